package prefetch

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 100, 0, time.UTC) // a whole second

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func spec(res string, p Policy) Spec {
	return Spec{Key: Key{Name: "www.example.", Type: dns.TypeA, Resolver: res}, Policy: p}
}

var (
	bindPol    = PolicyFor("bind", "window", 2*time.Second, 0)
	unboundPol = PolicyFor("unbound", "window", 0, 10)
	expiryPol  = PolicyFor("dnsmasq", "expiry", 0, 0)
)

func ok(ttl int) Outcome { return Outcome{OK: true, TTL: time.Duration(ttl) * time.Second} }

// step is one query answered: Pop at when, answer o, expect next.
type step struct {
	when float64
	o    Outcome
	next float64
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name         string
		pol          Policy
		steps        []step
		foundExpired uint64
		fetches      uint64
	}{
		{"expiry: just after expiry", expiryPol, []step{
			{0.3, ok(10), 10.05}, // E = 10
			{10.05, ok(10), 20.05},
		}, 0, 2},
		{"expiry: TTL 0 served through the zero second, aim one second later", expiryPol, []step{
			{0.3, ok(10), 10.05},
			{10.05, ok(0), 11.05},
			{11.05, ok(10), 22.05},
		}, 0, 2},
		{"bind window: middle of the 2s window, then read the refreshed entry", bindPol, []step{
			{0.3, ok(10), 9},   // E = 10, window [8,10), middle 9
			{9, ok(1), 10.05},  // in the window: BIND refreshes; read after old E
			{10.05, ok(9), 18}, // refreshed at 9.08: E' = 19
			{18, ok(1), 19.05}, // again
			{19.05, ok(9), 27},
		}, 0, 1},
		{"bind window: entry found expired", bindPol, []step{
			{0.3, ok(10), 9},
			{9, ok(1), 10.05},   // the product should refresh now, but does not
			{10.05, ok(10), 19}, // a full fresh TTL after the old expiry
		}, 1, 2},
		{"bind window: refreshed early by a client is not found expired", bindPol, []step{
			{0.3, ok(10), 9},
			{9, ok(10), 18},
		}, 0, 2},
		{"bind below 9s original TTL: expiry", bindPol, []step{
			{0.3, ok(5), 5.05},
		}, 0, 1},
		{"unbound 10% of 10s: 1s window, aim 0.5s before expiry", unboundPol, []step{
			{0.3, ok(10), 9.5},
			{9.5, ok(1), 10.05}, // in the window: read after the old expiry
		}, 0, 1},
		{"unbound 10% of 30s: 3s window", unboundPol, []step{
			{0.3, ok(30), 28.5},
		}, 0, 1},
		{"unbound 10% of 4s: no whole-second window, expiry", unboundPol, []step{
			{0.3, ok(4), 4.05},
		}, 0, 1},
		{"unbound 10% of 9s rounds to a 1s window", unboundPol, []step{
			{0.3, ok(9), 8.5},
		}, 0, 1},
		{"cached mid-life answer learns expiry from remaining TTL", expiryPol, []step{
			{0.7, ok(4), 4.05},
		}, 0, 1},
		{"uncacheable zero TTL waits", expiryPol, []step{
			{0.3, ok(0), 60.3},
		}, 0, 0},
		{"failures back off 1s, 2s, 4s, then recover", expiryPol, []step{
			{0, Outcome{Detail: "timeout"}, 1},
			{1, Outcome{Detail: "rcode SERVFAIL"}, 3},
			{3, Outcome{Detail: "timeout"}, 7},
			{7, ok(10), 17.05},
		}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScheduler(0, nil)
			s.SetHealthy(map[string]bool{"r": true}, at(0))
			sp := spec("r", tt.pol)
			s.Set([]Spec{sp}, at(0))
			for i, st := range tt.steps {
				got, popped := s.Pop(at(st.when))
				if !popped || got.Key != sp.Key {
					next, _ := s.Next()
					t.Fatalf("step %d: nothing due at %v (next %v)", i, at(st.when), next.Sub(t0))
				}
				if _, again := s.Pop(at(st.when + 100)); again {
					t.Fatalf("step %d: entry popped twice while in flight", i)
				}
				next := s.Done(sp.Key, st.o, at(st.when))
				if want := at(st.next); !next.Equal(want) {
					t.Errorf("step %d: next = %v, want %v", i, next.Sub(t0), want.Sub(t0))
				}
			}
			c := s.Totals()
			if c.FoundExpired != tt.foundExpired || c.Fetches != tt.fetches || c.Queries != uint64(len(tt.steps)) {
				t.Errorf("counters = %+v, want found_expired %d, fetches %d, queries %d", c, tt.foundExpired, tt.fetches, len(tt.steps))
			}
		})
	}
}

