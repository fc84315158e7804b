package responder

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/responder/doh"
)

// The encrypted fronts ([gslb.tls]) answer through the server's one
// answer path: DNS over TLS (RFC 7858) is the TCP connections' own code
// (framing, pipelining, limits, idle timeouts, graceful close) over a
// TLS session, with a registry and series of its own; DNS over HTTPS
// and the JSON API (package doh) call Exchange, which answers a message
// as over TCP. Every query is counted by the flood alarms with its
// client, as TCP's are.

// Fronts are the server's encrypted listeners.
type Fronts struct {
	// DoH are the addresses of DNS over HTTPS and the JSON API; DoT
	// those of DNS over TLS.
	DoH, DoT []netip.AddrPort
	// Certs is the certificate both present. Required.
	Certs *doh.Certs
	// Handler configures DoH and the JSON API (paths, trust, sizes).
	Handler doh.HandlerOptions
	// ProxyProtocol reads a PROXY v2 header from the trusted proxies.
	ProxyProtocol bool
	// HTTP bounds the DoH connections; DoTLimits the DoT connections.
	HTTP      doh.Limits
	DoTLimits TCPLimits
	// Handshake bounds a DoT connection's TLS handshake (and PROXY
	// header).
	Handshake time.Duration

	// config is the table these came from (Responder.listen compares).
	config configs.GSLBTLS
}

// FrontsOf returns the fronts of [gslb.tls] t, with the TCP limits of
// [gslb.server] s where DoT shares them (tcp_max_queries, the
// descriptor reserve), presenting certs; nil when t listens nowhere.
func FrontsOf(s configs.GSLBServer, t configs.GSLBTLS, certs *doh.Certs) *Fronts {
	if !t.On() {
		return nil
	}
	return &Fronts{
		DoH: t.DoHAddrs, DoT: t.DoTAddrs, Certs: certs,
		Handler: doh.HandlerOptions{DoHPath: t.DoHPath, JSONPath: t.JSONPath, JSONSecret: []byte(t.JSONSecret),
			Trust:          TrustOf(t),
			MaxMessageSize: t.MaxMessageSize, MaxBatch: t.MaxBatch},
		ProxyProtocol: t.ProxyProtocol,
		HTTP: doh.Limits{MaxConnections: t.MaxConnections, MaxPerSource: t.MaxPerSource, ReservedFDs: s.TCPReservedFDs,
			HandshakeTimeout: t.HandshakeTimeout.Duration, IdleTimeout: t.IdleTimeout.Duration,
			RequestTimeout: t.RequestTimeout.Duration, MaxStreams: t.MaxStreams},
		DoTLimits: TCPLimits{MaxConnections: t.MaxConnections, MaxPerSource: t.MaxPerSource, IdleTimeout: t.IdleTimeout.Duration,
			MaxQueries: s.TCPMaxQueries, ReservedFDs: s.TCPReservedFDs},
		Handshake: t.HandshakeTimeout.Duration,
		config:    t,
	}
}

// TrustOf is whose word on a client's address the fronts of [gslb.tls]
// t take (the fronts and lbctl gslb explain share it).
func TrustOf(t configs.GSLBTLS) doh.Trust {
	return doh.Trust{Proxies: t.Proxies, AllowClientIP: t.AllowClientIP}
}

// dotSession is what a DoT connection needs beyond TCP's.
type dotSession struct {
	config    *tls.Config
	trust     doh.Trust
	proxy     bool
	handshake time.Duration
	metrics   *doh.Metrics
}

// Exchange answers the DNS message query from client as over TCP: the
// whole reply (never truncated), by the path of every UDP and TCP
// query, packed into dst when it fits (else a new buffer); nil when
// query gets none. It is counted in the metrics and by the flood alarms
// with client. query may be changed. It is the encrypted fronts' entry
// (doh.Answerer), safe for concurrent use.
func (s *Server) Exchange(dst, query []byte, client netip.Addr) []byte {
	wk, _ := s.work.Get().(*tcpWork)
	if wk == nil {
		wk = new(tcpWork)
	}
	defer s.work.Put(wk)
	rb := s.reply(&wk.sc, dst[:cap(dst)], query, client.Unmap(), true)
	if s.tcpFlood != nil {
		s.tcpFlood.AddMessage(client.Unmap(), query, rb)
	}
	return rb
}

