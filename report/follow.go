package report

import (
	"context"

	"lbdns/gslb"
	"lbdns/hub"
)

// FollowServing tells the journal every change of the VIPs' and the
// GSLB listeners' serving verdicts on h, and of the GSLB names on their
// last resort, until ctx is done. In a dry run (dryRun) no VIP serves,
// and the banner says why: the VIPs' verdicts are not journaled.
func (j *Journal) FollowServing(ctx context.Context, h *hub.Hub, dryRun bool) {
	var vAfter, rAfter uint64
	var vips, listeners []hub.Verdict
	var resorts []gslb.NameStatus
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.VIPs.Changed(vAfter):
			var v []hub.Verdict
			v, vAfter = h.VIPs.Load()
			if !dryRun {
				j.Serving("VIP", vips, v)
			}
			vips = v
		case <-h.Responder.Changed(rAfter):
			var st hub.ResponderState
			st, rAfter = h.Responder.Load()
			j.Serving("GSLB listener", listeners, st.Listeners)
			j.LastResorts(resorts, st.LastResort)
			listeners, resorts = st.Listeners, st.LastResort
		}
	}
}
