package daemon

import (
	"context"
	"maps"

	"lbdns/gslb"
	"lbdns/hub"
)

// The daemon's followers of the hub: each waits for new versions of the
// values it needs and hands them on.

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

// followServing tells the journal every change of the VIPs' and the GSLB
// listeners' serving verdicts, and of the GSLB names on their last
// resort, until ctx is done.
func (d *Daemon) followServing(ctx context.Context) {
	var vAfter, rAfter uint64
	var vips, listeners []hub.Verdict
	var resorts []gslb.NameStatus
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.hub.VIPs.Changed(vAfter):
			var v []hub.Verdict
			v, vAfter = d.hub.VIPs.Load()
			if !d.dryRun { // in a dry run no VIP serves, and the banner says why
				d.journal.Serving("VIP", vips, v)
			}
			vips = v
		case <-d.hub.Responder.Changed(rAfter):
			var st hub.ResponderState
			st, rAfter = d.hub.Responder.Load()
			d.journal.Serving("GSLB listener", listeners, st.Listeners)
			d.journal.LastResorts(resorts, st.LastResort)
			listeners, resorts = st.Listeners, st.LastResort
		}
	}
}
