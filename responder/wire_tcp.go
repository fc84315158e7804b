package responder

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/internal/fdbudget"
)

// The TCP side of the server is its own too (RFC 7766): an accept loop
// per listen address and a goroutine per connection, which reads what
// the client sent into a buffer that grows only as bytes arrive, answers
// every whole query in it in order (pipelined queries, section 6.2.1.1)
// with the UDP readers' own reply, and
// writes the answers of a read at once. The connections of all listen
// addresses are bounded together (section 10): in total (at the cap,
// the longest idle one is closed for the new one, as gdnsd does), per
// client address (beyond, a new one is refused), by the descriptors left
// to the rest of the daemon (its monitors, control socket and status
// endpoint: within TCPLimits.ReservedFDs of RLIMIT_NOFILE a new one is
// refused), by an idle timeout (from the accept or the last answer
// written, so that a client trickling bytes is closed too), and by a
// number of queries, after which the connection is closed gracefully: a
// FIN after the last answer, then what the client still sends read and
// dropped until it closes, so that no reset discards answers in flight.
// An accept that fails (EMFILE, ENFILE) closes the longest idle
// connection and backs off, from 5 ms doubling to 1 s, instead of
// spinning. miekg/dns's server, used before, has none of this: it
// retries a failed accept at once, allocates a query's whole length
// prefix before its bytes come (64 KiB per connection), and closes a
// connection at its query limit with the rest of the pipeline unread,
// which resets it.

// TCPLimits bound the server's TCP connections. A zero field takes its
// default.
type TCPLimits struct {
	// MaxConnections is the most connections open at once, all listen
	// addresses together; a new one beyond closes the longest idle.
	// Default DefaultTCPMaxConnections.
	MaxConnections int
	// MaxPerSource is the most connections open at once from one
	// client (an IPv4 address, an IPv6 /64); a new one beyond is
	// refused. Default DefaultTCPMaxPerSource.
	MaxPerSource int
	// IdleTimeout closes a connection that got no answer written for
	// that long since it was accepted or since its last answer, and
	// bounds each write. Default DefaultTCPIdleTimeout.
	IdleTimeout time.Duration
	// MaxQueries is how many queries a connection is read (every
	// message counts, answered or not); after the last one's answer it
	// is closed gracefully. Default DefaultTCPMaxQueries.
	MaxQueries int
	// ReservedFDs is how many descriptors below the process's
	// RLIMIT_NOFILE (soft) a new connection may not take: it is refused,
	// so that the monitors, the control socket and the status endpoint
	// can still open theirs. At most half the limit is reserved.
	// Default DefaultTCPReservedFDs.
	ReservedFDs int
}

// The defaults of TCPLimits.
const (
	DefaultTCPMaxConnections = 1024
	DefaultTCPMaxPerSource   = 64
	DefaultTCPIdleTimeout    = 10 * time.Second
	DefaultTCPMaxQueries     = 1000
	DefaultTCPReservedFDs    = 1024
)

// TCPLimitsOf returns the TCP limits of the [gslb.server] table c.
func TCPLimitsOf(c configs.GSLBServer) TCPLimits {
	return TCPLimits{
		MaxConnections: c.TCPMaxConnections,
		MaxPerSource:   c.TCPMaxPerSource,
		IdleTimeout:    c.TCPIdleTimeout.Duration,
		MaxQueries:     c.TCPMaxQueries,
		ReservedFDs:    c.TCPReservedFDs,
	}
}

// withDefaults returns l with its zero fields set to their defaults.
func (l TCPLimits) withDefaults() TCPLimits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultTCPMaxConnections
	}
	if l.MaxPerSource <= 0 {
		l.MaxPerSource = DefaultTCPMaxPerSource
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultTCPIdleTimeout
	}
	if l.MaxQueries <= 0 {
		l.MaxQueries = DefaultTCPMaxQueries
	}
	if l.ReservedFDs <= 0 {
		l.ReservedFDs = DefaultTCPReservedFDs
	}
	return l
}