func TestBackoffCapped(t *testing.T) {
	s := NewScheduler(0, nil)
	s.SetHealthy(map[string]bool{"r": true}, at(0))
	sp := spec("r", expiryPol)
	s.Set([]Spec{sp}, at(0))
	now := at(0)
	var gap time.Duration
	for i := 0; i < 12; i++ {
		if _, ok := s.Pop(now); !ok {
			t.Fatalf("failure %d: not due", i)
		}
		next := s.Done(sp.Key, Outcome{Detail: "timeout"}, now)
		gap, now = next.Sub(now), next
	}
	if gap != MaxBackoff {
		t.Errorf("gap after 12 failures = %v, want %v", gap, MaxBackoff)
	}
	if st := s.Snapshot(now)[0]; st.ConsecutiveFailures != 12 || st.Counters.Failures != 12 || st.LastError != "timeout" {
		t.Errorf("status = %+v", st)
	}
}

func TestHealthParking(t *testing.T) {
	s := NewScheduler(0, nil)
	a, b := spec("a", expiryPol), spec("b", expiryPol)
	s.Set([]Spec{a, b}, at(0))
	if _, ok := s.Next(); ok {
		t.Fatal("entries queued before any resolver is healthy")
	}
	s.SetHealthy(map[string]bool{"a": true, "b": false}, at(1))
	got, ok := s.Pop(at(1))
	if !ok || got.Key.Resolver != "a" {
		t.Fatalf("Pop = %v %v, want a", got.Key, ok)
	}
	if _, ok := s.Pop(at(1)); ok {
		t.Fatal("b popped while unhealthy")
	}
	// a goes down while its query is in flight: the result is recorded,
	// the entry stays parked.
	s.SetHealthy(map[string]bool{"b": true}, at(2))
	if next := s.Done(a.Key, ok10(), at(2)); !next.IsZero() {
		t.Errorf("parked entry rescheduled at %v", next)
	}
	if got, ok := s.Pop(at(2)); !ok || got.Key.Resolver != "b" {
		t.Fatalf("b not due at once after recovery: %v %v", got.Key, ok)
	}
	s.SetHealthy(map[string]bool{"a": true, "b": true}, at(3))
	if got, ok := s.Pop(at(3)); !ok || got.Key.Resolver != "a" {
		t.Fatalf("a not resumed: %v %v", got.Key, ok)
	}
	st := s.Snapshot(at(3))
	if len(st) != 2 || !st[0].Healthy || st[0].LastTTL != 10*time.Second || st[0].Remaining != 9*time.Second {
		t.Errorf("snapshot = %+v", st)
	}
}

func ok10() Outcome { return ok(10) }

func TestSetKeepsState(t *testing.T) {
	s := NewScheduler(0, nil)
	s.SetHealthy(map[string]bool{"a": true, "b": true}, at(0))
	a, b := spec("a", expiryPol), spec("b", expiryPol)
	s.Set([]Spec{a, b}, at(0))
	for range 2 {
		sp, _ := s.Pop(at(0))
		s.Done(sp.Key, ok(10), at(0.5))
	}
	c := Spec{Key: Key{Name: "other.example.", Type: dns.TypeAAAA, Resolver: "a"}, Policy: expiryPol}
	a.Policy = bindPol
	s.Set([]Spec{a, c}, at(1))
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
	st := s.Snapshot(at(1))
	if st[1].Key != a.Key || st[1].Counters.Queries != 1 || st[1].OriginalTTL != 10*time.Second {
		t.Errorf("kept entry lost its state: %+v", st[1])
	}
	if st[1].Mode != Window {
		t.Errorf("policy change not taken over: mode %v", st[1].Mode)
	}
	if st[0].Key != c.Key || st[0].NextRun != at(1) {
		t.Errorf("new entry = %+v, want due at once", st[0])
	}
}

