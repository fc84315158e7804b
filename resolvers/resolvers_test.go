package resolvers

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/vip"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func boolp(b bool) *bool { return &b }

// testConfig builds a pool "main" of two BIND and two unbound resolvers
// behind VIP 192.0.2.53, with forwarding fwd.
func testConfig(fwd string, failOpen bool, minHealthy int) *configs.Config {
	c := &configs.Config{
		VIPs: []configs.VIP{{
			Name: "v4", Address: "192.0.2.53", Addr: netip.MustParseAddr("192.0.2.53"),
			Ports: []int{53}, Protocols: []string{"udp", "tcp"}, Scheduler: "wrr", Forwarding: fwd, Pool: "main",
		}},
		Pools: []configs.Pool{{
			Name: "main", Members: []string{"bind-1", "bind-2", "unbound-1", "unbound-2"},
			Check: "rec", MinHealthy: minHealthy, RecoverHealthy: max(minHealthy, 2), FailOpen: boolp(failOpen),
		}},
		Checks: map[string]*configs.Check{"rec": {
			Name: "rec", Kind: "dns", Interval: configs.Duration{Duration: time.Second}, Timeout: configs.Duration{Duration: 500 * time.Millisecond},
			Rise: 2, Fall: 3, DNS: &configs.DNSCheck{QName: "probe.example."},
		}},
	}
	for i, r := range []struct{ name, vendor string }{{"bind-1", "bind"}, {"bind-2", "bind"}, {"unbound-1", "unbound"}, {"unbound-2", "unbound"}} {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(10 + i)}), 5353)
		c.Resolvers = append(c.Resolvers, configs.Resolver{Name: r.name, Vendor: r.vendor, Address: ap.String(), AddrPort: ap, Weight: 100 + i})
	}
	return c
}

func facts(states map[string]health.State, since map[string]time.Time) map[TargetKey]Fact {
	out := map[TargetKey]Fact{}
	for n, s := range states {
		at, ok := since[n]
		if !ok {
			at = t0
		}
		out[TargetKey{Resolver: n, Check: "rec"}] = Fact{State: s, Since: at, Fresh: true, Reason: "rcode SERVFAIL"}
	}
	return out
}

func allUp() map[string]health.State {
	return map[string]health.State{"bind-1": health.Up, "bind-2": health.Up, "unbound-1": health.Up, "unbound-2": health.Up}
}

func dests(t *testing.T, p Plan, proto vip.Protocol) map[string]uint32 {
	t.Helper()
	key := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.53"), Port: 53, Proto: proto}
	svc, ok := p.Table[key]
	if !ok {
		t.Fatalf("service %s missing from table %v", key, p.Table)
	}
	out := map[string]uint32{}
	for a, d := range svc.Dests {
		out[a.String()] = d.Weight
	}
	return out
}

