package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"lbdns/control"
	"lbdns/gslb/server"
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

func (b backend) Reload(ctx context.Context) (*control.ReloadReply, error) {
	return b.d.reloadForControl(ctx)
}

// serve runs the control server, the status server and the GSLB responder
// until ctx is done; the returned group is done when all have stopped.
func (d *Daemon) serve(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	b := backend{d}
	gs := server.NewResponder(server.ResponderOptions{Config: d.Config, Statuses: d.mon.Status, Events: d.evlog, Registerer: d.registry, Logger: d.log.With("component", "gslb"), Now: d.now})
	srv := control.NewServer(control.ServerOptions{Backend: b, Events: d.evlog, Logger: d.log.With("component", "control"), GSLB: gs})
	wg.Go(func() {
		if err := srv.Serve(ctx, d.ctlLn); err != nil {
			d.log.Error("control socket stopped", "socket", d.ctlLn.Addr().String(), "err", err)
		}
	})
	d.log.Info("control socket listening", "socket", d.ctlLn.Addr().String())
	gs.Start(ctx, &wg)
	if d.statusLn != nil {
		ss := control.NewStatusServer(control.StatusOptions{Backend: b, Gatherer: d.registry, Logger: d.log.With("component", "status")})
		wg.Go(func() {
			if err := ss.Serve(ctx, d.statusLn); err != nil {
				d.log.Error("status endpoint stopped", "addr", d.statusLn.Addr().String(), "err", err)
			}
		})
		d.log.Info("status endpoint listening (read-only)", "url", "http://"+d.statusLn.Addr().String()+"/")
	}
	return &wg
}

// overrideCall is an override request handed to the loop.
type overrideCall struct {
	// ctx is the request's: a request whose client gave up before the
	// loop took it is not applied.
	ctx   context.Context
	req   control.OverrideRequest
	by    string
	reply chan overrideResult
}

type overrideResult struct {
	rep *control.OverrideReply
	err error
}

// SetOverride applies an operator override (lbctl drain, disable,
// enable). The request is validated against the running configuration,
// persisted before it takes effect, and applied at once. It refuses
// (409) a drain or disable that would leave a VIP service with no
// destination taking new queries, or that would put a resolver into
// traffic (by making a pool fail open): an override only takes traffic
// away.
func (d *Daemon) SetOverride(ctx context.Context, req control.OverrideRequest, by string) (*control.OverrideReply, error) {
	call := overrideCall{ctx: ctx, req: req, by: by, reply: make(chan overrideResult, 1)}
	select {
	case d.overrideCh <- call:
	case <-d.stopping:
		return nil, control.Errorf(http.StatusServiceUnavailable, "lbdnsd is stopping")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-call.reply:
		return r.rep, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// handleOverride runs in the loop: intent decides, the store persists,
// and only then does the change take effect.
func (d *Daemon) handleOverride(ctx context.Context, call overrideCall) (*control.OverrideReply, error) {
	if err := call.ctx.Err(); err != nil {
		return nil, err // the client gave up: change nothing
	}
	req := call.req
	next, res, err := intent.Apply(d.intent, intent.Request{Action: req.Action, Resolver: req.Resolver, Pool: req.Pool, VIP: req.VIP,
		Reason: req.Reason, By: call.by, At: d.now()}, intentView{d})
	if err != nil {
		return nil, controlError(err)
	}
	if !res.Changed {
		return &control.OverrideReply{Message: res.Message, Overrides: report.Overrides(d.cfg, next.Overrides)}, nil
	}
	if err := d.store.Save(ctx, next); err != nil {
		var ds *atomicfile.DirSyncError
		if !errors.As(err, &ds) {
			return nil, fmt.Errorf("cannot persist the override, nothing changed: %w", err)
		}
		// The new state is in place; only its durability is in doubt.
		d.log.Warn("override saved but the state directory could not be synced", "err", err)
	}
	d.setOverrides(next)
	d.journal.Override(req, call.by, res)
	d.reconcile(ctx, false)
	return &control.OverrideReply{Message: res.Message, Changed: true, Overrides: report.Overrides(d.cfg, next.Overrides)}, nil
}

// setOverrides makes st the operator intent in force (loop only).
func (d *Daemon) setOverrides(st intent.State) {
	d.intent = st
	d.rules = resolvers.RulesFrom(st.Overrides)
	d.mu.Lock()
	d.overridesView = slices.Clone(st.Overrides)
	d.mu.Unlock()
}

// reloadForControl is the control servers' reload: it validates and applies the
// configuration file; an invalid one is a 422 with every problem.
func (d *Daemon) reloadForControl(ctx context.Context) (*control.ReloadReply, error) {
	if err := d.Reload(ctx); err != nil {
		return nil, report.ReloadRejected(d.opts.ConfigPath, err)
	}
	return &control.ReloadReply{Summary: d.Config().Summary()}, nil
}
