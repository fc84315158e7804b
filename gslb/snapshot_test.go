package gslb

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/intent"
)

// snapDoc is the configuration of most tests.
func snapDoc() string {
	return `
[check.c.dns]
qname = "example.com"

[gslb]
whoami      = "whoami.g.example.com"
max_records = 3

[[gslb.zone]]
name    = "g.example.com"
ns      = ["ns1.example.com.", "ns2.example.com."]
ttl     = 300
minimum = 60

[[gslb.zone.record]]
name  = "www"
type  = "A"
value = "192.0.2.100"

[[gslb.zone.record]]
name  = "alias"
type  = "CNAME"
value = "www.g.example.com."

[[gslb.zone.record]]
name  = "txt"
type  = "TXT"
value = "hello"
ttl   = 10

[[gslb.zone.record]]
name  = "@"
type  = "MX"
value = "10 mail.example.com."

[[gslb.zone.record]]
name  = "deep.sub"
type  = "AAAA"
value = "2001:db8::100"

[[gslb.zone]]
name    = "other.example.net"
ns      = ["ns1.example.com."]
minimum = 900
ttl     = 120
` +
		pool("rr", "rr", "", "r1 192.0.2.1", "r2 192.0.2.2", "r3 192.0.2.3", "r6 2001:db8::1") +
		pool("wrr", "wrr", "", "w1 192.0.2.11 weight=3", "w2 192.0.2.12 weight=1") +
		pool("hash", "hash", "", "h1 192.0.2.21", "h2 192.0.2.22", "h3 192.0.2.23", "h4 192.0.2.24") +
		pool("random", "random", "", "x1 192.0.2.51", "x2 192.0.2.52") +
		pool("prio", "priority", "", "p1 192.0.2.31 priority=0", "p2 192.0.2.32 priority=0", "p3 192.0.2.33 priority=1") +
		pool("all", "all", "", "a1 192.0.2.41", "a2 192.0.2.42", "a3 192.0.2.43", "a4 192.0.2.44", "a5 192.0.2.45") +
		pool("all2", "all", "", "b1 192.0.2.61", "b2 192.0.2.62", "b3 192.0.2.63", "max_records=2") +
		pool("gd", "rr", "", "g1 198.51.100.1") +
		pool("chain-a", "rr", "chain-b", "ca 198.51.100.11") +
		pool("chain-b", "rr", "chain-c", "cb 198.51.100.12") +
		pool("chain-c", "rr", "", "cc 198.51.100.13") +
		pool("dead", "rr", "", "d1 203.0.113.1", "d2 203.0.113.2", "d3 203.0.113.3", "d4 203.0.113.4", "d6 2001:db8::dead") +
		nameDoc("rr.g.example.com", "", "rr") +
		nameDoc("wrr.g.example.com", "", "wrr") +
		nameDoc("hash.g.example.com", "ecs = true", "hash") +
		nameDoc("hashsrc.g.example.com", "", "hash") +
		nameDoc("random.g.example.com", "", "random") +
		nameDoc("prio.g.example.com", "", "prio") +
		nameDoc("all.g.example.com", "ttl = 5", "all") +
		nameDoc("all2.g.example.com", "", "all2") +
		nameDoc("geo.g.example.com", "ecs = true", "all", "carrier=cmcc chain-a", "carrier=cmcc province=gd gd", "country=cn rr") +
		nameDoc("geo-noecs.g.example.com", "", "all", "carrier=cmcc province=gd gd") +
		nameDoc("fo.g.example.com", "ecs = true", "dead") +
		nameDoc("st.g.example.com", `ecs = true
last_resort = "static"
static = ["192.0.2.250", "2001:db8::250"]`, "dead") +
		nameDoc("sf.g.example.com", `last_resort = "servfail"`, "dead") +
		nameDoc("fo-geo.g.example.com", "ecs = true", "", "country=cn dead")
}

// pool is a [[gslb.pool]] with members "NAME ADDR [key=value...]"; an item
// "key=value" alone is a pool key.
func pool(n, algorithm, fallback string, members ...string) string {
	var b strings.Builder
	var tail strings.Builder
	fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = %q\nmonitors = [\"c\"]\nalgorithm = %q\n", n, algorithm)
	if fallback != "" {
		fmt.Fprintf(&b, "fallback = %q\n", fallback)
	}
	for _, m := range members {
		f := strings.Fields(m)
		if len(f) == 1 {
			k, v, _ := strings.Cut(f[0], "=")
			fmt.Fprintf(&b, "%s = %s\n", k, v)
			continue
		}
		fmt.Fprintf(&tail, "[[gslb.pool.member]]\nname = %q\naddress = %q\n", f[0], f[1])
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Fprintf(&tail, "%s = %s\n", k, v)
		}
	}
	return b.String() + tail.String()
}

// nameDoc is a [[gslb.name]] with extra keys, a global policy to pool
// (none when ""), and policies "level=value ... POOL".
func nameDoc(fqdn, extra, global string, policies ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n[[gslb.name]]\nname = %q\n%s\n", fqdn, extra)
	if global != "" {
		fmt.Fprintf(&b, "[[gslb.name.policy]]\npool = %q\n", global)
	}
	for _, p := range policies {
		f := strings.Fields(p)
		var m []string
		for _, kv := range f[:len(f)-1] {
			k, v, _ := strings.Cut(kv, "=")
			m = append(m, fmt.Sprintf("%s = %q", k, v))
		}
		fmt.Fprintf(&b, "[[gslb.name.policy]]\nmatch = { %s }\npool = %q\n", strings.Join(m, ", "), f[len(f)-1])
	}
	return b.String()
}

// fakeLocator locates by the most specific prefix containing the address.
type fakeLocator map[netip.Prefix]Location

