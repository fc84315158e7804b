package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"lbdns/control"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/internal/atomicfile"
	"lbdns/report"
	"lbdns/resolvers"
)

// backend is the Daemon as the control servers see it.
type backend struct{ d *Daemon }

var _ control.Backend = backend{}

func (b backend) Status(ctx context.Context) (*control.Status, error) { return b.d.Status(ctx) }

func (b backend) SetOverride(ctx context.Context, req control.OverrideRequest, by string) (*control.OverrideReply, error) {
	return b.d.SetOverride(ctx, req, by)
}

func (b backend) SetGSLB(ctx context.Context, req control.GSLBRequest, by string) (*control.GSLBReply, error) {
	r := b.d.intentCall(ctx, overrideCall{gslb: &req, by: by})
	return r.grep, r.err
}

func (b backend) Reload(ctx context.Context) (*control.ReloadReply, error) {
	return b.d.reloadForControl(ctx)
}

// serve runs the control server, the status server and the GSLB responder
// until ctx is done; the returned group is done when all have stopped.
func (d *Daemon) serve(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	b := backend{d}
	srv := control.NewServer(control.ServerOptions{Backend: b, Events: d.evlog, Logger: d.log.With("component", "control"), GSLB: d.gslb,
		Limits:     control.Limits{MaxConnections: d.cfg.Daemon.ControlMaxConnections, ReservedFDs: d.cfg.Daemon.ReservedFDs},
		Registerer: d.registry})
	wg.Go(func() {
		if err := srv.Serve(ctx, d.ctlLn); err != nil {
			d.log.Error("control socket stopped", "socket", d.ctlLn.Addr().String(), "err", err)
		}
	})
	d.log.Info("control socket listening", "socket", d.ctlLn.Addr().String())
	d.gslb.Start(ctx, &wg)
	if d.statusLn != nil {
		ss := control.NewStatusServer(control.StatusOptions{Backend: b, Gatherer: d.registry, Logger: d.log.With("component", "status"), Events: d.evlog,
			MaxRequests: d.cfg.Daemon.StatusMaxRequests, Registerer: d.registry,
			Limits: control.Limits{MaxConnections: d.cfg.Daemon.StatusMaxConnections, ReservedFDs: d.cfg.Daemon.ReservedFDs}})
		wg.Go(func() {
			if err := ss.Serve(ctx, d.statusLn); err != nil {
				d.log.Error("status endpoint stopped", "addr", d.statusLn.Addr().String(), "err", err)
			}
		})
		d.log.Info("status endpoint listening (read-only)", "url", "http://"+d.statusLn.Addr().String()+"/")
	}
	return &wg
}

// overrideCall is an operator request for the loop (a GSLB one if gslb is set).
type overrideCall struct {
	ctx   context.Context // the request's: if its client gave up first, nothing is applied
	req   control.OverrideRequest
	gslb  *control.GSLBRequest
	host  *control.HostRequest   // a host request (bgp.go)
	cl    *control.ClientRequest // a client request (clients.go)
	by    string
	reply chan overrideResult
}

// overrideResult answers an overrideCall (grep a GSLB request).
type overrideResult struct {
	rep  *control.OverrideReply
	grep *control.GSLBReply
	hrep *control.HostReply
	crep *control.ClientReply
	err  error
}

// SetOverride applies an operator override (lbctl drain, disable,
// enable): validated, persisted before it takes effect, applied at once
// (intent.Apply says what it refuses).
func (d *Daemon) SetOverride(ctx context.Context, req control.OverrideRequest, by string) (*control.OverrideReply, error) {
	r := d.intentCall(ctx, overrideCall{req: req, by: by})
	return r.rep, r.err
}

// intentCall hands an operator request to the loop and waits for its answer.
func (d *Daemon) intentCall(ctx context.Context, call overrideCall) overrideResult {
	call.ctx, call.reply = ctx, make(chan overrideResult, 1)
	select {
	case d.overrideCh <- call:
	case <-d.stopping:
		return overrideResult{err: control.Errorf(control.Unavailable, "lbdnsd is stopping")}
	case <-ctx.Done():
		return overrideResult{err: ctx.Err()}
	}
	select {
	case r := <-call.reply:
		return r
	case <-ctx.Done():
		return overrideResult{err: ctx.Err()}
	}
}

