// Package server is the GSLB responder on the wire: an authoritative DNS
// server (github.com/miekg/dns, UDP and TCP on every listen address) that
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
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
	// Metrics, when set, counts queries and replies.
	Metrics *Metrics
	// NotifyStartedFunc, when set, is called once every listener serves.
	NotifyStartedFunc func()

	answerer atomic.Pointer[answerer]

	mu      sync.Mutex
	servers []*dns.Server
	addrs   []netip.AddrPort
	wg      sync.WaitGroup
}

// answerer boxes an Answerer for atomic.Pointer.
type answerer struct{ gslb.Answerer }

// Swap makes a the snapshot that answers from now on. A query being
// answered keeps the snapshot it started with: every reply comes whole
// from one snapshot. Until the first Swap, or after Swap(nil), queries
// are answered SERVFAIL.
func (s *Server) Swap(a gslb.Answerer) {
	if a == nil {
		s.answerer.Store(nil)
		return
	}
	s.answerer.Store(&answerer{a})
}

// Start opens every listen address, UDP then TCP on the same port, and
// serves them; it returns once all serve, or the first error (having
// closed what it opened).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers != nil {
		return errors.New("server: already started")
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	var servers []*dns.Server
	var addrs []netip.AddrPort
	closeAll := func() {
		for _, srv := range servers {
			if srv.PacketConn != nil {
				srv.PacketConn.Close()
			}
			if srv.Listener != nil {
				srv.Listener.Close()
			}
		}
	}
	for _, ap := range s.Listen {
		pc, ln, err := listenBoth(ap)
		if err != nil {
			closeAll()
			return err
		}
		servers = append(servers, s.dnsServer(pc, nil), s.dnsServer(nil, ln))
		addrs = append(addrs, pc.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	started := make(chan error, len(servers))
	for _, srv := range servers {
		srv.NotifyStartedFunc = func() { started <- nil }
		s.wg.Go(func() {
			if err := srv.ActivateAndServe(); err != nil {
				started <- err
				s.Logger.Error("gslb dns listener stopped", "addr", srvAddr(srv), "err", err)
			}
		})
	}
	for range servers {
		if err := <-started; err != nil {
			closeAll()
			s.wg.Wait()
			return fmt.Errorf("server: serve: %w", err)
		}
	}
	s.servers, s.addrs = servers, addrs
	for _, a := range addrs {
		s.Logger.Info("gslb responder listening (udp, tcp)", "addr", a.String())
	}
	if s.NotifyStartedFunc != nil {
		s.NotifyStartedFunc()
	}
	return nil
}

// listenBoth opens UDP on ap, then TCP on the port UDP got.
func listenBoth(ap netip.AddrPort) (net.PacketConn, net.Listener, error) {
	for try := 0; ; try++ {
		pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		if err != nil {
			return nil, nil, fmt.Errorf("server: listen udp %s: %w", ap, err)
		}
		got := pc.LocalAddr().(*net.UDPAddr).AddrPort()
		ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(got))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if ap.Port() != 0 || try >= 10 {
			return nil, nil, fmt.Errorf("server: listen tcp %s: %w", got, err)
		}
		// The free UDP port was taken for TCP: pick another.
	}
}

// dnsServer is the miekg/dns server of one socket.
func (s *Server) dnsServer(pc net.PacketConn, ln net.Listener) *dns.Server {
	return &dns.Server{
		PacketConn:     pc,
		Listener:       ln,
		Handler:        s,
		UDPSize:        dns.MaxMsgSize, // the read buffer: queries of any size
		MsgAcceptFunc:  accept,
		DecorateReader: func(r dns.Reader) dns.Reader { return ecsReader{r} },
	}
}

func srvAddr(srv *dns.Server) string {
	if srv.PacketConn != nil {
		return "udp " + srv.PacketConn.LocalAddr().String()
	}
	return "tcp " + srv.Listener.Addr().String()
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

// Shutdown stops every listener and waits for the queries being answered,
// until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	servers := s.servers
	s.servers, s.addrs = nil, nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		if err := srv.ShutdownContext(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: shutdown %s: %w", srvAddr(srv), err))
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
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
// response). It is what ServeDNS sends.
func (s *Server) Respond(req *dns.Msg, src netip.Addr, tcp bool) *dns.Msg {
	if req.Response {
		return nil
	}
	resp := &dns.Msg{}
	resp.Id, resp.Response, resp.Opcode = req.Id, true, req.Opcode
	resp.RecursionDesired, resp.CheckingDisabled = req.RecursionDesired, req.CheckingDisabled
	if len(req.Question) == 1 {
		resp.Question = req.Question // echoed with its case
	}
	size := dns.MinMsgSize
	var q *ecs
	var r gslb.Response
	asked := false
	rcode := s.check(req, resp, &size, &q)
	if rcode < 0 {
		rcode, r, asked = s.answer(req, resp, src, q)
	}
	resp.Rcode = rcode
	if tcp {
		size = dns.MaxMsgSize
	}
	resp.Truncate(size)
	if s.Metrics != nil {
		s.Metrics.observe(req, resp, &r, asked, q != nil)
	}
	return resp
}

// check checks req's header, question and EDNS, sets resp's OPT record
// (and size, the UDP payload the reply may fill) and q (the Client
// Subnet option, when req carries a valid one), and returns the rcode
// that answers req, or -1 when req is to be answered from the snapshot.
func (s *Server) check(req, resp *dns.Msg, size *int, q **ecs) int {
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
		resp.SetEdns0(uint16(udp), opt.Do())
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
			// in memory (from the wire it arrives as EDNS0_SUBNET).
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
			*q = &e
		case *dns.EDNS0_SUBNET:
			// Parsed by miekg/dns: the reader did not mark it, so
			// it could not be checked.
			return dns.RcodeFormatError
		}
	}
	return -1
}

// answer fills resp from the snapshot and returns its rcode and the
// snapshot's response (asked false when there is no snapshot).
func (s *Server) answer(req, resp *dns.Msg, src netip.Addr, q *ecs) (rcode int, r gslb.Response, asked bool) {
	box := s.answerer.Load()
	if box == nil {
		return dns.RcodeServerFailure, r, false
	}
	query := gslb.Query{Name: lowerFQDN(req.Question[0].Name), Type: req.Question[0].Qtype, Source: src}
	if q != nil {
		query.ECS = q.prefix
	}
	r = box.Answer(query)
	resp.Answer, resp.Ns = r.Answer, r.Authority
	if len(r.Extra) > 0 { // the snapshot's slices are shared: copy before adding
		resp.Extra = append(append(make([]dns.RR, 0, len(r.Extra)+len(resp.Extra)), r.Extra...), resp.Extra...)
	}
	resp.Authoritative = r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeNameError
	if q != nil {
		opt := resp.IsEdns0()
		opt.Option = append(opt.Option, q.option(r.Scope))
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
