// Package intake listens for dnstap from resolvers, on a Unix socket and
// on TCP, and hands each decoded client message to a Handler.
//
// Every connection is one Frame Streams stream (package fstrm) of content
// type protobuf:dnstap.Dnstap. What a peer can get wrong costs it its own
// connection only, closed and counted by reason: bytes that break the
// Frame Streams protocol, another content type, a frame above the size
// cap, a handshake not finished within its deadline, a connection beyond
// the cap on connections. A data frame that is not a dnstap message is
// counted and skipped (the framing around it is intact, so the stream
// goes on). Memory is bounded by MaxConnections × (MaxFrame + the 16 KiB
// read buffer): a frame's buffer grows to the largest frame the
// connection sent, never above the cap, and nothing is queued between
// the connection and the Handler.
package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/dnstap"
	"lbdns/dnstap/fstrm"
	"lbdns/internal/fdbudget"
)

// Defaults of Config.
const (
	DefaultMaxConnections   = 64
	DefaultMaxFrame         = 128 << 10
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultMaxPerSource     = 4
	DefaultIdleTimeout      = 10 * time.Minute
	// readBuffer is each connection's read buffer.
	readBuffer = 16 << 10
)

// Reasons a connection ends, the values of the reason label of
// lbdns_dnstap_connections_closed_total.
const (
	ReasonFinished         = "finished"          // STOP, answered with FINISH
	ReasonEOF              = "eof"               // the peer closed without STOP
	ReasonProtocol         = "protocol"          // bytes that are not Frame Streams
	ReasonContentType      = "content_type"      // a content type other than dnstap
	ReasonFrameTooLarge    = "frame_too_large"   // a frame above MaxFrame
	ReasonHandshakeTimeout = "handshake_timeout" // no START within HandshakeTimeout
	ReasonLimit            = "limit"             // beyond MaxConnections, closed at once
	ReasonSourceLimit      = "source_limit"      // beyond MaxPerSource from one address, closed at once
	ReasonIdle             = "idle"              // no frame for IdleTimeout after the handshake
	ReasonDescriptors      = "descriptors"       // within ReservedFDs of RLIMIT_NOFILE, closed at once
	ReasonError            = "error"             // a read or write error (reset, write deadline)
	ReasonShutdown         = "shutdown"          // the server stopped
)

// Reasons returns every reason, in a fixed order.
func Reasons() []string {
	return []string{ReasonFinished, ReasonEOF, ReasonProtocol, ReasonContentType, ReasonFrameTooLarge,
		ReasonHandshakeTimeout, ReasonLimit, ReasonSourceLimit, ReasonIdle, ReasonDescriptors, ReasonError, ReasonShutdown}
}

// Handler receives each decoded CLIENT_QUERY and CLIENT_RESPONSE. It is
// called from the connection's goroutine, concurrently for different
// connections, and m is valid only during the call (copy what you keep;
// its strings may be kept). A slow Handler slows its connection only:
// the sender's own buffer absorbs it or drops, as the sender decides.
type Handler func(m *dnstap.Message)

// Config says where and how to listen.
type Config struct {
	// Unix is the path of the Unix socket to listen on, "" for none. A
	// socket file left there is replaced; the socket is made mode 0660.
	Unix string
	// TCP is the "ADDRESS:PORT" to listen on, "" for none.
	TCP string
	// MaxConnections caps the connections open at once over both
	// listeners; one more is closed as soon as it is accepted.
	// Default DefaultMaxConnections.
	MaxConnections int
	// ReservedFDs is how many descriptors below RLIMIT_NOFILE a new
	// connection may not take (the daemon's one budget, internal/fdbudget:
	// kept for the health probes); one is closed as soon as it is
	// accepted. At most half the limit is reserved. Default
	// fdbudget.DefaultReserve.
	ReservedFDs int
	// MaxPerSource caps the TCP connections open at once from one
	// address (Unix-socket peers are local and not capped by it), so
	// that one source cannot take every slot. Default
	// DefaultMaxPerSource.
	MaxPerSource int
	// IdleTimeout closes a connection that sends no frame for that
	// long after its handshake (a sender that went silent gives its
	// slot back; resolvers reconnect with their next message). Negative:
	// none. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxFrame caps a data frame's size in bytes. Default
	// DefaultMaxFrame.
	MaxFrame int
	// HandshakeTimeout bounds the time from accept to START, and every
	// write to a peer (ACCEPT, FINISH). Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Now is the clock of the per-sender view. Default time.Now.
	Now func() time.Time
}

