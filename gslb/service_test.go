package gslb

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/intent"
)

// withServices returns cfg with every name turned into a name with a
// service: names whose ECS setting, last resort, static set and
// policies are the same share one; every other service takes its first
// name's TTL (its names that have the same inherit it, the others keep
// their own).
func withServices(cfg *configs.Config) *configs.Config {
	c := *cfg
	g := &c.GSLB
	g.Names = append([]configs.GSLBName(nil), cfg.GSLB.Names...)
	g.Services = nil
	ids := map[string]int{}
	for i := range g.Names {
		n := &g.Names[i]
		key := fmt.Sprint(n.ECS, n.LastResort, n.StaticAddrs, n.Policies)
		id, ok := ids[key]
		if !ok {
			id = len(g.Services)
			ids[key] = id
			g.Services = append(g.Services, configs.GSLBService{Name: fmt.Sprintf("s%d", id), TTL: configs.DefaultNameTTL,
				ECS: n.ECS, LastResort: n.LastResort, Static: n.Static, StaticAddrs: n.StaticAddrs, Policies: n.Policies})
			if id%2 == 0 {
				g.Services[id].TTL = n.TTL
			}
		}
		n.Service, n.Policies = g.Services[id].Name, nil
	}
	return &c
}

// withTwins returns cfg with a twin of every name: "twin-NAME", the same
// keys and policies.
func withTwins(cfg *configs.Config) *configs.Config {
	c := *cfg
	c.GSLB.Names = append([]configs.GSLBName(nil), cfg.GSLB.Names...)
	for _, n := range cfg.GSLB.Names {
		n.Name, n.FQDN = "twin-"+n.Name, "twin-"+n.FQDN
		c.GSLB.Names = append(c.GSLB.Names, n)
	}
	return &c
}

// respOf is r with its records as text, for comparing.
type respOf struct {
	Rcode                          int
	Answer, Authority              string
	Scope                          int
	Name, Policy, Pool, LastResort string
	Trace                          *Trace
}

func respView(r Response) respOf {
	text := func(rrs []dns.RR) string {
		var b strings.Builder
		for _, rr := range rrs {
			b.WriteString(rr.String() + "\n")
		}
		return b.String()
	}
	return respOf{r.Rcode, text(r.Answer), text(r.Authority), r.Scope, r.Name, r.Policy, r.Pool, r.LastResort, r.Trace}
}

// TestServiceAnswersAsInline: a snapshot whose names have services
// answers every query as the one whose names carry the same keys and
// policies themselves: records (owners, TTLs), scopes, metrics labels,
// traces, rotations, last resorts, under emergency switches and
// TTL raises, over random names, types, sources and ECS prefixes, with
// and without a caller's own Records and rotation counters.
func TestServiceAnswersAsInline(t *testing.T) {
	inline := withTwins(parse(t, snapDoc()))
	shared := withServices(inline)
	if len(shared.GSLB.Services) >= len(shared.GSLB.Names) {
		t.Fatalf("%d services for %d names: want some shared", len(shared.GSLB.Services), len(shared.GSLB.Names))
	}
	intents := []intent.State{{},
		{Emergencies: []intent.Emergency{{Name: "geo.g.example.com.", Mode: intent.ModeStatic}, {Name: "rr.g.example.com.", Mode: intent.ModeStatic}},
			TTLRaises: []intent.TTLRaise{{Name: "hash.g.example.com.", Seconds: 600}, {Zone: "g.example.com.", Seconds: 40}}},
		{Emergencies: []intent.Emergency{{Zone: "g.example.com.", Mode: intent.ModeStatic}}},
	}
	overs := []map[string]health.State{{"dead/*": health.Down}, {"dead/*": health.Down, "gd/*": health.Down}, {"dead/*": health.Unknown, "www/*": health.Down}}
	var names []string
	for _, n := range inline.GSLB.Names {
		if !strings.Contains(n.FQDN, "random.") {
			names = append(names, n.FQDN)
		}
	}
	names = append(names, "www.g.example.com.", "nx.g.example.com.", "g.example.com.")
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeA, dns.TypeANY, dns.TypeTXT}
	rng := rand.New(rand.NewPCG(3, 4))
	for ii, st := range intents {
		for oi, over := range overs {
			var snaps [2]*Snapshot
			for k, cfg := range []*configs.Config{inline, shared} {
				snaps[k] = NewSnapshot(cfg, states(cfg, over), testLocator, 42, WithIntent(st))
			}
			var rots [2][]uint64
			var recs [2]Records
			for k := range rots {
				rots[k] = make([]uint64, snaps[k].Rotations())
			}
			for i := range 1500 {
				q := Query{Name: names[rng.IntN(len(names))], Type: types[rng.IntN(len(types))],
					Source: netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4)), 1}), Explain: rng.IntN(4) == 0}
				if rng.IntN(2) == 0 {
					q.ECS = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(5)), byte(rng.IntN(256)), 0}), 16+rng.IntN(9)).Masked()
				}
				own := rng.IntN(2) == 0
				var got [2]respOf
				for k, s := range snaps {
					qk := q
					if own {
						qk.Rotation, qk.Records = rots[k], &recs[k]
					}
					got[k] = respView(s.Answer(qk))
				}
				if !reflect.DeepEqual(got[0], got[1]) {
					t.Fatalf("intent %d, states %d, query %d %+v:\nwith services %+v\ninline        %+v", ii, oi, i, q, got[1], got[0])
				}
			}
			if fmt.Sprint(rots[0]) != fmt.Sprint(rots[1]) {
				t.Errorf("rotations %v, inline %v", rots[1], rots[0])
			}
			for k, f := range []func(*Snapshot) any{func(s *Snapshot) any { return s.Degraded() }, func(s *Snapshot) any { return s.Emergencies() }} {
				if a, b := f(snaps[0]), f(snaps[1]); !reflect.DeepEqual(a, b) {
					t.Errorf("intent %d, states %d: list %d %v with services, %v inline", ii, oi, k, b, a)
				}
			}
		}
	}
}

