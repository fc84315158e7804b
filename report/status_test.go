package report

import (
	"encoding/json"
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/health"
	"lbdns/internal/buildinfo"
	"lbdns/monitor"
	"lbdns/monitor/identify"
	"lbdns/probes"
	"lbdns/resolvers"
	"lbdns/vip"
)

// testConfig has one pool of four resolvers behind two VIPs: v1 by direct
// routing on port 53, v2 by NAT on port 5353 (to the resolvers' port 53).
const testConfig = `
[[vip]]
name = "v1"
address = "192.0.2.1"
pool = "p"
forwarding = "dr"

[[vip]]
name = "v2"
address = "192.0.2.2"
pool = "p"
forwarding = "nat"
ports = [5353]
protocols = ["udp"]

[[pool]]
name = "p"
members = ["a", "b", "c", "d"]
check = "rec"

[[resolver]]
name = "a"
address = "198.51.100.1:53"
vendor = "bind"

[[resolver]]
name = "b"
address = "198.51.100.2:53"
vendor = "unbound"

[[resolver]]
name = "c"
address = "198.51.100.3:53"
vendor = "bind"

[[resolver]]
name = "d"
address = "198.51.100.4:53"
vendor = "unbound"

[check.rec]

[check.rec.dns]
zone = "probe.example.net"
`

var (
	t0   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	addr = map[string]netip.AddrPort{
		"a": netip.MustParseAddrPort("198.51.100.1:53"),
		"b": netip.MustParseAddrPort("198.51.100.2:53"),
		"c": netip.MustParseAddrPort("198.51.100.3:53"),
		"d": netip.MustParseAddrPort("198.51.100.4:53"),
	}
	v1UDP = vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Proto: vip.UDP}
	v1TCP = vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Proto: vip.TCP}
	v2UDP = vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.2"), Port: 5353, Proto: vip.UDP}
)

// drAddr is the destination of resolver r in v1 (direct routing: the
// service's port).
func drAddr(r string) netip.AddrPort { return netip.AddrPortFrom(addr[r].Addr(), 53) }