const (
	// tcpReadMin is a connection's first read buffer: room for several
	// common queries. It grows (at most doubling, and only once full)
	// for a query that does not fit, and is dropped when it is empty
	// and has grown beyond tcpReadKeep.
	tcpReadMin  = 512
	tcpReadKeep = 4 * tcpReadMin
	// tcpFlush is how many bytes of answers are written at once at
	// most: a long pipeline is answered in writes of about this size.
	tcpFlush = 16 << 10
	// tcpLinger bounds how long a connection closed at its query limit
	// reads (and drops) what the client still sends before it closes.
	tcpLinger = 2 * time.Second
	// The accept loop's back-off after a failed accept.
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// The reason label values of lbdns_gslb_tcp_refused_total and
// lbdns_gslb_tcp_closed_total.
const (
	refusedPerSource   = "per_source"
	refusedDescriptors = "descriptors"
	closedEvicted      = "evicted"
	closedIdle         = "idle"
	closedQueryLimit   = "query_limit"
	closedHandshake    = "handshake"
)

// tcpMetrics are the series of the TCP connections, or of DoT's.
type tcpMetrics struct {
	open         prometheus.Gauge
	refused      *prometheus.CounterVec
	closed       *prometheus.CounterVec
	acceptErrors prometheus.Counter
	// queries counts the queries read (DoT's; nil for TCP, whose
	// queries lbdns_gslb_queries_total counts with UDP's).
	queries prometheus.Counter
}

// newTCPMetrics creates the series of the TCP connections.
func newTCPMetrics() tcpMetrics {
	m := tcpMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "gslb_tcp_connections",
			Help: "TCP connections open to the GSLB responder.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_tcp_refused_total",
			Help: "TCP connections to the GSLB responder closed as soon as accepted, by reason: per_source (tcp_max_per_source open from that client), descriptors (the process within tcp_reserved_fds of its descriptor limit).",
		}, []string{"reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_tcp_closed_total",
			Help: "TCP connections the GSLB responder closed, by reason: evicted (the longest idle, for a new one at tcp_max_connections or after a failed accept), idle (tcp_idle_timeout without an answer), query_limit (tcp_max_queries answered, closed gracefully).",
		}, []string{"reason"}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_tcp_accept_errors_total",
			Help: "Failed accepts of the GSLB responder's TCP listeners (EMFILE, ENFILE: out of descriptors); each is followed by a back-off.",
		}),
	}
	m.init()
	return m
}

// newDoTMetrics creates the series of the DoT connections.
func newDoTMetrics() tcpMetrics {
	m := tcpMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "gslb_dot_connections",
			Help: "DNS over TLS connections open to the GSLB responder.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_dot_refused_total",
			Help: "DNS over TLS connections to the GSLB responder closed as soon as accepted, by reason: per_source (gslb.tls max_per_source open from that client), descriptors (the process within tcp_reserved_fds of its descriptor limit).",
		}, []string{"reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_dot_closed_total",
			Help: "DNS over TLS connections the GSLB responder closed, by reason: evicted (the longest idle, for a new one at gslb.tls max_connections or after a failed accept), idle (gslb.tls idle_timeout without an answer), query_limit (tcp_max_queries answered, closed gracefully), handshake (the TLS handshake or the PROXY header failed or took longer than handshake_timeout).",
		}, []string{"reason"}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_dot_accept_errors_total",
			Help: "Failed accepts of the GSLB responder's DNS over TLS listeners (EMFILE, ENFILE: out of descriptors); each is followed by a back-off.",
		}),
		queries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_dot_queries_total",
			Help: "DNS messages read on the GSLB responder's DNS over TLS connections (each also counted, with UDP's and TCP's, in lbdns_gslb_queries_total).",
		}),
	}
	m.init()
	m.closed.WithLabelValues(closedHandshake)
	return m
}

// init makes every reason's series.
func (m *tcpMetrics) init() {
	for _, r := range []string{refusedPerSource, refusedDescriptors} {
		m.refused.WithLabelValues(r)
	}
	for _, r := range []string{closedEvicted, closedIdle, closedQueryLimit} {
		m.closed.WithLabelValues(r)
	}
}

// collectors are m's series, to register.
func (m *tcpMetrics) collectors() []prometheus.Collector {
	c := []prometheus.Collector{m.open, m.refused, m.closed, m.acceptErrors}
	if m.queries != nil {
		c = append(c, m.queries)
	}
	return c
}