func (f fakeLocator) Locate(a netip.Addr) Location {
	best := Location{}
	for p, l := range f {
		if p.Contains(a) && (!best.Prefix.IsValid() || p.Bits() > best.Prefix.Bits()) {
			best = l
			best.Prefix = p
		}
	}
	return best
}

var testLocator = fakeLocator{
	netip.MustParsePrefix("10.1.0.0/16"): {Labels: map[string]string{"carrier": "cmcc", "province": "gd", "country": "cn"}, Scope: 16},
	netip.MustParsePrefix("10.2.0.0/16"): {Labels: map[string]string{"carrier": "cmcc", "province": "bj", "country": "cn"}, Scope: 17},
	netip.MustParsePrefix("10.3.0.0/16"): {Labels: map[string]string{"carrier": "unicom", "country": "cn"}, Scope: 18},
}

// states are the pool states of cfg: every member up unless over (by
// "POOL/MEMBER", or "POOL/*" for every member of the pool) says.
func states(cfg *configs.Config, over map[string]health.State) []PoolState {
	var out []PoolState
	for _, p := range cfg.GSLB.Pools {
		ps := PoolState{Name: p.Name, Total: len(p.Members)}
		for _, m := range p.Members {
			st, ok := over[p.Name+"/"+m.Name]
			if !ok {
				st, ok = over[p.Name+"/*"]
			}
			if !ok {
				st = health.Up
			}
			ps.Members = append(ps.Members, MemberState{Name: m.Name, Addr: m.Addr, Weight: m.Weight, Priority: m.Priority, State: st})
		}
		out = append(out, ps)
	}
	return out
}

func parse(t testing.TB, doc string) *configs.Config {
	t.Helper()
	cfg, err := configs.Parse([]byte(doc), "snap.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// snap builds the test snapshot with the dead pool down and over applied.
func snap(t testing.TB, over map[string]health.State) *Snapshot {
	t.Helper()
	cfg := parse(t, snapDoc())
	o := map[string]health.State{"dead/*": health.Down}
	for k, v := range over {
		o[k] = v
	}
	return NewSnapshot(cfg, states(cfg, o), testLocator, 42)
}

func src(s string) netip.Addr { return netip.MustParseAddr(s) }

// ask answers an A (or t) question for qname from source 192.0.2.200
// (or ecs when set).
func ask(s *Snapshot, qname string, t uint16, ecs string) Response {
	q := Query{Name: qname, Type: t, Source: src("192.0.2.200"), Explain: true}
	if ecs != "" {
		q.ECS = netip.MustParsePrefix(ecs).Masked()
	}
	return s.Answer(q)
}

// addrs are the answer's addresses as strings.
func addrs(r Response) []string {
	var out []string
	for _, a := range addrsOf(r.Answer) {
		out = append(out, a.String())
	}
	return out
}

func TestRoundRobin(t *testing.T) {
	s := snap(t, nil)
	var got []string
	for range 6 {
		r := ask(s, "rr.g.example.com.", dns.TypeA, "")
		if len(r.Answer) != 1 || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("answer = %v", r.Answer)
		}
		got = append(got, addrs(r)...)
	}
	if !slices.Equal(got[:3], got[3:]) || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 3 {
		t.Errorf("rr sequence %v: want the three members in turn", got)
	}
	if r := ask(s, "rr.g.example.com.", dns.TypeAAAA, ""); !slices.Equal(addrs(r), []string{"2001:db8::1"}) {
		t.Errorf("AAAA = %v", addrs(r))
	}
	// A member down leaves the rotation.
	s = snap(t, map[string]health.State{"rr/r2": health.Down})
	for range 4 {
		if a := addrs(ask(s, "rr.g.example.com.", dns.TypeA, "")); a[0] == "192.0.2.2" {
			t.Errorf("down member answered")
		}
	}
}

// TestOwnRotation checks Query.Rotation: a caller's own counters rotate
// rr for that caller alone (each caller sees every member in turn) and
// leave the shared counter where it was; counters of the wrong length
// are not used.
func TestOwnRotation(t *testing.T) {
	s := snap(t, nil)
	if s.Rotations() < 1 {
		t.Fatalf("Rotations() = %d", s.Rotations())
	}
	seq := func(own []uint64, n int) []string {
		var got []string
		for range n {
			q := Query{Name: "rr.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200"), Rotation: own}
			got = append(got, addrs(s.Answer(q))...)
		}
		return got
	}
	shared := seq(nil, 1) // the shared counter moves one on
	a, b := make([]uint64, s.Rotations()), make([]uint64, s.Rotations())
	ga := seq(a, 3)
	gb := seq(b, 3)
	if !slices.Equal(ga, gb) || len(slices.Compact(slices.Sorted(slices.Values(ga)))) != 3 {
		t.Errorf("own rotations %v and %v: want each to see the three members in the same turn", ga, gb)
	}
	var sum uint64
	for _, v := range a {
		sum += v
	}
	if ga[0] != shared[0] || sum != 3 {
		t.Errorf("own rotation %v (counters %v): want it to start at its own 0 (%s, as the shared one did) and count 3", ga, a, shared[0])
	}
	// The shared counter did not move while the callers used their own:
	// its next answer is the one after shared[0].
	next := seq(nil, 3)
	if want := seq(nil, 3); !slices.Equal(next, want) || next[2] != shared[0] {
		t.Errorf("shared rotation after own ones: %v then %v, want it to go on from %v", next, want, shared)
	}
	// Counters of another length fall back to the shared ones (which move).
	short := make([]uint64, s.Rotations()-1)
	seq(short, 2)
	if slices.ContainsFunc(short, func(v uint64) bool { return v != 0 }) {
		t.Errorf("short counters were written: %v", short)
	}
}