// testInput is the state of testConfig in which a is up, b is up and
// drained on v2 only (a VIP-scoped override: the pool verdict does not
// show it), c is up and disabled pool-wide, and d is down. An override of
// a resolver that left the configuration is kept, orphaned.
func testInput(t *testing.T) Input {
	t.Helper()
	cfg, err := configs.Parse([]byte(testConfig), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	fact := func(st health.State) resolvers.Fact {
		return resolvers.Fact{State: st, Fresh: true, Since: t0.Add(-time.Hour)}
	}
	plan := resolvers.Compute(resolvers.Input{Config: cfg, Now: t0,
		Facts: map[resolvers.TargetKey]resolvers.Fact{
			{Resolver: "a", Check: "rec"}: fact(health.Up),
			{Resolver: "b", Check: "rec"}: fact(health.Up),
			{Resolver: "c", Check: "rec"}: fact(health.Up),
			{Resolver: "d", Check: "rec"}: fact(health.Down),
		},
		Overrides: []resolvers.Rule{
			{Resolver: "b", VIP: "v2", Override: resolvers.Drain},
			{Resolver: "c", Pool: "p", Override: resolvers.Disable},
		},
	})
	dest := func(a netip.AddrPort, fwd vip.Forwarding, w uint32) map[netip.AddrPort]vip.Destination {
		return map[netip.AddrPort]vip.Destination{a: {Addr: a, Forwarding: fwd, Weight: w}}
	}
	svc := func(k vip.ServiceKey, ds ...map[netip.AddrPort]vip.Destination) vip.Service {
		s := vip.Service{Key: k, Scheduler: "wrr", Dests: map[netip.AddrPort]vip.Destination{}}
		for _, d := range ds {
			for a, x := range d {
				s.Dests[a] = x
			}
		}
		return s
	}
	applied := vip.Table{
		v1UDP: svc(v1UDP, dest(drAddr("a"), vip.DirectRoute, 1), dest(drAddr("b"), vip.DirectRoute, 1)),
		v1TCP: svc(v1TCP, dest(drAddr("a"), vip.DirectRoute, 1), dest(drAddr("b"), vip.DirectRoute, 1)),
		v2UDP: svc(v2UDP, dest(addr["a"], vip.NAT, 1), dest(addr["b"], vip.NAT, 0)),
	}
	stats := Stats{
		v1UDP: {drAddr("b"): {Conns: 10, PacketsIn: 100, BytesIn: 1000, ActiveConns: 1, CPS: 2}},
		v1TCP: {drAddr("b"): {Conns: 5, PacketsIn: 50, BytesIn: 500, ActiveConns: 2, CPS: 1}},
		v2UDP: {addr["b"]: {Conns: 1, PacketsIn: 2, BytesIn: 3, InactiveConns: 7}},
	}
	targets := map[string]monitor.TargetStatus{
		resolvers.TargetKey{Resolver: "a", Check: "rec"}.String(): {Health: health.Status{Flaps: 3},
			LastAt: t0.Add(-time.Second), Last: probes.Result{OK: true, RTT: 1500 * time.Microsecond}},
		resolvers.TargetKey{Resolver: "d", Check: "rec"}.String(): {LastAt: t0.Add(-time.Second), Last: probes.Result{Detail: "timeout", RTT: time.Second}},
	}
	return Input{
		Now: t0, Config: cfg, Plan: plan, Applied: applied, Stats: stats,
		Target: func(r, c string) (monitor.TargetStatus, bool) {
			ts, ok := targets[resolvers.TargetKey{Resolver: r, Check: c}.String()]
			return ts, ok
		},
		Identities: map[string]identify.Identity{"a": {Version: "9.18.28-1~deb12u2-Debian", Vendor: "bind"}},
		Overrides: []control.Override{
			{Resolver: "b", VIP: "v2", Action: control.ActionDrain, Reason: "b on v2 only", Set: t0},
			{Resolver: "c", Action: control.ActionDrain, Reason: "wrong action"},
			{Resolver: "c", Pool: "p", Action: control.ActionDisable, Reason: "ticket 42", Set: t0},
			{Resolver: "gone", Action: control.ActionDisable, Reason: "old", Orphaned: true},
		},
		IPVS:   vip.ReconcilerStats{OpsApplied: 7, OpErrors: 2, OpsFailed: 1, Dumps: 4},
		Daemon: Daemon{ConfigPath: "/etc/lbdns.toml", Started: t0.Add(-time.Hour), Warm: true, LastReload: t0.Add(-time.Minute)},
	}
}

func TestStatusMembers(t *testing.T) {
	st := Status(testInput(t))
	if len(st.Pools) != 1 || len(st.Pools[0].Members) != 4 {
		t.Fatalf("pools: %+v", st.Pools)
	}
	p := st.Pools[0]
	if p.Check != "rec" || len(p.VIPs) != 2 || p.VIPs[0] != "v1" || p.VIPs[1] != "v2" || p.Diagnosis != "degraded" ||
		p.Healthy != 2 || p.Enabled != 3 || p.Total != 4 || p.FailOpen {
		t.Errorf("pool: %+v", p)
	}
	if len(p.Vendors) != 2 || p.Vendors[0].Vendor != "bind" || p.Vendors[1] != (control.VendorCount{Vendor: "unbound", Total: 2, Healthy: 1}) {
		t.Errorf("vendors not sorted by name: %+v", p.Vendors)
	}
	tests := []struct {
		resolver  string
		inTraffic bool
		weight    uint32
		override  string
		reason    string
	}{
		{resolver: "a", inTraffic: true, weight: 1, override: "none"},
		// drained on v2 only: in traffic with its largest weight.
		{resolver: "b", inTraffic: true, weight: 1, override: "none"},
		// a pool-wide disable: the reason of the override whose action
		// matches, not of another one of c.
		{resolver: "c", override: "disable", reason: "ticket 42"},
		{resolver: "d", override: "none"},
	}
	for i, tt := range tests {
		t.Run(tt.resolver, func(t *testing.T) {
			m := p.Members[i]
			if m.Resolver != tt.resolver || m.InTraffic != tt.inTraffic || m.Weight != tt.weight ||
				m.Override != tt.override || m.OverrideReason != tt.reason {
				t.Errorf("got %s in traffic %v weight %d override %q (%q); want %s %v %d %q (%q)", m.Resolver, m.InTraffic, m.Weight,
					m.Override, m.OverrideReason, tt.resolver, tt.inTraffic, tt.weight, tt.override, tt.reason)
			}
			if m.Address != addr[tt.resolver].String() || m.Since != t0.Add(-time.Hour).UTC() || m.Since.Location() != time.UTC {
				t.Errorf("address %s since %v", m.Address, m.Since)
			}
		})
	}
	t.Run("probe facts", func(t *testing.T) {
		a, d := p.Members[0], p.Members[3]
		if a.Identity == "" || a.IdentifiedVendor != "bind" || a.Flaps != 3 || a.LastResult != "ok" || a.RTTMillis != 1.5 ||
			a.LastProbe != t0.Add(-time.Second).UTC() {
			t.Errorf("a: %+v", a)
		}
		if d.LastResult != "timeout" || d.RTTMillis != 1000 {
			t.Errorf("d: %+v", d)
		}
		if b := p.Members[1]; b.Identity != "" || !b.LastProbe.IsZero() || b.LastResult != "" {
			t.Errorf("b has probe facts without a target: %+v", b)
		}
	})
}

func TestStatusUnknownMemberHasNoSince(t *testing.T) {
	in := testInput(t)
	in.Plan.Pools[0].Members[3].State = health.Unknown
	in.Target = nil
	st := Status(in)
	if m := st.Pools[0].Members[3]; !m.Since.IsZero() || m.State != "unknown" {
		t.Errorf("unknown member: %+v", m)
	}
}

func TestStatusStats(t *testing.T) {
	st := Status(testInput(t))
	b := st.Pools[0].Members[1]
	want := control.DestStats{Conns: 16, PacketsIn: 152, BytesIn: 1503, ActiveConns: 3, InactiveConns: 7, CPS: 3}
	if b.Stats == nil || *b.Stats != want {
		t.Errorf("b's stats summed over v1 udp, v1 tcp and v2 udp: %+v, want %+v", b.Stats, want)
	}
	if a := st.Pools[0].Members[0]; a.Stats != nil {
		t.Errorf("a has stats although none were read: %+v", a.Stats)
	}
	t.Run("destinations", func(t *testing.T) {
		if len(st.VIPs) != 2 || len(st.VIPs[0].Services) != 2 || len(st.VIPs[1].Services) != 1 {
			t.Fatalf("vips: %+v", st.VIPs)
		}
		v2 := st.VIPs[1].Services[0]
		if v2.Proto != "udp" || v2.Address != "192.0.2.2:5353" || v2.Scheduler != "wrr" || len(v2.Destinations) != 2 {
			t.Fatalf("v2 service: %+v", v2)
		}
		a, b := v2.Destinations[0], v2.Destinations[1]
		if a.Resolver != "a" || a.Address != "198.51.100.1:53" || a.Stats != nil || a.Forwarding != "nat" {
			t.Errorf("v2 destination a: %+v", a)
		}
		if b.Resolver != "b" || b.Weight != 0 || b.Stats == nil || b.Stats.InactiveConns != 7 {
			t.Errorf("v2 destination b (drained on v2): %+v", b)
		}
		if d := st.VIPs[0].Services[0].Destinations[1]; d.Resolver != "b" || d.Address != "198.51.100.2:53" || d.Stats == nil || d.Stats.Conns != 10 {
			t.Errorf("v1 destination b (direct routing: port 53): %+v", d)
		}
	})
	t.Run("no stats", func(t *testing.T) {
		in := testInput(t)
		in.Stats = nil
		for _, m := range Status(in).Pools[0].Members {
			if m.Stats != nil {
				t.Errorf("%s: stats %+v without a read", m.Resolver, m.Stats)
			}
		}
	})
}

func TestStatusDaemonAndOverrides(t *testing.T) {
	st := Status(testInput(t))
	want := control.Daemon{Config: "/etc/lbdns.toml", Started: t0.Add(-time.Hour).UTC(), Warm: true,
		LastReload: t0.Add(-time.Minute).UTC(), IPVSOps: 7, IPVSErrors: 2, Version: buildinfo.Version()}
	if st.Daemon != want || st.Version != control.StatusVersion || st.Generated != t0.UTC() || st.Generated.Location() != time.UTC {
		t.Errorf("daemon: %+v (generated %v)", st.Daemon, st.Generated)
	}
	if len(st.Overrides) != 4 || !st.Overrides[3].Orphaned || st.Overrides[3].Resolver != "gone" || st.Overrides[0].Orphaned {
		t.Errorf("overrides, orphaned one flagged: %+v", st.Overrides)
	}
	t.Run("empty lists are not null", func(t *testing.T) {
		in := testInput(t)
		in.Overrides, in.Plan, in.Applied = nil, resolvers.Plan{}, nil
		st := Status(in)
		if st.Overrides == nil || st.Pools == nil || len(st.VIPs) != 2 || st.VIPs[0].Services == nil || st.Prefetch != nil {
			t.Errorf("empty status: %+v", st)
		}
	})
}

// TestStatusGSLBResponder: the responder's state is in the status as
// given, and absent from the JSON when none runs.
func TestStatusGSLBResponder(t *testing.T) {
	in := testInput(t)
	if st := Status(in); st.GSLBResponder != nil {
		t.Errorf("no responder: %+v", st.GSLBResponder)
	} else if b, err := json.Marshal(st); err != nil || strings.Contains(string(b), "gslb_responder") {
		t.Errorf("no responder: JSON %s (%v), want no gslb_responder", b, err)
	}
	in.GSLBResponder = &control.GSLBResponder{On: true, Listen: []string{"127.0.0.1:53"}, Serial: 7, Zones: []string{"g.test."},
		LastResort: []control.GSLBLastResort{{Name: "www.g.test.", Type: "A", LastResort: "fail-open"}},
		Listeners:  []control.GSLBListener{{Listen: "127.0.0.1:53", Serving: true, Reason: "answering"}}}
	st := Status(in)
	if st.GSLBResponder != in.GSLBResponder {
		t.Errorf("responder %+v, want %+v", st.GSLBResponder, in.GSLBResponder)
	}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"gslb_responder":{"on":true,"listen":["127.0.0.1:53"],"serial":7,"zones":["g.test."],"last_resort":[{"name":"www.g.test.","type":"A","last_resort":"fail-open"}],"listeners":[{"listen":"127.0.0.1:53","serving":true,"reason":"answering"}]}`) {
		t.Errorf("responder JSON %s (%v)", b, err)
	}
}

func TestStatusWhy(t *testing.T) {
	t.Run("codes match control's", func(t *testing.T) {
		for code, want := range map[resolvers.WhyCode]string{
			resolvers.WhyHealthy: control.WhyHealthy, resolvers.WhyNoVerdict: control.WhyNoVerdict, resolvers.WhyDown: control.WhyDown,
			resolvers.WhyStale: control.WhyStale, resolvers.WhyDrained: control.WhyDrained, resolvers.WhyDisabled: control.WhyDisabled,
			resolvers.WhyHeldFailOpen: control.WhyHeldFailOpen, resolvers.WhyOutFailOpen: control.WhyOutFailOpen,
			resolvers.WhyFailOpenAll: control.WhyFailOpenAll,
		} {
			if code.String() != want {
				t.Errorf("resolvers code %d is %q, control says %q", code, code, want)
			}
		}
	})
	t.Run("from the plan", func(t *testing.T) {
		st := Status(testInput(t))
		for i, want := range []string{control.WhyHealthy, control.WhyHealthy, control.WhyDisabled, control.WhyDown} {
			m := st.Pools[0].Members[i]
			if m.Why != want || m.WhyText == "" {
				t.Errorf("%s: why %q (%q), want %q with a text", m.Resolver, m.Why, m.WhyText, want)
			}
		}
	})
	t.Run("fail-open to the last good set", func(t *testing.T) {
		// a and b were the last good set; b and d are down now (d already
		// was), c is up but disabled: the pool fails open, holds a and b,
		// keeps d out.
		in := testInput(t)
		down := resolvers.Fact{State: health.Down, Fresh: true, Since: t0.Add(-time.Minute), Reason: "timeout"}
		in.Plan = resolvers.Compute(resolvers.Input{Config: in.Config, Now: t0,
			Facts: map[resolvers.TargetKey]resolvers.Fact{
				{Resolver: "a", Check: "rec"}: down,
				{Resolver: "b", Check: "rec"}: down,
				{Resolver: "c", Check: "rec"}: {State: health.Up, Fresh: true, Since: t0.Add(-time.Hour)},
				{Resolver: "d", Check: "rec"}: {State: health.Down, Fresh: true, Since: t0.Add(-time.Hour), Reason: "wrong question"},
			},
			Overrides: []resolvers.Rule{{Resolver: "c", Pool: "p", Override: resolvers.Disable}},
			Memory:    map[string]resolvers.Memory{"p": {LastGood: []string{"a", "b"}}},
		})
		p := Status(in).Pools[0]
		if !p.FailOpen {
			t.Fatalf("pool does not fail open: %+v", p)
		}
		for i, want := range []string{control.WhyHeldFailOpen, control.WhyHeldFailOpen, control.WhyDisabled, control.WhyOutFailOpen} {
			if m := p.Members[i]; m.Why != want {
				t.Errorf("%s: why %q (%q), want %q", m.Resolver, m.Why, m.WhyText, want)
			}
		}
		if m := p.Members[3]; !strings.Contains(m.WhyText, "wrong question") {
			t.Errorf("d's reason text lacks its failure: %q", m.WhyText)
		}
	})
}

func TestStatusDestinationOwners(t *testing.T) {
	in := testInput(t)
	// A destination the daemon does not manage, and d (out of traffic)
	// put in by hand: the plan names d, not the stranger.
	stranger := netip.MustParseAddrPort("203.0.113.9:53")
	svc := in.Applied[v1UDP]
	svc.Dests[stranger] = vip.Destination{Addr: stranger, Forwarding: vip.DirectRoute, Weight: 1}
	svc.Dests[drAddr("d")] = vip.Destination{Addr: drAddr("d"), Forwarding: vip.DirectRoute, Weight: 1}
	st := Status(in)
	got := map[string]string{}
	for _, d := range st.VIPs[0].Services[0].Destinations {
		got[d.Address] = d.Resolver
	}
	want := map[string]string{"198.51.100.1:53": "a", "198.51.100.2:53": "b", "198.51.100.4:53": "d", "203.0.113.9:53": ""}
	if !maps.Equal(got, want) {
		t.Errorf("v1 udp owners %v, want %v", got, want)
	}
	// v2 forwards by NAT to port 53 of the resolvers on the service's port
	// 5353: the plan knows the translated address.
	for _, d := range st.VIPs[1].Services[0].Destinations {
		if d.Resolver == "" {
			t.Errorf("v2 destination %s has no owner", d.Address)
		}
	}
}