// tcpConns is the registry of a started server's TCP connections, of
// all its listen addresses: what the limits are checked against.
type tcpConns struct {
	lim TCPLimits
	// fds is the descriptor reserve a new connection may not take
	// (the daemon's one budget, shared with the control socket, the
	// status endpoint and the dnstap intake).
	fds fdbudget.Budget
	// metrics are the series of these connections (TCP's, or DoT's);
	// nil: not counted.
	metrics *tcpMetrics
	// exempt, when set, tells the clients the per-source limit does
	// not bound (trusted proxies, over DoT).
	exempt func(netip.Addr) bool
	// dot, when set, makes these DoT connections: each is served by
	// serveDoT (PROXY header, TLS handshake) before serveConn.
	dot  *dotSession
	work sync.Pool // of *tcpWork
	// base is when the registry was made: the connections' times are
	// kept as durations since (monotonic).
	base time.Time

	mu       sync.Mutex
	all      map[*tcpConn]struct{}
	bySource map[netip.Addr]int
	// closing is set (under mu) by shutdown; read without it by the
	// connections after they set a read deadline (see serveConn).
	closing atomic.Bool
}

// tcpConn is one connection.
type tcpConn struct {
	// c is the connection accepted (closed by an eviction, a shutdown);
	// io is what the queries are read from and the answers written to:
	// c, or its TLS session over DoT.
	c   net.Conn
	io  net.Conn
	src netip.Addr // unmapped
	key netip.Addr // src, an IPv6 one masked to its /64
	// active is when the connection was accepted or last began to
	// write answers (nanoseconds since tcpConns.base): the longest idle
	// has the least. Set before the write, so that a client that reads
	// an answer and then opens another connection finds this one's
	// time before the new one's.
	active atomic.Int64
	// evicted is set when the registry closed it for another.
	evicted atomic.Bool
}

// tcpWork is what answering needs, shared by the connections (pooled):
// a scratch and the buffer a reply is packed in.
type tcpWork struct {
	sc scratch
	rb []byte
}

// newTCPConns returns the registry for lim (defaults applied).
func newTCPConns(lim TCPLimits, m *tcpMetrics) *tcpConns {
	t := &tcpConns{lim: lim.withDefaults(), metrics: m, base: time.Now(), all: make(map[*tcpConn]struct{}), bySource: make(map[netip.Addr]int)}
	t.work.New = func() any { return new(tcpWork) }
	t.fds = fdbudget.New(t.lim.ReservedFDs)
	return t
}

// sourceKey is what the per-source limit counts a client by: its IPv4
// address, or its IPv6 /64 (one host's share of a network).
func sourceKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// admit registers the connection c from src, or refuses it (closes it,
// counted): the per-source limit, the descriptors' reserve, or shutdown.
// At the total limit it closes the longest idle connection for c. It
// returns the connection registered, or nil.
func (t *tcpConns) admit(c net.Conn, src netip.Addr) *tcpConn {
	if !t.fds.Admits(c) {
		t.refused(refusedDescriptors) // counted before the client can tell
		c.Close()
		return nil
	}
	tc := &tcpConn{c: c, io: c, src: src, key: sourceKey(src)}
	tc.active.Store(int64(time.Since(t.base)))
	var victim *tcpConn
	t.mu.Lock()
	switch {
	case t.closing.Load():
		t.mu.Unlock()
		c.Close()
		return nil
	case t.bySource[tc.key] >= t.lim.MaxPerSource && (t.exempt == nil || !t.exempt(src)):
		t.mu.Unlock()
		t.refused(refusedPerSource)
		c.Close()
		return nil
	case len(t.all) >= t.lim.MaxConnections:
		victim = t.oldestLocked()
		t.removeLocked(victim)
	}
	t.all[tc] = struct{}{}
	t.bySource[tc.key]++
	t.mu.Unlock()
	if t.metrics != nil {
		t.metrics.open.Inc()
	}
	if victim != nil {
		t.evict(victim)
	}
	return tc
}

// evictOldest closes the longest idle connection, if any (an accept
// failed for want of descriptors).
func (t *tcpConns) evictOldest() {
	t.mu.Lock()
	victim := t.oldestLocked()
	t.removeLocked(victim)
	t.mu.Unlock()
	if victim != nil {
		t.evict(victim)
	}
}

// evict closes tc, just removed from the registry, for another.
func (t *tcpConns) evict(tc *tcpConn) {
	if t.metrics != nil {
		t.metrics.open.Dec()
	}
	tc.evicted.Store(true)
	t.closed(closedEvicted)
	tc.c.Close()
}