func TestWeightedRoundRobin(t *testing.T) {
	s := snap(t, nil)
	var seq []string
	for range 8 {
		seq = append(seq, addrs(ask(s, "wrr.g.example.com.", dns.TypeA, ""))...)
	}
	n := 0
	for i, a := range seq {
		if a == "192.0.2.12" {
			n++
			if i > 0 && seq[i-1] == a {
				t.Errorf("light member twice in a row: %v", seq)
			}
		}
	}
	if n != 2 {
		t.Errorf("wrr %v: weight 1 of 4 should answer 2 of 8", seq)
	}
	if got := smoothSchedule([]member{{weight: 5, rr: rrA("a")}, {weight: 1, rr: rrA("b")}, {weight: 1, rr: rrA("c")}}); schedText(got) != "aabacaa" {
		t.Errorf("smooth schedule 5:1:1 = %s, want aabacaa (nginx's)", schedText(got))
	}
}

func rrA(owner string) dns.RR { return &dns.A{Hdr: hdr(owner, dns.TypeA, 0)} }

func schedText(rrs []dns.RR) string {
	var b strings.Builder
	for _, rr := range rrs {
		b.WriteString(rr.Header().Name)
	}
	return b.String()
}

func TestHash(t *testing.T) {
	s := snap(t, nil)
	first := map[string]string{}
	spread := map[string]bool{}
	for i := range 64 {
		ecs := fmt.Sprintf("10.9.%d.0/24", i)
		a := addrs(ask(s, "hash.g.example.com.", dns.TypeA, ecs))
		for range 3 {
			if b := addrs(ask(s, "hash.g.example.com.", dns.TypeA, ecs)); !slices.Equal(a, b) {
				t.Fatalf("%s: %v then %v", ecs, a, b)
			}
		}
		first[ecs] = a[0]
		spread[a[0]] = true
	}
	if len(spread) != 4 {
		t.Errorf("64 subnets used %d of 4 members", len(spread))
	}
	// h2 down: its clients move, every other client keeps its member.
	s = snap(t, map[string]health.State{"hash/h2": health.Down})
	for ecs, was := range first {
		now := addrs(ask(s, "hash.g.example.com.", dns.TypeA, ecs))[0]
		if was != "192.0.2.22" && now != was {
			t.Errorf("%s moved from %s to %s though its member is up", ecs, was, now)
		}
		if now == "192.0.2.22" {
			t.Errorf("%s still on the member down", ecs)
		}
	}
	// Without ECS on the name, the key is the source address.
	a := addrs(ask(s, "hashsrc.g.example.com.", dns.TypeA, "10.1.0.0/24"))
	b := addrs(ask(s, "hashsrc.g.example.com.", dns.TypeA, "10.3.0.0/24"))
	if !slices.Equal(a, b) {
		t.Errorf("hash of source differs with the ECS the name ignores: %v, %v", a, b)
	}
}

func TestRandom(t *testing.T) {
	s := snap(t, nil)
	seen := map[string]int{}
	for range 200 {
		a := addrs(ask(s, "random.g.example.com.", dns.TypeA, ""))
		if len(a) != 1 {
			t.Fatalf("random answered %v", a)
		}
		seen[a[0]]++
	}
	if len(seen) != 2 || seen["192.0.2.51"] < 50 || seen["192.0.2.52"] < 50 {
		t.Errorf("random spread %v", seen)
	}
}

func TestPriority(t *testing.T) {
	s := snap(t, nil)
	if a := addrs(ask(s, "prio.g.example.com.", dns.TypeA, "")); len(a) != 2 || slices.Contains(a, "192.0.2.33") {
		t.Errorf("priority = %v, want both members of priority 0", a)
	}
	s = snap(t, map[string]health.State{"prio/p1": health.Down})
	if a := addrs(ask(s, "prio.g.example.com.", dns.TypeA, "")); !slices.Equal(a, []string{"192.0.2.32"}) {
		t.Errorf("priority with p1 down = %v", a)
	}
	s = snap(t, map[string]health.State{"prio/p1": health.Down, "prio/p2": health.Unknown})
	if a := addrs(ask(s, "prio.g.example.com.", dns.TypeA, "")); !slices.Equal(a, []string{"192.0.2.33"}) {
		t.Errorf("priority with p1, p2 not up = %v", a)
	}
}

func TestAllCapped(t *testing.T) {
	s := snap(t, nil)
	union := map[string]bool{}
	for range 5 {
		r := ask(s, "all.g.example.com.", dns.TypeA, "")
		a := addrs(r)
		if len(a) != 3 || len(slices.Compact(slices.Sorted(slices.Values(a)))) != 3 {
			t.Fatalf("all = %v, want 3 distinct (max_records)", a)
		}
		if r.Answer[0].Header().Ttl != 5 {
			t.Errorf("ttl = %d", r.Answer[0].Header().Ttl)
		}
		for _, x := range a {
			union[x] = true
		}
	}
	if len(union) != 5 {
		t.Errorf("rotation reached %d of 5 members", len(union))
	}
	if a := addrs(ask(s, "all2.g.example.com.", dns.TypeA, "")); len(a) != 2 {
		t.Errorf("pool max_records 2: %v", a)
	}
	s = snap(t, map[string]health.State{"all/a1": health.Down, "all/a2": health.Down, "all/a3": health.Down})
	if a := addrs(ask(s, "all.g.example.com.", dns.TypeA, "")); len(a) != 2 || slices.Contains(a, "192.0.2.41") {
		t.Errorf("all with 3 down = %v", a)
	}
}

