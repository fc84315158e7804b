package daemon

import (
	"context"
	"sync"
	"sync/atomic"

	"lbdns/configs"
	"lbdns/prefetch"
	"lbdns/resolvers"
)

// prefetcher is the daemon's handle on the cache-refresh runner. The
// runner starts with the first config that lists a [[prefetch.domain]]
// (at Run or on a later reload) and stops with Run.
type prefetcher struct {
	runner atomic.Pointer[prefetch.Runner]
	// ctx is Run's context, kept to start the runner on a reload.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// limits are the settings the running runner was built with.
	limits configs.Prefetch
}

// startPrefetch starts the runner when cfg lists prefetch domains. It is
// called from Run (ctx is Run's) and from a reload.
func (d *Daemon) startPrefetch(ctx context.Context, cfg *configs.Config) {
	pf := &d.pf
	pf.ctx = ctx
	if pf.ctx == nil || pf.runner.Load() != nil || len(cfg.Prefetch.Domains) == 0 {
		return
	}
	r := prefetch.New(prefetch.Options{
		MaxQPS:  cfg.Prefetch.MaxQPS,
		Jitter:  cfg.Prefetch.Jitter.Duration,
		Timeout: cfg.Prefetch.Timeout.Duration,
		Now:     d.now,
	})
	specs := prefetch.Specs(cfg)
	r.Update(specs)
	r.SetHealthy(prefetchHealthy(d.Plan()))
	rctx, cancel := context.WithCancel(pf.ctx)
	pf.cancel, pf.limits = cancel, cfg.Prefetch
	pf.runner.Store(r)
	pf.wg.Add(1)
	go func() {
		defer pf.wg.Done()
		_ = r.Run(rctx)
	}()
	d.log.Info("prefetcher started", "entries", len(specs), "domains", len(cfg.Prefetch.Domains),
		"max_qps", cfg.Prefetch.MaxQPS, "jitter", cfg.Prefetch.Jitter.String())
}

// stopPrefetch stops the runner and waits for its queries in flight.
func (d *Daemon) stopPrefetch() {
	pf := &d.pf
	if pf.cancel != nil {
		pf.cancel()
	}
	pf.wg.Wait()
	pf.runner.Store(nil)
	pf.cancel = nil
}

// reloadPrefetch brings the runner to a newly loaded config: entries whose
// (name, type, resolver, partition) is unchanged keep their state. A change
// of max_qps, jitter or timeout restarts the runner (its entries are then
// scheduled afresh).
func (d *Daemon) reloadPrefetch(cfg *configs.Config) {
	pf := &d.pf
	r := pf.runner.Load()
	if r != nil && (len(cfg.Prefetch.Domains) == 0 || !sameLimits(pf.limits, cfg.Prefetch)) {
		d.stopPrefetch()
		d.log.Info("prefetcher stopped for reload", "domains", len(cfg.Prefetch.Domains))
		r = nil
	}
	if r == nil {
		d.startPrefetch(pf.ctx, cfg)
		return
	}
	specs := prefetch.Specs(cfg)
	r.Update(specs)
	d.log.Info("prefetcher updated", "entries", len(specs))
}

func sameLimits(a, b configs.Prefetch) bool {
	return a.MaxQPS == b.MaxQPS && a.Jitter == b.Jitter && a.Timeout == b.Timeout
}

// prefetchHealth tells the runner which resolvers it may query: those up,
// with fresh facts, and not disabled by an operator in at least one pool.
func (d *Daemon) prefetchHealth(plan resolvers.Plan) {
	if r := d.pf.runner.Load(); r != nil {
		r.SetHealthy(prefetchHealthy(plan))
	}
}

func prefetchHealthy(plan resolvers.Plan) map[string]bool {
	out := map[string]bool{}
	for _, p := range plan.Pools {
		for _, m := range p.Members {
			if m.Healthy() && m.Override != resolvers.Disable {
				out[m.Name] = true
			}
		}
	}
	return out
}

// Prefetch returns the state of every prefetch entry (nil when the
// prefetcher is not running), for lbctl, metrics and the status page.
func (d *Daemon) Prefetch() []prefetch.Status {
	if r := d.pf.runner.Load(); r != nil {
		return r.Snapshot()
	}
	return nil
}