// Server is a dnstap intake: its listeners and their connections.
type Server struct {
	cfg    Config
	handle Handler
	log    *slog.Logger
	m      *metrics
	// senders is the per-sender view (Senders).
	senders *senders
	// fds is the descriptor reserve (Config.ReservedFDs).
	fds fdbudget.Budget

	open atomic.Int64

	mu        sync.Mutex // guards the fields below
	listeners []net.Listener
	names     []string // of listeners: unix, tcp
	conns     map[net.Conn]struct{}
	sources   map[netip.Addr]int // open TCP connections by remote address
	closing   bool
	serving   bool
	wg        sync.WaitGroup
}

// New returns a Server that hands messages to h, with its metrics
// registered on reg (nil: not registered) and its log lines (debug: one
// per connection) on log.
func New(cfg Config, h Handler, reg prometheus.Registerer, log *slog.Logger) (*Server, error) {
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.MaxPerSource <= 0 {
		cfg.MaxPerSource = DefaultMaxPerSource
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if h == nil {
		h = func(*dnstap.Message) {}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, handle: h, log: log, m: m, senders: newSenders(m.senders, cfg.Now), conns: map[net.Conn]struct{}{}, sources: map[netip.Addr]int{}, fds: fdbudget.New(cfg.ReservedFDs)}, nil
}

// Start is Listen and Serve.
func (s *Server) Start() error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.Serve()
	return nil
}

// Listen binds the configured listeners (or returns the error of the
// first that failed, the other closed); connections queue in the kernel
// until Serve.
func (s *Server) Listen() error {
	var ls []net.Listener
	var names []string
	if s.cfg.Unix != "" {
		if fi, err := os.Lstat(s.cfg.Unix); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if err := os.Remove(s.cfg.Unix); err != nil {
				return fmt.Errorf("dnstap: unix %s: remove stale socket: %w", s.cfg.Unix, err)
			}
		}
		l, err := net.Listen("unix", s.cfg.Unix)
		if err != nil {
			return fmt.Errorf("dnstap: unix %s: %w", s.cfg.Unix, err)
		}
		if err := os.Chmod(s.cfg.Unix, 0o660); err != nil {
			l.Close()
			return fmt.Errorf("dnstap: unix %s: %w", s.cfg.Unix, err)
		}
		ls, names = append(ls, l), append(names, "unix")
	}
	if s.cfg.TCP != "" {
		l, err := net.Listen("tcp", s.cfg.TCP)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return fmt.Errorf("dnstap: tcp %s: %w", s.cfg.TCP, err)
		}
		ls, names = append(ls, l), append(names, "tcp")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		for _, l := range ls {
			l.Close()
		}
		return errors.New("dnstap: server shut down")
	}
	s.listeners = append(s.listeners, ls...)
	s.names = append(s.names, names...)
	return nil
}

// Serve starts accepting on the listeners Listen bound; it returns at
// once.
func (s *Server) Serve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.serving {
		return
	}
	s.serving = true
	for i, l := range s.listeners {
		s.wg.Add(1)
		go s.accept(l, s.names[i])
	}
}

// Addrs returns the addresses the server listens on, Unix first.
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	var as []net.Addr
	for _, l := range s.listeners {
		as = append(as, l.Addr())
	}
	return as
}

// Senders returns what the intake knows of each sender identity, sorted
// by identity: at most MaxSenders of them and OtherSenders.
func (s *Server) Senders() []Sender { return s.senders.list() }

// Open returns how many connections are open.
func (s *Server) Open() int { return int(s.open.Load()) }

// Shutdown closes the listeners and every connection and waits until
// their goroutines have returned, or ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for _, l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dnstap: shutdown: %w", ctx.Err())
	}
}

// accept accepts connections on l until it is closed.
func (s *Server) accept(l net.Listener, name string) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait a little, as
			// net/http does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("dnstap accept", "listener", name, "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.m.accepted.WithLabelValues(name).Inc()
		if !s.track(c) {
			c.Close()
			continue
		}
		s.wg.Add(1)
		go s.serve(c, name)
	}
}