// TestRendezvousMovesOnlyItsShare: with fixed client keys, removing one
// of ten members moves exactly the clients it had, about a tenth.
func TestRendezvousMovesOnlyItsShare(t *testing.T) {
	var ms []string
	for i := range 10 {
		ms = append(ms, fmt.Sprintf("m%d 192.0.2.%d", i, i+1))
	}
	doc := "[check.c.dns]\nqname = \"example.com\"\n[[gslb.zone]]\nname = \"g.example.com\"\nns = [\"ns.example.com.\"]\n" +
		pool("p", "rendezvous", "", ms...) + nameDoc("r.g.example.com", "ecs = true", "p")
	cfg := parse(t, doc)
	before := NewSnapshot(cfg, states(cfg, nil), nil, 1)
	after := NewSnapshot(cfg, states(cfg, map[string]health.State{"p/m4": health.Down}), nil, 1)
	const clients = 10000
	count := map[string]int{}
	moved := 0
	for i := range clients {
		ecs := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24).String()
		a := ask(before, "r.g.example.com.", dns.TypeA, ecs)
		b := ask(after, "r.g.example.com.", dns.TypeA, ecs)
		if a.Scope != 24 {
			t.Fatalf("scope %d, want the ECS source length the key used", a.Scope)
		}
		was, now := addrs(a)[0], addrs(b)[0]
		count[was]++
		if was != now {
			moved++
			if was != "192.0.2.5" {
				t.Fatalf("%s moved from %s (up) to %s", ecs, was, now)
			}
		}
	}
	for m, n := range count {
		if n < clients/10*7/10 || n > clients/10*13/10 {
			t.Errorf("member %s has %d of %d clients, want about a tenth", m, n, clients)
		}
	}
	if moved != count["192.0.2.5"] {
		t.Errorf("moved %d, want exactly the removed member's %d", moved, count["192.0.2.5"])
	}
	// Weights: a member of weight 3 among weight 1s takes about 3 shares.
	ws := slices.Clone(ms)
	for i := range ws {
		ws[i] += " weight=1"
	}
	ws[0] = ms[0] + " weight=3"
	cfg = parse(t, "[check.c.dns]\nqname = \"example.com\"\n[[gslb.zone]]\nname = \"g.example.com\"\nns = [\"ns.example.com.\"]\n"+
		pool("p", "rendezvous", "", ws...)+nameDoc("r.g.example.com", "ecs = true", "p"))
	w := NewSnapshot(cfg, states(cfg, nil), nil, 1)
	heavy := 0
	for i := range clients {
		ecs := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24).String()
		if addrs(ask(w, "r.g.example.com.", dns.TypeA, ecs))[0] == "192.0.2.1" {
			heavy++
		}
	}
	if want := clients * 3 / 12; heavy < want*8/10 || heavy > want*12/10 {
		t.Errorf("weight 3 of 12: %d of %d clients, want about %d", heavy, clients, want)
	}
}

func TestPoliciesAndFallback(t *testing.T) {
	tests := []struct {
		name   string
		over   map[string]health.State
		ecs    string
		want   []string
		scope  int
		policy int // index of the answering policy in the trace
	}{
		{"most specific", nil, "10.1.2.0/24", []string{"198.51.100.1"}, 16, 0},
		{"carrier only", nil, "10.2.2.0/24", []string{"198.51.100.11"}, 17, 1},
		{"first fallback", map[string]health.State{"chain-a/ca": health.Down}, "10.2.2.0/24", []string{"198.51.100.12"}, 17, 1},
		{"end of chain", map[string]health.State{"chain-a/ca": health.Down, "chain-b/cb": health.Unknown}, "10.2.2.0/24", []string{"198.51.100.13"}, 17, 1},
		{"next policy", map[string]health.State{"chain-a/*": health.Down, "chain-b/*": health.Down, "chain-c/*": health.Down}, "10.2.2.0/24", []string{"192.0.2.1"}, 17, 2},
		{"country", nil, "10.3.2.0/24", []string{"192.0.2.1"}, 18, 2},
		{"global", nil, "10.200.0.0/24", nil, 0, 3},
		{"ECS source 0", nil, "0.0.0.0/0", nil, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snap(t, tt.over)
			r := ask(s, "geo.g.example.com.", dns.TypeA, tt.ecs)
			got := addrs(r)
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("answer %v, want %v", got, tt.want)
			}
			if tt.want == nil && len(got) != 3 {
				t.Errorf("global answer %v, want 3 of pool all", got)
			}
			if r.Scope != tt.scope {
				t.Errorf("scope %d, want %d", r.Scope, tt.scope)
			}
			tr := r.Trace
			from := "ecs"
			if tt.ecs == "0.0.0.0/0" {
				from = "source" // as without ECS (TestECSSourceZero)
			}
			if tr.LastResort != "" || tr.ClientFrom != from || !tr.Policies[tt.policy].Answered || len(tr.Policies) != tt.policy+1 {
				t.Errorf("trace %+v", tr)
			}
			pools := tr.Policies[tt.policy].Pools
			if r.Name != "geo.g.example.com." || r.LastResort != "" || len(pools) == 0 || r.Pool != pools[len(pools)-1].Name {
				t.Errorf("response names name %q pool %q last resort %q; the trace's answering pool is %+v", r.Name, r.Pool, r.LastResort, pools)
			}
			wantPolicy := "global"
			if m := tr.Policies[tt.policy].Match; len(m) > 0 {
				var kv []string
				for l, v := range m {
					kv = append(kv, l+"="+v)
				}
				slices.Sort(kv)
				wantPolicy = strings.Join(kv, "+")
			}
			if r.Policy != wantPolicy {
				t.Errorf("response policy %q, want %q", r.Policy, wantPolicy)
			}
		})
	}
	// The trace lists policies most specific first, with the chain tried.
	s := snap(t, map[string]health.State{"chain-a/ca": health.Down, "chain-b/cb": health.Down})
	tr := ask(s, "geo.g.example.com.", dns.TypeA, "10.2.0.0/24").Trace
	if len(tr.Policies) != 2 || configs.PolicyKey(tr.Policies[0].Match) != "carrier+province" || tr.Policies[0].Matched ||
		!tr.Policies[1].Matched || len(tr.Policies[1].Pools) != 3 {
		t.Fatalf("trace policies %+v", tr.Policies)
	}
	pt := tr.Policies[1].Pools
	if pt[0].Name != "chain-a" || pt[0].Healthy != 0 || pt[0].Members[0].State != "down" || pt[2].Name != "chain-c" ||
		!pt[2].Members[0].Chosen || pt[2].Algorithm != "rr" {
		t.Errorf("pool traces %+v", pt)
	}
	if tr.Location.Labels["province"] != "bj" || tr.Client != src("10.2.0.0") || tr.TTL != configs.DefaultNameTTL || tr.Scope != 17 {
		t.Errorf("trace %+v", tr)
	}
}

