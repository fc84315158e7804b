package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/internal/atomicfile"
	"lbdns/resolvers"
	"lbdns/vip"
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

// serve runs the control server and the status server until ctx is done;
// the returned group is done when both have stopped.
func (d *Daemon) serve(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	b := backend{d}
	srv := control.NewServer(control.ServerOptions{Backend: b, Events: d.evlog, Logger: d.log.With("component", "control")})
	wg.Go(func() {
		if err := srv.Serve(ctx, d.ctlLn); err != nil {
			d.log.Error("control socket stopped", "socket", d.ctlLn.Addr().String(), "err", err)
		}
	})
	d.log.Info("control socket listening", "socket", d.ctlLn.Addr().String())
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

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
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

// handleOverride runs in the loop.
func (d *Daemon) handleOverride(ctx context.Context, call overrideCall) (*control.OverrideReply, error) {
	if err := call.ctx.Err(); err != nil {
		return nil, err // the client gave up: change nothing
	}
	req := call.req
	o := storedOverride{Resolver: req.Resolver, Pool: req.Pool, VIP: req.VIP, Action: req.Action,
		Reason: req.Reason, Set: d.now().UTC(), By: call.by}
	if err := d.checkOverride(o); err != nil {
		return nil, err
	}
	next, msg, changed := applyOverride(d.overrides, o)
	if !changed {
		if o.Action == control.ActionEnable {
			if still := covering(d.overrides, o.Resolver); len(still) > 0 {
				return nil, control.Errorf(http.StatusConflict, "%s; it is still %s: run lbctl enable %s without --pool/--vip to clear every override",
					msg, strings.Join(still, ", "), o.Resolver)
			}
		}
		return &control.OverrideReply{Message: msg, Overrides: d.overrideView(d.cfg, next)}, nil
	}
	if o.Action != control.ActionEnable {
		before, after := d.planWith(d.overrides).Table, d.planWith(next).Table
		if lost := lastTakers(d.cfg, before, after); len(lost) > 0 {
			return nil, control.Errorf(http.StatusConflict, "refused: %s %s would leave %s with no destination taking new queries; enable or repair another resolver first",
				o.Action, o.Resolver, strings.Join(lost, ", "))
		}
		if added := newTakers(before, after); len(added) > 0 {
			return nil, control.Errorf(http.StatusConflict, "refused: %s %s would put its pool below min_healthy, and the pool would fail open and send new queries to %s, which the health checks keep out; repair or enable another resolver first",
				o.Action, o.Resolver, strings.Join(added, ", "))
		}
	}
	if err := saveOverrides(d.cfg.Daemon.StateDir, next); err != nil {
		var ds *atomicfile.DirSyncError
		if !errors.As(err, &ds) {
			return nil, fmt.Errorf("cannot persist the override, nothing changed: %w", err)
		}
		// The new file is in place; only its durability is in doubt.
		d.log.Warn("override saved but the state directory could not be synced", "err", err)
	}
	d.setOverrides(next)
	d.log.Info("operator override", "action", o.Action, "resolver", o.Resolver, "scope", o.scopeText(),
		"reason", o.Reason, "by", o.By, "result", msg)
	text := msg
	if o.Reason != "" {
		text += " (reason: " + o.Reason + ")"
	}
	if o.By != "" {
		text += " by " + o.By
	}
	d.event(control.Event{Kind: control.EventOverride, Subject: o.Resolver, Message: text})
	d.reconcile(ctx, false)
	return &control.OverrideReply{Message: msg, Changed: true, Overrides: d.overrideView(d.cfg, next)}, nil
}

// checkOverride validates the names of an override request against the
// running configuration. Enable is also accepted for a name that is gone
// from the configuration but still has overrides (to clear orphans).
func (d *Daemon) checkOverride(o storedOverride) error {
	cfg := d.cfg
	switch o.Action {
	case control.ActionDrain, control.ActionDisable, control.ActionEnable:
	default:
		return control.Errorf(http.StatusBadRequest, "action: want drain, disable or enable, not %q", o.Action)
	}
	if o.Resolver == "" {
		return control.Errorf(http.StatusBadRequest, "resolver: missing")
	}
	if o.Pool != "" && o.VIP != "" {
		return control.Errorf(http.StatusBadRequest, "pool and vip: give at most one")
	}
	if o.Action == control.ActionEnable && len(covering(d.overrides, o.Resolver)) > 0 {
		return nil // may clear an orphan, or say which override is left
	}
	if cfg.Resolver(o.Resolver) == nil {
		return control.Errorf(http.StatusNotFound, "unknown resolver %q%s", o.Resolver, configs.Suggest(o.Resolver, resolverNames(cfg)))
	}
	pools := poolsOf(cfg, o.Resolver)
	switch {
	case o.Pool != "":
		if cfg.Pool(o.Pool) == nil {
			return control.Errorf(http.StatusNotFound, "unknown pool %q", o.Pool)
		}
		if !slices.Contains(pools, o.Pool) {
			return control.Errorf(http.StatusNotFound, "resolver %s is not a member of pool %s (it is in: %s)", o.Resolver, o.Pool, listOrNone(pools))
		}
	case o.VIP != "":
		v := cfg.VIP(o.VIP)
		if v == nil {
			return control.Errorf(http.StatusNotFound, "unknown VIP %q", o.VIP)
		}
		if !slices.Contains(pools, v.Pool) {
			return control.Errorf(http.StatusNotFound, "resolver %s is not in pool %s of VIP %s (it is in: %s)", o.Resolver, v.Pool, o.VIP, listOrNone(pools))
		}
	}
	return nil
}

// applyOverride returns the override list after o, a one-line message,
// and whether anything changed. Drain and disable replace an override of
// the same scope; enable without a scope removes every override of the
// resolver, with a scope only that scope's.
func applyOverride(list []storedOverride, o storedOverride) ([]storedOverride, string, bool) {
	if o.Action == control.ActionEnable {
		var next []storedOverride
		var removed []string
		for _, p := range list {
			if p.Resolver == o.Resolver && (o.Pool == "" && o.VIP == "" || p.sameScope(o)) {
				removed = append(removed, p.Action+" "+p.scopeText())
				continue
			}
			next = append(next, p)
		}
		if len(removed) == 0 {
			return list, fmt.Sprintf("%s has no override %s; nothing changed", o.Resolver, o.scopeText()), false
		}
		if still := covering(next, o.Resolver); len(still) > 0 {
			return next, fmt.Sprintf("%s: removed %s; still %s (lbctl enable %s without --pool/--vip clears every override)",
				o.Resolver, strings.Join(removed, ", "), strings.Join(still, ", "), o.Resolver), true
		}
		return next, fmt.Sprintf("%s enabled: removed %s; back under health-driven control", o.Resolver, strings.Join(removed, ", ")), true
	}
	next := slices.Clone(list)
	for i, p := range next {
		if p.sameScope(o) {
			if p.Action == o.Action && p.Reason == o.Reason {
				return list, fmt.Sprintf("%s is already %s %s; nothing changed", o.Resolver, past(o.Action), o.scopeText()), false
			}
			next[i] = o
			if p.Action == o.Action {
				return next, fmt.Sprintf("%s still %s %s; reason updated", o.Resolver, past(o.Action), o.scopeText()), true
			}
			return next, fmt.Sprintf("%s %s %s (was %s)", o.Resolver, past(o.Action), o.scopeText(), past(p.Action)), true
		}
	}
	next = append(next, o)
	return next, fmt.Sprintf("%s %s %s", o.Resolver, past(o.Action), o.scopeText()), true
}

func past(action string) string {
	switch action {
	case control.ActionDrain:
		return "drained"
	case control.ActionDisable:
		return "disabled"
	}
	return action + "d"
}

// planWith computes the plan the current facts give under other overrides.
func (d *Daemon) planWith(list []storedOverride) resolvers.Plan {
	now := d.now()
	return d.planner.WhatIf(d.facts(now), rules(list), now)
}

// lastTakers lists the services (as "VIP proto/addr:port") that have a
// destination with a weight above zero in before and none in after.
func lastTakers(cfg *configs.Config, before, after vip.Table) []string {
	var out []string
	for _, k := range before.Keys() {
		if takers(before[k]) > 0 && takers(after[k]) == 0 {
			out = append(out, vipName(cfg, k)+" "+k.String())
		}
	}
	return out
}

// newTakers lists the destinations (as "ADDR:PORT in SERVICE") that have
// a weight above zero in after but not in before.
func newTakers(before, after vip.Table) []string {
	var out []string
	for _, k := range after.Keys() {
		for a, dst := range after[k].Dests {
			if dst.Weight == 0 {
				continue
			}
			if old, ok := before[k].Dests[a]; !ok || old.Weight == 0 {
				out = append(out, a.String()+" in "+k.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

// covering describes the overrides of resolver ("disabled in all pools").
func covering(list []storedOverride, resolver string) []string {
	var out []string
	for _, o := range list {
		if o.Resolver == resolver {
			out = append(out, past(o.Action)+" "+o.scopeText())
		}
	}
	return out
}

func takers(s vip.Service) int {
	n := 0
	for _, d := range s.Dests {
		if d.Weight > 0 {
			n++
		}
	}
	return n
}

func vipName(cfg *configs.Config, k vip.ServiceKey) string {
	for i := range cfg.VIPs {
		if cfg.VIPs[i].Addr == k.Addr {
			return cfg.VIPs[i].Name
		}
	}
	return "?"
}

// setOverrides makes list the overrides in force (loop only).
func (d *Daemon) setOverrides(list []storedOverride) {
	d.overrides = list
	d.rules = rules(list)
	d.mu.Lock()
	d.overridesView = slices.Clone(list)
	d.mu.Unlock()
}

// overrideView turns the stored overrides into the API's, marking the
// orphaned ones.
func (d *Daemon) overrideView(cfg *configs.Config, list []storedOverride) []control.Override {
	out := make([]control.Override, 0, len(list))
	for _, o := range list {
		out = append(out, control.Override{Resolver: o.Resolver, Pool: o.Pool, VIP: o.VIP, Action: o.Action,
			Reason: o.Reason, Set: o.Set, By: o.By, Orphaned: orphaned(cfg, o) != ""})
	}
	return out
}

// reportOrphans logs every override the configuration no longer matches.
func (d *Daemon) reportOrphans(cfg *configs.Config) {
	for _, o := range d.overrides {
		if why := orphaned(cfg, o); why != "" {
			d.log.Warn("orphaned override kept (it applies again if the name comes back; lbctl enable clears it)",
				"resolver", o.Resolver, "action", o.Action, "scope", o.scopeText(), "why", why, "reason", o.Reason)
			d.event(control.Event{Kind: control.EventOverride, Subject: o.Resolver, Error: true,
				Message: fmt.Sprintf("orphaned override kept: %s %s %s: %s", o.Action, o.Resolver, o.scopeText(), why)})
		}
	}
}

// reloadForControl is the control servers' reload: it validates and applies the
// configuration file; an invalid one is a 422 with every problem.
func (d *Daemon) reloadForControl(ctx context.Context) (*control.ReloadReply, error) {
	if err := d.Reload(ctx); err != nil {
		if ps := configs.Problems(err); len(ps) > 0 {
			e := &control.Error{Code: http.StatusUnprocessableEntity, Message: fmt.Sprintf("reload rejected, running config unchanged: %d problems in %s", len(ps), d.opts.ConfigPath)}
			for _, p := range ps {
				e.Problems = append(e.Problems, control.Problem{File: p.File, Line: p.Line, Key: p.Key, Value: p.Value, Message: p.Msg, Text: p.Error()})
			}
			return nil, e
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, &control.Error{Code: http.StatusUnprocessableEntity, Message: "reload rejected, running config unchanged: " + err.Error()}
	}
	return &control.ReloadReply{Summary: d.Config().Summary()}, nil
}

func poolsOf(cfg *configs.Config, resolver string) []string {
	var out []string
	for i := range cfg.Pools {
		if slices.Contains(cfg.Pools[i].Members, resolver) {
			out = append(out, cfg.Pools[i].Name)
		}
	}
	return out
}

func resolverNames(cfg *configs.Config) []string {
	out := make([]string, 0, len(cfg.Resolvers))
	for i := range cfg.Resolvers {
		out = append(out, cfg.Resolvers[i].Name)
	}
	return out
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "no pool"
	}
	return strings.Join(s, ", ")
}