// TestAnswerSetsShared: names with one service, and names with the same
// keys of their own, share one compiled answer set; a name of other
// keys has its own; every pool is compiled once.
func TestAnswerSetsShared(t *testing.T) {
	inline := withTwins(parse(t, snapDoc()))
	for _, cfg := range []*configs.Config{inline, withServices(inline)} {
		s := NewSnapshot(cfg, states(cfg, nil), testLocator, 1)
		sets := map[*answerSet][]string{}
		pools := map[*famPool]bool{}
		for _, n := range cfg.GSLB.Names {
			dn := s.nodes[n.FQDN].dyn
			sets[dn.answerSet] = append(sets[dn.answerSet], n.FQDN)
			for _, p := range dn.policies {
				for _, fp := range p.chain[0] {
					pools[fp] = true
				}
			}
		}
		keys := map[string]bool{}
		for _, n := range cfg.GSLB.Names {
			keys[string(setKey(nil, cfg, &n))] = true
		}
		if len(sets) != len(keys) {
			t.Errorf("%d answer sets for %d distinct keys: %v", len(sets), len(keys), sets)
		}
		if len(pools) > len(cfg.GSLB.Pools) {
			t.Errorf("%d IPv4 pools compiled for %d pools", len(pools), len(cfg.GSLB.Pools))
		}
	}
	// 200 names of one service: one set.
	var b strings.Builder
	b.WriteString(snapDoc() + "\n[[gslb.service]]\nname = \"many\"\necs = true\n[[gslb.service.policy]]\nmatch = { carrier = \"cmcc\" }\npool = \"gd\"\n[[gslb.service.policy]]\npool = \"all\"\n")
	for i := range 200 {
		fmt.Fprintf(&b, "\n[[gslb.name]]\nname = \"m%d.g.example.com\"\nservice = \"many\"\n", i)
	}
	cfg := parse(t, b.String())
	s := NewSnapshot(cfg, states(cfg, nil), testLocator, 1)
	first := s.nodes["m0.g.example.com."].dyn.answerSet
	for i := range 200 {
		n := s.nodes[fmt.Sprintf("m%d.g.example.com.", i)].dyn
		if n.answerSet != first {
			t.Fatalf("m%d has its own answer set", i)
		}
		r := s.Answer(Query{Name: n.fqdn, Type: dns.TypeA, Source: src("192.0.2.1"), ECS: netip.MustParsePrefix("10.1.0.0/24")})
		if len(r.Answer) == 0 || r.Answer[0].Header().Name != n.fqdn || r.Answer[0].Header().Ttl != configs.DefaultNameTTL {
			t.Fatalf("m%d: answer %v", i, r.Answer)
		}
	}
}

// TestAnswerNoAllocWithRecords: with its own Records and rotation
// counters a caller's dynamic answers allocate nothing; the records of
// the shared set stay without owner.
func TestAnswerNoAllocWithRecords(t *testing.T) {
	s := snap(t, nil)
	var recs Records
	q := Query{Name: "geo.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200"), ECS: netip.MustParsePrefix("10.1.3.0/24"),
		Rotation: make([]uint64, s.Rotations()), Records: &recs}
	for _, name := range []string{"geo.g.example.com.", "all.g.example.com.", "fo.g.example.com.", "rr.g.example.com."} {
		q.Name = name
		if n := testing.AllocsPerRun(100, func() { s.Answer(q) }); n != 0 {
			t.Errorf("%s: %v allocations per answer", name, n)
		}
		if r := s.Answer(q); len(r.Answer) == 0 || r.Answer[0].Header().Name != name {
			t.Errorf("%s: answer %v", name, r.Answer)
		}
	}
	for _, p := range s.nodes["all.g.example.com."].dyn.policies {
		for _, fp := range p.chain[0] {
			for _, rr := range fp.all {
				if rr.Header().Name != "" || rr.Header().Ttl != 0 {
					t.Fatalf("pool %s: shared record %v has an owner or TTL", fp.name, rr)
				}
			}
		}
	}
}

