package responder

import (
	"encoding/binary"
	"net"
	"net/netip"

	"lbdns/internal/dnswire"

	"github.com/miekg/dns"
)

// miekg/dns parses the Client Subnet option itself and forgives what RFC
// 7871 section 6 tells a server to reject (too many or too few ADDRESS
// octets, bits set beyond SOURCE PREFIX-LENGTH), and it rejects a bad
// FAMILY by failing the whole message. To check the option exactly, the
// server's reader renames every ECS option (code 8) of a query's OPT
// record to ecsMarkCode before miekg/dns unpacks it: the option then
// reaches the handler as an EDNS0_LOCAL with its raw bytes, which
// parseECS checks. An option that already carried ecsMarkCode (a local
// option, meaningless to us) is renamed to ecsShadowCode, so that it
// cannot pass for ECS.
const (
	ecsMarkCode   = 65001
	ecsShadowCode = 65002
)

// markECS renames the ECS options of the OPT record of the DNS message b
// in place (see ecsMarkCode). A message it cannot walk is left as it is:
// miekg/dns then fails to unpack it too and answers FORMERR.
func markECS(b []byte) {
	if len(b) < 12 {
		return
	}
	qd := int(binary.BigEndian.Uint16(b[4:]))
	rrs := int(binary.BigEndian.Uint16(b[6:])) + int(binary.BigEndian.Uint16(b[8:]))
	ar := int(binary.BigEndian.Uint16(b[10:]))
	off := 12
	for range qd {
		var ok bool
		if off, ok = dnswire.SkipName(b, off); !ok || off+4 > len(b) {
			return
		}
		off += 4
	}
	for i := range rrs + ar {
		var ok bool
		if off, ok = dnswire.SkipName(b, off); !ok || off+10 > len(b) {
			return
		}
		typ := binary.BigEndian.Uint16(b[off:])
		rd := off + 10
		end := rd + int(binary.BigEndian.Uint16(b[off+8:]))
		if end > len(b) {
			return
		}
		if i >= rrs && typ == dns.TypeOPT {
			for o := rd; o+4 <= end; {
				n := int(binary.BigEndian.Uint16(b[o+2:]))
				switch binary.BigEndian.Uint16(b[o:]) {
				case dns.EDNS0SUBNET:
					binary.BigEndian.PutUint16(b[o:], ecsMarkCode)
				case ecsMarkCode:
					binary.BigEndian.PutUint16(b[o:], ecsShadowCode)
				}
				o += 4 + n
			}
		}
		off = end
	}
}

// ecs is a Client Subnet option of a query, checked.
type ecs struct {
	// family, source and addr are the option's FAMILY, SOURCE
	// PREFIX-LENGTH and ADDRESS, echoed in the reply.
	family uint16
	source uint8
	addr   netip.Addr
	// prefix is the source prefix (0.0.0.0/0 for FAMILY 0, SOURCE 0).
	prefix netip.Prefix
}

// parseECS checks the raw data of a Client Subnet option of a query
// (RFC 7871 section 6 and 7.1.2) and returns it, or ok false when the
// query must be answered FORMERR: a FAMILY other than 1 (IPv4) or 2
// (IPv6), a SOURCE PREFIX-LENGTH longer than the family's addresses, an
// ADDRESS of other than ceil(SOURCE/8) octets or with bits set beyond
// SOURCE. FAMILY 0 is taken with SOURCE 0 and no ADDRESS only (what dig
// sends for +subnet=0): the client asks that no address be used. A
// SCOPE PREFIX-LENGTH other than 0 (a MUST of the sender) is ignored.
func parseECS(data []byte) (e ecs, ok bool) {
	if len(data) < 4 {
		return e, false
	}
	e.family, e.source = binary.BigEndian.Uint16(data), data[2]
	raw := data[4:]
	var bits int
	switch e.family {
	case 0:
		if e.source != 0 || len(raw) != 0 {
			return e, false
		}
		e.addr = netip.IPv4Unspecified()
		e.prefix = netip.PrefixFrom(e.addr, 0)
		return e, true
	case 1:
		bits = 32
	case 2:
		bits = 128
	default:
		return e, false
	}
	if int(e.source) > bits || len(raw) != (int(e.source)+7)/8 {
		return e, false
	}
	var full [16]byte
	copy(full[:], raw)
	if e.family == 1 {
		e.addr = netip.AddrFrom4([4]byte(full[:4]))
	} else {
		e.addr = netip.AddrFrom16(full)
	}
	e.prefix = netip.PrefixFrom(e.addr, int(e.source))
	if e.prefix.Masked().Addr() != e.addr {
		return e, false // bits set beyond SOURCE PREFIX-LENGTH
	}
	return e, true
}

// option returns e as the reply's Client Subnet option with scope, in o
// (its address in o's reused storage when it has room).
func (e ecs) option(o *dns.EDNS0_SUBNET, scope int) *dns.EDNS0_SUBNET {
	bits := 32
	if e.family == 2 {
		bits = 128
	}
	if e.source == 0 || scope < 0 {
		scope = 0 // no address given: the answer cannot depend on one
	}
	addr := o.Address[:0]
	if e.addr.Is4() {
		a := e.addr.As4()
		addr = append(addr, a[:]...)
	} else {
		a := e.addr.As16()
		addr = append(addr, a[:]...)
	}
	*o = dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: e.family, SourceNetmask: e.source,
		SourceScope: uint8(min(scope, bits)), Address: net.IP(addr)}
	return o
}

// appendSubnet appends o to b as it is on the wire: option code and
// length, then what miekg/dns packs for it (o as option returns it:
// ADDRESS masked, of the family's length).
func appendSubnet(b []byte, o *dns.EDNS0_SUBNET) []byte {
	need := (int(o.SourceNetmask) + 7) / 8
	if o.Family == 0 {
		need = 0
	}
	b = binary.BigEndian.AppendUint16(b, dns.EDNS0SUBNET)
	b = binary.BigEndian.AppendUint16(b, uint16(4+need))
	b = binary.BigEndian.AppendUint16(b, o.Family)
	b = append(b, o.SourceNetmask, o.SourceScope)
	return append(b, o.Address[:need]...)
}