func TestScope(t *testing.T) {
	s := snap(t, nil)
	for _, tt := range []struct {
		qname, ecs string
		scope      int
	}{
		{"geo.g.example.com.", "10.1.0.0/24", 16},         // located policy consulted
		{"geo.g.example.com.", "", 0},                     // no ECS: no scope
		{"geo-noecs.g.example.com.", "10.1.0.0/24", 0},    // ECS off for the name
		{"rr.g.example.com.", "10.1.0.0/24", 0},           // global only
		{"hash.g.example.com.", "10.1.0.0/20", 20},        // keyed on the subnet
		{"fo.g.example.com.", "10.1.0.0/24", 0},           // last resort
		{"st.g.example.com.", "10.1.0.0/24", 0},           // static
		{"fo-geo.g.example.com.", "10.1.0.0/24", 0},       // no policy matched: fail open
		{"whoami.g.example.com.", "10.1.0.0/24", 24},      // depends on the client
		{"www.g.example.com.", "10.1.0.0/24", 0},          // static record
		{"geo.g.example.com.", "10.200.0.0/24", 0},        // located, unmapped
		{"geo.g.example.com.", "0.0.0.0/0", 0},            // SOURCE 0
		{"hash.g.example.com.", "2001:db8:1234::/48", 48}, // v6 key
		{"geo.g.example.com.", "10.3.0.0/24", 18},         // country policy
		{"geo.g.example.com.", "10.2.0.0/24", 17},         // carrier policy
		{"whoami.g.example.com.", "", 0},                  // whoami without ECS
		{"nx.g.example.com.", "10.1.0.0/24", 0},           // NXDOMAIN
		{"all.g.example.com.", "10.1.0.0/24", 0},          // all, global
		{"hashsrc.g.example.com.", "10.1.0.0/24", 0},      // hash on the source
		{"sf.g.example.com.", "10.1.0.0/24", 0},           // servfail
		{"alias.g.example.com.", "10.1.0.0/24", 0},        // CNAME
		{"g.example.com.", "10.1.0.0/24", 0},              // apex
		{"sub.g.example.com.", "10.1.0.0/24", 0},          // empty non-terminal
		{"whoami.g.example.com.", "2001:db8::/56", 56},    // v6 ECS
		{"geo.g.example.com.", "10.1.0.0/32", 16},         // a mapping address /32
		{"hash.g.example.com.", "10.1.0.0/32", 32},        // hash of a /32
		{"geo.g.example.com.", "192.0.2.0/24", 0},         // unmapped
		{"hash.g.example.com.", "0.0.0.0/0", 0},           // hash with SOURCE 0
		{"example.org.", "10.1.0.0/24", 0},                // refused
		{"txt.g.example.com.", "10.1.0.0/24", 0},          // static TXT name asked A
		{"geo.g.example.com.", "10.2.0.0/16", 17},         // /16 in a /17 scope
	} {
		if r := ask(s, tt.qname, dns.TypeA, tt.ecs); r.Scope != tt.scope {
			t.Errorf("%s ecs %q: scope %d, want %d", tt.qname, tt.ecs, r.Scope, tt.scope)
		}
	}
}

func TestLastResorts(t *testing.T) {
	s := snap(t, nil)
	r := ask(s, "fo.g.example.com.", dns.TypeA, "")
	if a := addrs(r); len(a) != 3 || r.Trace.LastResort != TraceFailOpen || r.Trace.Warming || r.Rcode != dns.RcodeSuccess {
		t.Errorf("fail open = %v %+v, want 3 of the 4 members down (max_records)", a, r.Trace)
	}
	if a := addrs(ask(s, "fo.g.example.com.", dns.TypeAAAA, "")); !slices.Equal(a, []string{"2001:db8::dead"}) {
		t.Errorf("fail open AAAA = %v", a)
	}
	r = ask(s, "st.g.example.com.", dns.TypeA, "")
	if a := addrs(r); !slices.Equal(a, []string{"192.0.2.250"}) || !r.Trace.Static || r.Trace.LastResort != TraceStatic {
		t.Errorf("static = %v %+v", a, r.Trace)
	}
	if a := addrs(ask(s, "st.g.example.com.", dns.TypeAAAA, "")); !slices.Equal(a, []string{"2001:db8::250"}) {
		t.Errorf("static AAAA = %v", a)
	}
	r = ask(s, "sf.g.example.com.", dns.TypeA, "")
	if r.Rcode != dns.RcodeServerFailure || len(r.Answer) != 0 || r.Trace.LastResort != TraceServfail || r.LastResort != TraceServfail || r.Pool != "" {
		t.Errorf("servfail = %+v", r)
	}
	// No policy matches at all: the last resort too.
	if r := ask(s, "fo-geo.g.example.com.", dns.TypeA, "10.200.0.0/24"); len(r.Answer) != 3 || r.Trace.LastResort != TraceFailOpen {
		t.Errorf("fo-geo unmatched = %v %+v", addrs(r), r.Trace)
	}
	want := []NameStatus{
		{Name: "fo.g.example.com.", Type: dns.TypeA, LastResort: TraceFailOpen}, {Name: "fo.g.example.com.", Type: dns.TypeAAAA, LastResort: TraceFailOpen},
		{Name: "st.g.example.com.", Type: dns.TypeA, LastResort: TraceStatic}, {Name: "st.g.example.com.", Type: dns.TypeAAAA, LastResort: TraceStatic},
		{Name: "sf.g.example.com.", Type: dns.TypeA, LastResort: TraceServfail}, {Name: "sf.g.example.com.", Type: dns.TypeAAAA, LastResort: TraceServfail},
		{Name: "fo-geo.g.example.com.", Type: dns.TypeA, LastResort: TraceFailOpen}, {Name: "fo-geo.g.example.com.", Type: dns.TypeAAAA, LastResort: TraceFailOpen},
	}
	if got := s.Degraded(); !slices.Equal(got, want) {
		t.Errorf("Degraded = %+v\nwant %+v", got, want)
	}
}

