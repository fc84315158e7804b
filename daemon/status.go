package daemon

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/health"
	"lbdns/monitor"
	"lbdns/prefetch"
	"lbdns/resolvers"
	"lbdns/vip"
)

// statsMaxAge is how long kernel statistics are reused: a dashboard that
// polls /status and /metrics every second costs one kernel dump a second.
const statsMaxAge = time.Second

// statsCache keeps the last per-destination statistics read from the
// kernel.
type statsCache struct {
	mu   sync.Mutex
	at   time.Time
	data map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats
	// failing is set while reads fail, so that the failure is logged once.
	failing bool
}

// destStats returns the kernel's statistics of the applied services, or
// nil when the client cannot read them (dry-run, tests) or the read failed.
func (d *Daemon) destStats(ctx context.Context, applied vip.Table) map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats {
	sr, ok := d.client.(vip.StatsReader)
	if !ok || d.dryRun {
		return nil
	}
	c := &d.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	now := d.now()
	if c.data != nil && now.Sub(c.at) < statsMaxAge {
		return c.data
	}
	data, err := sr.DestStats(ctx, func(k vip.ServiceKey) bool { _, ok := applied[k]; return ok })
	if err != nil {
		if !c.failing {
			d.log.Warn("cannot read IPVS statistics", "err", err)
		}
		c.failing, c.data = true, nil
		return nil
	}
	c.failing, c.at, c.data = false, now, data
	return data
}

// Status returns a snapshot of the daemon's state (control.Backend).
func (d *Daemon) Status(ctx context.Context) (*control.Status, error) {
	now := d.now()
	d.mu.Lock()
	cfg, plan, ovs := d.view, d.plan, d.overridesView
	lastReload, reloadErr := d.lastReload, d.lastReloadErr
	d.mu.Unlock()
	mon := d.mon.Status()
	ids := d.ident.Identities()
	applied := d.rec.Table()
	stats := d.destStats(ctx, applied)
	rs := d.rec.Stats()

	st := &control.Status{
		Version:   control.StatusVersion,
		Generated: now.UTC(),
		Daemon: control.Daemon{Config: d.opts.ConfigPath, Started: d.started.UTC(), DryRun: d.dryRun, Warm: d.warmView.Load(),
			LastReload: lastReload.UTC(), LastReloadError: reloadErr, IPVSOps: rs.OpsApplied, IPVSErrors: rs.OpErrors},
		VIPs:      []control.VIP{},
		Pools:     []control.Pool{},
		Overrides: d.overrideView(cfg, ovs),
	}
	members := map[string]*resolvers.PoolStatus{}
	for i := range plan.Pools {
		members[plan.Pools[i].Name] = &plan.Pools[i]
	}
	for i := range cfg.VIPs {
		st.VIPs = append(st.VIPs, vipStatus(&cfg.VIPs[i], members[cfg.VIPs[i].Pool], applied, stats))
	}
	for i := range plan.Pools {
		p := cfg.Pool(plan.Pools[i].Name)
		if p == nil {
			continue
		}
		st.Pools = append(st.Pools, poolStatus(cfg, p, &plan.Pools[i], mon, ids, ovs, applied, stats))
	}
	st.Prefetch = prefetchView(d.Prefetch())
	return st, nil
}

func vipStatus(v *configs.VIP, ps *resolvers.PoolStatus, applied vip.Table, stats map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats) control.VIP {
	out := control.VIP{Name: v.Name, Address: v.Addr.String(), Pool: v.Pool, Services: []control.Service{}}
	fwd := resolvers.Forwarding(v.Forwarding)
	for _, k := range vipKeys(v) {
		svc, ok := applied[k]
		if !ok {
			continue
		}
		owner := map[netip.AddrPort]string{}
		if ps != nil {
			for _, m := range ps.Members {
				owner[resolvers.DestAddr(fwd, k.Port, m.Addr)] = m.Name
			}
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
			cd := control.Destination{Resolver: owner[a], Address: a.String(), Forwarding: dst.Forwarding.String(), Weight: dst.Weight}
			if s, ok := stats[k][a]; ok {
				cd.Stats = apiStats(s)
			}
			cs.Destinations = append(cs.Destinations, cd)
		}
		out.Services = append(out.Services, cs)
	}
	return out
}

