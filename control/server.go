package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultTimeout bounds a request to a server when its options leave the
// timeout unset.
const DefaultTimeout = 30 * time.Second

// shutdownGrace is how long Serve waits for requests in flight when it
// stops before it closes their connections.
const shutdownGrace = 5 * time.Second

// shutdownForced is the log message when requests outlive shutdownGrace.
const shutdownForced = "requests still running at shutdown; closing them"

// ServerOptions configure a control-socket Server.
type ServerOptions struct {
	// Backend answers the requests. Required.
	Backend Backend
	// Events is the log GET /v1/events reads. Default: an empty log.
	Events *EventLog
	// Logger receives a line for every mutating request and for failures.
	// Default: discard.
	Logger *slog.Logger
	// Timeout bounds every request except a followed event stream.
	// Default DefaultTimeout.
	Timeout time.Duration
	// GSLB answers /v1/gslb/explain. Nil: that endpoint answers 503.
	GSLB GSLBBackend
	// Parts are the components that answer their own routes: each
	// optional route (HostBackend, ClientsBackend, FleetBackend,
	// TopBackend) is answered by the first part that implements it, else
	// by Backend when it does, else with 404.
	Parts []any
	// Limits bound the socket's connections (MaxConnections default
	// DefaultControlMaxConnections).
	Limits Limits
	// Registerer receives lbdns_listener_connections_refused_total
	// {listener="control"}. Nil: not exported.
	Registerer prometheus.Registerer
}

// Server is the control-socket server: the JSON API under APIPrefix that
// lbctl uses through Client. Create it with NewServer, listen with
// ListenUnix and run it with Serve.
type Server struct {
	backend Backend
	parts   []any
	gslb    GSLBBackend
	events  *EventLog
	log     *slog.Logger
	timeout time.Duration
	// euid is the daemon's user: with root, the only peer uid let in.
	euid    uint32
	handler http.Handler
	limits  Limits
	reg     prometheus.Registerer
}

// route returns the part that answers a route of T (ServerOptions.Parts,
// then Backend).
func route[T any](parts []any, backend Backend) (T, bool) {
	for _, p := range parts {
		if t, ok := p.(T); ok {
			return t, true
		}
	}
	t, ok := backend.(T)
	return t, ok
}

// NewServer returns a control-socket server over opts.Backend.
func NewServer(opts ServerOptions) *Server {
	s := &Server{
		backend: opts.Backend,
		parts:   opts.Parts,
		gslb:    opts.GSLB,
		events:  opts.Events,
		log:     opts.Logger,
		timeout: opts.Timeout,
		euid:    uint32(os.Geteuid()),
		limits:  opts.Limits,
		reg:     opts.Registerer,
	}
	if s.events == nil {
		s.events = NewEventLog(0, nil)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	var rt routes
	rt.handle(http.MethodGet, APIPrefix+"/status", s.bounded(s.handleStatus))
	rt.handle(http.MethodGet, APIPrefix+"/fleet", s.bounded(s.handleFleet))
	rt.handle(http.MethodGet, APIPrefix+"/top", s.bounded(s.handleTop))
	rt.handle(http.MethodPost, APIPrefix+"/overrides", s.bounded(s.handleOverride))
	rt.handle(http.MethodPost, APIPrefix+"/gslb", s.bounded(s.handleGSLB))
	rt.handle(http.MethodPost, APIPrefix+"/reload", s.bounded(s.handleReload))
	rt.handle(http.MethodGet, APIPrefix+"/events", s.handleEvents)
	rt.handle(http.MethodGet, APIPrefix+"/gslb/explain", s.bounded(s.handleExplain))
	rt.handle(http.MethodPost, APIPrefix+"/gslb/explain", s.bounded(s.handleExplain))
	s.hostRoutes(&rt)   // POST /v1/host (bgp.go)
	s.clientRoutes(&rt) // POST /v1/clients (clients.go)
	s.handler = s.deadlines(s.authorize(&rt))
	return s
}

// Handler returns the server's HTTP handler. Served elsewhere than by
// Serve it sees no peer credentials, so overrides are set by "unknown".
func (s *Server) Handler() http.Handler { return s.handler }

// stopKey is the context key under which Serve passes a context that is
// done when the server stops, to end followed event streams.
type stopKey struct{}

// Serve answers requests on ln (from ListenUnix) until ctx is done, then
// stops: followed event streams end, requests in flight get a few seconds
// to finish. It returns nil after such a stop, or the error that made
// serving fail. ln is closed either way. The connections beyond
// ServerOptions.Limits are closed as soon as accepted, and a connection
// that sends no request head within 10 s, or stays idle a minute, is
// closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ln = bound(ln, s.limits, DefaultControlMaxConnections, "control", s.reg, s.log)
	stop, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ConnContext:       withPeer,
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), stopKey{}, context.Context(stop))
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return serveUntil(ctx, hs, ln, stopStreams, s.log.With("server", "control"))
}