func TestWarming(t *testing.T) {
	// Every member unknown (first probe round): last resort, warming.
	cfg := parse(t, snapDoc())
	s := NewSnapshot(cfg, states(cfg, map[string]health.State{"rr/*": health.Unknown, "dead/*": health.Unknown}), testLocator, 1)
	r := ask(s, "rr.g.example.com.", dns.TypeA, "")
	if len(r.Answer) != 3 || r.Trace.LastResort != TraceFailOpen || !r.Trace.Warming {
		t.Errorf("warming rr = %v %+v", addrs(r), r.Trace)
	}
	r = ask(s, "sf.g.example.com.", dns.TypeA, "")
	if r.Rcode != dns.RcodeServerFailure || !r.Trace.Warming {
		t.Errorf("warming servfail = %+v", r.Trace)
	}
	// One member up answers; the others still unknown do not matter.
	s = NewSnapshot(cfg, states(cfg, map[string]health.State{"rr/r1": health.Unknown, "rr/r2": health.Unknown}), testLocator, 1)
	for range 3 {
		if r := ask(s, "rr.g.example.com.", dns.TypeA, ""); !slices.Equal(addrs(r), []string{"192.0.2.3"}) || r.Trace.Warming {
			t.Errorf("one up = %v %+v", addrs(r), r.Trace)
		}
	}
	// Down members do not warm.
	if r := ask(snap(t, nil), "fo.g.example.com.", dns.TypeA, ""); r.Trace.Warming {
		t.Error("members down: warming")
	}
	// A states list without the pool at all: members unknown.
	s = NewSnapshot(cfg, nil, testLocator, 1)
	if r := ask(s, "rr.g.example.com.", dns.TypeA, ""); !r.Trace.Warming || len(r.Answer) != 3 {
		t.Errorf("no states: %v %+v", addrs(r), r.Trace)
	}
}

func TestZoneData(t *testing.T) {
	s := snap(t, nil)
	for _, tt := range []struct {
		qname string
		qtype uint16
		rcode int
		ans   string // the answer's records, space-separated "TYPE:TTL"
		neg   uint32 // the SOA TTL in authority (0: none)
	}{
		{"www.g.example.com.", dns.TypeA, dns.RcodeSuccess, "A:300", 0},
		{"www.g.example.com.", dns.TypeAAAA, dns.RcodeSuccess, "", 60},
		{"alias.g.example.com.", dns.TypeA, dns.RcodeSuccess, "CNAME:300", 0},
		{"alias.g.example.com.", dns.TypeCNAME, dns.RcodeSuccess, "CNAME:300", 0},
		{"txt.g.example.com.", dns.TypeTXT, dns.RcodeSuccess, "TXT:10", 0},
		{"g.example.com.", dns.TypeMX, dns.RcodeSuccess, "MX:300", 0},
		{"g.example.com.", dns.TypeSOA, dns.RcodeSuccess, "SOA:300", 0},
		{"g.example.com.", dns.TypeNS, dns.RcodeSuccess, "NS:300 NS:300", 0},
		{"g.example.com.", dns.TypeA, dns.RcodeSuccess, "", 60},
		{"nx.g.example.com.", dns.TypeA, dns.RcodeNameError, "", 60},
		{"x.www.g.example.com.", dns.TypeA, dns.RcodeNameError, "", 60},
		{"x.rr.g.example.com.", dns.TypeA, dns.RcodeNameError, "", 60},
		{"sub.g.example.com.", dns.TypeA, dns.RcodeSuccess, "", 60},
		{"rr.g.example.com.", dns.TypeMX, dns.RcodeSuccess, "", 60},
		{"wrr.g.example.com.", dns.TypeAAAA, dns.RcodeSuccess, "", 60},    // no IPv6 member
		{"nx.other.example.net.", dns.TypeA, dns.RcodeNameError, "", 120}, // min(900, 120)
		{"example.org.", dns.TypeA, dns.RcodeRefused, "", 0},
		{"example.com.", dns.TypeSOA, dns.RcodeRefused, "", 0},
		{".", dns.TypeNS, dns.RcodeRefused, "", 0},
	} {
		r := ask(s, tt.qname, tt.qtype, "")
		var ans []string
		for _, rr := range r.Answer {
			ans = append(ans, fmt.Sprintf("%s:%d", dns.TypeToString[rr.Header().Rrtype], rr.Header().Ttl))
		}
		var neg uint32
		if len(r.Authority) == 1 {
			soa := r.Authority[0].(*dns.SOA)
			neg = soa.Hdr.Ttl
			if soa.Serial != 42 {
				t.Errorf("%s: serial %d", tt.qname, soa.Serial)
			}
		}
		if r.Rcode != tt.rcode || strings.Join(ans, " ") != tt.ans || neg != tt.neg || len(r.Authority) > 1 {
			t.Errorf("%s %s: rcode %d answer %q neg %d, want %d %q %d", tt.qname, dns.TypeToString[tt.qtype], r.Rcode, ans, neg, tt.rcode, tt.ans, tt.neg)
		}
	}
	soa := ask(s, "g.example.com.", dns.TypeSOA, "").Answer[0].(*dns.SOA)
	if soa.Ns != "ns1.example.com." || soa.Mbox != "hostmaster.g.example.com." || soa.Serial != 42 || soa.Minttl != 60 || s.Serial() != 42 {
		t.Errorf("SOA %v", soa)
	}
	mx := ask(s, "g.example.com.", dns.TypeMX, "").Answer[0].(*dns.MX)
	if mx.Preference != 10 || mx.Mx != "mail.example.com." {
		t.Errorf("MX %v", mx)
	}
}

