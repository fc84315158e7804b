package configs

import (
	"net/netip"
	"slices"
	"testing"
)

// TestGSLBSelectionDefaults: the selection keys decode with their
// defaults and canonical names.
func TestGSLBSelectionDefaults(t *testing.T) {
	cfg, err := Load("testdata/gslb-names.toml")
	if err != nil {
		t.Fatal(err)
	}
	g := &cfg.GSLB
	if g.MaxRecords != DefaultMaxRecords || !slices.Equal(g.PolicyOrder, DefaultPolicyOrder()) {
		t.Errorf("max_records %d, policy_order %v: want the defaults", g.MaxRecords, g.PolicyOrder)
	}
	if g.WhoamiFQDN() != "whoami.gslb.example.com." {
		t.Errorf("WhoamiFQDN = %q", g.WhoamiFQDN())
	}
	north, south, backup := cfg.GSLBPool("north"), cfg.GSLBPool("south"), cfg.GSLBPool("backup")
	if north.Algorithm != AlgorithmWRR || north.Fallback != "south" || north.MaxRecords != DefaultMaxRecords {
		t.Errorf("north = %+v", north.GSLBPoolSelection)
	}
	if south.Algorithm != AlgorithmAll || south.MaxRecords != 2 || backup.Algorithm != AlgorithmRR || backup.Fallback != "" {
		t.Errorf("south = %+v, backup = %+v", south.GSLBPoolSelection, backup.GSLBPoolSelection)
	}
	z := g.Zones[0]
	if z.Apex != "gslb.example.com." || z.Mbox != "hostmaster.GSLB.example.com." || z.TTL != 600 ||
		z.Refresh != DefaultSOARefresh || z.Retry != DefaultSOARetry || z.Expire != DefaultSOAExpire || z.Minimum != DefaultSOAMinimum {
		t.Errorf("zone = %+v", z)
	}
	wantRecs := []struct {
		owner, typ string
		ttl        int
	}{{"gslb.example.com.", "MX", 600}, {"www.gslb.example.com.", "CNAME", 60}, {"app.gslb.example.com.", "TXT", 600}}
	for i, w := range wantRecs {
		r := z.Records[i]
		if r.Owner != w.owner || r.Type != w.typ || r.TTL != w.ttl {
			t.Errorf("record[%d] = %+v, want %+v", i, r, w)
		}
	}
	app, st := g.Names[0], g.Names[1]
	if app.FQDN != "app.gslb.example.com." || app.TTL != DefaultNameTTL || !app.ECS || app.LastResort != LastResortFailOpen {
		t.Errorf("app = %+v", app)
	}
	if st.FQDN != "static.gslb.example.com." || st.TTL != 5 || st.ECS || st.LastResort != LastResortStatic ||
		!slices.Equal(st.StaticAddrs, []netip.Addr{netip.MustParseAddr("192.0.2.99"), netip.MustParseAddr("2001:db8::99")}) {
		t.Errorf("static = %+v", st)
	}
	ranks := g.PolicyRanks()
	if PolicyKey(app.Policies[0].Match) != "carrier+province" || ranks["carrier+province"] != 0 || ranks[PolicyGlobal] != 6 ||
		PolicyKey(nil) != PolicyGlobal {
		t.Errorf("ranks = %v, key = %q", ranks, PolicyKey(app.Policies[0].Match))
	}
}

// TestGSLBFallbackLoops: every loop is reported once, naming its chain,
// and a chain into a loop is not itself a loop.
func TestGSLBFallbackLoops(t *testing.T) {
	doc := `
[check.c.dns]
qname = "example.com"
` + pool("a", "b") + pool("b", "c") + pool("c", "a") + pool("d", "a") + pool("e", "e")
	_, err := Parse([]byte(doc), "g.toml")
	var got []string
	for _, p := range Problems(err) {
		got = append(got, p.Key+": "+p.Msg)
	}
	want := []string{"gslb.pool[0].fallback: fallback loop: a → b → c → a", "gslb.pool[4].fallback: fallback loop: e → e"}
	if !slices.Equal(got, want) {
		t.Errorf("problems = %q, want %q", got, want)
	}
}

