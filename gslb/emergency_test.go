package gslb

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"lbdns/health"
	"lbdns/intent"
)

// countingLocator counts its calls: an emergency answer makes none.
type countingLocator struct {
	n   *atomic.Int64
	loc Locator
}

func (c countingLocator) Locate(a netip.Addr) Location {
	c.n.Add(1)
	return c.loc.Locate(a)
}

// offSnap builds the test snapshot (dead pool down) under st.
func offSnap(t testing.TB, st intent.State) (*Snapshot, *atomic.Int64) {
	t.Helper()
	cfg := parse(t, snapDoc())
	n := new(atomic.Int64)
	return NewSnapshot(cfg, states(cfg, map[string]health.State{"dead/*": health.Down}), countingLocator{n, testLocator}, 42, WithIntent(st)), n
}

func TestEmergencyAnswersStaticScopeZero(t *testing.T) {
	st := intent.State{Emergencies: []intent.Emergency{
		{Name: "geo.g.example.com.", Mode: intent.ModeStatic},
		{Name: "st.g.example.com.", Mode: intent.ModeStatic},
		{Name: "fo.g.example.com.", Mode: intent.ModeStatic},
	}}
	s, located := offSnap(t, st)

	// geo (ecs, policies on the location): every member of its pools
	// whatever its health or the client's location, capped, scope 0.
	every := []string{"192.0.2.41", "192.0.2.42", "192.0.2.43", "192.0.2.44", "192.0.2.45", "198.51.100.11", "198.51.100.12", "198.51.100.13",
		"198.51.100.1", "192.0.2.1", "192.0.2.2", "192.0.2.3"}
	seen := map[string]bool{}
	for range 12 {
		r := ask(s, "geo.g.example.com.", dns.TypeA, "10.1.2.0/24")
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 3 || r.Scope != 0 || r.Policy != PolicyEmergency || r.Pool != "" || r.LastResort != "" {
			t.Fatalf("geo off: rcode %d answers %v scope %d policy %q pool %q last resort %q", r.Rcode, addrs(r), r.Scope, r.Policy, r.Pool, r.LastResort)
		}
		if !r.Trace.Static || r.Trace.Location.Prefix.IsValid() || len(r.Trace.Policies) != 0 {
			t.Fatalf("geo off trace: %+v", r.Trace)
		}
		for _, a := range addrs(r) {
			seen[a] = true
		}
	}
	for _, a := range every {
		if !seen[a] {
			t.Errorf("geo off never answered %s (answered %v)", a, seen)
		}
	}
	if len(seen) != len(every) {
		t.Errorf("geo off answered %d addresses, want %d", len(seen), len(every))
	}
	// st: its static set, per family.
	if r := ask(s, "st.g.example.com.", dns.TypeA, "10.1.2.0/24"); !slices.Equal(addrs(r), []string{"192.0.2.250"}) || r.Scope != 0 {
		t.Errorf("st off A: %v scope %d", addrs(r), r.Scope)
	}
	if r := ask(s, "st.g.example.com.", dns.TypeAAAA, ""); !slices.Equal(addrs(r), []string{"2001:db8::250"}) {
		t.Errorf("st off AAAA: %v", addrs(r))
	}
	// fo: every member of its dead pool, whatever its health.
	if r := ask(s, "fo.g.example.com.", dns.TypeA, "10.1.2.0/24"); len(r.Answer) != 3 || r.LastResort != "" || r.Scope != 0 {
		t.Errorf("fo off: %v last resort %q scope %d", addrs(r), r.LastResort, r.Scope)
	}
	if r := ask(s, "fo.g.example.com.", dns.TypeAAAA, ""); !slices.Equal(addrs(r), []string{"2001:db8::dead"}) {
		t.Errorf("fo off AAAA: %v", addrs(r))
	}
	if n := located.Load(); n != 0 {
		t.Errorf("emergency answers located the client %d times", n)
	}
	// A name not switched off still answers dynamically.
	if r := ask(s, "geo-noecs.g.example.com.", dns.TypeA, ""); r.Policy == PolicyEmergency || located.Load() == 0 {
		t.Errorf("geo-noecs: policy %q, located %d", r.Policy, located.Load())
	}
	// Non-address types of an off name: NODATA as before.
	if r := ask(s, "geo.g.example.com.", dns.TypeTXT, ""); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Authority) != 1 {
		t.Errorf("geo off TXT: %+v", r)
	}
	want := []NameEmergency{{Name: "geo.g.example.com.", Off: true, TTL: 30}, {Name: "fo.g.example.com.", Off: true, TTL: 30}, {Name: "st.g.example.com.", Off: true, TTL: 30}}
	if got := s.Emergencies(); !slices.Equal(got, want) {
		t.Errorf("Emergencies() = %+v\nwant %+v", got, want)
	}
}