// track registers c as open, unless the cap is reached or the server is
// closing (c is then counted as closed).
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		s.m.closed[ReasonShutdown].Inc()
		return false
	case !s.fds.Admits(c):
		s.m.closed[ReasonDescriptors].Inc()
		s.log.Debug("dnstap connection refused", "remote", c.RemoteAddr(), "reason", ReasonDescriptors, "open", len(s.conns))
		return false
	case len(s.conns) >= s.cfg.MaxConnections:
		s.m.closed[ReasonLimit].Inc()
		s.log.Debug("dnstap connection refused", "remote", c.RemoteAddr(), "reason", ReasonLimit, "open", len(s.conns))
		return false
	}
	if src, ok := source(c); ok {
		if s.sources[src] >= s.cfg.MaxPerSource {
			s.m.closed[ReasonSourceLimit].Inc()
			s.log.Debug("dnstap connection refused", "remote", c.RemoteAddr(), "reason", ReasonSourceLimit, "from_source", s.sources[src])
			return false
		}
		s.sources[src]++
	}
	s.conns[c] = struct{}{}
	s.open.Add(1)
	s.m.open.Inc()
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if src, ok := source(c); ok {
		if s.sources[src]--; s.sources[src] <= 0 {
			delete(s.sources, src)
		}
	}
	s.mu.Unlock()
	s.open.Add(-1)
	s.m.open.Dec()
}

// source is the remote address of a TCP connection (false for a Unix
// socket's).
func source(c net.Conn) (netip.Addr, bool) {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ap := a.AddrPort()
	return ap.Addr().Unmap(), true
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// serve reads one connection to its end.
func (s *Server) serve(c net.Conn, listener string) {
	defer s.wg.Done()
	defer s.untrack(c)
	defer c.Close()
	messages, reason, err := s.read(c)
	if s.isClosing() && reason != ReasonFinished {
		reason = ReasonShutdown
	}
	s.m.closed[reason].Inc()
	s.log.Debug("dnstap connection closed", "listener", listener, "remote", c.RemoteAddr(), "reason", reason, "messages", messages, "err", err)
}

// read runs the handshake and the data frames of c; it returns the
// messages read and why the stream ended.
func (s *Server) read(c net.Conn) (int, string, error) {
	c.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	r := fstrm.NewReader(deadlineWriter{c, s.cfg.HandshakeTimeout}, dnstap.ContentType, s.cfg.MaxFrame, readBuffer)
	if err := r.Handshake(); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, ReasonHandshakeTimeout, err
		}
		if errors.Is(err, io.EOF) {
			return 0, ReasonEOF, err
		}
		return 0, reason(err), err
	}
	c.SetReadDeadline(time.Time{})
	idle := s.cfg.IdleTimeout
	var armed time.Time // when the idle deadline was last moved
	var d dnstap.Decoder
	var m dnstap.Message
	var from *sender // of identity
	identity := ""
	n := 0
	for {
		if idle > 0 {
			// Moved at most 8 times per idle timeout, not per frame: a
			// connection is closed after 7/8 to all of it in silence.
			if now := time.Now(); now.Sub(armed) >= idle/8 {
				c.SetReadDeadline(now.Add(idle))
				armed = now
			}
		}
		f, err := r.Next()
		if err != nil {
			var ne net.Error
			if idle > 0 && errors.As(err, &ne) && ne.Timeout() {
				return n, ReasonIdle, err
			}
			return n, reason(err), err
		}
		n++
		if err := d.Decode(f, &m); err != nil {
			s.m.malformed.Inc()
			continue
		}
		switch m.Type {
		case dnstap.ClientQuery:
			s.m.queries.Inc()
		case dnstap.ClientResponse:
			s.m.responses.Inc()
		default:
			s.m.other.Inc()
			continue
		}
		if from == nil || m.Identity != identity {
			from, identity = s.senders.get(m.Identity), m.Identity
		}
		from.note(&m, s.cfg.Now())
		s.handle(&m)
	}
}

// reason names why a stream ended with err.
func reason(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return ReasonFinished
	case errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonEOF
	case errors.Is(err, fstrm.ErrProtocol):
		return ReasonProtocol
	case errors.Is(err, fstrm.ErrContentType):
		return ReasonContentType
	case errors.Is(err, fstrm.ErrFrameTooLarge):
		return ReasonFrameTooLarge
	}
	return ReasonError
}

// deadlineWriter is a connection whose every write has its own deadline.
type deadlineWriter struct {
	net.Conn
	timeout time.Duration
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	w.Conn.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.Conn.Write(p)
}
