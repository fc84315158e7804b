package responder

import (
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"lbdns/gslb"
)

// ServeDNS answers one query (dns.Handler).
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	var src netip.Addr
	tcp := false
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		src = a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		src, tcp = a.AddrPort().Addr().Unmap(), true
	}
	resp := s.Respond(req, src, tcp)
	if resp == nil {
		return
	}
	if err := w.WriteMsg(resp); err != nil {
		s.Logger.Debug("gslb reply not sent", "client", src.String(), "err", err)
	}
}

// Respond is the reply to req from src (over TCP when tcp is set), whole,
// truncated to the size the client can take; nil when req gets none (a
// response). It is what ServeDNS sends, and what the UDP readers pack.
func (s *Server) Respond(req *dns.Msg, src netip.Addr, tcp bool) *dns.Msg {
	sc := new(scratch)
	if !s.respond(sc, req, src, tcp) {
		return nil
	}
	return &sc.resp
}

// respond builds the reply to req from src in sc.resp (its records and
// options in sc's reused storage: the reply is good until sc's next use)
// and reports whether req gets one. Every wire rule of the server is
// here, for UDP and TCP alike: build, then finish.
func (s *Server) respond(sc *scratch, req *dns.Msg, src netip.Addr, tcp bool) bool {
	if !s.build(sc, req, src, tcp) {
		return false
	}
	s.finish(sc, req)
	return true
}

// build builds the reply to req from src in sc.resp, whole: without the
// Client Subnet option (sc.echo tells whether sc.subnet is to be added
// to its OPT record) and not truncated yet (to sc.size), for finish or
// packReply to complete. It reports whether req gets a reply.
func (s *Server) build(sc *scratch, req *dns.Msg, src netip.Addr, tcp bool) bool {
	if req.Response {
		return false
	}
	sc.resetReply()
	resp := &sc.resp
	resp.Id, resp.Response, resp.Opcode = req.Id, true, req.Opcode
	resp.RecursionDesired, resp.CheckingDisabled = req.RecursionDesired, req.CheckingDisabled
	if len(req.Question) == 1 {
		resp.Question = req.Question // echoed with its case
	}
	size := dns.MinMsgSize
	var q *ecs
	rcode := s.check(sc, req, &size, &q)
	if rcode < 0 {
		rcode, sc.r, sc.asked = s.answer(sc, req, src, q)
	}
	resp.Rcode = rcode
	if sc.opt.Hdr.Rrtype == dns.TypeOPT && rcode != dns.RcodeFormatError && rcode != dns.RcodeBadVers {
		if code, text, ok := edeOf(rcode, &sc.r, sc.asked); ok {
			sc.edeCode, sc.edeText, sc.ede = code, text, appendEDE(sc.ede[:0], code, text)
		}
	}
	if tcp {
		size = dns.MaxMsgSize
	}
	sc.size, sc.hadECS, sc.echo = size, q != nil, q != nil && sc.asked
	return true
}

// finish completes the reply build left: the Client Subnet option added,
// truncation to sc.size, and the metrics counted.
func (s *Server) finish(sc *scratch, req *dns.Msg) {
	size := sc.size
	if sc.echo || len(sc.ede) > 0 {
		// The Client Subnet option echoed and the Extended DNS Error:
		// left to reply to append as bytes (miekg/dns allocates to pack
		// them), unless that would change truncation (Truncate never
		// fills less than 512).
		sc.tail = sc.tail[:0]
		if sc.echo {
			sc.tail = appendSubnet(sc.tail, &sc.subnet)
		}
		sc.tail = append(sc.tail, sc.ede...)
		if sc.raw && size-len(sc.tail) >= dns.MinMsgSize {
			size -= len(sc.tail)
		} else {
			if sc.echo {
				sc.opt.Option = append(sc.opt.Option, &sc.subnet)
			}
			if len(sc.ede) > 0 {
				sc.opt.Option = append(sc.opt.Option, &dns.EDNS0_EDE{InfoCode: sc.edeCode, ExtraText: sc.edeText})
			}
			sc.tail = sc.tail[:0]
		}
	}
	sc.resp.Truncate(size)
	// Truncate leaves a reply that fits uncompressed uncompressed:
	// names are compressed in every reply, as gdnsd and BIND do.
	sc.resp.Compress = true
	s.observe(sc, req)
}

