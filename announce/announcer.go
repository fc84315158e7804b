package announce

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"lbdns/configs"
	"lbdns/fleet"
	"lbdns/hub"
	"lbdns/intent"
)

// retryAfter is how long the Announcer waits before it tries again when
// the speaker refused a configuration or a set of paths.
const retryAfter = time.Second

// Change is one thing the Announcer did or saw, for people: the daemon
// words it as an event and a log line.
type Change struct {
	// Subject is the prefix or the peer's address.
	Subject string
	// Message says what changed and why.
	Message string
	// Error is set for a withdrawal, a session lost and a speaker error.
	Error bool
}

// Status is what the Announcer does now.
type Status struct {
	// Enabled is set while the configuration has [bgp].
	Enabled bool
	// Peers are the sessions, in configuration order.
	Peers []PeerStatus
	// Routes are the prefixes of the configuration and what is decided
	// for each, in prefix order.
	Routes []Route
	// Drain is the host drain in force (nil when enabled).
	Drain *intent.HostDrain
	// Error is the speaker's last error ("" when the last call worked).
	Error string
}

// Options configure an Announcer.
type Options struct {
	// Hub is followed for the configuration, the VIPs' verdicts, the
	// responder's listeners and the host drain. Required.
	Hub *hub.Hub
	// Speaker announces. Required.
	Speaker Speaker
	// Logger receives the speaker's errors. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnChange is called, from Run's goroutine, for every Change.
	// Default: none.
	OnChange func(Change)
	// Fleet is the fleet's view of the other hosts' announcements, for
	// the floor (min_announcing); nil without [fleet].
	Fleet *hub.Value[FleetView]
}

// Beat is what this host announces, for its fleet heartbeat
// (fleet.Beat).
type Beat = fleet.Beat

// Announcer follows the hub and keeps the speaker announcing exactly
// what Decide says. Make one with New and run it with Run.
type Announcer struct {
	opts Options

	// Run's own state.
	bgp     *configs.BGP // the [bgp] the speaker was configured with
	applied []Path       // the paths the speaker announces
	peers   []PeerStatus // the sessions last seen, for changes
	routes  []Route      // the last decision, for changes
	lastErr string       // the speaker's last error, told once
	beat    *hub.Value[Beat]

	mu     sync.Mutex
	status Status
}

// New returns an Announcer over opts.
func New(opts Options) *Announcer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.OnChange == nil {
		opts.OnChange = func(Change) {}
	}
	return &Announcer{opts: opts, beat: hub.NewValue[Beat]()}
}

// Beat is what this host's fleet heartbeat should say of its
// announcements, published at every change.
func (a *Announcer) Beat() *hub.Value[Beat] { return a.beat }

// Status returns what the Announcer does now, with the sessions as the
// speaker sees them at this moment.
func (a *Announcer) Status() Status {
	a.mu.Lock()
	st := a.status
	a.mu.Unlock()
	st.Peers = a.opts.Speaker.Peers()
	return st
}

