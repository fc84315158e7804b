package daemon

import (
	"context"

	"lbdns/control"
	"lbdns/hub"
	"lbdns/incident"
	"lbdns/monitor"
	"lbdns/report"
	"lbdns/resolvers"
	"lbdns/vip"
)

// Status returns a snapshot of the daemon's state (control.Backend).
func (d *Daemon) Status(ctx context.Context) (*control.Status, error) {
	st := report.Status(d.reportInput(ctx))
	st.BGP = d.bgp.Status()
	st.Fleet = d.fleet.Etcd()    // the link to the fleet's etcd
	d.fleet.FillMembers(st.GSLB) // the fleet's votes
	st.Dnstap = d.dnstap.Status()
	st.Flood = d.flood.Status()
	if cfg := d.Config(); cfg != nil {
		st.Clients = d.clients.Status(cfg, d.intentNow())
	}
	st.Summary = incident.Summarize(st)
	return st, nil
}

// reportInput gathers what the status and the metrics are built from:
// the hub's configuration, plan and intent, the monitor's facts, the applied table and its
// kernel statistics, the prefetcher's entries.
func (d *Daemon) reportInput(ctx context.Context) report.Input {
	now := d.now()
	cfg, plan, said := d.Config(), d.Plan(), d.intentNow()
	d.mu.Lock()
	lastReload, reloadErr := d.lastReload, d.lastReloadErr
	d.mu.Unlock()
	mon := d.mon.Status()
	forced, _ := d.hub.Forced.Load()
	snap := d.rec.Snapshot() // table and counters from one publish
	applied := snap.Table
	in := report.Input{
		Now: now, Config: cfg, Plan: plan, Overrides: report.Overrides(cfg, said.Overrides), Intent: said,
		Target: func(resolver, check string) (monitor.TargetStatus, bool) {
			ts, ok := mon[resolvers.MonitorKey(resolver, check)]
			return ts, ok
		},
		Identities: d.ident.Identities(),
		Monitor:    mon,
		Forced:     forced,
		Applied:    applied, Stats: d.stats.Read(ctx, applied), IPVS: snap.Stats,
		Daemon: report.Daemon{ConfigPath: d.opts.ConfigPath, Started: d.started, DryRun: d.dryRun, Warm: plan.Warm,
			LastReload: lastReload, LastReloadError: reloadErr},
	}
	in.Prefetch, in.PrefetchTotals = d.pf.Status()
	in.GSLBResponder = d.gslb.Status()
	verdicts, _ := d.hub.VIPs.Load()
	in.Serving = make(map[string]hub.Verdict, len(verdicts))
	for _, v := range verdicts {
		in.Serving[v.Name] = v
	}
	return in
}

// statsReader is what reads the kernel's statistics: nil in dry-run and
// with a client that cannot.
func (d *Daemon) statsReader() vip.StatsReader {
	if sr, ok := d.client.(vip.StatsReader); ok && !d.dryRun {
		return sr
	}
	return nil
}
