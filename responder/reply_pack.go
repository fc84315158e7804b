package responder

import (
	"encoding/binary"
	"net"

	"github.com/miekg/dns"
)

// packReply writes resp into dst (grown when too small) as miekg/dns's
// PackBuffer packs it without compression (what it does to a reply that
// Truncate finds fits: Compress false), with subnet, when not nil, and
// the option bytes ede (an Extended DNS Error) added as the last options
// of the OPT record, and the names known to nw
// copied from it. It returns the bytes and
// ok, or ok false when the reply is longer than size or has a shape
// this writer does not know (a record type other than A, AAAA, SOA, NS,
// CNAME, PTR, MX and OPT, an OPT with options of its own or not last, a
// name miekg/dns would unescape or refuse, an address it would not
// pack): the caller then truncates and packs resp with miekg/dns, which
// gives the same bytes for what packReply accepts.
func packReply(dst []byte, resp *dns.Msg, subnet *dns.EDNS0_SUBNET, ede []byte, size int, nw nameWriter) ([]byte, bool) {
	if resp.Rcode < 0 || resp.Rcode > 0xFFF {
		return nil, false
	}
	bits := uint16(resp.Opcode)<<11 | uint16(resp.Rcode&0xF)
	for _, f := range [...]struct {
		on  bool
		bit uint16
	}{
		{resp.Response, 1 << 15}, {resp.Authoritative, 1 << 10}, {resp.Truncated, 1 << 9},
		{resp.RecursionDesired, 1 << 8}, {resp.RecursionAvailable, 1 << 7}, {resp.Zero, 1 << 6},
		{resp.AuthenticatedData, 1 << 5}, {resp.CheckingDisabled, 1 << 4},
	} {
		if f.on {
			bits |= f.bit
		}
	}
	be := binary.BigEndian
	b := be.AppendUint16(dst[:0], resp.Id)
	b = be.AppendUint16(b, bits)
	b = be.AppendUint16(b, uint16(len(resp.Question)))
	b = be.AppendUint16(b, uint16(len(resp.Answer)))
	b = be.AppendUint16(b, uint16(len(resp.Ns)))
	b = be.AppendUint16(b, uint16(len(resp.Extra)))
	ok := true
	for _, q := range resp.Question {
		if b, ok = nw.append(b, q.Name); !ok {
			return nil, false
		}
		b = be.AppendUint16(be.AppendUint16(b, q.Qtype), q.Qclass)
	}
	for _, rr := range resp.Answer {
		if b, ok = appendRR(b, rr, resp.Rcode, nil, nil, &nw); !ok {
			return nil, false
		}
	}
	for _, rr := range resp.Ns {
		if b, ok = appendRR(b, rr, resp.Rcode, nil, nil, &nw); !ok {
			return nil, false
		}
	}
	opt := false
	for i, rr := range resp.Extra {
		if _, ok := rr.(*dns.OPT); ok {
			if i != len(resp.Extra)-1 {
				return nil, false // miekg/dns sets the extended rcode of the last
			}
			opt = true
		}
		if b, ok = appendRR(b, rr, resp.Rcode, subnet, ede, &nw); !ok {
			return nil, false
		}
	}
	if !opt && (resp.Rcode > 0xF || subnet != nil || len(ede) > 0) {
		return nil, false
	}
	if len(b) > size {
		return nil, false
	}
	return b, true
}

// appendRR appends rr as miekg/dns packs it uncompressed, an OPT record
// with the extended bits of rcode and subnet (when not nil) and ede as
// its options; ok false for what packReply leaves to miekg/dns.
func appendRR(b []byte, rr dns.RR, rcode int, subnet *dns.EDNS0_SUBNET, ede []byte, nw *nameWriter) ([]byte, bool) {
	if rr == nil {
		return nil, false
	}
	h := rr.Header()
	if _, isOPT := rr.(*dns.OPT); isOPT != (h.Rrtype == dns.TypeOPT) {
		return nil, false
	}
	ok := true
	if b, ok = nw.append(b, h.Name); !ok {
		return nil, false
	}
	be := binary.BigEndian
	b = be.AppendUint16(be.AppendUint16(b, h.Rrtype), h.Class)
	ttl := h.Ttl
	if h.Rrtype == dns.TypeOPT {
		ttl = ttl&0x00FFFFFF | uint32(uint16(rcode)>>4)<<24
	}
	b = be.AppendUint32(b, ttl)
	b = append(b, 0, 0) // RDLENGTH, set below
	rd := len(b)
	switch rr := rr.(type) {
	case *dns.A:
		switch len(rr.A) {
		case net.IPv4len, net.IPv6len:
			a := rr.A.To4()
			if a == nil {
				return nil, false
			}
			b = append(b, a...)
		case 0:
		default:
			return nil, false
		}
	case *dns.AAAA:
		switch len(rr.AAAA) {
		case net.IPv6len:
			b = append(b, rr.AAAA...)
		case 0:
		default:
			return nil, false
		}
	case *dns.SOA:
		if b, ok = appendName(b, rr.Ns); !ok {
			return nil, false
		}
		if b, ok = appendName(b, rr.Mbox); !ok {
			return nil, false
		}
		for _, v := range [...]uint32{rr.Serial, rr.Refresh, rr.Retry, rr.Expire, rr.Minttl} {
			b = be.AppendUint32(b, v)
		}
	case *dns.NS:
		b, ok = appendName(b, rr.Ns)
	case *dns.CNAME:
		b, ok = appendName(b, rr.Target)
	case *dns.PTR:
		b, ok = appendName(b, rr.Ptr)
	case *dns.MX:
		b, ok = appendName(be.AppendUint16(b, rr.Preference), rr.Mx)
	case *dns.OPT:
		if len(rr.Option) != 0 {
			return nil, false
		}
		if subnet != nil {
			b = appendSubnet(b, subnet)
		}
		b = append(b, ede...)
	default:
		return nil, false
	}
	if !ok || len(b)-rd > 0xFFFF {
		return nil, false
	}
	be.PutUint16(b[rd-2:], uint16(len(b)-rd))
	return b, true
}

// nameWriter appends names to a message, copying the wire form of the
// name it appended last (or was seeded with: the question's name as the
// query has it) when the same name comes again, as the owner of the
// records.
type nameWriter struct {
	last string
	wire []byte
}

// append appends the name s to b as appendName does.
func (nw *nameWriter) append(b []byte, s string) ([]byte, bool) {
	if len(nw.wire) > 0 && s == nw.last {
		return append(b, nw.wire...), true
	}
	off := len(b)
	b, ok := appendName(b, s)
	if ok {
		// Good even when b grows: the old array keeps these bytes.
		nw.last, nw.wire = s, b[off:len(b):len(b)]
	}
	return b, ok
}

// appendName appends the domain name s uncompressed, as miekg/dns packs
// it; ok false for a name it leaves to miekg/dns: empty, not fully
// qualified, with an escape, an empty or long label, or long.
func appendName(b []byte, s string) ([]byte, bool) {
	n := len(s)
	if n == 0 || s[n-1] != '.' || n > 254 {
		return nil, false
	}
	if n == 1 {
		return append(b, 0), true
	}
	// '.' then the name: each dot becomes the length of the label
	// after it, the last one the root's 0.
	start := len(b)
	b = append(append(b, '.'), s...)
	w := b[start:]
	at := 0
	for i := 1; i <= n; i++ {
		switch w[i] {
		case '.':
			l := i - at - 1
			if l == 0 || l > 63 {
				return nil, false
			}
			w[at] = byte(l)
			at = i
		case '\\':
			return nil, false
		}
	}
	w[at] = 0
	return b, true
}
