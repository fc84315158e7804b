package responder

import (
	"encoding/binary"
	"net/netip"

	"lbdns/gslb"
	"lbdns/internal/dnswire"

	"github.com/miekg/dns"
)

// reply answers the DNS message query from src (over TCP when tcp is
// set): the reply packed into dst (or a new buffer when dst is too
// small), or nil when query gets none. It is the UDP readers' whole
// query path, and the TCP connections': query is parsed by parseQuery
// when it has the common shape, else marked (markECS) and unpacked by
// miekg/dns as its server would; what cannot be unpacked is answered
// FORMERR as miekg/dns's server answers it, a message shorter than a
// header or a response not at all. query may be changed (markECS).
func (s *Server) reply(sc *scratch, dst, query []byte, src netip.Addr, tcp bool) []byte {
	if len(query) < 12 {
		return nil // miekg/dns: the client is let hang
	}
	if accept(dns.Header{Bits: binary.BigEndian.Uint16(query[2:])}) == dns.MsgIgnore {
		return nil
	}
	req := &sc.req
	sc.box, sc.entry = s.answerer.Load(), gslb.Entry{}      // one snapshot for the name's lookup and the answer
	defer func() { sc.box, sc.entry = nil, gslb.Entry{} }() // an old snapshot is not kept alive by an idle reader
	if !sc.parseQuery(query) {
		sc.qlower, sc.qwire, sc.entry = "", nil, gslb.Entry{}
		query = dropCutQuestion(query)
		markECS(query)
		*req = dns.Msg{}
		if err := req.Unpack(query); err != nil {
			// What miekg/dns's server sends (serveDNS).
			req.SetRcodeFormatError(req)
			req.Zero = false
			req.Ns, req.Answer, req.Extra = nil, nil, nil
			out, err := req.PackBuffer(dst)
			if err != nil {
				return nil
			}
			return out
		}
	}
	sc.raw = true
	if !s.build(sc, req, src, tcp) {
		return nil
	}
	var subnet *dns.EDNS0_SUBNET
	if sc.echo {
		subnet = &sc.subnet
	}
	sc.nw.reset(sc.question[0].Name, sc.qwire)
	if out, ok := packReply(dst, &sc.resp, subnet, sc.ede, sc.size, &sc.nw); ok {
		s.observe(sc, req)
		return out
	}
	s.finish(sc, req)
	out, err := sc.resp.PackBuffer(dst)
	if err != nil {
		return nil
	}
	if len(sc.tail) == 0 {
		return out
	}
	// The Client Subnet option: appended to the OPT record, the last
	// record (Truncate keeps it last), which has no other option.
	n := len(out)
	if n < 12+11 || out[n-11] != 0 || binary.BigEndian.Uint16(out[n-10:]) != dns.TypeOPT || binary.BigEndian.Uint16(out[n-2:]) != 0 {
		return nil // cannot be: respond built the OPT record
	}
	binary.BigEndian.PutUint16(out[n-2:], uint16(len(sc.tail)))
	return append(out, sc.tail...)
}

// dropCutQuestion returns the DNS message b (at least a header) without
// its question section when a question is cut short: its name is
// followed by fewer than the four octets of its type and class.
// miekg/dns unpacks such a question with the type or class it lacks
// as 0, which would be answered as a question the client never sent;
// a message of the header alone is answered FORMERR (no question), as
// the malformed query it is. Any other message is returned as it is.
func dropCutQuestion(b []byte) []byte {
	if len(b) < 12 {
		return b
	}
	off := 12
	for range int(binary.BigEndian.Uint16(b[4:])) {
		var ok bool
		if off, ok = dnswire.SkipName(b, off); !ok {
			return b // miekg/dns cannot unpack it: FORMERR
		}
		if off+4 > len(b) {
			return b[:12:12]
		}
		off += 4
	}
	return b
}