// observe counts the reply in sc to req in the metrics, if any.
func (s *Server) observe(sc *scratch, req *dns.Msg) {
	if s.Metrics != nil {
		s.Metrics.observe(&sc.counters, req, &sc.resp, &sc.r, sc.asked, sc.hadECS)
	}
}

// check checks req's header, question and EDNS, sets the reply's OPT
// record (and size, the UDP payload the reply may fill) and q (the Client
// Subnet option, when req carries a valid one), and returns the rcode
// that answers req, or -1 when req is to be answered from the snapshot.
func (s *Server) check(sc *scratch, req *dns.Msg, size *int, q **ecs) int {
	var opt *dns.OPT
	for _, rr := range req.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			if opt != nil {
				return dns.RcodeFormatError // RFC 6891 6.1.1: one OPT at most
			}
			opt = o
		}
	}
	if opt != nil {
		udp := s.UDPSize
		if udp <= 0 {
			udp = DefaultUDPSize
		}
		sc.setEdns0(uint16(udp), opt.Do())
		*size = min(max(int(opt.UDPSize()), dns.MinMsgSize), udp)
		if opt.Hdr.Name != "." {
			return dns.RcodeFormatError
		}
		if opt.Version() != 0 {
			return dns.RcodeBadVers
		}
	}
	if req.Opcode != dns.OpcodeQuery {
		return dns.RcodeNotImplemented
	}
	if len(req.Question) != 1 {
		return dns.RcodeFormatError
	}
	switch qt := req.Question[0].Qtype; {
	case qt == dns.TypeOPT || qt == dns.TypeTSIG || qt == dns.TypeTKEY:
		return dns.RcodeFormatError
	case req.Question[0].Qclass != dns.ClassINET, qt == dns.TypeAXFR, qt == dns.TypeIXFR:
		return dns.RcodeRefused // other classes and zone transfers are not served
	}
	if opt == nil {
		return -1
	}
	for _, o := range opt.Option {
		switch o := o.(type) {
		case *dns.EDNS0_LOCAL:
			// Marked by the reader; or raw code 8 in a message built
			// in memory or parsed by the UDP readers (from miekg/dns
			// it arrives as EDNS0_SUBNET).
			if o.Code != ecsMarkCode && o.Code != dns.EDNS0SUBNET {
				continue
			}
			if *q != nil {
				return dns.RcodeFormatError // two Client Subnet options
			}
			e, ok := parseECS(o.Data)
			if !ok {
				return dns.RcodeFormatError
			}
			sc.ecs = e
			*q = &sc.ecs
		case *dns.EDNS0_SUBNET:
			// Parsed by miekg/dns: the reader did not mark it, so
			// it could not be checked.
			return dns.RcodeFormatError
		}
	}
	return -1
}

// answer fills the reply from the snapshot and returns its rcode and the
// snapshot's response (asked false when there is no snapshot).
func (s *Server) answer(sc *scratch, req *dns.Msg, src netip.Addr, q *ecs) (rcode int, r gslb.Response, asked bool) {
	box := sc.box
	if box == nil {
		box = s.answerer.Load()
	}
	if box == nil {
		return dns.RcodeServerFailure, r, false
	}
	name := sc.qlower
	if name == "" {
		name = lowerFQDN(req.Question[0].Name)
	}
	query := gslb.Query{Name: name, Type: req.Question[0].Qtype, Source: src, Records: &sc.recs, Entry: sc.entry}
	if q != nil {
		query.ECS = q.prefix
	}
	if n := box.rotations; sc.reader && n > 0 {
		// A reader's own rotation: no counter shared with the others.
		if len(sc.rot) < n {
			sc.rot = make([]uint64, n)
		}
		query.Rotation = sc.rot[:n]
	}
	r = box.Answer(query)
	resp := &sc.resp
	resp.Answer, resp.Ns = r.Answer, r.Authority
	if len(r.Extra) > 0 { // the snapshot's slices are shared: copy before adding
		resp.Extra = append(append(sc.extra[:0], r.Extra...), resp.Extra...)
		sc.extra = resp.Extra
	}
	resp.Authoritative = r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeNameError
	if q != nil {
		q.option(&sc.subnet, r.Scope) // added to the reply by respond
	}
	return r.Rcode, r, true
}

// lowerFQDN returns name lower-cased (ASCII) and fully qualified, without
// a copy when it already is.
func lowerFQDN(name string) string {
	upper := false
	for i := range len(name) {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			upper = true
			break
		}
	}
	if upper {
		name = strings.ToLower(name)
	}
	return dns.Fqdn(name)
}