// TestJitterBounded checks where the jitter can put a window-mode query:
// the window of an answer with TTL 10 under BIND's 2s trigger is [8,10),
// its middle 9, and a jitter of 100ms spreads the query over [8.95, 9.05).
func TestJitterBounded(t *testing.T) {
	for _, tt := range []struct {
		name string
		rnd  func(n time.Duration) time.Duration
		want time.Time
	}{
		{"least", func(time.Duration) time.Duration { return 0 }, at(8.95)},
		{"middle", func(n time.Duration) time.Duration { return n / 2 }, at(9)},
		{"most", func(n time.Duration) time.Duration { return n - 1 }, at(9.05).Add(-1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScheduler(100*time.Millisecond, tt.rnd)
			s.SetHealthy(map[string]bool{"r": true}, at(0))
			sp := spec("r", bindPol)
			s.Set([]Spec{sp}, at(0))
			sp, _ = s.Pop(at(1))
			if next := s.Done(sp.Key, ok(10), at(0.3)); !next.Equal(tt.want) {
				t.Errorf("next = %v, want %v", next.Sub(t0), tt.want.Sub(t0))
			}
		})
	}
}

func TestBucket(t *testing.T) {
	b := newBucket(10, 2, at(0))
	got := 0
	for i := 0; i < 100; i++ {
		if b.take(at(0)) == 0 {
			got++
		}
	}
	if got != 2 {
		t.Errorf("burst gave %d tokens, want 2", got)
	}
	if w := b.take(at(0)); w != 100*time.Millisecond {
		t.Errorf("wait = %v, want 100ms", w)
	}
	// Asked every millisecond for one second at 10/s, the empty bucket
	// gives a token every 100ms: at 100, 200, ... 1000ms.
	var when []int
	for ms := 0; ms <= 1000; ms++ {
		if b.take(at(float64(ms)/1000)) == 0 {
			when = append(when, ms)
		}
	}
	if want := []int{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}; !slices.Equal(when, want) {
		t.Errorf("one second at 10/s gave tokens at %v ms, want %v", when, want)
	}
}

func TestExpiryGap(t *testing.T) {
	s := NewScheduler(0, nil)
	s.SetHealthy(map[string]bool{"r": true}, at(0))
	sp := spec("r", expiryPol)
	s.Set([]Spec{sp}, at(0))
	for _, st := range []step{{0.3, ok(10), 10.05}, {10.05, ok(0), 11.05}, {11.13, ok(10), 22.05}} {
		s.Pop(at(st.when))
		s.Done(sp.Key, st.o, at(st.when))
	}
	// expired at 11 (served through the zero second 10), re-fetched at 11.13
	if g := s.Snapshot(at(12))[0].Gap; g != 130*time.Millisecond {
		t.Errorf("Gap = %v, want 130ms", g)
	}
}

// TestFetchCountedOncePerCacheEntry: two ECS partitions of one name at
// one resolver whose answer holds for every subnet (scope 0, or no ECS in
// the reply) read one cache entry: the partition that queries second in
// the same second gets the full TTL the first one's query just fetched,
// and that is one fetch, not two. With a scope that tells the partitions
// apart they are two entries and two fetches; the same scope covering
// both is one.
func TestFetchCountedOncePerCacheEntry(t *testing.T) {
	part := func(name, addr string) Spec {
		sp := spec("r", expiryPol)
		sp.Key.Partition, sp.ECS = name, netip.MustParseAddr(addr)
		return sp
	}
	answer := func(ttl, scope int) Outcome { o := ok(ttl); o.Scope = scope; return o }
	tests := []struct {
		name    string
		specs   []Spec
		scope   int
		second  float64 // when the second partition's answer arrives
		fetches uint64
	}{
		{"scope 0, same second", []Spec{part("eu", "192.0.2.1"), part("us", "198.51.100.1")}, 0, 0.35, 1},
		{"scope 0, across a second boundary", []Spec{part("eu", "192.0.2.1"), part("us", "198.51.100.1")}, 0, 1.1, 1},
		{"scope /24 apart", []Spec{part("eu", "192.0.2.1"), part("us", "198.51.100.1")}, 24, 0.35, 2},
		{"scope /16 covering both", []Spec{part("a", "10.1.2.3"), part("b", "10.1.9.9")}, 16, 0.35, 1},
		{"families apart", []Spec{part("v4", "192.0.2.1"), part("v6", "2001:db8::1")}, 24, 0.35, 2},
		{"no ECS and a partition, scope 0", []Spec{spec("r", expiryPol), part("eu", "192.0.2.1")}, 0, 0.35, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScheduler(0, nil)
			s.SetHealthy(map[string]bool{"r": true}, at(0))
			s.Set(tc.specs, at(0))
			a, _ := s.Pop(at(0.3))
			b, _ := s.Pop(at(0.3))
			s.Done(a.Key, answer(30, tc.scope), at(0.3))
			s.Done(b.Key, answer(30, tc.scope), at(tc.second))
			if got := s.Totals().Fetches; got != tc.fetches {
				t.Errorf("fetches %d, want %d", got, tc.fetches)
			}
			// The next expiry: again one fetch per cache entry, and a
			// sibling's fetch a TTL before does not hide this one's.
			a, _ = s.Pop(at(30.05))
			b, _ = s.Pop(at(31.5))
			s.Done(a.Key, answer(30, tc.scope), at(30.05))
			s.Done(b.Key, answer(30, tc.scope), at(30.1))
			if got := s.Totals().Fetches; got != 2*tc.fetches {
				t.Errorf("after the second expiry: fetches %d, want %d", got, 2*tc.fetches)
			}
		})
	}
	// A different name or resolver is another cache entry.
	s := NewScheduler(0, nil)
	s.SetHealthy(map[string]bool{"r": true, "q": true}, at(0))
	other := spec("q", expiryPol)
	s.Set([]Spec{spec("r", expiryPol), other}, at(0))
	a, _ := s.Pop(at(0.3))
	b, _ := s.Pop(at(0.3))
	s.Done(a.Key, ok(30), at(0.3))
	s.Done(b.Key, ok(30), at(0.3))
	if got := s.Totals().Fetches; got != 2 {
		t.Errorf("two resolvers: fetches %d, want 2", got)
	}
}

