package e2e

import (
	"slices"
	"strings"
	"testing"
)

// TestStatusShowsEveryBackEnd: after start, lbctl status has a row per
// back end, each up, and -o json is the version 1 schema with the pools,
// members and VIPs of the configuration.
func TestStatusShowsEveryBackEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t, twoPools())
	w.startReady()

	r := w.mustLbctl("status")
	if !strings.Contains(r.stdout, "DRY RUN") || !strings.Contains(r.stdout, "config "+w.cfgPath) {
		t.Errorf("status lacks the DRY RUN line or the config path:\n%s", r.stdout)
	}
	rows := tableRows(t, r.stdout, memberColumns...)
	if len(rows) != len(w.layout.resolvers) {
		t.Errorf("%d member rows, want %d:\n%s", len(rows), len(w.layout.resolvers), r.stdout)
	}
	for _, res := range w.layout.resolvers {
		row := rowOf(t, rows, "RESOLVER", res.name)
		// LAST is "ok" or, on a loaded machine, a single timeout (the
		// 100ms timeout is tight; one failure does not take a member down).
		if row["STATE"] != "up" || row["ADDRESS"] != w.addr(res.name) || row["VENDOR"] != res.vendor ||
			row["LAST"] == "-" || row["RTT"] == "-" || row["OVERRIDE"] != "-" || row["WEIGHT"] != itoa(res.weight) {
			t.Errorf("row of %s: %v", res.name, row)
		}
	}
	vips := tableRows(t, r.stdout, "NAME", "ADDRESS", "POOL", "SERVICES", "SERVING")
	for _, p := range w.layout.pools {
		if v := rowOf(t, vips, "NAME", p.vip); v["ADDRESS"] != p.vipAddr || v["POOL"] != p.name || v["SERVICES"] != "udp/53 tcp/53" {
			t.Errorf("VIP row %v", v)
		}
	}

	st := w.statusJSON()
	if st.Version != 1 {
		t.Errorf("version %d, want 1", st.Version)
	}
	if !st.Daemon.DryRun || !st.Daemon.Warm || st.Daemon.Config != w.cfgPath || st.Daemon.LastReloadError != "" {
		t.Errorf("daemon %+v", st.Daemon)
	}
	if len(st.Overrides) != 0 {
		t.Errorf("overrides %+v, want none", st.Overrides)
	}
	if len(st.Pools) != len(w.layout.pools) || len(st.VIPs) != len(w.layout.pools) {
		t.Fatalf("%d pools and %d VIPs, want %d each", len(st.Pools), len(st.VIPs), len(w.layout.pools))
	}
	for i, p := range w.layout.pools {
		sp := st.Pools[i]
		if sp.Name != p.name || sp.Check != "rec" || !slices.Equal(sp.VIPs, []string{p.vip}) ||
			sp.Total != len(p.members) || sp.Enabled != len(p.members) || sp.Healthy != len(p.members) ||
			sp.FailOpen || sp.Diagnosis != "healthy" {
			t.Errorf("pool %d: %+v", i, sp)
		}
		var names []string
		for _, m := range sp.Members {
			names = append(names, m.Resolver)
			res := w.layout.resolver(m.Resolver)
			if m.Address != w.addr(m.Resolver) || m.Vendor != res.vendor || m.State != "up" || !m.Fresh ||
				m.Since.IsZero() || m.LastResult == "" || m.LastProbe.IsZero() || m.Override != "none" || !m.InTraffic || m.Weight != uint32(res.weight) {
				t.Errorf("pool %s member %+v", sp.Name, m)
			}
		}
		if !slices.Equal(names, p.members) {
			t.Errorf("pool %s members %v, want %v", sp.Name, names, p.members)
		}

		v := st.VIPs[i]
		if v.Name != p.vip || v.Address != p.vipAddr || v.Pool != p.name || len(v.Services) != 2 {
			t.Fatalf("VIP %d: %+v", i, v)
		}
		for _, s := range v.Services {
			if s.Address != p.vipAddr+":53" || s.Scheduler != "wrr" || (s.Proto != "udp" && s.Proto != "tcp") {
				t.Errorf("VIP %s service %+v", v.Name, s)
			}
			var dests []string
			for _, d := range s.Destinations {
				dests = append(dests, d.Resolver)
				if d.Address != w.addr(d.Resolver) || d.Forwarding != "nat" || d.Weight != uint32(w.layout.resolver(d.Resolver).weight) || d.Stats != nil {
					t.Errorf("VIP %s %s destination %+v", v.Name, s.Proto, d)
				}
			}
			slices.Sort(dests)
			if !slices.Equal(dests, p.members) {
				t.Errorf("VIP %s %s destinations of %v, want %v", v.Name, s.Proto, dests, p.members)
			}
		}
	}
}
