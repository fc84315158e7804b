package doh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"lbdns/internal/fdbudget"
)

// Limits bound the connections and requests of a Server. A zero field
// takes its default.
type Limits struct {
	// MaxConnections is the most connections open at once, every
	// listen address together; a new one beyond is closed at once.
	// Default 1024.
	MaxConnections int
	// MaxPerSource is the most connections open at once from one
	// client (an IPv4 address, an IPv6 /64; a trusted proxy is not
	// bounded); a new one beyond is closed at once. Default 64.
	MaxPerSource int
	// ReservedFDs is the daemon's descriptor reserve (fdbudget): a new
	// connection that would take one is closed at once. Default
	// fdbudget.DefaultReserve.
	ReservedFDs int
	// HandshakeTimeout bounds the TLS handshake, a PROXY header and the
	// reading of a request's header. Default 5s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection without a request for that long.
	// Default 30s.
	IdleTimeout time.Duration
	// RequestTimeout bounds reading a request's body and writing its
	// response (per stream over HTTP/2). Default 5s.
	RequestTimeout time.Duration
	// MaxStreams is HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS. Default
	// 100.
	MaxStreams int
}

// withDefaults returns l with its zero fields set.
func (l Limits) withDefaults() Limits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = 1024
	}
	if l.MaxPerSource <= 0 {
		l.MaxPerSource = 64
	}
	if l.ReservedFDs <= 0 {
		l.ReservedFDs = fdbudget.DefaultReserve
	}
	if l.HandshakeTimeout <= 0 {
		l.HandshakeTimeout = 5 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 30 * time.Second
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = 5 * time.Second
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = 100
	}
	return l
}

// Server serves DoH and the JSON API over HTTPS (HTTP/2 and HTTP/1.1)
// on its listen addresses. Set its fields, Start it; Shutdown stops it.
// The fields must not change after Start.
type Server struct {
	// Listen are the addresses to serve (TCP). Port 0 picks a free one
	// (Addrs tells which).
	Listen []netip.AddrPort
	// Handler are the handler's options (paths, trust, sizes).
	Handler HandlerOptions
	// Answerer is the responder's answer path. Required.
	Answerer Answerer
	// Certs is the certificate served. Required.
	Certs *Certs
	// ProxyProtocol reads a PROXY v2 header from trusted proxies (see
	// Trust.Wrap).
	ProxyProtocol bool
	// Limits bound connections and requests.
	Limits Limits
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
	// Metrics, when set, counts connections and requests.
	Metrics *Metrics

	mu    sync.Mutex
	srvs  []*http.Server
	lns   []net.Listener
	addrs []netip.AddrPort
	total chan struct{} // a place per connection open
	wg    sync.WaitGroup
}

// Listen opens the TCP listener of ap (ports picked for port 0).
func Listen(ap netip.AddrPort) (*net.TCPListener, error) {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(ap))
	if err != nil {
		return nil, fmt.Errorf("doh: listen tcp %s: %w", ap, err)
	}
	return ln, nil
}

// Start opens every listen address and serves them; it returns once all
// serve, or the first error (having closed what it opened).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srvs != nil {
		return errors.New("doh: already started")
	}
	if s.Answerer == nil || s.Certs == nil {
		return errors.New("doh: an Answerer and Certs are required")
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	lim := s.Limits.withDefaults()
	ho := s.Handler
	ho.Metrics, ho.Logger, ho.ProxyProtocol = s.Metrics, s.Logger, s.ProxyProtocol
	h := NewHandler(ho, s.Answerer)
	var raw []net.Listener
	for _, ap := range s.Listen {
		ln, err := Listen(ap)
		if err != nil {
			for _, l := range raw {
				l.Close()
			}
			return err
		}
		raw = append(raw, ln)
	}
	// One cap for every address: the connections share the budget.
	caps := &sourceCaps{max: lim.MaxPerSource, trust: ho.Trust, bySource: map[netip.Addr]int{}}
	total := make(chan struct{}, lim.MaxConnections)
	s.total = total
	budget := fdbudget.New(lim.ReservedFDs)
	maxHeader := max(8<<10, 2*ho.withDefaults().MaxMessageSize+4<<10) // a GET's base64url message in its URL
	for _, ln := range raw {
		bl := &boundedListener{Listener: ln, total: total, budget: budget, caps: caps, metrics: s.Metrics,
			proxy: s.ProxyProtocol, timeout: lim.HandshakeTimeout}
		srv := &http.Server{
			Handler:           h,
			TLSConfig:         s.Certs.TLSConfig([]string{"h2", "http/1.1"}),
			ReadHeaderTimeout: lim.HandshakeTimeout,
			ReadTimeout:       lim.HandshakeTimeout + lim.RequestTimeout,
			WriteTimeout:      lim.HandshakeTimeout + lim.RequestTimeout,
			IdleTimeout:       lim.IdleTimeout,
			MaxHeaderBytes:    maxHeader,
			HTTP2: &http.HTTP2Config{
				MaxConcurrentStreams:      lim.MaxStreams,
				MaxReceiveBufferPerStream: 64 << 10,
			},
			ConnContext: withConn,
			ErrorLog:    log.New(&errorLog{log: s.Logger, metrics: s.Metrics}, "", 0),
		}
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		s.srvs = append(s.srvs, srv)
		s.lns = append(s.lns, bl)
		s.addrs = append(s.addrs, ln.Addr().(*net.TCPAddr).AddrPort())
		s.wg.Go(func() {
			if err := srv.ServeTLS(bl, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.Logger.Error("gslb doh listener stopped", "addr", ln.Addr().String(), "err", err)
			}
		})
	}
	if s.Metrics != nil {
		s.Metrics.SetCertExpiry(s.Certs.NotAfter())
	}
	for _, a := range s.addrs {
		s.Logger.Info("gslb responder listening (doh, json api)", "addr", a.String())
	}
	return nil
}