// Run follows the hub until ctx is done, then withdraws every route and
// closes the sessions before it returns (within stopCtx's deadline: a
// SIGTERM withdraws before lbdnsd exits). With drain_on_stop, it first
// marks every announcement GRACEFUL_SHUTDOWN for drain_on_stop_delay,
// following the hub meanwhile (a VIP that dies is withdrawn at once).
func (a *Announcer) Run(ctx context.Context, stopCtx func() (context.Context, context.CancelFunc)) {
	h := a.opts.Hub
	var cfgV, vipV, respV, intentV, fleetV uint64
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	done := ctx.Done()
	var stopping time.Time // when the drain on stop began
	var drainCtx context.Context = ctx
	for {
		var cfg *configs.Config
		var vips []hub.Verdict
		var resp hub.ResponderState
		var in hub.Intent
		cfg, cfgV = h.Config.Load()
		vips, vipV = h.VIPs.Load()
		resp, respV = h.Responder.Load()
		in, intentV = h.Intent.Load()
		var view *FleetView
		var fleetCh <-chan struct{}
		if a.opts.Fleet != nil && cfg != nil && cfg.Fleet != nil {
			var v FleetView
			v, fleetV = a.opts.Fleet.Load()
			view, fleetCh = &v, a.opts.Fleet.Changed(fleetV)
		}
		next, ok := a.Step(drainCtx, Input{Config: cfg, VIPs: vips, Listeners: resp.Listeners, Fronts: resp.Fronts, Drain: in.State.Host, Stopping: stopping, Fleet: view})
		if !stopping.IsZero() && (next.IsZero() || len(a.applied) == 0 || a.opts.Now().After(stopping.Add(cfg.BGP.DrainOnStopDelay.Duration+time.Second))) {
			a.halt(stopCtx) // the drain on stop is over
			return
		}
		timer.Stop()
		switch {
		case !ok:
			timer.Reset(retryAfter)
		case !next.IsZero():
			timer.Reset(max(next.Sub(a.opts.Now()), 0))
		}
		select {
		case <-done:
			if cfg == nil || !cfg.BGP.Enabled || !cfg.BGP.DrainOnStop || len(a.applied) == 0 {
				a.halt(stopCtx)
				return
			}
			stopping, done = a.opts.Now(), nil
			dctx, cancel := context.WithTimeout(context.Background(), cfg.BGP.DrainOnStopDelay.Duration+2*time.Second)
			defer cancel()
			drainCtx = dctx
			a.opts.OnChange(Change{Subject: "speaker", Message: fmt.Sprintf("lbdnsd stopping: %d routes marked GRACEFUL_SHUTDOWN for %s (drain_on_stop), then withdrawn", len(a.applied), cfg.BGP.DrainOnStopDelay)})
		case <-h.Config.Changed(cfgV):
		case <-h.VIPs.Changed(vipV):
		case <-h.Responder.Changed(respV):
		case <-h.Intent.Changed(intentV):
		case <-fleetCh:
		case <-a.opts.Speaker.PeerChanges():
		case <-timer.C:
		}
	}
}

// halt withdraws everything and closes the sessions within stopCtx.
func (a *Announcer) halt(stopCtx func() (context.Context, context.CancelFunc)) {
	sctx, cancel := stopCtx()
	defer cancel()
	a.stop(sctx)
}

// Step decides from in (its Announced and Now are the Announcer's own),
// configures the speaker when [bgp] changed and hands it the paths; it
// returns when the decision changes by time alone (zero: never) and
// whether the speaker took everything (when not, the caller tries again
// soon). Run calls it; tests may too.
func (a *Announcer) Step(ctx context.Context, in Input) (time.Time, bool) {
	cfg, drain := in.Config, in.Drain
	ok := true
	var errText string
	enabled := cfg != nil && cfg.BGP.Enabled
	if !enabled && a.bgp != nil {
		// A reload removed [bgp]: withdraw everything, close the sessions.
		a.stop(ctx)
		a.bgp = nil
	}
	if enabled && (a.bgp == nil || !sameBGP(*a.bgp, cfg.BGP)) {
		if err := a.opts.Speaker.Configure(ctx, cfg.BGP); err != nil {
			ok, errText = false, err.Error()
			a.tellError("speaker configuration failed", err)
		} else {
			b := cfg.BGP
			a.bgp = &b
		}
	}
	in.Now = a.opts.Now()
	in.Announced = make([]netip.Prefix, 0, len(a.applied))
	for _, p := range a.applied {
		in.Announced = append(in.Announced, p.Prefix)
	}
	routes, next := Decide(in)
	paths := Paths(routes)
	if !slices.EqualFunc(paths, a.applied, Path.Equal) {
		if err := a.opts.Speaker.Announce(ctx, paths); err != nil {
			ok, errText = false, err.Error()
			a.tellError("announcing failed", err)
		} else {
			a.applied = paths
		}
	}
	a.tellRoutes(routes)
	a.tellPeers(a.opts.Speaker.Peers())
	if errText == "" && a.lastErr != "" {
		a.opts.OnChange(Change{Subject: "speaker", Message: "speaker working again"})
	}
	a.lastErr = errText
	a.mu.Lock()
	a.status = Status{Enabled: enabled, Routes: routes, Drain: drain, Error: errText}
	a.mu.Unlock()
	a.publishBeat(Beat{Drained: drain != nil || !in.Stopping.IsZero(), Announced: Announcements(routesOf(routes, a.applied))})
	return next, ok
}

// routesOf returns the routes whose paths the speaker announces as
// applied (a route the speaker refused is not said to be announced).
func routesOf(routes []Route, applied []Path) []Route {
	var out []Route
	for _, r := range routes {
		if r.Announce && slices.ContainsFunc(applied, func(p Path) bool { return p.Equal(Path{Prefix: r.Prefix, MED: r.MED, Communities: r.Communities}) }) {
			out = append(out, r)
		}
	}
	return out
}

