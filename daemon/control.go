package daemon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"lbdns/control"
	"lbdns/flood"
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
	return b.d.SetGSLB(ctx, req, by)
}

// Flood returns the flood pipeline (nil when [flood] is off): other
// inputs of queries (a dnstap reader) feed it with Observe or a
// Producer of their own.
func (d *Daemon) Flood() *flood.Pipeline { return d.flood.Pipeline() }

func (b backend) Reload(ctx context.Context) (*control.ReloadReply, error) {
	return b.d.reloadForControl(ctx)
}

// serve runs the control server, the status server and the GSLB responder
// until ctx is done; the returned group is done when all have stopped.
func (d *Daemon) serve(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	b := backend{d}
	srv := control.NewServer(control.ServerOptions{Backend: b, Events: d.evlog, Logger: d.log.With("component", "control"), GSLB: d.gslb,
		Parts:      []any{d.clients, d.flood, d.bgp, d.fleet}, // each answers its own routes
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

// change is a change of the operator intent for the loop
// (intent.Changer).
type change struct {
	ctx   context.Context // the request's: if its client gave up first, nothing is applied
	c     intent.Change
	reply chan changeResult
}

// changeResult answers a change.
type changeResult struct {
	out intent.Changed
	err error
}

// SetOverride applies an operator override (lbctl drain, disable,
// enable): validated, persisted before it takes effect, applied at once
// (intent.Apply says what it refuses).
func (d *Daemon) SetOverride(ctx context.Context, req control.OverrideRequest, by string) (*control.OverrideReply, error) {
	out, err := d.Change(ctx, d.overrideChange(req, by))
	if err != nil {
		return nil, err
	}
	return &control.OverrideReply{Message: out.Result.Message, Changed: out.Result.Changed, Overrides: report.Overrides(d.Config(), out.State.Overrides)}, nil
}

// overrideChange is the change of an override request: decided in the
// loop, over its plan (intentView), journaled before its reconcile.
func (d *Daemon) overrideChange(req control.OverrideRequest, by string) intent.Change {
	return intent.Change{What: "override",
		Apply: func(st intent.State) (intent.State, intent.Result, error) {
			return intent.Apply(st, intent.Request{Action: req.Action, Resolver: req.Resolver, Pool: req.Pool, VIP: req.VIP, Reason: req.Reason, By: by, At: d.now()}, intentView{d})
		},
		Applied: func(c intent.Changed) { d.journal.Override(req, by, c.Result) },
	}
}

// Change runs c in the loop and waits for its outcome (intent.Changer).
func (d *Daemon) Change(ctx context.Context, c intent.Change) (intent.Changed, error) {
	call := change{ctx: ctx, c: c, reply: make(chan changeResult, 1)}
	select {
	case d.changeCh <- call:
	case <-d.stopping:
		return intent.Changed{}, control.Errorf(control.Unavailable, "lbdnsd is stopping")
	case <-ctx.Done():
		return intent.Changed{}, ctx.Err()
	}
	select {
	case r := <-call.reply:
		return r.out, r.err
	case <-ctx.Done():
		return intent.Changed{}, ctx.Err()
	}
}

// handleChange runs in the loop: intent decides, the store persists,
// and only then does the change take effect, published on the hub (the
// responder, the client actions and the announcer follow it there) and
// in the loop's plan when the overrides changed.
func (d *Daemon) handleChange(ctx context.Context, call change) (intent.Changed, error) {
	if err := call.ctx.Err(); err != nil {
		return intent.Changed{}, err // the client gave up: change nothing
	}
	c := call.c
	next, res, err := c.Apply(d.intent)
	if err != nil {
		return intent.Changed{}, report.IntentError(err)
	}
	if !res.Changed {
		return intent.Changed{State: d.intent, Revision: d.rev, Result: res}, nil
	}
	rev, err := d.store.Save(ctx, next, d.rev)
	if err != nil {
		var ds *atomicfile.DirSyncError
		var ce *intent.ConflictError
		var ue *control.Error
		switch {
		case errors.As(err, &ue) && ue.Unavailable != "":
			return intent.Changed{}, ue // the fleet's etcd is out of reach: it says so whole
		case errors.As(err, &ce):
			// Another writer of the store won: take its revision, so
			// that a retry is decided on it.
			d.adoptIntent(ctx, intent.Stored{State: ce.Current, Revision: ce.Actual}) // whatever its revision: the store has it
			return intent.Changed{}, control.Errorf(control.Conflict, "%w", err)      // the store's conflict stays in the chain
		case !errors.As(err, &ds):
			return intent.Changed{}, fmt.Errorf("cannot persist the %s, nothing changed: %w", c.What, err)
		}
		// The new state is in place; only its durability is in doubt.
		d.log.Warn(c.What+" saved but the state directory could not be synced", "err", err)
	}
	before := d.intent
	d.setOverrides(next, rev)
	out := intent.Changed{State: next, Revision: rev, Result: res}
	if c.Applied != nil {
		c.Applied(out)
	}
	if !reflect.DeepEqual(before.Overrides, next.Overrides) {
		d.reconcile(ctx, false)
	}
	return out, nil
}

// SetGSLB applies a GSLB emergency request (off, on, ttl): the
// responder's.
func (d *Daemon) SetGSLB(ctx context.Context, req control.GSLBRequest, by string) (*control.GSLBReply, error) {
	return d.gslb.SetGSLB(ctx, req, by)
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

// Fleet reads the fleet view (GET /v1/fleet) and this node's part in
// the votes.
func (d *Daemon) Fleet(ctx context.Context) (*control.FleetStatus, error) {
	return d.fleet.Fleet(ctx)
}
