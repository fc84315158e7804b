// Package server is the GSLB responder on the wire: an authoritative DNS
// server (UDP and TCP on every listen address: UDP by its own readers,
// blocking readers, one per CPU, answering inline, see udp.go; TCP by
// its own accept loops, with bounded connections, see tcp.go) that
// answers from an atomically swapped gslb.Answerer snapshot, with the
// protocol around it done here: header flags, the question echoed with
// its case, FORMERR and NOTIMP, EDNS(0) with BADVERS, the Client Subnet
// option checked and echoed with the answer's scope (RFC 7871), UDP
// truncation and TCP. Its Responder wires it into the daemon: listeners,
// the persisted SOA serial, and the snapshot rebuilt on reload and on
// every GSLB member state change.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/miekg/dns"

	"lbdns/gslb"
)

// DefaultUDPSize is the EDNS payload size the server advertises and fills
// when Server.UDPSize is 0.
const DefaultUDPSize = 1232

// Server answers DNS queries from a gslb.Answerer on UDP and TCP. Set its
// fields, Swap in a first snapshot, then Start it; Shutdown stops it.
// The fields must not change after Start.
type Server struct {
	// Listen are the addresses to serve, UDP and TCP on each. A port 0
	// picks a free port, the same for UDP and TCP (Addrs tells which).
	Listen []netip.AddrPort
	// UDPSize is the EDNS payload size advertised, and the most a UDP
	// reply fills when the client's is larger. Default DefaultUDPSize.
	UDPSize int
	// UDPReaders is how many readers (threads) read each listen
	// address's UDP socket. Default (0): GOMAXPROCS but one, at least
	// one (see udpReaders).
	UDPReaders int
	// NoReplyCache, when set, builds every UDP reply anew: the readers
	// keep no reply cache (see replyCache).
	NoReplyCache bool
	// TCP bounds the TCP connections (RFC 7766 section 10); its zero
	// fields take their defaults.
	TCP TCPLimits
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
	// Metrics, when set, counts queries and replies.
	Metrics *Metrics
	// NotifyStartedFunc, when set, is called once every listener serves.
	NotifyStartedFunc func()

	answerer atomic.Pointer[answerer]

	// tcpRead, when set (tests), is called after every read of a TCP
	// connection that got bytes.
	tcpRead func()

	mu      sync.Mutex
	tcp     []net.Listener // served by serveTCP
	conns   *tcpConns      // the TCP connections of all of them
	tcpDone chan struct{}  // closed by Shutdown: ends accept back-offs
	udp     []*udpSocket   // served by serveUDP
	addrs   []netip.AddrPort
	wg      sync.WaitGroup
}

// answerer boxes an Answerer for atomic.Pointer, with the number of its
// rotation counters (gslb.Query.Rotation; 0 when it has none).
type answerer struct {
	gslb.Answerer
	rotations int
	// id is a weak pointer to the box: what the readers' reply caches
	// keep, so that a snapshot swapped out is freed whatever they hold.
	id weak.Pointer[answerer]
}

// Swap makes a the snapshot that answers from now on. A query being
// answered keeps the snapshot it started with: every reply comes whole
// from one snapshot. Until the first Swap, or after Swap(nil), queries
// are answered SERVFAIL.
func (s *Server) Swap(a gslb.Answerer) {
	if a == nil {
		s.answerer.Store(nil)
		return
	}
	box := &answerer{Answerer: a}
	box.id = weak.Make(box)
	if r, ok := a.(interface{ Rotations() int }); ok {
		box.rotations = r.Rotations()
	}
	s.answerer.Store(box)
}