// oldestLocked is the longest idle connection, nil when there is none;
// t.mu held.
func (t *tcpConns) oldestLocked() *tcpConn {
	var old *tcpConn
	var at int64
	for tc := range t.all {
		if a := tc.active.Load(); old == nil || a < at {
			old, at = tc, a
		}
	}
	return old
}

// removeLocked takes tc (nil: none) out of the registry and reports
// whether it was in; t.mu held.
func (t *tcpConns) removeLocked(tc *tcpConn) bool {
	if tc == nil {
		return false
	}
	if _, ok := t.all[tc]; !ok {
		return false
	}
	delete(t.all, tc)
	if t.bySource[tc.key]--; t.bySource[tc.key] <= 0 {
		delete(t.bySource, tc.key)
	}
	return true
}

// remove takes tc out of the registry (it is closed), unless an
// eviction did.
func (t *tcpConns) remove(tc *tcpConn) {
	t.mu.Lock()
	in := t.removeLocked(tc)
	t.mu.Unlock()
	if in && t.metrics != nil {
		t.metrics.open.Dec()
	}
}

// shutdown refuses new connections and wakes every connection's read,
// so that each closes once its answers are written.
func (t *tcpConns) shutdown() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closing.Store(true)
	now := time.Now()
	for tc := range t.all {
		tc.c.SetReadDeadline(now)
	}
}

// open returns how many connections are open, and their cap.
func (t *tcpConns) open() (open, limit int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.all), t.lim.MaxConnections
}

// closeAll closes every connection (shutdown ran out of time).
func (t *tcpConns) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tc := range t.all {
		tc.c.Close()
	}
}

func (t *tcpConns) refused(reason string) {
	if t.metrics != nil {
		t.metrics.refused.WithLabelValues(reason).Inc()
	}
}

func (t *tcpConns) closed(reason string) {
	if t.metrics != nil {
		t.metrics.closed.WithLabelValues(reason).Inc()
	}
}

// serveTCP accepts connections on ln until it is closed, each admitted
// (tcpConns.admit) served by serveConn. A failed accept closes the
// longest idle connection when the process is out of descriptors, and
// backs off (acceptBackoffMin doubling to acceptBackoffMax) instead of
// trying again at once; done ends a back-off early.
func (s *Server) serveTCP(ln net.Listener, t *tcpConns, done <-chan struct{}) {
	var delay time.Duration
	var warned time.Time // the last failure logged at warning level
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if t.metrics != nil {
				t.metrics.acceptErrors.Inc()
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				t.evictOldest()
			}
			if delay == 0 {
				delay = acceptBackoffMin
			} else {
				delay = min(2*delay, acceptBackoffMax)
			}
			if now := time.Now(); now.Sub(warned) >= time.Minute {
				warned = now
				s.Logger.Warn("gslb tcp accept failed; backing off (logged once a minute at most; lbdns_gslb_tcp_accept_errors_total counts them all)", "addr", ln.Addr().String(), "err", err, "backoff", delay.String())
			} else {
				s.Logger.Debug("gslb tcp accept failed", "addr", ln.Addr().String(), "err", err, "backoff", delay.String())
			}
			tm := time.NewTimer(delay)
			select {
			case <-done:
				tm.Stop()
				return
			case <-tm.C:
			}
			continue
		}
		delay = 0
		var src netip.Addr
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			src = a.AddrPort().Addr().Unmap()
		}
		tc := t.admit(c, src)
		if tc == nil {
			continue
		}
		if t.dot != nil {
			s.wg.Go(func() { s.serveDoT(t, tc) })
			continue
		}
		s.wg.Go(func() { s.serveConn(t, tc) })
	}
}