// publishBeat publishes b when it says something new.
func (a *Announcer) publishBeat(b Beat) {
	if old, _ := a.beat.Load(); old.Drained == b.Drained && slices.Equal(old.Announced, b.Announced) {
		return
	}
	a.beat.Publish(b)
}

// tellError logs and tells a speaker error, once while it repeats (Run
// retries every second).
func (a *Announcer) tellError(what string, err error) {
	if err.Error() == a.lastErr {
		return
	}
	a.opts.Logger.Error("bgp: "+what, "err", err)
	a.opts.OnChange(Change{Subject: "speaker", Message: what + ": " + err.Error(), Error: true})
}

// stop withdraws everything and closes the sessions.
func (a *Announcer) stop(ctx context.Context) {
	if err := a.opts.Speaker.Close(ctx); err != nil {
		a.opts.Logger.Error("bgp: stop the speaker", "err", err)
	}
	if len(a.applied) > 0 {
		a.opts.OnChange(Change{Subject: "speaker", Message: fmt.Sprintf("speaker stopped: %d routes withdrawn, sessions closed", len(a.applied))})
	}
	a.applied = nil
	a.mu.Lock()
	a.status.Routes = nil
	a.mu.Unlock()
	old, _ := a.beat.Load()
	a.publishBeat(Beat{Drained: old.Drained})
}

// sameBGP reports whether a and b configure the speaker the same.
func sameBGP(a, b configs.BGP) bool {
	return a.RouterAddr == b.RouterAddr && a.LocalAS == b.LocalAS && a.ListenPort == b.ListenPort && slices.Equal(a.Peers, b.Peers)
}

// tellRoutes reports every route whose decision changed from the last.
func (a *Announcer) tellRoutes(routes []Route) {
	before := map[string]Route{}
	for _, r := range a.routes {
		before[r.Prefix.String()] = r
	}
	for _, r := range routes {
		old, known := before[r.Prefix.String()]
		delete(before, r.Prefix.String())
		if known && old.Announce == r.Announce && old.MED == r.MED && slices.Equal(old.Communities, r.Communities) {
			continue
		}
		if !known && !r.Announce {
			continue // never announced: nothing to tell
		}
		subject := r.Prefix.String()
		switch {
		case r.Announce:
			a.opts.OnChange(Change{Subject: subject, Message: fmt.Sprintf("%s %s announced, MED %d%s: %s", r.Kind, r.Name, r.MED, commText(r.Communities), r.Reason)})
		default:
			a.opts.OnChange(Change{Subject: subject, Message: fmt.Sprintf("%s %s %s", r.Kind, r.Name, r.Reason), Error: true})
		}
	}
	for _, old := range before {
		if old.Announce {
			a.opts.OnChange(Change{Subject: old.Prefix.String(), Message: fmt.Sprintf("%s %s withdrawn: no longer in the configuration", old.Kind, old.Name), Error: true})
		}
	}
	a.routes = routes
}

// tellPeers reports every session whose state changed.
func (a *Announcer) tellPeers(peers []PeerStatus) {
	before := map[string]PeerStatus{}
	for _, p := range a.peers {
		before[p.Address.String()] = p
	}
	for _, p := range peers {
		old, known := before[p.Address.String()]
		if p.ReasonCode != "" && p.ReasonCode != old.ReasonCode {
			// Told once, when it is first seen (not at every retry).
			a.opts.OnChange(Change{Subject: p.Address.String(), Message: fmt.Sprintf("BGP session with %s (AS %d) not established: %s", p.Address, p.AS, p.Reason), Error: true})
		}
		if known && old.State == p.State || !known && p.State != StateEstablished {
			continue
		}
		if p.State == StateEstablished {
			a.opts.OnChange(Change{Subject: p.Address.String(), Message: fmt.Sprintf("BGP session with %s (AS %d) established", p.Address, p.AS)})
			continue
		}
		if old.State == StateEstablished {
			msg := fmt.Sprintf("BGP session with %s (AS %d) down (%s)", p.Address, p.AS, p.State)
			if p.LastError != "" {
				msg += ": " + p.LastError
			}
			a.opts.OnChange(Change{Subject: p.Address.String(), Message: msg, Error: true})
		}
	}
	a.peers = peers
}

// commText formats communities for messages (" communities 1:2 3:4").
func commText(cs []configs.Community) string {
	if len(cs) == 0 {
		return ""
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return ", communities " + strings.Join(parts, " ")
}
