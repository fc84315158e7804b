package control

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultRefresh is how often the status page reloads itself when the
// options leave it unset.
const DefaultRefresh = 5 * time.Second

// DefaultMaxStatusRequests is how many requests the status server serves
// at once when the options leave it unset: node_exporter's default limit
// of concurrent scrapes.
const DefaultMaxStatusRequests = 40

// statusRetryAfter is the Retry-After, in seconds, of a request refused
// because the status server is busy.
const statusRetryAfter = 1

// StatusOptions configure a StatusServer.
type StatusOptions struct {
	// Backend answers GET /status and feeds the page. Only its Status
	// method is ever called.
	Backend Backend
	// Gatherer is served on /metrics. Nil: /metrics answers 404.
	Gatherer prometheus.Gatherer
	// Logger receives failures. Default: discard.
	Logger *slog.Logger
	// Refresh is the status page's auto-refresh interval. Default
	// DefaultRefresh.
	Refresh time.Duration
	// Timeout bounds every request. Default DefaultTimeout.
	Timeout time.Duration
	// Now is the clock the page computes "up for" and "since" with.
	// Default time.Now.
	Now func() time.Time
	// MaxRequests is how many requests are served at once (each /metrics
	// or /status builds the whole snapshot); one more is answered 503
	// with Retry-After and a body naming the limit. Default
	// DefaultMaxStatusRequests.
	MaxRequests int
	// Registerer receives lbdns_status_requests_refused_total, the
	// requests refused for MaxRequests. Nil: not exported.
	Registerer prometheus.Registerer
	// Events is the event log whose newest events the page shows. Nil:
	// the page has no events section.
	Events *EventLog
	// PageEvents is how many events the page shows. Default
	// DefaultPageEvents.
	PageEvents int
	// Limits bound the endpoint's connections (MaxConnections default
	// DefaultStatusMaxConnections); the refusals are counted in
	// lbdns_listener_connections_refused_total{listener="status"} on
	// Registerer.
	Limits Limits
}

// DefaultPageEvents is how many of the newest events the status page
// shows.
const DefaultPageEvents = 20

// StatusServer is the read-only status server for dashboards and people:
// GET /status (Status as JSON), GET /metrics (Prometheus) and GET / (the
// status page). It answers only GET and HEAD and never changes anything.
type StatusServer struct {
	backend  Backend
	log      *slog.Logger
	refresh  time.Duration
	timeout  time.Duration
	now      func() time.Time
	hostname string
	page     *template.Template
	handler  http.Handler
	events   *EventLog
	nEvents  int
	// slots holds a token per request being served, at most MaxRequests.
	slots   chan struct{}
	refused prometheus.Counter
	limits  Limits
	reg     prometheus.Registerer
}

// NewStatusServer returns a status server over opts.Backend.
func NewStatusServer(opts StatusOptions) *StatusServer {
	s := &StatusServer{
		backend: opts.Backend,
		log:     opts.Logger,
		refresh: opts.Refresh,
		timeout: opts.Timeout,
		now:     opts.Now,
		page:    newPageTemplate(),
		events:  opts.Events,
		nEvents: opts.PageEvents,
		limits:  opts.Limits,
		reg:     opts.Registerer,
	}
	if s.nEvents <= 0 {
		s.nEvents = DefaultPageEvents
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.refresh <= 0 {
		s.refresh = DefaultRefresh
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	slots := opts.MaxRequests
	if slots <= 0 {
		slots = DefaultMaxStatusRequests
	}
	s.slots = make(chan struct{}, slots)
	s.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "lbdns", Name: "status_requests_refused_total",
		Help: "Requests to the status endpoint answered 503 because daemon.status_max_requests were being served.",
	})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.refused); err != nil {
			s.log.Warn("status endpoint: refusals not exported", "err", err)
		}
	}
	s.hostname, _ = os.Hostname()
	rt := routes{notAllowed: func(r *http.Request) string {
		return fmt.Sprintf("the status endpoint is read-only: %s not allowed (GET or HEAD only; change state with lbctl on the control socket)", r.Method)
	}}
	get := func(path string, h http.HandlerFunc) {
		rt.handle(http.MethodGet, path, h)
		rt.handle(http.MethodHead, path, h)
	}
	get("/status", s.handleStatus)
	get("/", s.handlePage)
	if opts.Gatherer != nil {
		get("/metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{
			ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
			ErrorHandling: promhttp.ContinueOnError,
			Timeout:       s.timeout,
		}).ServeHTTP)
	}
	s.handler = s.limit(http.TimeoutHandler(&rt, s.timeout, `{"error": "timed out"}`))
	return s
}

// limit serves a request through next while fewer than MaxRequests are
// being served; past that it answers 503 at once, with Retry-After and why,
// and counts the refusal.
func (s *StatusServer) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
			next.ServeHTTP(w, r)
		default:
			s.refused.Inc()
			w.Header().Set("Retry-After", strconv.Itoa(statusRetryAfter))
			writeJSON(w, http.StatusServiceUnavailable, ErrorReply{Error: fmt.Sprintf(
				"the status endpoint is busy: it serves at most %d requests at once (daemon.status_max_requests) and that many are in progress; retry after %d s",
				cap(s.slots), statusRetryAfter)})
		}
	})
}

// Handler returns the server's HTTP handler.
func (s *StatusServer) Handler() http.Handler { return s.handler }

// Serve answers requests on ln until ctx is done, then stops, giving
// requests in flight a few seconds. It returns nil after such a stop, or
// the error that made serving fail. ln is closed either way. The
// connections beyond StatusOptions.Limits are closed as soon as
// accepted; one that sends no request head within 10 s, or stays idle a
// minute, is closed.
func (s *StatusServer) Serve(ctx context.Context, ln net.Listener) error {
	ln = bound(ln, s.limits, DefaultStatusMaxConnections, "status", s.reg, s.log)
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.timeout,
		WriteTimeout:      s.timeout + time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return serveUntil(ctx, hs, ln, func() {}, s.log.With("server", "status"))
}

// status asks the Backend for a snapshot, logging failures that are the
// daemon's.
func (s *StatusServer) status(r *http.Request) (*Status, error) {
	st, err := s.backend.Status(r.Context())
	if err != nil {
		logBackendError(s.log, r, err)
	}
	return st, err
}

// handleStatus answers GET /status.
func (s *StatusServer) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.status(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// handlePage answers GET / with the status page. A failure is a page too,
// one that keeps refreshing, so a person watching sees it recover.
func (s *StatusServer) handlePage(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	code := http.StatusOK
	var data any
	st, err := s.status(r)
	if err != nil {
		code = httpStatus(err)
		data = errorPage(now, s.hostname, s.refresh, err)
	} else {
		p := buildPage(st, now, s.hostname, s.refresh)
		if s.events != nil {
			evs, _, _ := s.events.Since(0)
			f, fv := pageEventFilter(r.URL.Query(), evs)
			p.Events, p.EventsFilter, p.EventsShown = eventViews(evs, f, s.nEvents, now), fv, true
		}
		data = p
	}
	var buf bytes.Buffer
	if err := s.page.Execute(&buf, data); err != nil {
		s.log.Error("render status page", "err", err)
		writeError(w, fmt.Errorf("render status page: %w", err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(labelCells(buf.Bytes()))
}