// serveConn answers the queries of one connection until the client
// closes it, it idles out, it reaches its query limit (then closed
// gracefully), or it is evicted or shut down.
func (s *Server) serveConn(t *tcpConns, tc *tcpConn) {
	c := tc.io
	lim := t.lim
	defer t.remove(tc)
	var buf, out []byte
	r, w, queries := 0, 0, 0
	eof := false
	for {
		var wk *tcpWork
		for w-r >= 2 && queries < lim.MaxQueries {
			n := int(binary.BigEndian.Uint16(buf[r:]))
			if w-r < 2+n {
				break
			}
			if wk == nil {
				wk = t.work.Get().(*tcpWork)
			}
			out = wk.answer(s, out, buf[r+2:r+2+n], tc.src)
			r += 2 + n
			queries++
			if t.metrics != nil && t.metrics.queries != nil {
				t.metrics.queries.Inc()
			}
			if len(out) >= tcpFlush {
				if !s.writeAnswers(t, tc, out, lim.IdleTimeout) {
					t.work.Put(wk)
					c.Close()
					return
				}
				out = out[:0]
			}
		}
		if wk != nil {
			t.work.Put(wk)
		}
		if len(out) > 0 {
			if !s.writeAnswers(t, tc, out, lim.IdleTimeout) {
				c.Close()
				return
			}
			out = out[:0]
			if cap(out) > tcpFlush*2 {
				out = nil
			}
		}
		if queries >= lim.MaxQueries {
			t.closed(closedQueryLimit)
			lingerClose(c, min(tcpLinger, lim.IdleTimeout))
			return
		}
		if eof {
			c.Close() // every whole query answered: FIN
			return
		}
		buf, r, w = readRoom(buf, r, w)
		c.SetReadDeadline(t.base.Add(time.Duration(tc.active.Load()) + lim.IdleTimeout))
		if t.closing.Load() {
			// Checked after the deadline is set: a shutdown either came
			// before (seen here) or sets its own deadline after ours.
			c.Close()
			return
		}
		n, err := c.Read(buf[w:])
		w += n
		if n > 0 && s.tcpRead != nil {
			s.tcpRead()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				eof = true // answer what came whole, then close
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !tc.evicted.Load() && !t.closing.Load() {
				t.closed(closedIdle)
			}
			c.Close()
			return
		}
	}
}

// readRoom makes room in buf for a read after buf[r:w], the part of a
// query read so far (or nothing): the buffer is allocated at
// tcpReadMin, moved down when full, grown only when full of one query
// (to at most twice its size: memory follows the bytes that came, not a
// length prefix), and dropped once empty if it grew big. It returns the
// buffer, its length its capacity, and the new r and w.
func readRoom(buf []byte, r, w int) ([]byte, int, int) {
	if r == w {
		r, w = 0, 0
		if cap(buf) > tcpReadKeep {
			buf = nil
		}
	}
	if buf == nil {
		return make([]byte, tcpReadMin), 0, 0
	}
	if w < len(buf) {
		return buf, r, w
	}
	if r > 0 {
		copy(buf, buf[r:w])
		return buf, 0, w - r
	}
	need := 2 * len(buf)
	if w >= 2 {
		need = min(need, 2+int(binary.BigEndian.Uint16(buf)))
	}
	nb := make([]byte, need)
	copy(nb, buf[:w])
	return nb, 0, w
}

// answer appends the reply to the query q from src, with its length
// prefix, to out (nothing when q gets none).
func (wk *tcpWork) answer(s *Server, out, q []byte, src netip.Addr) []byte {
	rb := s.reply(&wk.sc, wk.rb[:cap(wk.rb)], q, src, true)
	if s.tcpFlood != nil {
		s.tcpFlood.AddMessage(src, q, rb)
	}
	if len(rb) == 0 {
		return out
	}
	if cap(rb) > cap(wk.rb) {
		wk.rb = rb[:0]
	}
	out = binary.BigEndian.AppendUint16(out, uint16(len(rb)))
	return append(out, rb...)
}

// writeAnswers writes out to tc within timeout and reports whether it
// was written whole; the connection's idle time starts again.
func (s *Server) writeAnswers(t *tcpConns, tc *tcpConn, out []byte, timeout time.Duration) bool {
	now := time.Now()
	tc.active.Store(int64(now.Sub(t.base)))
	tc.io.SetWriteDeadline(now.Add(timeout))
	if _, err := tc.io.Write(out); err != nil {
		s.Logger.Debug("gslb tcp answers not sent", "client", tc.src.String(), "err", err)
		return false
	}
	return true
}

// lingerClose closes c gracefully after its last answer: a FIN (the
// write side shut), then what the client still sends read and dropped
// until it closes or for d at most, then the close. Closed at once with
// unread bytes, the kernel would reset the connection, and the client's
// kernel could drop answers it had not yet read.
func lingerClose(c net.Conn, d time.Duration) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		c.SetReadDeadline(time.Now().Add(d))
		var junk [512]byte
		for {
			if _, err := c.Read(junk[:]); err != nil {
				break
			}
		}
	}
	c.Close()
}
