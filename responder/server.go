// Package responder is the GSLB responder on the wire: an authoritative DNS
// server (UDP and TCP on every listen address: UDP by its own blocking
// readers, answering inline; TCP by its own accept loops, with bounded
// connections) that answers from an atomically swapped gslb.Answerer
// snapshot, with the protocol around it done here: header flags, the
// question echoed with its case, FORMERR and NOTIMP, EDNS(0) with
// BADVERS, the Client Subnet option checked and echoed with the answer's
// scope (RFC 7871), UDP truncation and TCP. Its Responder wires it into
// the daemon: listeners, the persisted SOA serial, and the snapshot
// rebuilt on reload and on every GSLB member state change.
//
// The files say which room they belong to:
//   - the wire: server.go (the Server, its start and shutdown),
//     wire_udp.go (UDP sockets), wire_udpread.go (the UDP readers),
//     wire_tcp.go (TCP accept loops and connections);
//   - the reply path: reply.go (a query's bytes to a reply's),
//     reply_answer.go (a parsed query to its answer), reply_pack.go,
//     reply_ecs.go, reply_scratch.go, metrics.go;
//   - the responder's lifecycle: responder.go (the Responder: waits on
//     the hub, rebuilds and swaps snapshots, listens), responder_state.go,
//     responder_status.go, responder_explain.go;
//   - the serial store: serial.go.
package responder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"lbdns/flood"
	"lbdns/gslb"
	"lbdns/responder/doh"
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
	// TCP bounds the TCP connections (RFC 7766 section 10); its zero
	// fields take their defaults.
	TCP TCPLimits
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
	// Metrics, when set, counts queries and replies.
	Metrics *Metrics
	// Flood, when set, counts every query read, UDP and TCP (its
	// client, name, type and the reply's code): each
	// UDP reader records into a flood.Producer of its own, the TCP
	// connections into one they share.
	Flood *flood.Pipeline
	// Fronts, when set, are the encrypted listeners (DoT, DoH and the
	// JSON API: wire_tls.go), started and stopped with the others.
	Fronts *Fronts
	// NotifyStartedFunc, when set, is called once every listener serves.
	NotifyStartedFunc func()

	answerer atomic.Pointer[answerer]
	// work is the scratch of Exchange's callers (pooled).
	work sync.Pool

	// tcpRead, when set (tests), is called after every read of a TCP
	// connection that got bytes.
	tcpRead func()

	mu       sync.Mutex
	tcp      []net.Listener  // served by serveTCP
	conns    *tcpConns       // the TCP connections of all of them
	tcpDone  chan struct{}   // closed by Shutdown: ends accept back-offs
	udp      []*udpSocket    // served by serveUDP
	tcpFlood *flood.Producer // the TCP connections' and the fronts' (nil: not counted)
	addrs    []netip.AddrPort
	dot      []net.Listener // served by serveTCP, TLS over each connection
	dotConns *tcpConns
	doh      *doh.Server
	wg       sync.WaitGroup
}

