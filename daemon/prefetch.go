package daemon

import (
	"context"
	"maps"

	"lbdns/prefetch"
)

// Prefetch returns the state of every prefetch entry (nil when the
// prefetcher is not running), for lbctl, metrics and the status page.
func (d *Daemon) Prefetch() []prefetch.Status {
	st, _ := d.pf.Status()
	return st
}

// feedPrefetch hands the prefetcher the resolvers it may query each time
// a plan that changes them is published, until ctx is done.
func (d *Daemon) feedPrefetch(ctx context.Context) {
	var after uint64
	var last map[string]bool
	for {
		plan, ver, err := d.hub.Plan.Wait(ctx, after)
		if err != nil {
			return
		}
		after = ver
		if healthy := plan.HealthyResolvers(); last == nil || !maps.Equal(healthy, last) {
			d.pf.SetHealthy(healthy)
			last = healthy
		}
	}
}