// Start opens every listen address, UDP (a reader per CPU, see
// serveUDP) then TCP on the same port (an accept loop, see serveTCP),
// and serves them; it returns once all serve, or the first error
// (having closed what it opened).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tcp != nil || s.udp != nil {
		return errors.New("server: already started")
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	var tcp []net.Listener
	var udp []*udpSocket
	var addrs []netip.AddrPort
	for _, ap := range s.Listen {
		pcs, ln, err := listenBoth(ap, udpSockets())
		if err != nil {
			for _, ln := range tcp {
				ln.Close()
			}
			for _, c := range udp {
				c.Close()
			}
			return err
		}
		tcp = append(tcp, ln)
		udp = append(udp, pcs...)
		addrs = append(addrs, pcs[0].LocalAddr().(*net.UDPAddr).AddrPort())
	}
	conns, done := newTCPConns(s.TCP, s.Metrics), make(chan struct{})
	for _, ln := range tcp {
		s.wg.Go(func() { s.serveTCP(ln, conns, done) })
	}
	for _, c := range udp {
		pktinfo := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().IsUnspecified()
		s.wg.Go(func() { s.serveUDP(c, pktinfo) })
	}
	s.tcp, s.conns, s.tcpDone, s.udp, s.addrs = tcp, conns, done, udp, addrs
	for _, a := range addrs {
		s.Logger.Info("gslb responder listening (udp, tcp)", "addr", a.String(), "udp_sockets", udpSockets())
	}
	if s.NotifyStartedFunc != nil {
		s.NotifyStartedFunc()
	}
	return nil
}

// listenBoth opens n UDP sockets on ap (SO_REUSEPORT), then TCP on the
// port UDP got.
func listenBoth(ap netip.AddrPort, n int) ([]*udpSocket, net.Listener, error) {
	for try := 0; ; try++ {
		pc, err := listenUDP(ap)
		if err != nil {
			return nil, nil, err
		}
		got := pc.LocalAddr().(*net.UDPAddr).AddrPort()
		ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(got))
		if err != nil {
			pc.Close()
			if ap.Port() != 0 || try >= 10 {
				return nil, nil, fmt.Errorf("server: listen tcp %s: %w", got, err)
			}
			continue // the free UDP port was taken for TCP: pick another
		}
		pcs := []*udpSocket{pc}
		for len(pcs) < n {
			more, err := listenUDP(netip.AddrPortFrom(ap.Addr(), got.Port()))
			if err != nil {
				for _, c := range pcs {
					c.Close()
				}
				ln.Close()
				return nil, nil, err
			}
			pcs = append(pcs, more)
		}
		return pcs, ln, nil
	}
}

// accept lets every query reach ServeDNS, which answers malformed ones
// itself; responses are never answered.
func accept(dh dns.Header) dns.MsgAcceptAction {
	if dh.Bits&(1<<15) != 0 { // QR
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// Addrs returns the addresses served (with the ports picked for port 0),
// in Listen order; nil before Start.
func (s *Server) Addrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs
}

// Shutdown stops every listener (closing the UDP sockets stops their
// readers), wakes the TCP connections, which close once the answers of
// what they read are written, and waits for them, until ctx is done
// (then it closes the connections left).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	tcp, conns, done, udp := s.tcp, s.conns, s.tcpDone, s.udp
	s.tcp, s.conns, s.tcpDone, s.udp, s.addrs = nil, nil, nil, nil, nil
	s.mu.Unlock()
	var errs []error
	for _, c := range udp {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("server: close udp %s: %w", c.LocalAddr(), err))
		}
	}
	for _, ln := range tcp {
		if err := ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("server: close tcp %s: %w", ln.Addr(), err))
		}
	}
	if done != nil {
		close(done)
	}
	if conns != nil {
		conns.shutdown()
	}
	wait := make(chan struct{})
	go func() { s.wg.Wait(); close(wait) }()
	select {
	case <-wait:
	case <-ctx.Done():
		if conns != nil {
			conns.closeAll()
		}
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

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
	if sc.echo {
		// The Client Subnet option echoed: left to reply to append as
		// bytes (miekg/dns allocates to pack it), unless that would
		// change truncation (Truncate never fills less than 512).
		sc.tail = appendSubnet(sc.tail[:0], &sc.subnet)
		if sc.raw && size-len(sc.tail) >= dns.MinMsgSize {
			size -= len(sc.tail)
		} else {
			sc.opt.Option = append(sc.opt.Option, &sc.subnet)
			sc.tail = sc.tail[:0]
		}
	}
	sc.resp.Truncate(size)
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
	box := s.answerer.Load()
	if box == nil {
		return dns.RcodeServerFailure, r, false
	}
	name := sc.qlower
	if name == "" {
		name = lowerFQDN(req.Question[0].Name)
	}
	query := gslb.Query{Name: name, Type: req.Question[0].Qtype, Source: src, Records: &sc.recs}
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