func TestWhoami(t *testing.T) {
	s := snap(t, nil)
	q := Query{Name: "whoami.g.example.com.", Type: dns.TypeTXT, Source: src("192.0.2.200"), ECS: netip.MustParsePrefix("10.1.2.0/24")}
	r := s.Answer(q)
	if txt := r.Answer[0].(*dns.TXT).Txt; !slices.Equal(txt, []string{"resolver=192.0.2.200 ecs=10.1.2.0/24"}) || r.Scope != 24 {
		t.Errorf("TXT %v scope %d", txt, r.Scope)
	}
	q.ECS, q.Type = netip.Prefix{}, dns.TypeA
	if r := s.Answer(q); !slices.Equal(addrs(r), []string{"192.0.2.200"}) || r.Scope != 0 {
		t.Errorf("A %v", addrs(r))
	}
	q.Type = dns.TypeAAAA
	if r := s.Answer(q); len(r.Answer) != 0 || len(r.Authority) != 1 {
		t.Errorf("AAAA from an IPv4 resolver: %+v", r)
	}
	q.Type, q.Source = dns.TypeTXT, src("2001:db8::53")
	if txt := s.Answer(q).Answer[0].(*dns.TXT).Txt; txt[0] != "resolver=2001:db8::53 ecs=none" {
		t.Errorf("TXT %v", txt)
	}
}

// TestConcurrent answers from many goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	s := snap(t, nil)
	names := []string{"rr", "wrr", "hash", "random", "prio", "all", "geo", "fo", "st", "whoami", "www", "nx"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				n := names[(g+i)%len(names)] + ".g.example.com."
				if r := ask(s, n, dns.TypeA, "10.1.0.0/24"); r.Rcode == dns.RcodeRefused {
					t.Errorf("%s refused", n)
				}
			}
		})
	}
	wg.Wait()
}

// constLocator locates every address at one place (the benchmark
// measures the answer path, not the test's map walk).
type constLocator struct{ loc Location }

func (c constLocator) Locate(netip.Addr) Location { return c.loc }

func BenchmarkAnswer(b *testing.B) {
	cfg := parse(b, snapDoc())
	s := NewSnapshot(cfg, states(cfg, map[string]health.State{"dead/*": health.Down}),
		constLocator{testLocator[netip.MustParsePrefix("10.2.0.0/16")]}, 1)
	for _, bc := range []struct {
		name  string
		query Query
	}{
		{"geo-ecs", Query{Name: "geo.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200"), ECS: netip.MustParsePrefix("10.2.3.0/24")}},
		{"rr", Query{Name: "rr.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200")}},
		{"hash-ecs", Query{Name: "hash.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200"), ECS: netip.MustParsePrefix("10.2.3.0/24")}},
		{"static", Query{Name: "www.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200")}},
		{"nxdomain", Query{Name: "nx.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			q := bc.query
			q.Records = new(Records) // as the server's readers pass theirs
			for b.Loop() {
				if r := s.Answer(q); r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
					b.Fatal(r.Rcode)
				}
			}
		})
	}
}

// TestTraceOnlyWhenAsked: Explain fills the trace on every path, and
// only then.
func TestTraceOnlyWhenAsked(t *testing.T) {
	s := snap(t, nil)
	for _, qname := range []string{"geo.g.example.com.", "fo.g.example.com.", "sf.g.example.com.", "www.g.example.com.",
		"nx.g.example.com.", "whoami.g.example.com.", "example.org.", "wrr.g.example.com."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			q := Query{Name: qname, Type: qt, Source: src("10.1.0.1")}
			if r := s.Answer(q); r.Trace != nil {
				t.Errorf("%s: trace without Explain", qname)
			}
			q.Explain = true
			r := s.Answer(q)
			if r.Trace == nil {
				t.Fatalf("%s: no trace with Explain", qname)
			}
			if got := r.Trace.Answer; !slices.Equal(got, addrsOf(r.Answer)) {
				t.Errorf("%s: trace answer %v, answer %v", qname, got, r.Answer)
			}
		}
	}
	tr := ask(s, "www.g.example.com.", dns.TypeA, "").Trace
	if tr.Name != "" || tr.TTL != 300 || !slices.Equal(tr.Answer, []netip.Addr{src("192.0.2.100")}) {
		t.Errorf("static trace %+v", tr)
	}
	// A name with ECS off locates the resolver.
	tr = ask(s, "geo-noecs.g.example.com.", dns.TypeA, "10.1.0.0/24").Trace
	if tr.ClientFrom != "source" || tr.Client != src("192.0.2.200") || tr.Policies[0].Matched {
		t.Errorf("ecs off trace %+v", tr)
	}
}