func TestCompute(t *testing.T) {
	later := t0.Add(time.Minute)
	tests := []struct {
		name      string
		cfg       *configs.Config
		states    map[string]health.State
		since     map[string]time.Time
		stale     []string
		failing   []string
		overrides []Rule
		diag      Diagnosis
		failOpen  bool
		want      map[string]uint32 // udp destinations -> weight
		healthy   int
		detail    string
	}{
		{
			name: "all up", cfg: testConfig("dr", true, 1), states: allUp(), diag: Healthy, healthy: 4,
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "one box down", cfg: testConfig("dr", true, 1),
			states: map[string]health.State{"bind-1": health.Up, "bind-2": health.Down, "unbound-1": health.Up, "unbound-2": health.Up},
			diag:   Degraded, healthy: 3, detail: "bind-2",
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "nat keeps resolver port", cfg: testConfig("nat", true, 1), states: allUp(), diag: Healthy, healthy: 4,
			want: map[string]uint32{"198.51.100.10:5353": 100, "198.51.100.11:5353": 101, "198.51.100.12:5353": 102, "198.51.100.13:5353": 103},
		},
		{
			name: "start-up: no facts fails open", cfg: testConfig("dr", true, 1), states: map[string]health.State{},
			diag: NoFacts, failOpen: true,
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "vendor-wide failure", cfg: testConfig("dr", true, 1),
			states: map[string]health.State{"bind-1": health.Up, "bind-2": health.Up, "unbound-1": health.Down, "unbound-2": health.Down},
			diag:   VendorWide, healthy: 2, detail: "vendor unbound",
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101},
		},
		{
			name: "all fail at once: upstream, fail open", cfg: testConfig("dr", true, 1),
			states: map[string]health.State{"bind-1": health.Down, "bind-2": health.Down, "unbound-1": health.Down, "unbound-2": health.Down},
			since:  map[string]time.Time{"bind-1": t0, "bind-2": t0.Add(time.Second), "unbound-1": t0.Add(2 * time.Second), "unbound-2": t0.Add(3 * time.Second)},
			diag:   Upstream, failOpen: true, detail: "upstream",
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "first down while all others already failing: upstream, nothing removed", cfg: testConfig("dr", true, 1),
			states:  map[string]health.State{"bind-1": health.Down, "bind-2": health.Up, "unbound-1": health.Up, "unbound-2": health.Up},
			failing: []string{"bind-2", "unbound-1", "unbound-2"},
			diag:    Upstream, failOpen: true, healthy: 3, detail: "at once",
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "one vendor failing together is not upstream", cfg: testConfig("dr", true, 1),
			states:  map[string]health.State{"bind-1": health.Down, "bind-2": health.Up, "unbound-1": health.Up, "unbound-2": health.Up},
			failing: []string{"bind-2"},
			diag:    Degraded, healthy: 3,
			want: map[string]uint32{"198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "all down one by one: below minimum, fail open", cfg: testConfig("dr", true, 1),
			states: map[string]health.State{"bind-1": health.Down, "bind-2": health.Down, "unbound-1": health.Down, "unbound-2": health.Down},
			since:  map[string]time.Time{"bind-1": t0, "bind-2": t0.Add(time.Hour), "unbound-1": t0, "unbound-2": later},
			diag:   BelowMinimum, failOpen: true,
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "fail_open off: nothing left", cfg: testConfig("dr", false, 1),
			states: map[string]health.State{"bind-1": health.Down, "bind-2": health.Down, "unbound-1": health.Down, "unbound-2": health.Down},
			diag:   Upstream, want: map[string]uint32{},
		},
		{
			name: "below min_healthy keeps all enabled", cfg: testConfig("dr", true, 3),
			states: map[string]health.State{"bind-1": health.Up, "bind-2": health.Down, "unbound-1": health.Up, "unbound-2": health.Down},
			since:  map[string]time.Time{"bind-2": t0, "unbound-2": later},
			diag:   BelowMinimum, failOpen: true, healthy: 2,
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "stale facts are not healthy", cfg: testConfig("dr", true, 1), states: allUp(), stale: []string{"bind-1"},
			diag: Healthy, healthy: 3,
			want: map[string]uint32{"198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "drain keeps weight 0, disable removes", cfg: testConfig("dr", true, 1), states: allUp(),
			overrides: []Rule{{Resolver: "bind-1", Override: Drain}, {Resolver: "unbound-2", Override: Disable}},
			diag:      Healthy, healthy: 2,
			want: map[string]uint32{"198.51.100.10:53": 0, "198.51.100.11:53": 101, "198.51.100.12:53": 102},
		},
		{
			name: "disabled member stays out even when failing open", cfg: testConfig("dr", true, 1),
			states:    map[string]health.State{"bind-1": health.Down, "bind-2": health.Down, "unbound-1": health.Down, "unbound-2": health.Down},
			overrides: []Rule{{Resolver: "unbound-2", Override: Disable}},
			diag:      Upstream, failOpen: true,
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101, "198.51.100.12:53": 102},
		},
		{
			name: "rule of another pool does not apply", cfg: testConfig("dr", true, 1), states: allUp(),
			overrides: []Rule{{Resolver: "bind-1", Pool: "other", Override: Disable}},
			diag:      Healthy, healthy: 4,
			want: map[string]uint32{"198.51.100.10:53": 100, "198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "pool-scoped drain and the stronger of two rules", cfg: testConfig("dr", true, 1), states: allUp(),
			overrides: []Rule{{Resolver: "bind-1", Pool: "main", Override: Drain}, {Resolver: "bind-2", Override: Drain}, {Resolver: "bind-2", Pool: "main", Override: Disable}},
			diag:      Healthy, healthy: 2,
			want: map[string]uint32{"198.51.100.10:53": 0, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "VIP-scoped rules change the table, not the pool's counts", cfg: testConfig("dr", true, 1), states: allUp(),
			overrides: []Rule{{Resolver: "bind-1", VIP: "v4", Override: Drain}, {Resolver: "unbound-1", VIP: "v4", Override: Disable}, {Resolver: "bind-2", VIP: "other", Override: Disable}},
			diag:      Healthy, healthy: 4,
			want: map[string]uint32{"198.51.100.10:53": 0, "198.51.100.11:53": 101, "198.51.100.13:53": 103},
		},
		{
			name: "VIP-scoped drain never adds a failing member", cfg: testConfig("dr", true, 1),
			states:    map[string]health.State{"bind-1": health.Down, "bind-2": health.Up, "unbound-1": health.Up, "unbound-2": health.Up},
			overrides: []Rule{{Resolver: "bind-1", VIP: "v4", Override: Drain}},
			diag:      Degraded, healthy: 3,
			want: map[string]uint32{"198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
		{
			name: "drained failing member is removed", cfg: testConfig("dr", true, 1),
			states:    map[string]health.State{"bind-1": health.Down, "bind-2": health.Up, "unbound-1": health.Up, "unbound-2": health.Up},
			overrides: []Rule{{Resolver: "bind-1", Override: Drain}},
			diag:      Degraded, healthy: 3,
			want: map[string]uint32{"198.51.100.11:53": 101, "198.51.100.12:53": 102, "198.51.100.13:53": 103},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := facts(tc.states, tc.since)
			for _, n := range tc.failing {
				x := f[TargetKey{Resolver: n, Check: "rec"}]
				x.Failing = true
				f[TargetKey{Resolver: n, Check: "rec"}] = x
			}
			for _, n := range tc.stale {
				x := f[TargetKey{Resolver: n, Check: "rec"}]
				x.Fresh = false
				f[TargetKey{Resolver: n, Check: "rec"}] = x
			}
			p := Compute(Input{Config: tc.cfg, Facts: f, Overrides: tc.overrides, Now: later})
			if len(p.Pools) != 1 {
				t.Fatalf("pools = %d, want 1", len(p.Pools))
			}
			ps := p.Pools[0]
			if ps.Diagnosis != tc.diag {
				t.Errorf("diagnosis = %s (%s), want %s", ps.Diagnosis, ps.Detail, tc.diag)
			}
			if ps.FailOpen != tc.failOpen {
				t.Errorf("fail-open = %v, want %v", ps.FailOpen, tc.failOpen)
			}
			if ps.Healthy != tc.healthy {
				t.Errorf("healthy = %d, want %d", ps.Healthy, tc.healthy)
			}
			if tc.detail != "" && !strings.Contains(ps.Detail, tc.detail) {
				t.Errorf("detail %q does not mention %q", ps.Detail, tc.detail)
			}
			for _, proto := range []vip.Protocol{vip.UDP, vip.TCP} {
				got := dests(t, p, proto)
				if len(got) != len(tc.want) {
					t.Errorf("%s dests = %v, want %v", proto, got, tc.want)
					continue
				}
				for a, w := range tc.want {
					if gw, ok := got[a]; !ok || gw != w {
						t.Errorf("%s dest %s = %d (present %v), want weight %d", proto, a, gw, ok, w)
					}
				}
			}
		})
	}
}

func TestVendorCounts(t *testing.T) {
	p := Compute(Input{Config: testConfig("dr", true, 1), Now: t0,
		Facts: facts(map[string]health.State{"bind-1": health.Up, "bind-2": health.Down, "unbound-1": health.Up, "unbound-2": health.Up}, nil)})
	v := p.Pools[0].Vendors
	if v["bind"] != (VendorCount{Total: 2, Healthy: 1}) || v["unbound"] != (VendorCount{Total: 2, Healthy: 2}) {
		t.Fatalf("vendor counts = %+v", v)
	}
}

func TestEvents(t *testing.T) {
	cfg := testConfig("dr", true, 1)
	p1 := Compute(Input{Config: cfg, Now: t0, Facts: facts(allUp(), nil)})
	p2 := Compute(Input{Config: cfg, Now: t0, Facts: facts(allUp(), nil)})
	if ev := Events(p1.Pools, p2.Pools, t0); len(ev) != 0 {
		t.Fatalf("no change gave events %v", ev)
	}
	down := map[string]health.State{"bind-1": health.Down, "bind-2": health.Down, "unbound-1": health.Down, "unbound-2": health.Down}
	p3 := Compute(Input{Config: cfg, Now: t0, Facts: facts(down, nil)})
	ev := Events(p2.Pools, p3.Pools, t0)
	if len(ev) != 1 || ev[0].From != Healthy || ev[0].To != Upstream || !ev[0].FailOpen {
		t.Fatalf("events = %+v", ev)
	}
	if s := ev[0].String(); !strings.Contains(s, "FAIL-OPEN") || !strings.Contains(s, "upstream") {
		t.Errorf("event text %q should be loud about fail-open and upstream", s)
	}
	if ev := Events(nil, p1.Pools, t0); len(ev) != 1 || ev[0].From != NoFacts {
		t.Fatalf("first plan events = %+v", ev)
	}
}

func TestV6Service(t *testing.T) {
	cfg := testConfig("dr", true, 1)
	cfg.VIPs[0].Addr = netip.MustParseAddr("2001:db8::53")
	for i := range cfg.Resolvers {
		cfg.Resolvers[i].AddrPort = netip.AddrPortFrom(netip.MustParseAddr("2001:db8::10").Next(), 53)
	}
	cfg.Resolvers[1].AddrPort = netip.MustParseAddrPort("[2001:db8::12]:53")
	p := Compute(Input{Config: cfg, Now: t0, Facts: facts(allUp(), nil)})
	key := vip.ServiceKey{Addr: netip.MustParseAddr("2001:db8::53"), Port: 53, Proto: vip.TCP}
	if _, ok := p.Table[key]; !ok {
		t.Fatalf("v6 service %s missing: %v", key, p.Table)
	}
}

func TestRecoveryHysteresis(t *testing.T) {
	cfg := testConfig("dr", true, 1) // recover_healthy 2 of 4
	down := map[string]health.State{"bind-1": health.Down, "bind-2": health.Down, "unbound-1": health.Down, "unbound-2": health.Down}
	p := Compute(Input{Config: cfg, Now: t0, Facts: facts(down, nil)})
	mem := remember(nil, p.Pools, t0)
	if !p.Pools[0].FailOpen {
		t.Fatal("all down: not failing open")
	}
	steps := []struct {
		up        []string
		failOpen  bool
		inTraffic int
	}{
		{up: []string{"bind-1"}, failOpen: true, inTraffic: 4},               // one back: hold fail-open
		{up: []string{"bind-1", "unbound-1"}, failOpen: false, inTraffic: 2}, // recover_healthy reached
		{up: []string{"bind-1"}, failOpen: false, inTraffic: 1},              // above min_healthy: no fail-open again
	}
	for i, st := range steps {
		states := map[string]health.State{}
		for n := range down {
			states[n] = health.Down
		}
		for _, n := range st.up {
			states[n] = health.Up
		}
		p = Compute(Input{Config: cfg, Now: t0, Facts: facts(states, nil), Memory: mem})
		mem = remember(mem, p.Pools, t0)
		ps := p.Pools[0]
		n := 0
		for _, m := range ps.Members {
			if m.InTraffic {
				n++
			}
		}
		if ps.FailOpen != st.failOpen || n != st.inTraffic {
			t.Errorf("step %d (%v up): fail-open %v, %d in traffic; want %v, %d (%s)", i, st.up, ps.FailOpen, n, st.failOpen, st.inTraffic, ps.Detail)
		}
	}
}