// parseQuery fills sc.req from b, a DNS message of at least a header,
// when b has the shape of nearly every query: one question of a name
// whose labels need no escaping, no answer or authority records, at most
// one additional record, an OPT of the root name whose options are only
// Client Subnet (up to two), cookies and padding, and nothing after it.
// It reports false for any other message, which the caller unpacks with
// miekg/dns: for what it accepts, sc.req answers as miekg/dns's
// unpacking of b (after markECS) does, without allocating once the
// name is known. b is not changed.
func (sc *scratch) parseQuery(b []byte) bool {
	be := binary.BigEndian
	if be.Uint16(b[4:]) != 1 || be.Uint16(b[6:]) != 0 || be.Uint16(b[8:]) != 0 || be.Uint16(b[10:]) > 1 {
		return false
	}
	name, lower, off, ok := sc.parseName(b, 12)
	if !ok || off+4 > len(b) {
		return false
	}
	sc.qlower, sc.qwire = lower, b[12:off:off]
	sc.question[0] = dns.Question{Name: name, Qtype: be.Uint16(b[off:]), Qclass: be.Uint16(b[off+2:])}
	off += 4
	bits := be.Uint16(b[2:])
	req := &sc.req
	*req = dns.Msg{MsgHdr: dns.MsgHdr{
		Id:                 be.Uint16(b),
		Response:           bits&(1<<15) != 0,
		Opcode:             int(bits>>11) & 0xF,
		Authoritative:      bits&(1<<10) != 0,
		Truncated:          bits&(1<<9) != 0,
		RecursionDesired:   bits&(1<<8) != 0,
		RecursionAvailable: bits&(1<<7) != 0,
		Zero:               bits&(1<<6) != 0,
		AuthenticatedData:  bits&(1<<5) != 0,
		CheckingDisabled:   bits&(1<<4) != 0,
		Rcode:              int(bits & 0xF),
	}, Question: sc.question[:1]}
	if be.Uint16(b[10:]) == 0 {
		return off == len(b)
	}
	// The OPT record: root name, type, class, TTL, RDLENGTH, options.
	if off+11 > len(b) || b[off] != 0 || be.Uint16(b[off+1:]) != dns.TypeOPT {
		return false
	}
	rd := off + 11
	end := rd + int(be.Uint16(b[off+9:]))
	if end != len(b) {
		return false
	}
	sc.reqOpt = dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: be.Uint16(b[off+3:]),
		Ttl: be.Uint32(b[off+5:]), Rdlength: uint16(end - rd)}, Option: sc.reqOpts[:0]}
	for o := rd; o < end; {
		if o+4 > end {
			return false
		}
		code, n := be.Uint16(b[o:]), int(be.Uint16(b[o+2:]))
		data := o + 4
		if data+n > end {
			return false
		}
		switch code {
		case dns.EDNS0SUBNET:
			i := len(sc.reqOpt.Option)
			if i == len(sc.reqECS) {
				return false
			}
			sc.reqECS[i] = dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: b[data : data+n : data+n]}
			sc.reqOpt.Option = append(sc.reqOpt.Option, &sc.reqECS[i])
		case dns.EDNS0COOKIE, dns.EDNS0PADDING:
			// Never refused by miekg/dns, never read by check.
		default:
			return false
		}
		o = data + n
	}
	req.Rcode |= sc.reqOpt.ExtendedRcode()
	sc.reqExtra[0] = &sc.reqOpt
	req.Extra = sc.reqExtra[:1]
	return true
}

// parseName returns the domain name at off in b as miekg/dns presents
// it (labels joined by dots, fully qualified) and lower-cased (as
// lowerFQDN gives it) — the snapshot's own string when the name has no
// upper case and the snapshot in sc.box has it (sc.entry is then its
// entry), else both interned in sc.names — and the offset past it; ok false when the name is compressed, has a label that miekg/dns
// would escape, or is long.
func (sc *scratch) parseName(b []byte, off int) (name, lower string, next int, ok bool) {
	buf := sc.nameBuf[:0]
	for {
		if off >= len(b) {
			return "", "", 0, false
		}
		c := int(b[off])
		off++
		if c == 0 {
			break
		}
		if c > 63 || off+c > len(b) || len(buf)+c+1 > 250 {
			return "", "", 0, false
		}
		for _, x := range b[off : off+c] {
			if !plainByte(x) {
				return "", "", 0, false
			}
		}
		buf = append(append(buf, b[off:off+c]...), '.')
		off += c
	}
	if len(buf) == 0 {
		buf = append(buf, '.')
	}
	sc.nameBuf = buf
	if sc.box != nil && sc.box.names != nil && !hasUpper(buf) {
		// A name already lower-cased that the snapshot has: its own
		// string is the question's, and its entry spares the answer a
		// second lookup.
		if e, ok := sc.box.names.Lookup(buf); ok {
			sc.entry = e
			return e.Name(), e.Name(), off, true
		}
	}
	if n, ok := sc.names[string(buf)]; ok {
		return n.name, n.lower, off, true
	}
	if sc.names == nil || len(sc.names) >= maxNames {
		sc.names = make(map[string]internedName)
	}
	name = string(buf)
	lower = lowerFQDN(name)
	sc.names[name] = internedName{name, lower}
	return name, lower, off, true
}

// hasUpper reports whether b, of bytes below 128 (plainByte), holds an
// ASCII upper-case letter, eight bytes at a time: a byte's top bit is set
// in v + 0x3f.. when it is at least 'A', in v + 0x25.. when it is past
// 'Z' (no byte carries into the next: each sum is below 256).
func hasUpper(b []byte) bool {
	const atLeastA, pastZ, tops = 0x3f3f3f3f3f3f3f3f, 0x2525252525252525, 0x8080808080808080
	for len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		if (v+atLeastA)&^(v+pastZ)&tops != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c-'A' < 26 {
			return true
		}
	}
	return false
}

// plainByte reports whether miekg/dns presents x in a label as itself:
// printable ASCII other than . ' @ ; ( ) " and \ (a bit set of each).
func plainByte(x byte) bool {
	const lo, hi uint64 = 0xf7ffbc7a00000000, 0x7fffffffeffffffe // bits of 0-63, 64-127
	if x < 64 {
		return lo>>x&1 != 0
	}
	return x < 128 && hi>>(x-64)&1 != 0
}
