package configs

import (
	"net/netip"
	"slices"
	"testing"
)

func TestGSLBExample(t *testing.T) {
	cfg, err := Load("gslb.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.VIPs)+len(cfg.Pools)+len(cfg.Resolvers) != 0 {
		t.Errorf("gslb.toml has resolver parts: %d vips, %d pools, %d resolvers", len(cfg.VIPs), len(cfg.Pools), len(cfg.Resolvers))
	}
	ns := cfg.GSLBPool("ns")
	if ns == nil || len(ns.Members) != 2 {
		t.Fatalf("GSLBPool(ns) = %+v", ns)
	}
	if ns.Combine != CombineAll || ns.AtLeast != 0 {
		t.Errorf("ns: combine %q at_least %d, want the default all", ns.Combine, ns.AtLeast)
	}
	east, west := &ns.Members[0], &ns.Members[1]
	if east.Weight != 200 || east.Priority != 0 || east.Addr != netip.MustParseAddr("192.0.2.10") || east.ProbeAddr != east.Addr {
		t.Errorf("ns-east = %+v", east)
	}
	if west.Weight != DefaultGSLBWeight || west.Priority != 1 || west.Addr != netip.MustParseAddr("2001:db8::10") ||
		west.ProbeAddr != netip.MustParseAddr("2001:db8:ffff::10") {
		t.Errorf("ns-west = %+v", west)
	}
	if got := ns.MemberMonitors(west); !slices.Equal(got, []string{"soa", "www"}) {
		t.Errorf("ns-west monitors = %v", got)
	}
	edge := cfg.GSLBPool("edge")
	if edge == nil || edge.Combine != CombineAtLeast || edge.AtLeast != 1 {
		t.Fatalf("GSLBPool(edge) = %+v", edge)
	}
	if got := edge.MemberMonitors(&edge.Members[1]); !slices.Equal(got, []string{"soa"}) {
		t.Errorf("edge-2 monitors = %v, want its own [soa]", got)
	}
	if cfg.GSLBPool("nope") != nil {
		t.Error("GSLBPool(nope) != nil")
	}
}

// TestGSLBOnlyMonitorsOfMembers: a pool without monitors is fine when
// every member has its own, and a dns check may judge a GSLB member.
func TestGSLBOnlyMonitorsOfMembers(t *testing.T) {
	doc := `
[check.c.dns]
qname = "example.com"

[[gslb.pool]]
name = "p"

[[gslb.pool.member]]
name = "m"
address = "192.0.2.1"
monitors = ["c"]
`
	cfg, err := Parse([]byte(doc), "g.toml")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.GSLBPool("p")
	if got := p.MemberMonitors(&p.Members[0]); !slices.Equal(got, []string{"c"}) {
		t.Errorf("monitors = %v", got)
	}
}

// TestGSLBPoolAccessor: GSLBPool finds pools through the index on a loaded
// config and by a scan on one built or changed by hand.
func TestGSLBPoolAccessor(t *testing.T) {
	cfg, err := Load("gslb.toml")
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.GSLB.Pools {
		name := cfg.GSLB.Pools[i].Name
		if p := cfg.GSLBPool(name); p != &cfg.GSLB.Pools[i] {
			t.Errorf("GSLBPool(%q) = %p, want pool %d", name, p, i)
		}
	}
	if p := cfg.GSLBPool("no-such-pool"); p != nil {
		t.Errorf("GSLBPool(no-such-pool) = %+v", p)
	}
	// Changed by hand: the stale index entry is checked, the scan finds it.
	cfg.GSLB.Pools[0].Name, cfg.GSLB.Pools[1].Name = cfg.GSLB.Pools[1].Name, cfg.GSLB.Pools[0].Name
	if p := cfg.GSLBPool(cfg.GSLB.Pools[0].Name); p != &cfg.GSLB.Pools[0] {
		t.Errorf("after a rename GSLBPool found %p, want the renamed pool", p)
	}
	hand := &Config{GSLB: GSLB{Pools: []GSLBPool{{Name: "a"}, {Name: "b"}}}}
	if p := hand.GSLBPool("b"); p == nil || p.Name != "b" {
		t.Errorf("hand-built config: GSLBPool(b) = %+v", p)
	}
}