// serveUntil runs hs on ln until ctx is done, calls beforeShutdown, and
// shuts hs down, closing what is still open after shutdownGrace.
func serveUntil(ctx context.Context, hs *http.Server, ln net.Listener, beforeShutdown func(), log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("control: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	beforeShutdown()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn(shutdownForced, "err", err)
		hs.Close()
	}
	<-errc
	return nil
}

// authorize refuses peers that are neither root nor the daemon's user.
// The socket's mode already keeps them out; this holds even while the
// socket's mode is being set, or when it was changed by hand.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := peerFrom(r.Context())
		if p.Known && p.UID != 0 && p.UID != s.euid {
			s.log.Warn("control request refused", "peer", p.String(), "method", r.Method, "path", r.URL.Path)
			writeError(w, Errorf(Forbidden, "permission denied: uid %d may not use the control socket (root and uid %d may)", p.UID, s.euid))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// deadlines gives every request's connection a read and a write
// deadline s.timeout (and a second) away; follow lifts them. They are a
// little later than bounded's context deadline, so that a timeout can be
// told to the client: a read deadline that passes first would cancel the
// request's context through net/http's background read.
func (s *Server) deadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := time.Now().Add(s.timeout + time.Second)
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(d)
		_ = rc.SetWriteDeadline(d)
		next.ServeHTTP(w, r)
	})
}

// DeadlineHeader carries the client's deadline (RFC 3339, nanoseconds):
// a request the daemon takes after it is not applied, since its client
// has given up on the reply.
const DeadlineHeader = "Lbdns-Deadline"

// bounded gives the Backend s.timeout to answer a request, or less when
// the client's deadline (DeadlineHeader) comes first; a request whose
// client's deadline has passed before it is taken (a daemon that was
// stopped, say) is refused without reaching the Backend.
func (s *Server) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		if v := r.Header.Get(DeadlineHeader); v != "" {
			d, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, Errorf(Malformed, "header %s: %q is no RFC 3339 time", DeadlineHeader, v))
				return
			}
			if !time.Now().Before(d) {
				writeError(w, Errorf(Unavailable, "the client's deadline (%s) passed before lbdnsd took the request: nothing was changed", d.Format(time.RFC3339Nano)))
				return
			}
			var dcancel context.CancelFunc
			ctx, dcancel = context.WithDeadline(ctx, d)
			defer dcancel()
		}
		h(w, r.WithContext(ctx))
	}
}

// backendError is what a client is told about err from the Backend.
func (s *Server) backendError(r *http.Request, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() != nil {
		return Errorf(Unavailable, "timed out after %s: %v", s.timeout, err)
	}
	logBackendError(s.log, r, err)
	return err
}