// TestWindowFoundExpiredShown: a window entry whose product does not
// refresh in its window (unbound's subnet cache ignores prefetch) shows
// it: Expired after the read that found a fresh TTL, the gap and the
// longest gap; a cycle refreshed in time clears Expired.
func TestWindowFoundExpiredShown(t *testing.T) {
	s := NewScheduler(0, nil)
	s.SetHealthy(map[string]bool{"r": true}, at(0))
	sp := spec("r", bindPol)
	s.Set([]Spec{sp}, at(0))
	run := func(steps ...step) Status {
		t.Helper()
		for _, st := range steps {
			if _, ok := s.Pop(at(st.when)); !ok {
				t.Fatalf("nothing due at %v", st.when)
			}
			if next := s.Done(sp.Key, st.o, at(st.when)); !next.Equal(at(st.next)) {
				t.Fatalf("at %v: next %v, want %v", st.when, next.Sub(t0).Seconds(), st.next)
			}
		}
		return s.Snapshot(at(steps[len(steps)-1].when))[0]
	}
	st := run(step{0.3, ok(10), 9}, step{9, ok(1), 10.05}, step{10.05, ok(10), 19})
	if !st.Expired || st.Counters.FoundExpired != 1 || st.Gap != 50*time.Millisecond || st.MaxGap != 50*time.Millisecond {
		t.Fatalf("not refreshed in the window: expired %v found %d gap %v max %v", st.Expired, st.Counters.FoundExpired, st.Gap, st.MaxGap)
	}
	st = run(step{19, ok(1), 20.05}, step{20.05, ok(9), 28})
	if st.Expired || st.Counters.FoundExpired != 1 || st.MaxGap != 50*time.Millisecond {
		t.Errorf("refreshed in the window: expired %v found %d max gap %v", st.Expired, st.Counters.FoundExpired, st.MaxGap)
	}
}

// BenchmarkSchedulerCycle measures one Pop and Done of an entry among
// 5,000 (1,000 names × 5 resolvers), the runner's per-query core cost.
func BenchmarkSchedulerCycle(b *testing.B) {
	s := NewScheduler(100*time.Millisecond, func(n time.Duration) time.Duration { return n / 2 })
	var specs []Spec
	healthy := map[string]bool{}
	for r := range 5 {
		res := "r" + string(rune('0'+r))
		healthy[res] = true
		pol := expiryPol
		if r < 2 {
			pol = bindPol
		}
		for n := range 1000 {
			specs = append(specs, Spec{Key: Key{Name: "n" + string(rune('a'+n%26)) + string(rune('a'+n/26%26)) + string(rune('a'+n/676)) + ".example.", Type: dns.TypeA, Resolver: res}, Policy: pol})
		}
	}
	now := at(0)
	s.SetHealthy(healthy, now)
	s.Set(specs, now)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next, _ := s.Next()
		if next.After(now) {
			now = next
		}
		sp, _ := s.Pop(now)
		s.Done(sp.Key, ok(30), now.Add(time.Millisecond))
	}
}