// TestLoadedInlineAsService: names loaded from TOML with the same
// policies written under each answer every query as the same names with
// one service (records, owners, TTLs, scopes, traces, rotations, last
// resorts, degraded lists), and configs.Parse holds their policies
// once: every name's list is the first one's, matches and all, as a
// service's names share the service's, and so is its static set.
func TestLoadedInlineAsService(t *testing.T) {
	const n = 300
	geo := []string{"carrier=cmcc chain-a", "carrier=cmcc province=gd gd", "country=cn rr"}
	st := "ecs = true\nlast_resort = \"static\"\nstatic = [\"192.0.2.250\", \"2001:db8::250\"]"
	service := func(name, doc string) string {
		doc = strings.Replace(doc, "[[gslb.name]]\nname = \"\"", "[[gslb.service]]\nname = \""+name+"\"", 1)
		return strings.ReplaceAll(doc, "[[gslb.name.policy]]", "[[gslb.service.policy]]")
	}
	var in, sv strings.Builder
	in.WriteString(snapDoc())
	sv.WriteString(snapDoc())
	sv.WriteString(service("geo", nameDoc("", "ecs = true", "all", geo...)))
	sv.WriteString(service("st", nameDoc("", st, "dead", "country=cn dead")))
	var names []string
	for i := range n {
		geoName, stName := fmt.Sprintf("geo%d.g.example.com", i), fmt.Sprintf("st%d.g.example.com", i)
		names = append(names, geoName+".", stName+".")
		in.WriteString(nameDoc(geoName, "ecs = true", "all", geo...))
		in.WriteString(nameDoc(stName, st, "dead", "country=cn dead"))
		fmt.Fprintf(&sv, "\n[[gslb.name]]\nname = %q\nservice = \"geo\"\n\n[[gslb.name]]\nname = %q\nservice = \"st\"\n", geoName, stName)
	}
	inline, shared := parse(t, in.String()), parse(t, sv.String())

	// Held once: the names after snapDoc's, geo and st in turn.
	loaded := inline.GSLB.Names[len(inline.GSLB.Names)-2*n:]
	for i := range loaded {
		first, nm := &loaded[i%2], &loaded[i]
		if len(nm.Policies) == 0 || &nm.Policies[0] != &first.Policies[0] ||
			reflect.ValueOf(nm.Policies[1].Match).Pointer() != reflect.ValueOf(first.Policies[1].Match).Pointer() {
			t.Fatalf("%s: its policies are its own copy, not %s's", nm.Name, first.Name)
		}
		if i%2 == 1 && (&nm.Static[0] != &first.Static[0] || &nm.StaticAddrs[0] != &first.StaticAddrs[0]) {
			t.Fatalf("%s: its static set is its own copy", nm.Name)
		}
	}
	if &loaded[0].Policies[0] == &loaded[1].Policies[0] {
		t.Fatal("names of other policies share a list")
	}

	overs := []map[string]health.State{nil, {"dead/*": health.Down, "gd/*": health.Down}, {"chain-a/*": health.Down, "chain-b/*": health.Down}, {"dead/*": health.Unknown}}
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY}
	rng := rand.New(rand.NewPCG(5, 6))
	for oi, over := range overs {
		var snaps [2]*Snapshot
		var rots [2][]uint64
		for k, cfg := range []*configs.Config{inline, shared} {
			snaps[k] = NewSnapshot(cfg, states(cfg, over), testLocator, 7)
			rots[k] = make([]uint64, snaps[k].Rotations())
		}
		for i := range 2000 {
			q := Query{Name: names[rng.IntN(len(names))], Type: types[rng.IntN(len(types))],
				Source: netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4)), 1}), Explain: rng.IntN(3) == 0}
			if rng.IntN(2) == 0 {
				q.ECS = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(5)), byte(rng.IntN(256)), 0}), 16+rng.IntN(9)).Masked()
			}
			var got [2]respOf
			for k, s := range snaps {
				qk := q
				qk.Rotation = rots[k]
				got[k] = respView(s.Answer(qk))
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Fatalf("states %d, query %d %+v:\ninline       %+v\nwith service %+v", oi, i, q, got[0], got[1])
			}
		}
		if fmt.Sprint(rots[0]) != fmt.Sprint(rots[1]) {
			t.Errorf("states %d: rotations %v inline, %v with a service", oi, rots[0], rots[1])
		}
		if a, b := snaps[0].Degraded(), snaps[1].Degraded(); !reflect.DeepEqual(a, b) {
			t.Errorf("states %d: degraded %v inline, %v with a service", oi, a, b)
		}
	}
}