// answerer boxes an Answerer for atomic.Pointer, with the number of its
// rotation counters (gslb.Query.Rotation; 0 when it has none).
type answerer struct {
	gslb.Answerer
	rotations int
	// names is the Answerer when it looks names up (gslb.Snapshot.Lookup:
	// the readers find the question's entry in it), else nil.
	names interface {
		Lookup(name []byte) (gslb.Entry, bool)
	}
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
	box.names, _ = a.(interface {
		Lookup(name []byte) (gslb.Entry, bool)
	})
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
		pc, ln, err := listenBoth(ap)
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
		udp = append(udp, pc)
		addrs = append(addrs, pc.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	closeAll := func() {
		for _, ln := range tcp {
			ln.Close()
		}
		for _, c := range udp {
			c.Close()
		}
	}
	conns, done := newTCPConns(s.TCP, s.Metrics.tcpSeries()), make(chan struct{})
	if s.Flood != nil {
		s.tcpFlood = s.Flood.Producer(flood.SourceResponder) // before DoH serves: its queries are counted there
	}
	var dot []net.Listener
	var dotConns *tcpConns
	var dohSrv *doh.Server
	if f := s.Fronts; f != nil {
		var err error
		if dot, err = listenFronts(f); err != nil {
			closeAll()
			if s.tcpFlood != nil {
				s.tcpFlood.Close()
				s.tcpFlood = nil
			}
			return err
		}
		dotConns = newTCPConns(f.DoTLimits, s.Metrics.dotSeries())
		dotConns.exempt = f.Handler.Trust.Trusted
		dotConns.dot = &dotSession{config: f.Certs.TLSConfig([]string{"dot"}), trust: f.Handler.Trust,
			proxy: f.ProxyProtocol, handshake: f.Handshake, metrics: s.Metrics.frontSeries()}
		if len(f.DoH) > 0 {
			dohSrv = &doh.Server{Listen: f.DoH, Handler: f.Handler, Answerer: s, Certs: f.Certs,
				ProxyProtocol: f.ProxyProtocol, Limits: f.HTTP, Logger: s.Logger, Metrics: s.Metrics.frontSeries()}
			if err := dohSrv.Start(); err != nil {
				closeAll()
				if s.tcpFlood != nil {
					s.tcpFlood.Close()
					s.tcpFlood = nil
				}
				for _, ln := range dot {
					ln.Close()
				}
				return fmt.Errorf("server: %w", err)
			}
		}
	}
	for _, ln := range tcp {
		s.wg.Go(func() { s.serveTCP(ln, conns, done) })
	}
	for _, ln := range dot {
		s.wg.Go(func() { s.serveTCP(ln, dotConns, done) })
	}
	for _, c := range udp {
		pktinfo := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().IsUnspecified()
		s.wg.Go(func() { s.serveUDP(c, pktinfo) })
	}
	s.tcp, s.conns, s.tcpDone, s.udp, s.addrs = tcp, conns, done, udp, addrs
	s.dot, s.dotConns, s.doh = dot, dotConns, dohSrv
	for _, ln := range dot {
		s.Logger.Info("gslb responder listening (dot)", "addr", ln.Addr().String())
	}
	for _, a := range addrs {
		s.Logger.Info("gslb responder listening (udp, tcp)", "addr", a.String())
	}
	if s.NotifyStartedFunc != nil {
		s.NotifyStartedFunc()
	}
	return nil
}

// listenBoth opens the UDP socket of ap (SO_REUSEPORT), then TCP on the
// port UDP got.
func listenBoth(ap netip.AddrPort) (*udpSocket, net.Listener, error) {
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
		return pc, ln, nil
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

// FrontAddrs returns the addresses the encrypted fronts serve (ports
// picked for port 0 resolved), DoH's then DoT's, in Fronts order; nil
// before Start or without fronts.
func (s *Server) FrontAddrs() (dohAddrs, dotAddrs []netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.doh != nil {
		dohAddrs = s.doh.Addrs()
	}
	for _, ln := range s.dot {
		dotAddrs = append(dotAddrs, ln.Addr().(*net.TCPAddr).AddrPort())
	}
	return dohAddrs, dotAddrs
}

// Shutdown stops every listener (closing the UDP sockets stops their
// readers), wakes the TCP connections, which close once the answers of
// what they read are written, and waits for them, until ctx is done
// (then it closes the connections left).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	tcp, conns, done, udp, fp := s.tcp, s.conns, s.tcpDone, s.udp, s.tcpFlood
	dot, dotConns, dohSrv := s.dot, s.dotConns, s.doh
	s.tcp, s.conns, s.tcpDone, s.udp, s.addrs = nil, nil, nil, nil, nil
	s.dot, s.dotConns, s.doh = nil, nil, nil
	s.mu.Unlock()
	var errs []error
	if dohSrv != nil {
		if err := dohSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: %w", err))
		}
	}
	for _, ln := range dot {
		if err := ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("server: close dot %s: %w", ln.Addr(), err))
		}
	}
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
	if dotConns != nil {
		dotConns.shutdown()
	}
	wait := make(chan struct{})
	go func() { s.wg.Wait(); close(wait) }()
	select {
	case <-wait:
		if fp != nil {
			fp.Close()
		}
	case <-ctx.Done():
		if conns != nil {
			conns.closeAll()
		}
		if dotConns != nil {
			dotConns.closeAll()
		}
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}
