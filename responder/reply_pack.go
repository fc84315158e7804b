package responder

import (
	"encoding/binary"
	"net"
	"strings"

	"github.com/miekg/dns"
)

// packReply writes resp into dst (grown when too small) as miekg/dns's
// PackBuffer packs it with Compress set (finish sets it after
// Truncate), with subnet, when not nil, and
// the option bytes ede (an Extended DNS Error) added as the last options
// of the OPT record, its names written by nw (reset for this message).
// It returns the bytes and
// ok, or ok false when the reply is longer than size or has a shape
// this writer does not know (a record type other than A, AAAA, SOA, NS,
// CNAME, PTR, MX and OPT, an OPT with options of its own or not last, a
// name miekg/dns would unescape or refuse, an address it would not
// pack): the caller then truncates and packs resp with miekg/dns, which
// gives the same bytes for what packReply accepts.
func packReply(dst []byte, resp *dns.Msg, subnet *dns.EDNS0_SUBNET, ede []byte, size int, nw *nameWriter) ([]byte, bool) {
	if resp.Rcode < 0 || resp.Rcode > 0xFFF {
		return nil, false
	}
	bits := uint16(resp.Opcode)<<11 | uint16(resp.Rcode&0xF) |
		flag(resp.Response, 1<<15) | flag(resp.Authoritative, 1<<10) | flag(resp.Truncated, 1<<9) |
		flag(resp.RecursionDesired, 1<<8) | flag(resp.RecursionAvailable, 1<<7) | flag(resp.Zero, 1<<6) |
		flag(resp.AuthenticatedData, 1<<5) | flag(resp.CheckingDisabled, 1<<4)
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
		if b, ok = appendRR(b, rr, resp.Rcode, nil, nil, nw); !ok {
			return nil, false
		}
	}
	for _, rr := range resp.Ns {
		if b, ok = appendRR(b, rr, resp.Rcode, nil, nil, nw); !ok {
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
		if b, ok = appendRR(b, rr, resp.Rcode, subnet, ede, nw); !ok {
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

// flag is bit when on is set, else 0.
func flag(on bool, bit uint16) uint16 {
	if on {
		return bit
	}
	return 0
}

// appendRR appends rr as miekg/dns packs it compressed, an OPT record
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
		if b, ok = nw.append(b, rr.Ns); !ok {
			return nil, false
		}
		if b, ok = nw.append(b, rr.Mbox); !ok {
			return nil, false
		}
		for _, v := range [...]uint32{rr.Serial, rr.Refresh, rr.Retry, rr.Expire, rr.Minttl} {
			b = be.AppendUint32(b, v)
		}
	case *dns.NS:
		b, ok = nw.append(b, rr.Ns)
	case *dns.CNAME:
		b, ok = nw.append(b, rr.Target)
	case *dns.PTR:
		b, ok = nw.append(b, rr.Ptr)
	case *dns.MX:
		b, ok = nw.append(be.AppendUint16(b, rr.Preference), rr.Mx)
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

// nameWriter appends domain names to a message compressed as
// miekg/dns packs a message with Compress set: each suffix of a name
// that starts at a label and was written before (the same bytes: the
// comparison keeps case, as miekg/dns's does) becomes a pointer to where
// it was first written; the suffixes written are remembered while their
// offset fits a pointer. The first name, the question's, is copied from
// the query's wire form when it is the name seeded (reset); its suffixes
// are remembered only once another name needs them (a GSLB answer's
// owners are the question's name itself: a pointer to it, no search).
type nameWriter struct {
	seed    string
	wire    []byte
	seedOff int  // where the seed was written whole, 0: not written
	lazy    bool // the seed's suffixes are not yet in tab
	n       int
	tab     [maxSuffixes]suffix
}

// suffix is a name written to the message, and where.
type suffix struct {
	name string
	off  int
}

// maxSuffixes bounds the names a nameWriter remembers: a reply with more
// distinct suffixes is left to miekg/dns (a static answer of many
// names; never a GSLB answer, whose records share one owner).
const maxSuffixes = 32

// maxPointer is the first message offset a compression pointer cannot
// reach (14 bits).
const maxPointer = 1 << 14

// reset makes nw ready for a new message whose question name is seed,
// as the query has it on the wire (nil: not known).
func (nw *nameWriter) reset(seed string, wire []byte) {
	nw.seed, nw.wire, nw.n, nw.seedOff, nw.lazy = seed, wire, 0, 0, false
}

// append appends the name s to b, compressed against the names appended
// before; ok false for a name left to miekg/dns (empty, not fully
// qualified, with an escape, an empty or long label, or long) or when
// nw cannot remember one more suffix.
func (nw *nameWriter) append(b []byte, s string) ([]byte, bool) {
	n := len(s)
	if n == 0 || s[n-1] != '.' || n > 254 {
		return nil, false
	}
	if n == 1 {
		return append(b, 0), true // the root: never compressed
	}
	if nw.seedOff > 0 && s == nw.seed {
		// What find would give: the seed was the first name written.
		return binary.BigEndian.AppendUint16(b, uint16(nw.seedOff|0xC000)), true
	}
	if nw.n == 0 && nw.seedOff == 0 && len(nw.wire) > 0 && s == nw.seed && len(b) < maxPointer {
		nw.seedOff, nw.lazy = len(b), true
		return append(b, nw.wire...), true
	}
	if nw.lazy {
		// Another name: it may point into the seed. A seed of more
		// labels than nw remembers leaves the message to miekg/dns
		// (which compresses the same way, without that bound).
		nw.lazy = false
		if !nw.remember(nw.seed, nw.seedOff) {
			return nil, false
		}
	}
	for at := 0; at < n; {
		if p, ok := nw.find(s[at:]); ok {
			return binary.BigEndian.AppendUint16(b, uint16(p|0xC000)), true
		}
		if len(b) < maxPointer {
			if nw.n == maxSuffixes {
				return nil, false
			}
			nw.tab[nw.n] = suffix{s[at:], len(b)}
			nw.n++
		}
		end := at + strings.IndexByte(s[at:], '.')
		l := end - at
		if l == 0 || l > 63 || strings.IndexByte(s[at:end], '\\') >= 0 {
			return nil, false
		}
		b = append(append(b, byte(l)), s[at:end]...)
		at = end + 1
	}
	return append(b, 0), true
}

// remember records the suffixes of s, a name without escapes written
// uncompressed at off; false when they do not all fit.
func (nw *nameWriter) remember(s string, off int) bool {
	for at := 0; at < len(s)-1 && off < maxPointer; {
		if nw.n == maxSuffixes {
			return false
		}
		nw.tab[nw.n] = suffix{s[at:], off}
		nw.n++
		l := strings.IndexByte(s[at:], '.')
		off += 1 + l
		at += l + 1
	}
	return true
}

// find returns where the suffix s was written, if it was.
func (nw *nameWriter) find(s string) (int, bool) {
	for i := range nw.n {
		if nw.tab[i].name == s {
			return nw.tab[i].off, true
		}
	}
	return 0, false
}
