package announce

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/fleet"
	"lbdns/hub"
	"lbdns/intent"
)

// Events is where the component's changes are told to operators (the
// event log; Append returns the event as logged).
type Events interface {
	Append(control.Event) control.Event
}

// PartOptions configure a Part.
type PartOptions struct {
	// Hub is what the announcer follows (and where the configuration
	// and the intent are read).
	Hub *hub.Hub
	// Changer runs the host requests' changes of the intent.
	Changer intent.Changer
	// Events hears every change of what is announced, and host requests.
	Events Events
	// Registerer receives the metrics. Nil: none.
	Registerer prometheus.Registerer
	// Logger receives the logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Nodes, when set, follows the fleet view's nodes ([fleet]: the
	// other hosts' announcements, for [bgp] min_announcing) until its
	// context is done; Self is this node's name there.
	Nodes func(ctx context.Context) <-chan []fleet.Node
	Self  string
}

// Part is the route announcer component ([bgp]): the Announcer over
// the hub with GoBGP as its speaker, its metrics, the fleet's view of
// the other hosts' announcements, the host requests (lbctl host drain,
// enable) and the status. Without [bgp] it opens no session.
type Part struct {
	o       PartOptions
	ann     *Announcer
	metrics *Metrics
	// view is the fleet's view of the other hosts' announcements.
	view *hub.Value[FleetView]
}

// NewPart returns the component, its metrics registered.
func NewPart(o PartOptions) (*Part, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Part{o: o, view: hub.NewValue[FleetView]()}
	log := o.Logger
	p.ann = New(Options{Hub: o.Hub, Speaker: NewGoBGP(log), Logger: log, Now: o.Now, Fleet: p.view, OnChange: func(c Change) {
		if c.Error {
			log.Warn(c.Message, "subject", c.Subject)
		} else {
			log.Info(c.Message, "subject", c.Subject)
		}
		o.Events.Append(control.Event{Kind: control.EventBGP, Subject: c.Subject, Message: c.Message, Error: c.Error})
	}})
	p.metrics = NewMetrics(p.ann.Status, o.Now)
	if o.Registerer != nil {
		if err := o.Registerer.Register(p.metrics); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Beat is what this host announces, for its fleet heartbeat.
func (p *Part) Beat() *hub.Value[Beat] { return p.ann.Beat() }

// FleetView is the fleet's view of the other hosts' announcements.
func (p *Part) FleetView() *hub.Value[FleetView] { return p.view }

// Run runs the announcer until ctx is done, with the fleet's view of
// the other hosts' announcements followed under [fleet]; on its way out
// it drains (drain_on_stop), withdraws every route and closes the
// sessions. The returned channel is closed when it has: the caller
// waits for it before it stops serving.
func (p *Part) Run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	wctx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if p.o.Nodes == nil {
			return
		}
		for nodes := range p.o.Nodes(wctx) {
			p.view.Publish(ViewOf(nodes, p.o.Self))
		}
	}()
	go func() {
		defer close(done)
		p.ann.Run(ctx, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), configs.BGPStopTimeout)
		})
		stopWatch()
		<-watched
	}()
	return done
}

// config is the configuration in force.
func (p *Part) config() *configs.Config { c, _ := p.o.Hub.Config.Load(); return c }

// SetHost applies a host request (lbctl host drain, enable): persisted
// before it takes effect, like every operator intent
// (control.HostBackend).
func (p *Part) SetHost(ctx context.Context, req control.HostRequest, by string) (*control.HostReply, error) {
	out, err := p.o.Changer.Change(ctx, intent.Change{What: "host request",
		Apply: func(st intent.State) (intent.State, intent.Result, error) {
			return intent.ApplyHost(st, intent.HostRequest{Action: req.Action, Reason: req.Reason, By: by, At: p.o.Now(), NoRoutes: !p.config().BGP.Enabled})
		},
		Applied: func(c intent.Changed) { p.hostChanged(req, by, c.Result) },
	})
	if err != nil {
		return nil, err
	}
	return &control.HostReply{Message: out.Result.Message, Changed: out.Result.Changed, Drain: hostDrainStatus(p.config(), out.State.Host)}, nil
}

// hostChanged tells a host request that changed the intent.
func (p *Part) hostChanged(req control.HostRequest, by string, res intent.Result) {
	msg := res.Message + " (by " + by + ")"
	if req.Reason != "" {
		msg += ": " + req.Reason
	}
	if !p.config().BGP.Enabled {
		msg += "; no [bgp] in the configuration: nothing is announced"
	}
	p.o.Logger.Warn(msg, "action", req.Action)
	p.o.Events.Append(control.Event{Kind: control.EventBGP, Subject: "host", Message: msg})
}

// hostDrainStatus is h as the control API shows it.
func hostDrainStatus(cfg *configs.Config, h *intent.HostDrain) *control.HostDrainStatus {
	if h == nil {
		return nil
	}
	st := &control.HostDrainStatus{Reason: h.Reason, Set: h.Set, By: h.By}
	if cfg.BGP.Enabled { // without [bgp] there is nothing to withdraw
		st.WithdrawAt = h.Set.Add(cfg.BGP.DrainDelay.Duration)
	}
	return st
}

// Status is the bgp section of /status (nil without [bgp]).
func (p *Part) Status() *control.BGPStatus {
	cfg := p.config()
	if cfg == nil || !cfg.BGP.Enabled {
		return nil
	}
	return StatusOf(cfg, p.ann.Status(), p.o.Now())
}

// StatusOf is st, of the announcer running cfg, as the control API
// shows it at now.
func StatusOf(cfg *configs.Config, st Status, now time.Time) *control.BGPStatus {
	out := &control.BGPStatus{RouterID: cfg.BGP.RouterID, LocalAS: uint32(cfg.BGP.LocalAS), Peers: []control.BGPPeer{}, Prefixes: []control.BGPPrefix{},
		Drain: hostDrainStatus(cfg, st.Drain), Error: st.Error}
	for _, p := range st.Peers {
		cp := control.BGPPeer{Address: p.Address.String(), AS: p.AS, State: p.State, LastError: p.LastError, Reason: p.Reason, ReasonCode: p.ReasonCode}
		if !p.Since.IsZero() {
			since := p.Since
			cp.Since, cp.UptimeSeconds = &since, now.Sub(since).Seconds()
		}
		out.Peers = append(out.Peers, cp)
	}
	for _, r := range st.Routes {
		cp := control.BGPPrefix{Prefix: r.Prefix.String(), Kind: r.Kind, Name: r.Name, Announced: r.Announce, MED: r.MED,
			Degraded: r.Degraded, Draining: r.Draining, Held: r.Held, Reason: r.Reason}
		for _, c := range r.Communities {
			cp.Communities = append(cp.Communities, c.String())
		}
		out.Prefixes = append(out.Prefixes, cp)
	}
	return out
}