// handleOverride runs in the loop: intent decides, the store persists, and only then does the
// change take effect: in the plan, or in the GSLB answers of every listener before the reply.
func (d *Daemon) handleOverride(ctx context.Context, call overrideCall) overrideResult {
	if err := call.ctx.Err(); err != nil {
		return overrideResult{err: err} // the client gave up: change nothing
	}
	req, g, what := call.req, call.gslb, "override"
	if g != nil {
		what = "gslb request"
	}
	if call.host != nil {
		what = "host request"
	}
	if call.cl != nil {
		what = "client request"
	}
	next, res, err := d.applyCall(call)
	if err != nil {
		return overrideResult{err: report.IntentError(err)}
	}
	if res.Changed {
		rev, err := d.store.Save(ctx, next, d.rev)
		if err != nil {
			var ds *atomicfile.DirSyncError
			var ce *intent.ConflictError
			var ue *control.Error
			switch {
			case errors.As(err, &ue) && ue.Unavailable != "":
				return overrideResult{err: ue} // the fleet's etcd is out of reach: it says so whole
			case errors.As(err, &ce):
				// Another writer of the store won: take its revision, so
				// that a retry is decided on it.
				d.adoptIntent(ctx, intent.Stored{State: ce.Current, Revision: ce.Actual}) // whatever its revision: the store has it
				return overrideResult{err: control.Errorf(control.Conflict, "%s", err.Error())}
			case !errors.As(err, &ds):
				return overrideResult{err: fmt.Errorf("cannot persist the %s, nothing changed: %w", what, err)}
			}
			// The new state is in place; only its durability is in doubt.
			d.log.Warn(what+" saved but the state directory could not be synced", "err", err)
		}
		d.setOverrides(next, rev)
		if call.cl != nil {
			d.journal.Client(*call.cl, call.by, res)
			d.enforceClients()
		} else if call.host != nil {
			d.hostChanged(*call.host, call.by, res)
		} else if g != nil {
			d.gslb.Refresh()
			d.journal.GSLB(*g, call.by, res)
		} else {
			d.journal.Override(req, call.by, res)
			d.reconcile(ctx, false)
		}
	}
	return overrideResult{rep: &control.OverrideReply{Message: res.Message, Changed: res.Changed, Overrides: report.Overrides(d.cfg, next.Overrides)},
		grep: &control.GSLBReply{Message: res.Message, Changed: res.Changed, Intent: report.GSLBIntent(d.cfg, next)},
		hrep: &control.HostReply{Message: res.Message, Changed: res.Changed, Drain: hostDrainStatus(d.cfg, next.Host)},
		crep: &control.ClientReply{Message: res.Message, Changed: res.Changed, Clients: d.clientsStatus(d.cfg, next)}}
}

// applyCall is what intent makes of call (loop only).
func (d *Daemon) applyCall(call overrideCall) (intent.State, intent.Result, error) {
	if c := call.cl; c != nil {
		return intent.ApplyClient(d.intent, intent.ClientRequest{Action: c.Action, Client: c.Client, Rate: c.Rate,
			For: time.Duration(c.ForSeconds) * time.Second, Force: c.Force, Reason: c.Reason, By: call.by, At: d.now()}, intent.ClientPolicyOf(d.cfg))
	}
	if call.host != nil {
		return intent.ApplyHost(d.intent, intent.HostRequest{Action: call.host.Action, Reason: call.host.Reason, By: call.by, At: d.now(), NoRoutes: !d.cfg.BGP.Enabled})
	}
	if g, by := call.gslb, call.by; g != nil {
		return intent.ApplyGSLB(d.intent, intent.GSLBRequest{Action: g.Action, Name: g.Name, Zone: g.Zone, Seconds: g.Seconds,
			Clear: g.Clear, Reason: g.Reason, By: by, At: d.now()}, d.cfg)
	}
	r := call.req
	return intent.Apply(d.intent, intent.Request{Action: r.Action, Resolver: r.Resolver, Pool: r.Pool, VIP: r.VIP, Reason: r.Reason, By: call.by, At: d.now()}, intentView{d})
}

// setOverrides makes st, at store revision rev, the operator intent in
// force, and publishes it (loop only).
func (d *Daemon) setOverrides(st intent.State, rev intent.Revision) {
	d.intent, d.rev = st, rev
	d.rules = resolvers.RulesFrom(st.Overrides)
	d.hub.Intent.Publish(hub.Intent{State: st, Revision: uint64(rev)})
}

// intentNow returns the operator intent in force (never modified in place).
func (d *Daemon) intentNow() intent.State { i, _ := d.hub.Intent.Load(); return i.State }

// reloadForControl is the control servers' reload: it validates and applies the
// configuration file; an invalid one is a 422 with every problem.
func (d *Daemon) reloadForControl(ctx context.Context) (*control.ReloadReply, error) {
	if err := d.Reload(ctx); err != nil {
		return nil, report.ReloadRejected(d.opts.ConfigPath, err)
	}
	return &control.ReloadReply{Summary: d.Config().Summary()}, nil
}