// TestWithSerial: a snapshot moved to another serial answers every
// question as a snapshot built with that serial does (the SOA in answers
// and in authority included), and the snapshot it came from still
// answers its own serial.
func TestWithSerial(t *testing.T) {
	cfg := parse(t, snapDoc())
	st := states(cfg, map[string]health.State{"dead/*": health.Down})
	s := NewSnapshot(cfg, st, testLocator, 42)
	if s.WithSerial(42) != s {
		t.Error("WithSerial of the snapshot's own serial is a copy")
	}
	moved, want := s.WithSerial(7), NewSnapshot(cfg, st, testLocator, 7)
	for _, q := range []struct {
		qname string
		qtype uint16
	}{
		{"g.example.com.", dns.TypeSOA}, {"g.example.com.", dns.TypeNS}, {"g.example.com.", dns.TypeMX},
		{"g.example.com.", dns.TypeA}, {"other.example.net.", dns.TypeSOA}, {"nx.other.example.net.", dns.TypeA},
		{"nx.g.example.com.", dns.TypeA}, {"www.g.example.com.", dns.TypeA}, {"www.g.example.com.", dns.TypeAAAA},
		{"rr.g.example.com.", dns.TypeA}, {"rr.g.example.com.", dns.TypeA}, {"dead.g.example.com.", dns.TypeA},
		{"sub.g.example.com.", dns.TypeA}, {"whoami.g.example.com.", dns.TypeA}, {"example.org.", dns.TypeA},
	} {
		got, exp := respText(ask(moved, q.qname, q.qtype, "")), respText(ask(want, q.qname, q.qtype, ""))
		if got != exp {
			t.Errorf("%s %s: %s, want %s", q.qname, dns.TypeToString[q.qtype], got, exp)
		}
	}
	if moved.Serial() != 7 || !slices.Equal(moved.Zones(), s.Zones()) {
		t.Errorf("moved: serial %d zones %v", moved.Serial(), moved.Zones())
	}
	for _, q := range []string{"g.example.com.", "nx.g.example.com."} {
		r := ask(s, q, dns.TypeSOA, "")
		for _, rr := range slices.Concat(r.Answer, r.Authority) {
			if soa, ok := rr.(*dns.SOA); ok && soa.Serial != 42 {
				t.Errorf("%s: the original snapshot answers serial %d, want 42", q, soa.Serial)
			}
		}
	}
}

// TestRRArena: the arena's records are those addrRR makes, for IPv4,
// IPv6 and IPv4-mapped IPv6 addresses, across many arrays, and a record
// handed out earlier is not changed by those made after it.
func TestRRArena(t *testing.T) {
	var ar rrArena
	var got, want []dns.RR
	for i := range 3 * arenaChunk {
		var a netip.Addr
		switch i % 3 {
		case 0:
			a = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		case 1:
			a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
		default:
			a = netip.AddrFrom16(netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)}).As16())
		}
		owner := fmt.Sprintf("n%d.example.", i)
		got = append(got, ar.rr(owner, a, uint32(i)))
		want = append(want, addrRR(owner, a, uint32(i)))
	}
	for i := range got {
		if got[i].String() != want[i].String() {
			t.Fatalf("record %d: %s, want %s", i, got[i], want[i])
		}
	}
	a := got[0].(*dns.A)
	if cap(a.A) != len(a.A) {
		t.Errorf("address bytes not capped: len %d cap %d", len(a.A), cap(a.A))
	}
}

// TestSnapshotParts: names built by several goroutines make the snapshot
// one goroutine makes: the same answers, and the names on their last
// resort and under intent in configuration order.
func TestSnapshotParts(t *testing.T) {
	cfg := parse(t, snapDoc())
	st := states(cfg, map[string]health.State{"dead/*": health.Down, "prio/p1": health.Down})
	raise := WithIntent(intent.State{TTLRaises: []intent.TTLRaise{{Zone: "g.example.com.", Seconds: 900}}})
	for _, parts := range []int{2, 3, len(cfg.GSLB.Names), len(cfg.GSLB.Names) + 5} {
		// Fresh both: answers move the pools' rotation counters.
		one, many := newSnapshot(cfg, st, testLocator, 42, 1, raise), newSnapshot(cfg, st, testLocator, 42, parts, raise)
		if !slices.Equal(one.Degraded(), many.Degraded()) || !slices.Equal(one.Emergencies(), many.Emergencies()) {
			t.Errorf("%d parts: degraded %v emergencies %v, want %v and %v", parts, many.Degraded(), many.Emergencies(), one.Degraded(), one.Emergencies())
		}
		if len(one.Emergencies()) < 2 {
			t.Fatalf("emergencies %v: the test wants several", one.Emergencies())
		}
		for i := range cfg.GSLB.Names {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
				q := dns.CanonicalName(cfg.GSLB.Names[i].Name)
				if q == "random.g.example.com." {
					continue // its pick is random
				}
				for _, ecs := range []string{"", "198.51.100.0/24"} {
					if got, want := respText(ask(many, q, qt, ecs)), respText(ask(one, q, qt, ecs)); got != want {
						t.Errorf("%d parts: %s %s (ECS %q): %s, want %s", parts, q, dns.TypeToString[qt], ecs, got, want)
					}
				}
			}
		}
	}
}

// respText is r's rcode and its answer and authority records, as text.
func respText(r Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rcode %d;", r.Rcode)
	for _, rr := range slices.Concat(r.Answer, r.Authority) {
		b.WriteString(" " + rr.String())
	}
	return b.String()
}