// vipKeys lists the IPVS services of v.
func vipKeys(v *configs.VIP) []vip.ServiceKey {
	var out []vip.ServiceKey
	for _, proto := range v.Protocols {
		pr := vip.UDP
		if proto == "tcp" {
			pr = vip.TCP
		}
		for _, port := range v.Ports {
			out = append(out, vip.ServiceKey{Addr: v.Addr, Port: uint16(port), Proto: pr})
		}
	}
	return out
}

func poolStatus(cfg *configs.Config, p *configs.Pool, ps *resolvers.PoolStatus, mon map[monitor.Key]monitor.TargetStatus,
	ids map[string]resolvers.Identity, ovs []storedOverride, applied vip.Table, stats map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats) control.Pool {
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
			Fresh: m.Fresh, Override: m.Override.String()}
		cm.InTraffic, cm.Weight = inTraffic(vips, m.Addr, applied)
		if m.State != health.Unknown {
			cm.Since = m.Since.UTC()
		}
		if id, ok := ids[m.Name]; ok {
			cm.Identity, cm.IdentifiedVendor = id.Version, id.Vendor
		}
		if ts, ok := mon[ResolverKey(m.Name, p.Check)]; ok {
			cm.Flaps = ts.Health.Flaps
			if !ts.LastAt.IsZero() {
				cm.LastProbe = ts.LastAt.UTC()
				cm.LastResult = "ok"
				if !ts.Last.OK {
					cm.LastResult = ts.Last.Detail
				}
				cm.RTTMillis = float64(ts.Last.RTT.Microseconds()) / 1000
			}
		}
		if m.Override != resolvers.None {
			for _, o := range ovs {
				if o.VIP == "" && o.rule().Applies(m.Name, p.Name, "") && o.Action == m.Override.String() {
					cm.OverrideReason = o.Reason
					break
				}
			}
		}
		cm.Stats = memberStats(vips, m.Addr, stats)
		out.Members = append(out.Members, cm)
	}
	return out
}

// inTraffic reports whether the resolver at addr has a destination in the
// applied services of vips, and its weight there: the largest when they
// differ (an override scoped to one of the VIPs). The pool's verdict alone
// cannot tell: VIP-scoped overrides act on the table only.
func inTraffic(vips []*configs.VIP, addr netip.AddrPort, applied vip.Table) (bool, uint32) {
	in, w := false, uint32(0)
	for _, v := range vips {
		fwd := resolvers.Forwarding(v.Forwarding)
		for _, k := range vipKeys(v) {
			if d, ok := applied[k].Dests[resolvers.DestAddr(fwd, k.Port, addr)]; ok {
				in, w = true, max(w, d.Weight)
			}
		}
	}
	return in, w
}

// memberStats sums the statistics of the destinations of a resolver at
// addr over the services of vips; nil when none were read.
func memberStats(vips []*configs.VIP, addr netip.AddrPort, stats map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats) *control.DestStats {
	var sum *control.DestStats
	for _, v := range vips {
		fwd := resolvers.Forwarding(v.Forwarding)
		for _, k := range vipKeys(v) {
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

// prefetchView turns the prefetcher's entries into the API's, sorted by
// name, type, resolver and partition.
func prefetchView(entries []prefetch.Status) []control.PrefetchEntry {
	if len(entries) == 0 {
		return nil
	}
	out := make([]control.PrefetchEntry, 0, len(entries))
	for _, e := range entries {
		pe := control.PrefetchEntry{Name: e.Key.Name, Type: dns.TypeToString[e.Key.Type], Resolver: e.Key.Resolver, Partition: e.Key.Partition,
			Mode: e.Mode.String(), TTLSeconds: int(e.LastTTL / time.Second), RemainingSeconds: int(e.Remaining / time.Second),
			LastError: e.LastError, Failures: int(e.Counters.Failures)}
		if !e.LastRefresh.IsZero() {
			pe.LastRefresh = e.LastRefresh.UTC()
		}
		if !e.NextRun.IsZero() {
			pe.NextRun = e.NextRun.UTC()
		}
		switch {
		case !e.Healthy:
			pe.State = "parked"
		case e.ConsecutiveFailures > 0:
			pe.State = "failing"
		case e.LastRefresh.IsZero():
			pe.State = "pending"
		default:
			pe.State = "ok"
		}
		out = append(out, pe)
	}
	slices.SortFunc(out, func(a, b control.PrefetchEntry) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Resolver, b.Resolver), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}
