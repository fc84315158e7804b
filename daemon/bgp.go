package daemon

import (
	"context"
	"time"

	"lbdns/announce"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/hub"
	"lbdns/intent"
)

// bgpPart is the route announcer: it follows the hub and announces over
// BGP what serves ([bgp]; without it no session is opened).
type bgpPart struct {
	ann     *announce.Announcer
	metrics *announce.Metrics
	// view is the fleet's view of the other hosts' announcements (for
	// [bgp] min_announcing), followed from etcd with [fleet].
	view *hub.Value[announce.FleetView]
}

// newBGP builds the announcer over d's hub, its events and metrics.
func newBGP(d *Daemon) *bgpPart {
	log := d.log.With("component", "bgp")
	spk := announce.NewGoBGP(log)
	b := &bgpPart{view: hub.NewValue[announce.FleetView]()}
	b.ann = announce.New(announce.Options{Hub: d.hub, Speaker: spk, Logger: log, Now: d.now, Fleet: b.view, OnChange: func(c announce.Change) {
		if c.Error {
			log.Warn(c.Message, "subject", c.Subject)
		} else {
			log.Info(c.Message, "subject", c.Subject)
		}
		d.evlog.Append(control.Event{Kind: control.EventBGP, Subject: c.Subject, Message: c.Message, Error: c.Error})
	}})
	b.metrics = announce.NewMetrics(b.ann.Status, d.now)
	d.registry.MustRegister(b.metrics)
	return b
}

// runBGP runs the announcer until ctx is done, with the fleet's view of
// the other hosts' announcements followed from etcd under [fleet]; on
// its way out it drains (drain_on_stop), withdraws every route and
// closes the sessions. The returned channel is closed when it has: the
// caller waits for it before it stops serving.
func (d *Daemon) runBGP(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	wctx, stopWatch := context.WithCancel(context.Background())
	watched := d.followFleetView(wctx)
	go func() {
		defer close(done)
		d.bgp.ann.Run(ctx, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), configs.BGPStopTimeout)
		})
		stopWatch()
		<-watched
	}()
	return done
}

// followFleetView publishes the fleet's view of the other hosts'
// announcements, as etcd has it, until ctx is done (nothing without
// [fleet]); the channel is closed when it has stopped.
func (d *Daemon) followFleetView(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	n := d.fleet
	if n == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		for nodes := range n.WatchNodes(ctx) {
			d.bgp.view.Publish(announce.ViewOf(nodes, n.Name()))
		}
	}()
	return done
}

// SetHost applies a host request (lbctl host drain, enable): persisted
// before it takes effect, like every operator intent.
func (b backend) SetHost(ctx context.Context, req control.HostRequest, by string) (*control.HostReply, error) {
	d := b.d
	out, err := d.Change(ctx, intent.Change{What: "host request",
		Apply: func(st intent.State) (intent.State, intent.Result, error) {
			return intent.ApplyHost(st, intent.HostRequest{Action: req.Action, Reason: req.Reason, By: by, At: d.now(), NoRoutes: !d.cfg.BGP.Enabled})
		},
		Applied: func(c intent.Changed) { d.hostChanged(req, by, c.Result) },
	})
	if err != nil {
		return nil, err
	}
	return &control.HostReply{Message: out.Result.Message, Changed: out.Result.Changed, Drain: hostDrainStatus(d.Config(), out.State.Host)}, nil
}

var _ control.HostBackend = backend{}

// hostChanged tells a host request that changed the intent (loop only).
func (d *Daemon) hostChanged(req control.HostRequest, by string, res intent.Result) {
	msg := res.Message + " (by " + by + ")"
	if req.Reason != "" {
		msg += ": " + req.Reason
	}
	if !d.cfg.BGP.Enabled {
		msg += "; no [bgp] in the configuration: nothing is announced"
	}
	d.log.Warn(msg, "action", req.Action)
	d.evlog.Append(control.Event{Kind: control.EventBGP, Subject: "host", Message: msg})
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

// bgpStatus is the bgp section of /status (nil without [bgp]).
func (d *Daemon) bgpStatus() *control.BGPStatus {
	cfg := d.Config()
	if cfg == nil || !cfg.BGP.Enabled {
		return nil
	}
	return BGPStatus(cfg, d.bgp.ann.Status(), d.now())
}

// BGPStatus is st, of the announcer running cfg, as the control API
// shows it at now.
func BGPStatus(cfg *configs.Config, st announce.Status, now time.Time) *control.BGPStatus {
	out := &control.BGPStatus{RouterID: cfg.BGP.RouterID, LocalAS: uint32(cfg.BGP.LocalAS), Peers: []control.BGPPeer{}, Prefixes: []control.BGPPrefix{},
		Drain: hostDrainStatus(cfg, st.Drain), Error: st.Error}
	for _, p := range st.Peers {
		cp := control.BGPPeer{Address: p.Address.String(), AS: p.AS, State: p.State, LastError: p.LastError}
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