// handleStatus answers GET /v1/status.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.backend.Status(r.Context())
	if err != nil {
		writeError(w, s.backendError(r, err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// handleOverride answers POST /v1/overrides.
func (s *Server) handleOverride(w http.ResponseWriter, r *http.Request) {
	serveChange(s, w, r, validateOverride, s.backend.SetOverride,
		func(rep *OverrideReply) string { return rep.Message },
		"override request", func(req OverrideRequest) []any {
			return []any{"action", req.Action, "resolver", req.Resolver,
				"scope", Scope(req.Pool, req.VIP), "reason", req.Reason}
		})
}

// handleGSLB answers POST /v1/gslb.
func (s *Server) handleGSLB(w http.ResponseWriter, r *http.Request) {
	serveChange(s, w, r, validateGSLB, s.backend.SetGSLB,
		func(rep *GSLBReply) string { return rep.Message },
		"gslb request", func(req GSLBRequest) []any {
			return []any{"action", req.Action, "scope", GSLBScope(req.Name, req.Zone),
				"seconds", req.Seconds, "clear", req.Clear, "reason", req.Reason}
		})
}

// serveChange answers one operator change request: strict decoding,
// validation, the backend's verdict, and one log line per request,
// applied or refused: logMsg with the peer, logged's key/values and the
// result.
func serveChange[Req, Rep any](s *Server, w http.ResponseWriter, r *http.Request, validate func(Req) error,
	apply func(context.Context, Req, string) (*Rep, error), message func(*Rep) string, logMsg string, logged func(Req) []any) {
	p := peerFrom(r.Context())
	var req Req
	err := readStrict(w, r, &req, false)
	if err == nil {
		err = validate(req)
	}
	var rep *Rep
	if err == nil {
		rep, err = apply(r.Context(), req, p.By())
		if err != nil {
			err = s.backendError(r, err)
		}
	}
	result := "ok"
	switch {
	case err != nil:
		result = "refused: " + err.Error()
	case rep != nil:
		result = message(rep)
	}
	s.log.Info(logMsg, append(append([]any{"peer", p.String()}, logged(req)...), "result", result)...)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// handleReload answers POST /v1/reload. The body must be empty or {}.
func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	p := peerFrom(r.Context())
	var none struct{}
	err := readStrict(w, r, &none, true)
	var rep *ReloadReply
	if err == nil {
		rep, err = s.backend.Reload(r.Context())
		if err != nil {
			err = s.backendError(r, err)
		}
	}
	if err != nil {
		var e *Error
		n := 0
		if errors.As(err, &e) {
			n = len(e.Problems)
		}
		s.log.Info("reload request", "peer", p.String(), "result", "refused: "+err.Error(), "problems", n)
		writeError(w, err)
		return
	}
	s.log.Info("reload request", "peer", p.String(), "result", rep.Summary)
	writeJSON(w, http.StatusOK, rep)
}

// handleExplain answers GET /v1/gslb/explain?name=N[&type=T][&client=IP][&ecs=PREFIX]
// [&via=V][&peer=IP][&forwarded_for=LIST][&proxy_source=IP][&ip=IP] and
// POST /v1/gslb/explain with a GSLBExplainRequest.
func (s *Server) handleExplain(w http.ResponseWriter, r *http.Request) {
	var req GSLBExplainRequest
	var err error
	if r.Method == http.MethodGet {
		req, err = explainQuery(r)
	} else {
		err = readStrict(w, r, &req, false)
	}
	if err == nil && strings.TrimSpace(req.Name) == "" {
		err = Errorf(Malformed, "name: missing (the name to explain)")
	}
	if probs := req.Check(); err == nil && len(probs) > 0 {
		err = Errorf(Malformed, "%s", strings.Join(probs, "; "))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if s.gslb == nil {
		writeError(w, Errorf(Unavailable, "this daemon has no GSLB responder"))
		return
	}
	rep, err := s.gslb.Explain(r.Context(), req)
	if err != nil {
		writeError(w, s.backendError(r, err))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// explainQuery parses the query of GET /v1/gslb/explain: each field of
// GSLBExplainRequest at most once, nothing else.
func explainQuery(r *http.Request) (GSLBExplainRequest, error) {
	var req GSLBExplainRequest
	fields := map[string]*string{"name": &req.Name, "type": &req.Type, "client": &req.Client, "ecs": &req.ECS,
		"via": &req.Via, "peer": &req.Peer, "forwarded_for": &req.ForwardedFor, "proxy_source": &req.ProxySource, "ip": &req.IP}
	for k, vs := range r.URL.Query() {
		f, ok := fields[k]
		if !ok {
			return req, Errorf(Malformed, "unknown query parameter %q (want name, type, client, ecs, via, peer, forwarded_for, proxy_source, ip)", k)
		}
		if len(vs) != 1 {
			return req, Errorf(Malformed, "%s: given %d times, want once", k, len(vs))
		}
		*f = vs[0]
	}
	return req, nil
}

// handleEvents answers GET /v1/events?after=N[&follow=1].
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	after, follow, err := eventsQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if follow {
		s.follow(w, r, after)
		return
	}
	s.bounded(func(w http.ResponseWriter, _ *http.Request) {
		evs, next, missed := s.events.Since(after)
		writeJSON(w, http.StatusOK, EventsReply{Events: evs, Next: next, Missed: missed})
	})(w, r)
}

// missedEvent is the line a follower reads in place of the n events the
// log dropped before it could send them (Seq 0: not an event of the log).
func (s *Server) missedEvent(n uint64) Event {
	return Event{Time: time.Now(), Kind: EventMissed, Subject: "events", Error: true,
		Message: fmt.Sprintf("%d events were dropped before they could be sent (the log keeps the newest %d); lbdnsd's log has every one", n, s.events.Capacity())}
}

// eventsQuery parses the query of GET /v1/events.
func eventsQuery(r *http.Request) (after uint64, follow bool, err error) {
	q := r.URL.Query()
	for k := range q {
		if k != "after" && k != "follow" {
			return 0, false, Errorf(Malformed, "unknown query parameter %q (want after, follow)", k)
		}
	}
	if v := q.Get("after"); v != "" {
		after, err = strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, false, Errorf(Malformed, "after: want a sequence number (0, 1, 2, ...), not %q", v)
		}
	}
	switch v := q.Get("follow"); v {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		return 0, false, Errorf(Malformed, "follow: want 1 or 0, not %q", v)
	}
	return after, follow, nil
}

// follow streams events as NDJSON, one per line, flushed per batch: first
// those kept after after, then new ones as they are appended, until the
// client goes away or the server stops. Each write has s.timeout, so a
// client that stops reading is dropped.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, after uint64) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if stop, ok := r.Context().Value(stopKey{}).(context.Context); ok {
		defer context.AfterFunc(stop, cancel)()
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_ = rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if err := rc.Flush(); err != nil {
		return
	}
	next := after
	for {
		evs, last, missed := s.events.Since(next)
		if missed > 0 {
			evs = append([]Event{s.missedEvent(missed)}, evs...)
		}
		if len(evs) > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.timeout))
			for _, ev := range evs {
				b, err := json.Marshal(ev)
				if err != nil {
					s.log.Error("encode event", "seq", ev.Seq, "err", err)
					return
				}
				if _, err := w.Write(append(b, '\n')); err != nil {
					return
				}
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		next = last
		if err := s.events.Wait(ctx, next); err != nil {
			return
		}
	}
}
