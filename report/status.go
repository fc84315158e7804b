// Package report builds lbdns's views: the status snapshot (lbctl status,
// GET /status, the status page) and the Prometheus metrics, from plain
// data the daemon hands over: the configuration, the plan, the monitor's
// facts, the operators' overrides, the applied IPVS table and its kernel
// statistics, and the prefetcher's entries. Building is pure: Status is a
// function of its Input, so views are tested without a daemon.
package report

import (
	"net/netip"
	"slices"
	"sort"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/internal/buildinfo"
	"lbdns/monitor"
	"lbdns/monitor/identify"
	"lbdns/prefetch"
	"lbdns/resolvers"
	"lbdns/vip"
)

// Input is everything a status snapshot is built from. The daemon gathers
// it (copies taken under its lock); report only reads it.
type Input struct {
	// Now is when the snapshot is taken.
	Now time.Time
	// Config is the running configuration.
	Config *configs.Config
	// Plan is the latest plan (pool verdicts and desired table).
	Plan resolvers.Plan
	// Target looks up the monitor's status of the health target that
	// checks resolver with the check profile check (false: none yet).
	// Nil means no target is known.
	Target func(resolver, check string) (monitor.TargetStatus, bool)
	// Monitor is the monitor's status of every target by key; the GSLB
	// members' health is evaluated from it (nil: none known).
	Monitor map[monitor.Key]monitor.TargetStatus
	// Forced is the GSLB member states forced over Monitor (the fleet's
	// verdicts; nil: none).
	Forced gslb.ForcedStates
	// Identities are the resolvers' identification answers by resolver
	// name (identify.Identifier); nil when none.
	Identities map[string]identify.Identity
	// Overrides are the operator overrides in force, orphaned ones
	// included and flagged, in the order they are listed.
	Overrides []control.Override
	// Intent is the operator intent in force: its GSLB emergency
	// switches and TTL raises are shown (GSLBIntent).
	Intent intent.State
	// Applied is the IPVS table the daemon believes the kernel holds for
	// its services (in dry-run, the table it would have programmed).
	Applied vip.Table
	// Stats are the kernel's per-destination statistics of the applied
	// services; nil when they could not be read.
	Stats Stats
	// IPVS are the reconciler's counters.
	IPVS vip.ReconcilerStats
	// Prefetch are the prefetcher's entries, in any order.
	Prefetch []prefetch.Status
	// PrefetchTotals are the prefetcher's counters; nil when the
	// prefetcher is not running.
	PrefetchTotals *prefetch.Counters
	// Daemon describes the running daemon.
	Daemon Daemon
	// GSLBResponder is the GSLB responder's state (Responder.Status), shown
	// as it is; nil when none runs.
	GSLBResponder *control.GSLBResponder
	// Serving are the VIPs' serving verdicts (vip.Verdicts), by VIP name.
	Serving map[string]hub.Verdict
}

// Stats are per-destination kernel statistics by service.
type Stats = map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats

// Daemon describes the running daemon for Input.
type Daemon struct {
	// ConfigPath is the configuration file's path.
	ConfigPath string
	// Started is when the daemon started.
	Started time.Time
	// DryRun is set when the IPVS table is computed but not applied.
	DryRun bool
	// Warm is set once every target has a verdict (or the warm-up is
	// over).
	Warm bool
	// LastReload is when the configuration was last loaded successfully;
	// LastReloadError the error of the last attempt ("" when it worked).
	LastReload      time.Time
	LastReloadError string
}