func pool(name, fallback string) string {
	return `
[[gslb.pool]]
name = "` + name + `"
monitors = ["c"]
fallback = "` + fallback + `"
[[gslb.pool.member]]
name = "m"
address = "192.0.2.1"
`
}

// TestGSLBServices: a name with a service takes the service's answer
// keys (its ttl unless it sets one) and its policies through
// NamePolicies; a name without keeps its own.
func TestGSLBServices(t *testing.T) {
	doc := `
[check.web]
kind = "tcp"
[check.web.tcp]
port = 80

[[gslb.pool]]
name = "www"
monitors = ["web"]
[[gslb.pool.member]]
name = "a"
address = "192.0.2.1"

[[gslb.zone]]
name = "gslb.example.com"
ns = ["ns1.example.com."]

[[gslb.service]]
name = "geo"
ecs = true
last_resort = "static"
static = ["192.0.2.9"]
[[gslb.service.policy]]
match = { carrier = "cmcc" }
pool = "www"
[[gslb.service.policy]]
pool = "www"

[[gslb.service]]
name = "plain"
ttl = 7
names = ["e.gslb.example.com", "F.gslb.example.com."]
[[gslb.service.policy]]
pool = "www"

[[gslb.name]]
name = "a.gslb.example.com"
service = "geo"

[[gslb.name]]
name = "b.gslb.example.com"
service = "plain"
ttl = 90

[[gslb.name]]
name = "c.gslb.example.com"
service = "plain"

[[gslb.name]]
name = "d.gslb.example.com"
[[gslb.name.policy]]
pool = "www"
`
	cfg, err := Parse([]byte(doc), "services.toml")
	if err != nil {
		t.Fatal(err)
	}
	g := &cfg.GSLB
	geo, plain := cfg.Service("geo"), cfg.Service("plain")
	if geo == nil || plain == nil || cfg.Service("nope") != nil {
		t.Fatalf("Service: geo %v, plain %v", geo, plain)
	}
	if geo.TTL != DefaultNameTTL || !geo.ECS || geo.LastResort != LastResortStatic || !slices.Equal(geo.StaticAddrs, []netip.Addr{netip.MustParseAddr("192.0.2.9")}) {
		t.Errorf("geo = %+v", geo)
	}
	if plain.TTL != 7 || plain.ECS || plain.LastResort != LastResortFailOpen {
		t.Errorf("plain = %+v", plain)
	}
	a, b, c, d := &g.Names[0], &g.Names[1], &g.Names[2], &g.Names[3]
	if a.TTL != DefaultNameTTL || !a.ECS || a.LastResort != LastResortStatic || !slices.Equal(a.StaticAddrs, geo.StaticAddrs) || a.Policies != nil {
		t.Errorf("a = %+v", a)
	}
	if b.TTL != 90 || c.TTL != 7 || b.ECS || c.LastResort != LastResortFailOpen {
		t.Errorf("b = %+v, c = %+v", b, c)
	}
	if p := cfg.NamePolicies(a); len(p) != 2 || &p[0] != &geo.Policies[0] {
		t.Errorf("NamePolicies(a) = %v: want the service's own slice", p)
	}
	if p := cfg.NamePolicies(d); len(p) != 1 || &p[0] != &d.Policies[0] {
		t.Errorf("NamePolicies(d) = %v", p)
	}
	// The service's names list: appended to Names after the tables.
	if len(g.Names) != 6 {
		t.Fatalf("%d names, want 4 tables and 2 listed", len(g.Names))
	}
	for i, fq := range []string{"e.gslb.example.com.", "f.gslb.example.com."} {
		n := &g.Names[4+i]
		if n.FQDN != fq || n.Service != "plain" || n.TTL != 7 || n.LastResort != LastResortFailOpen || n.Policies != nil || len(cfg.NamePolicies(n)) != 1 {
			t.Errorf("listed name %d = %+v", i, n)
		}
	}
}