// Addrs returns the addresses served, in Listen order; nil before Start.
func (s *Server) Addrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs
}

// Open returns how many connections are open on the listeners
// together, and their cap (Limits.MaxConnections); 0, 0 before Start.
func (s *Server) Open() (open, limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.total), cap(s.total)
}

// Shutdown stops the listeners and waits for the requests in flight
// until ctx is done (then it closes the connections left).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srvs := s.srvs
	s.srvs, s.lns, s.addrs, s.total = nil, nil, nil, nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range srvs {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
			errs = append(errs, fmt.Errorf("doh: shutdown: %w", err))
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// errorLog is net/http's error log: each line logged at debug, TLS
// handshake failures counted.
type errorLog struct {
	log     *slog.Logger
	metrics *Metrics
}

// Write takes one line of net/http's log.
func (e *errorLog) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	if bytes.Contains(p, []byte("TLS handshake error")) {
		e.metrics.HandshakeFailed(frontDoH)
	}
	e.log.Debug("gslb doh: "+line, "front", frontDoH)
	return len(p), nil
}

// sourceCaps counts the connections open per client (an IPv4 address,
// an IPv6 /64) of a Server's listeners; a trusted proxy is not counted.
type sourceCaps struct {
	max   int
	trust Trust

	mu       sync.Mutex
	bySource map[netip.Addr]int
}

// sourceKey is what the per-source cap counts a client by.
func sourceKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// take takes a place for a connection from a; false at the cap. The
// key returned (invalid: not counted) is given back by give.
func (sc *sourceCaps) take(a netip.Addr) (netip.Addr, bool) {
	if sc.trust.Trusted(a) {
		return netip.Addr{}, true
	}
	k := sourceKey(a)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.bySource[k] >= sc.max {
		return k, false
	}
	sc.bySource[k]++
	return k, true
}

// give gives back the place of key k.
func (sc *sourceCaps) give(k netip.Addr) {
	if !k.IsValid() {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.bySource[k]--; sc.bySource[k] <= 0 {
		delete(sc.bySource, k)
	}
}

// boundedListener is a Server's listener: a new connection outside the
// descriptor budget, beyond the total cap or beyond its source's is
// closed at once (counted by reason); one of a trusted proxy is wrapped
// to read its PROXY header (ProxyProtocol).
type boundedListener struct {
	net.Listener
	total   chan struct{}
	budget  fdbudget.Budget
	caps    *sourceCaps
	metrics *Metrics
	proxy   bool
	timeout time.Duration
}

// Accept returns the next connection the caps admit.
func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.budget.Admits(c) {
			l.refuse(c, refusedDescriptors)
			continue
		}
		select {
		case l.total <- struct{}{}:
		default:
			l.refuse(c, refusedLimit)
			continue
		}
		key, ok := l.caps.take(addrOf(c.RemoteAddr()))
		if !ok {
			<-l.total
			l.refuse(c, refusedPerSource)
			continue
		}
		if l.metrics != nil {
			l.metrics.conns.Inc()
		}
		bc := &boundedConn{Conn: c, l: l, key: key}
		return l.caps.trust.Wrap(bc, l.proxy, l.timeout, func(error) { l.metrics.ProxyFailed(frontDoH) }), nil
	}
}

// refuse closes c, counted under reason.
func (l *boundedListener) refuse(c net.Conn, reason string) {
	if l.metrics != nil {
		l.metrics.refused.WithLabelValues(reason).Inc()
	}
	c.Close()
}

// boundedConn is a connection of a boundedListener: closing it gives its
// places back.
type boundedConn struct {
	net.Conn
	l    *boundedListener
	key  netip.Addr
	once sync.Once
}

// Close closes the connection and gives its places back, once.
func (c *boundedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.caps.give(c.key)
		<-c.l.total
		if c.l.metrics != nil {
			c.l.metrics.conns.Dec()
		}
	})
	return err
}

// Unwrap returns the connection accepted.
func (c *boundedConn) Unwrap() net.Conn { return c.Conn }