func TestEmergencyScopes(t *testing.T) {
	zone, _ := offSnap(t, intent.State{Emergencies: []intent.Emergency{{Zone: "g.example.com.", Mode: intent.ModeStatic}}})
	all, _ := offSnap(t, intent.State{Emergencies: []intent.Emergency{{Mode: intent.ModeStatic}}})
	other, _ := offSnap(t, intent.State{Emergencies: []intent.Emergency{{Zone: "other.example.net.", Mode: intent.ModeStatic}}})
	for _, qname := range []string{"rr.g.example.com.", "geo.g.example.com.", "sf.g.example.com."} {
		if r := ask(zone, qname, dns.TypeA, ""); r.Policy != PolicyEmergency || r.Rcode != dns.RcodeSuccess {
			t.Errorf("zone off: %s answered %q rcode %d", qname, r.Policy, r.Rcode)
		}
		if r := ask(all, qname, dns.TypeA, ""); r.Policy != PolicyEmergency {
			t.Errorf("all off: %s answered %q", qname, r.Policy)
		}
		if r := ask(other, qname, dns.TypeA, ""); r.Policy == PolicyEmergency {
			t.Errorf("another zone off: %s answered %q", qname, r.Policy)
		}
	}
	// Static zone data is untouched.
	if r := ask(all, "www.g.example.com.", dns.TypeA, ""); !slices.Equal(addrs(r), []string{"192.0.2.100"}) {
		t.Errorf("static record under all off: %v", addrs(r))
	}
}

func TestTTLRaise(t *testing.T) {
	s, _ := offSnap(t, intent.State{
		TTLRaises:   []intent.TTLRaise{{Zone: "g.example.com.", Seconds: 3}, {Name: "rr.g.example.com.", Seconds: 600}, {Name: "st.g.example.com.", Seconds: 900}},
		Emergencies: []intent.Emergency{{Name: "st.g.example.com.", Mode: intent.ModeStatic}},
	})
	for _, tc := range []struct {
		qname string
		ttl   uint32
	}{
		{"rr.g.example.com.", 600},  // raised
		{"all.g.example.com.", 5},   // a raise to 3 never lowers 5
		{"hash.g.example.com.", 30}, // nor 30
		{"st.g.example.com.", 900},  // raised and off: the static set with the raise
		{"fo.g.example.com.", 30},   // last resort (fail-open) under a lower raise
	} {
		r := ask(s, tc.qname, dns.TypeA, "")
		if len(r.Answer) == 0 {
			t.Fatalf("%s: no answer", tc.qname)
		}
		for _, rr := range r.Answer {
			if rr.Header().Ttl != tc.ttl {
				t.Errorf("%s: TTL %d, want %d", tc.qname, rr.Header().Ttl, tc.ttl)
			}
		}
	}
	if r := ask(s, "www.g.example.com.", dns.TypeA, ""); r.Answer[0].Header().Ttl != 300 {
		t.Errorf("static record TTL %d, want 300 (raises apply to GSLB names)", r.Answer[0].Header().Ttl)
	}
}

// BenchmarkAnswerEmergency compares the answer path of the same names
// with intelligent resolution on and off (go test -bench
// AnswerEmergency ./gslb/).
func BenchmarkAnswerEmergency(b *testing.B) {
	cfg := parse(b, snapDoc())
	pools := states(cfg, map[string]health.State{"dead/*": health.Down})
	loc := constLocator{testLocator[netip.MustParsePrefix("10.2.0.0/16")]}
	on := NewSnapshot(cfg, pools, loc, 1)
	off := NewSnapshot(cfg, pools, loc, 1, WithIntent(intent.State{Emergencies: []intent.Emergency{{Mode: intent.ModeStatic}}}))
	for _, bc := range []struct {
		name  string
		query Query
	}{
		{"geo-ecs", Query{Name: "geo.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200"), ECS: netip.MustParsePrefix("10.2.3.0/24")}},
		{"hash-ecs", Query{Name: "hash.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200"), ECS: netip.MustParsePrefix("10.2.3.0/24")}},
		{"rr", Query{Name: "rr.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200")}},
		{"static-record", Query{Name: "www.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200")}},
	} {
		for _, mode := range []struct {
			name string
			s    *Snapshot
		}{{"on", on}, {"off", off}} {
			b.Run(bc.name+"/"+mode.name, func(b *testing.B) {
				b.ReportAllocs()
				q := bc.query
				q.Records = new(Records) // as the server's readers pass theirs
				for b.Loop() {
					if r := mode.s.Answer(q); len(r.Answer) == 0 {
						b.Fatal("no answer")
					}
				}
			})
		}
	}
}