// Locate is the location of addr in the snapshot answering now (none
// before the first Swap).
func (s *Server) Locate(addr netip.Addr) gslb.Location {
	box := s.answerer.Load()
	if box == nil {
		return gslb.Location{}
	}
	if l, ok := box.Answerer.(interface {
		Locate(netip.Addr) gslb.Location
	}); ok {
		return l.Locate(addr.Unmap())
	}
	return gslb.Location{}
}

// serveDoT serves the DoT connection tc, admitted: the PROXY header of
// a trusted proxy (ProxyProtocol) read, the TLS handshake done, both
// within the handshake timeout, then its queries as TCP's.
func (s *Server) serveDoT(t *tcpConns, tc *tcpConn) {
	d := t.dot
	fail := func(msg string, err error) {
		s.Logger.Debug("gslb dot: "+msg, "client", tc.src.String(), "err", err)
		t.closed(closedHandshake)
		tc.c.Close()
		t.remove(tc)
	}
	c := d.trust.Wrap(tc.c, d.proxy, d.handshake, func(error) { d.metrics.ProxyFailed("dot") })
	if d.proxy {
		peer, src := doh.Origin(c) // reads the header
		tc.src = d.trust.Locate(d.proxy, doh.Request{Via: doh.ViaDoT, Peer: peer, ProxySource: src}).Client
	}
	deadline := time.Now().Add(d.handshake)
	tc.c.SetDeadline(deadline)
	tconn := tls.Server(c, d.config)
	if err := tconn.Handshake(); err != nil {
		d.metrics.HandshakeFailed("dot")
		fail("tls handshake failed", err)
		return
	}
	tc.c.SetDeadline(time.Time{})
	tc.io = tconn
	s.serveConn(t, tc)
}

// FrontStatus returns the encrypted fronts serving, for the status
// views: DoH's (with the JSON API) then DoT's, each with its addresses,
// its connections open and the certificate served; nil before Start or
// without fronts.
func (s *Server) FrontStatus() []control.GSLBFront {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.Fronts
	if f == nil || s.dotConns == nil {
		return nil
	}
	subject, notAfter := f.Certs.Subject(), f.Certs.NotAfter()
	var out []control.GSLBFront
	if s.doh != nil {
		open, limit := s.doh.Open()
		fs := control.GSLBFront{Transport: "doh", Listen: []string{}, DoHPath: f.Handler.DoHPath, JSONPath: f.Handler.JSONPath,
			Connections: open, MaxConnections: limit, CertSubject: subject, CertNotAfter: notAfter}
		for _, a := range s.doh.Addrs() {
			fs.Listen = append(fs.Listen, a.String())
		}
		out = append(out, fs)
	}
	if len(s.dot) > 0 {
		open, limit := s.dotConns.open()
		fs := control.GSLBFront{Transport: "dot", Listen: []string{}, Connections: open, MaxConnections: limit,
			CertSubject: subject, CertNotAfter: notAfter}
		for _, ln := range s.dot {
			fs.Listen = append(fs.Listen, ln.Addr().String())
		}
		out = append(out, fs)
	}
	return out
}

// listenFronts opens the DoT listeners of f; on an error it closes what
// it opened.
func listenFronts(f *Fronts) ([]net.Listener, error) {
	var out []net.Listener
	for _, ap := range f.DoT {
		ln, err := doh.Listen(ap)
		if err != nil {
			for _, l := range out {
				l.Close()
			}
			return nil, fmt.Errorf("server: dot: %w", err)
		}
		out = append(out, ln)
	}
	return out, nil
}