// Status builds the status snapshot of in: every configured VIP with its
// applied services, every planned pool with its members, the overrides
// and the prefetch entries.
func Status(in Input) *control.Status {
	cfg, plan := in.Config, in.Plan
	st := &control.Status{
		Version:   control.StatusVersion,
		Generated: in.Now.UTC(),
		Daemon: control.Daemon{Config: in.Daemon.ConfigPath, Started: in.Daemon.Started.UTC(), DryRun: in.Daemon.DryRun,
			Warm: in.Daemon.Warm, LastReload: in.Daemon.LastReload.UTC(), LastReloadError: in.Daemon.LastReloadError,
			IPVSOps: in.IPVS.OpsApplied, IPVSErrors: in.IPVS.OpErrors, Version: buildinfo.Version()},
		VIPs:      []control.VIP{},
		Pools:     []control.Pool{},
		Overrides: in.Overrides,
	}
	if st.Overrides == nil {
		st.Overrides = []control.Override{}
	}
	for i := range cfg.VIPs {
		vs := vipStatus(&cfg.VIPs[i], &plan, in.Applied, in.Stats)
		if v, ok := in.Serving[vs.Name]; ok {
			vs.Serving, vs.ServingReason = &v.Serving, v.Reason
		} else {
			vs.ServingReason = "no verdict yet: the warm-up is not over"
		}
		st.VIPs = append(st.VIPs, vs)
	}
	for i := range plan.Pools {
		p := cfg.Pool(plan.Pools[i].Name)
		if p == nil {
			continue
		}
		st.Pools = append(st.Pools, poolStatus(cfg, p, &plan.Pools[i], &in))
	}
	st.Prefetch = PrefetchEntries(in.Prefetch)
	st.GSLB = GSLBPools(cfg, in.Monitor, in.Forced, in.Now)
	st.GSLBIntent = GSLBIntent(cfg, in.Intent)
	st.GSLBResponder = in.GSLBResponder
	return st
}

// vipStatus is the view of v's applied services; the plan names the
// resolver behind each destination (Plan.Dest), "" for one it does not
// manage.
func vipStatus(v *configs.VIP, plan *resolvers.Plan, applied vip.Table, stats Stats) control.VIP {
	out := control.VIP{Name: v.Name, Address: v.Addr.String(), Pool: v.Pool, Services: []control.Service{}}
	for _, k := range vip.ServiceKeys(v) {
		svc, ok := applied[k]
		if !ok {
			continue
		}
		cs := control.Service{Proto: k.Proto.String(), Address: netip.AddrPortFrom(k.Addr, k.Port).String(), Scheduler: svc.Scheduler,
			Destinations: []control.Destination{}}
		addrs := make([]netip.AddrPort, 0, len(svc.Dests))
		for a := range svc.Dests {
			addrs = append(addrs, a)
		}
		slices.SortFunc(addrs, netip.AddrPort.Compare)
		for _, a := range addrs {
			dst := svc.Dests[a]
			cd := control.Destination{Address: a.String(), Forwarding: dst.Forwarding.String(), Weight: dst.Weight}
			if _, m, ok := plan.Dest(k, a); ok {
				cd.Resolver = m.Name
			}
			if s, ok := stats[k][a]; ok {
				cd.Stats = apiStats(s)
			}
			cs.Destinations = append(cs.Destinations, cd)
		}
		out.Services = append(out.Services, cs)
	}
	return out
}

func poolStatus(cfg *configs.Config, p *configs.Pool, ps *resolvers.PoolStatus, in *Input) control.Pool {
	out := control.Pool{Name: ps.Name, Check: p.Check, VIPs: []string{}, MinHealthy: ps.MinHealthy, Total: ps.Total, Enabled: ps.Enabled,
		Healthy: ps.Healthy, FailOpen: ps.FailOpen, Diagnosis: ps.Diagnosis.String(), Detail: ps.Detail,
		Vendors: []control.VendorCount{}, Members: []control.Member{}}
	var vips []*configs.VIP
	for i := range cfg.VIPs {
		if cfg.VIPs[i].Pool == p.Name {
			vips = append(vips, &cfg.VIPs[i])
			out.VIPs = append(out.VIPs, cfg.VIPs[i].Name)
		}
	}
	vendors := make([]string, 0, len(ps.Vendors))
	for v := range ps.Vendors {
		vendors = append(vendors, v)
	}
	sort.Strings(vendors)
	for _, v := range vendors {
		out.Vendors = append(out.Vendors, control.VendorCount{Vendor: v, Total: ps.Vendors[v].Total, Healthy: ps.Vendors[v].Healthy})
	}
	for _, m := range ps.Members {
		cm := control.Member{Resolver: m.Name, Address: m.Addr.String(), Vendor: m.Vendor, State: m.State.String(),
			Fresh: m.Fresh, Override: m.Override.String(), Why: m.Why.Code.String(), WhyText: m.Why.Text}
		cm.InTraffic, cm.Weight = inTraffic(vips, m.Addr, in.Applied)
		if m.State != health.Unknown {
			cm.Since = m.Since.UTC()
		}
		if id, ok := in.Identities[m.Name]; ok {
			cm.Identity, cm.IdentifiedVendor = id.Version, id.Vendor
		}
		if in.Target != nil {
			if ts, ok := in.Target(m.Name, p.Check); ok {
				probeView(&cm, ts)
			}
		}
		if m.Override != resolvers.None {
			cm.OverrideReason = overrideReason(in.Overrides, m, p.Name)
		}
		cm.Stats = memberStats(vips, m.Addr, in.Stats)
		out.Members = append(out.Members, cm)
	}
	return out
}

// probeView fills in what the monitor knows of a member's target.
func probeView(cm *control.Member, ts monitor.TargetStatus) {
	cm.Flaps = ts.Health.Flaps
	if ts.LastAt.IsZero() {
		return
	}
	cm.LastProbe = ts.LastAt.UTC()
	cm.LastResult = "ok"
	if !ts.Last.OK {
		cm.LastResult = ts.Last.Detail
	}
	cm.RTTMillis = float64(ts.Last.RTT.Microseconds()) / 1000
}

// overrideReason is the reason of the pool-wide override that puts m in
// its override state in pool ("" when none: VIP-scoped overrides act on
// the table only, not on the pool's verdict).
func overrideReason(ovs []control.Override, m resolvers.Member, pool string) string {
	for _, o := range ovs {
		r := resolvers.Rule{Resolver: o.Resolver, Pool: o.Pool, VIP: o.VIP}
		if o.VIP == "" && r.Applies(m.Name, pool, "") && o.Action == m.Override.String() {
			return o.Reason
		}
	}
	return ""
}

// inTraffic reports whether the resolver at addr has a destination in the
// applied services of vips, and its weight there: the largest when they
// differ (an override scoped to one of the VIPs). The pool's verdict alone
// cannot tell: VIP-scoped overrides act on the table only.
func inTraffic(vips []*configs.VIP, addr netip.AddrPort, applied vip.Table) (bool, uint32) {
	in, w := false, uint32(0)
	for _, v := range vips {
		fwd := resolvers.Forwarding(v.Forwarding)
		for _, k := range vip.ServiceKeys(v) {
			if d, ok := applied[k].Dests[resolvers.DestAddr(fwd, k.Port, addr)]; ok {
				in, w = true, max(w, d.Weight)
			}
		}
	}
	return in, w
}

// memberStats sums the statistics of the destinations of a resolver at
// addr over the services of vips; nil when none were read.
func memberStats(vips []*configs.VIP, addr netip.AddrPort, stats Stats) *control.DestStats {
	var sum *control.DestStats
	for _, v := range vips {
		fwd := resolvers.Forwarding(v.Forwarding)
		for _, k := range vip.ServiceKeys(v) {
			s, ok := stats[k][resolvers.DestAddr(fwd, k.Port, addr)]
			if !ok {
				continue
			}
			if sum == nil {
				sum = &control.DestStats{}
			}
			a := apiStats(s)
			sum.ActiveConns += a.ActiveConns
			sum.InactiveConns += a.InactiveConns
			sum.Conns += a.Conns
			sum.PacketsIn += a.PacketsIn
			sum.PacketsOut += a.PacketsOut
			sum.BytesIn += a.BytesIn
			sum.BytesOut += a.BytesOut
			sum.CPS += a.CPS
			sum.PPSIn += a.PPSIn
			sum.PPSOut += a.PPSOut
			sum.BPSIn += a.BPSIn
			sum.BPSOut += a.BPSOut
		}
	}
	return sum
}

func apiStats(s vip.DestStats) *control.DestStats {
	return &control.DestStats{ActiveConns: s.ActiveConns, InactiveConns: s.InactiveConns, Conns: s.Conns,
		PacketsIn: s.PacketsIn, PacketsOut: s.PacketsOut, BytesIn: s.BytesIn, BytesOut: s.BytesOut,
		CPS: s.CPS, PPSIn: s.PPSIn, PPSOut: s.PPSOut, BPSIn: s.BPSIn, BPSOut: s.BPSOut}
}
