package resolvers

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/vip"
)

// threeConfig is testConfig's pool with three members: bind-1, bind-2
// and unbound-1 (min_healthy 1, recover_healthy 2).
func threeConfig() *configs.Config {
	c := testConfig("dr", true, 1)
	c.Pools[0].Members = []string{"bind-1", "bind-2", "unbound-1"}
	return c
}

// world is a pool's facts over time, as the planner sees them.
type world struct {
	t      *testing.T
	p      *Planner
	states map[string]health.State
	since  map[string]time.Time
	reason map[string]string
	rules  []Rule
	now    time.Time
}

// newWorld starts a planner on cfg with every member of states decided.
func newWorld(t *testing.T, cfg *configs.Config, states map[string]health.State) *world {
	w := &world{t: t, p: NewPlanner(), states: maps.Clone(states), since: map[string]time.Time{}, reason: map[string]string{}, now: t0}
	w.p.Configure(cfg, t0, false)
	return w
}

// set changes the state of the named members at the world's time (after
// moving it on by a minute).
func (w *world) set(s health.State, reason string, names ...string) {
	w.now = w.now.Add(time.Minute)
	for _, n := range names {
		w.states[n], w.since[n], w.reason[n] = s, w.now, reason
	}
}

func (w *world) facts() map[TargetKey]Fact {
	out := map[TargetKey]Fact{}
	for n, s := range w.states {
		at, ok := w.since[n]
		if !ok {
			at = t0
		}
		out[TargetKey{Resolver: n, Check: "rec"}] = Fact{State: s, Since: at, Fresh: true, Reason: w.reason[n]}
	}
	return out
}

// plan runs rounds until the plan settles (at most three) and returns the
// last step, with the events of every round.
func (w *world) plan() Step {
	w.t.Helper()
	var (
		st     Step
		events []Event
	)
	for range 3 {
		st = w.p.Plan(w.facts(), w.rules, w.now)
		events = append(events, st.Events...)
		st.Events = events
		if !st.Apply {
			return st
		}
		w.p.Settle(true)
		if w.p.Settled() {
			return st
		}
	}
	w.t.Fatalf("plan did not settle in three rounds: %+v", st.Plan.Pools)
	return st
}

// whys returns each member's reason code, "name=code" in member order.
func whys(ps PoolStatus) string {
	var out []string
	for _, m := range ps.Members {
		out = append(out, m.Name+"="+m.Why.Code.String())
	}
	return strings.Join(out, " ")
}

// udp returns the UDP service's destinations as "addr=weight", sorted.
func udp(p Plan) string {
	key := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.53"), Port: 53, Proto: vip.UDP}
	var out []string
	for a, d := range p.Table[key].Dests {
		out = append(out, a.String()+"="+strconv.FormatUint(uint64(d.Weight), 10))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

const (
	bind1 = "198.51.100.10:53"
	bind2 = "198.51.100.11:53"
	unb1  = "198.51.100.12:53"
)

// TestFailOpenLastGood is the case: bind-2 echoes a wrong
// question and unbound-1 replies with a wrong ID, both down long before;
// then the last good member, bind-1, dies. The pool fails open to bind-1
// alone; the two broken ones stay out.
func TestFailOpenLastGood(t *testing.T) {
	w := newWorld(t, threeConfig(), map[string]health.State{"bind-1": health.Up, "bind-2": health.Up, "unbound-1": health.Up})
	st := w.plan()
	if !st.Apply || !st.JustWarmed || udp(st.Plan) != bind1+"=100 "+bind2+"=101 "+unb1+"=102" {
		t.Fatalf("all up: apply %v warmed %v table %s", st.Apply, st.JustWarmed, udp(st.Plan))
	}
	w.set(health.Down, "question section mismatch", "bind-2")
	w.set(health.Down, "id mismatch", "unbound-1")
	st = w.plan()
	if got := udp(st.Plan); got != bind1+"=100" {
		t.Fatalf("two broken: table %s, want bind-1 alone", got)
	}
	w.now = w.now.Add(time.Hour)
	w.set(health.Down, "timeout", "bind-1")
	st = w.plan()
	ps := st.Plan.Pools[0]
	if !ps.FailOpen || ps.Diagnosis != BelowMinimum {
		t.Fatalf("last good down: fail-open %v diagnosis %s (%s)", ps.FailOpen, ps.Diagnosis, ps.Detail)
	}
	if got := udp(st.Plan); got != bind1+"=100" {
		t.Errorf("fail-open table %s, want bind-1 alone (the last good set)", got)
	}
	if got, want := whys(ps), "bind-1=held-fail-open bind-2=out-fail-open unbound-1=out-fail-open"; got != want {
		t.Errorf("whys %q, want %q", got, want)
	}
	for _, s := range []string{"holding", "bind-1", "kept out", "bind-2, unbound-1"} {
		if !strings.Contains(ps.Detail, s) {
			t.Errorf("detail %q does not mention %q", ps.Detail, s)
		}
	}
	if m := ps.Members[0]; !strings.Contains(m.Why.Text, "timeout") || !strings.Contains(m.Why.Text, "before the pool collapsed") {
		t.Errorf("held member's why text %q", m.Why.Text)
	}
	if len(st.Events) != 1 || !st.Events[0].FailOpen || !strings.Contains(st.Events[0].String(), "FAIL-OPEN") {
		t.Errorf("events %+v, want one loud fail-open event", st.Events)
	}
	if m, _ := w.p.Memory("main"); !m.FailOpen || !slices.Equal(m.LastGood, []string{"bind-1"}) {
		t.Errorf("memory %+v, want failing open with last good [bind-1]", m)
	}
}

// TestFailOpenColdStart: with no plan before (the daemon just started),
// a pool that fails open keeps every enabled member: nothing says which
// ones were in traffic.
func TestFailOpenColdStart(t *testing.T) {
	cfg := threeConfig()
	w := newWorld(t, cfg, map[string]health.State{"bind-1": health.Down, "bind-2": health.Down, "unbound-1": health.Down})
	w.since = map[string]time.Time{"bind-1": t0, "bind-2": t0.Add(time.Hour), "unbound-1": t0.Add(2 * time.Hour)}
	w.rules = []Rule{{Resolver: "unbound-1", Override: Disable}}
	st := w.plan()
	ps := st.Plan.Pools[0]
	if !ps.FailOpen {
		t.Fatalf("all down at start: not failing open (%s)", ps.Detail)
	}
	if got := udp(st.Plan); got != bind1+"=100 "+bind2+"=101" {
		t.Errorf("cold start table %s, want every enabled member", got)
	}
	if got, want := whys(ps), "bind-1=fail-open-all bind-2=fail-open-all unbound-1=disabled"; got != want {
		t.Errorf("whys %q, want %q", got, want)
	}
	if !strings.Contains(ps.Detail, "no last good set") {
		t.Errorf("detail %q does not say there is no last good set", ps.Detail)
	}
}

// TestFailOpenReload: a reload that changed the pool (its members, their
// addresses, or the question its check asks) forgets the last good set;
// one that did not (its check's pacing aside) keeps it.
func TestFailOpenReload(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *configs.Config)
		want   string // udp table after the reload
	}{
		{name: "unchanged pool", change: func(c *configs.Config) { c.VIPs[0].Scheduler = "rr"; c.Pools[0].MinHealthy = 1 },
			want: bind1 + "=100"},
		{name: "member added", change: func(c *configs.Config) { c.Pools[0].Members = append(c.Pools[0].Members, "unbound-2") },
			want: bind1 + "=100 " + bind2 + "=101 " + unb1 + "=102 198.51.100.13:53=103"},
		{name: "member address changed", change: func(c *configs.Config) {
			c.Resolvers[1].AddrPort = netip.MustParseAddrPort("198.51.100.99:5353")
		},
			want: bind1 + "=100 " + unb1 + "=102 198.51.100.99:53=101"},
		{name: "check pacing changed", change: func(c *configs.Config) { c.Checks["rec"].Fall = 5; c.Checks["rec"].Rise = 1 },
			want: bind1 + "=100"},
		{name: "check question changed", change: func(c *configs.Config) { c.Checks["rec"].DNS.QName = "other.example." },
			want: bind1 + "=100 " + bind2 + "=101 " + unb1 + "=102"},
		{name: "other check profile", change: func(c *configs.Config) {
			c.Checks["deep"] = &configs.Check{Name: "deep", Interval: configs.Duration{Duration: time.Second}, Rise: 2, Fall: 3}
			c.Pools[0].Check = "deep"
		},
			want: bind1 + "=100 " + bind2 + "=101 " + unb1 + "=102"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, threeConfig(), map[string]health.State{"bind-1": health.Up, "bind-2": health.Down, "unbound-1": health.Down})
			w.plan()
			w.now = w.now.Add(time.Hour)
			w.set(health.Down, "timeout", "bind-1")
			if got := udp(w.plan().Plan); got != bind1+"=100" {
				t.Fatalf("before the reload: table %s, want bind-1 held alone", got)
			}
			next := threeConfig()
			next.Checks["rec"] = &configs.Check{Name: "rec", Kind: "dns", Interval: configs.Duration{Duration: time.Second},
				Timeout: configs.Duration{Duration: 500 * time.Millisecond}, Rise: 2, Fall: 3, DNS: &configs.DNSCheck{QName: "probe.example."}}
			tc.change(next)
			if _, ok := w.states["unbound-2"]; !ok && slices.Contains(next.Pools[0].Members, "unbound-2") {
				w.states["unbound-2"], w.since["unbound-2"] = health.Down, t0
			}
			w.p.Configure(next, w.now, true)
			if !w.p.Warm() {
				t.Fatal("a reload cooled the planner down")
			}
			forget := tc.want != bind1+"=100"
			if m, _ := w.p.Memory("main"); !m.FailOpen || (m.LastGood == nil) != forget {
				t.Errorf("memory after the reload %+v; want failing open, last good forgotten %v", m, forget)
			}
			st := w.plan()
			if !st.Apply || st.JustWarmed {
				t.Errorf("after the reload: apply %v, just warmed %v; want true, false", st.Apply, st.JustWarmed)
			}
			if !st.Plan.Pools[0].FailOpen {
				t.Fatalf("after the reload: not failing open (%s)", st.Plan.Pools[0].Detail)
			}
			if got := udp(st.Plan); got != tc.want {
				t.Errorf("after the reload: table %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFailOpenRecovery: while failing open, members that recover come
// back at once; the pool keeps failing open (holding its last good set)
// until recover_healthy members are healthy, then only the healthy stay,
// and they are the next last good set.
func TestFailOpenRecovery(t *testing.T) {
	w := newWorld(t, threeConfig(), map[string]health.State{"bind-1": health.Up, "bind-2": health.Down, "unbound-1": health.Down})
	w.plan()
	w.now = w.now.Add(time.Hour)
	w.set(health.Down, "timeout", "bind-1")
	w.plan()

	w.set(health.Up, "", "bind-2")
	st := w.plan()
	ps := st.Plan.Pools[0]
	if !ps.FailOpen || !strings.Contains(ps.Detail, "recover_healthy") {
		t.Errorf("one recovered: fail-open %v (%s), want held by recover_healthy 2", ps.FailOpen, ps.Detail)
	}
	if got, want := whys(ps), "bind-1=held-fail-open bind-2=healthy unbound-1=out-fail-open"; got != want {
		t.Errorf("one recovered: whys %q, want %q", got, want)
	}
	if got := udp(st.Plan); got != bind1+"=100 "+bind2+"=101" {
		t.Errorf("one recovered: table %s", got)
	}

	w.set(health.Up, "", "unbound-1")
	st = w.plan()
	ps = st.Plan.Pools[0]
	if ps.FailOpen {
		t.Errorf("recover_healthy reached: still failing open (%s)", ps.Detail)
	}
	if got, want := whys(ps), "bind-1=down bind-2=healthy unbound-1=healthy"; got != want {
		t.Errorf("recovered: whys %q, want %q", got, want)
	}
	if got := udp(st.Plan); got != bind2+"=101 "+unb1+"=102" {
		t.Errorf("recovered: table %s", got)
	}
	if len(st.Events) != 1 || st.Events[0].FailOpen {
		t.Errorf("recovered: events %+v, want one that ends the fail-open", st.Events)
	}

	// The next collapse holds the new last good set.
	w.now = w.now.Add(time.Hour)
	w.set(health.Down, "timeout", "bind-2")
	w.plan()
	w.now = w.now.Add(time.Hour)
	w.set(health.Down, "timeout", "unbound-1")
	st = w.plan()
	if got, want := whys(st.Plan.Pools[0]), "bind-1=out-fail-open bind-2=out-fail-open unbound-1=held-fail-open"; got != want {
		// bind-2 went down while unbound-1 still met min_healthy: it was
		// out before the collapse.
		t.Errorf("second collapse: whys %q, want %q", got, want)
	}
}

// TestFailOpenOverrides: a drained member of the last good set is held at
// weight 0, a disabled one stays out, and a last good set with no enabled
// member left falls back to every enabled member (nothing else could take
// the queries).
func TestFailOpenOverrides(t *testing.T) {
	tests := []struct {
		name  string
		rules []Rule
		whys  string
		table string
	}{
		{name: "drained held at weight 0", rules: []Rule{{Resolver: "bind-1", Override: Drain}},
			whys: "bind-1=drained bind-2=out-fail-open unbound-1=out-fail-open", table: bind1 + "=0"},
		{name: "last good disabled: every enabled member", rules: []Rule{{Resolver: "bind-1", Override: Disable}},
			whys: "bind-1=disabled bind-2=fail-open-all unbound-1=fail-open-all", table: bind2 + "=101 " + unb1 + "=102"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, threeConfig(), map[string]health.State{"bind-1": health.Up, "bind-2": health.Down, "unbound-1": health.Down})
			w.plan()
			w.now = w.now.Add(time.Hour)
			w.set(health.Down, "timeout", "bind-1")
			w.rules = tc.rules
			st := w.plan()
			if got := whys(st.Plan.Pools[0]); got != tc.whys {
				t.Errorf("whys %q, want %q", got, tc.whys)
			}
			if got := udp(st.Plan); got != tc.table {
				t.Errorf("table %s, want %s", got, tc.table)
			}
		})
	}
}

// TestPlannerWarmUp: the table is held back until every target has a
// verdict or the warm-up is over; verdicts are reported only once warm,
// and the warm-up's partial plans leave no memory for the first applied
// plan (a pool that looked below its minimum must not be held failing
// open by the hysteresis).
func TestPlannerWarmUp(t *testing.T) {
	cfg := threeConfig() // warm-up: (3+1)*1s + 0.5s = 4.5s
	if got := WarmUp(cfg); got != 4500*time.Millisecond {
		t.Fatalf("WarmUp = %s, want 4.5s", got)
	}
	p := NewPlanner()
	p.Configure(cfg, t0, false)
	partial := map[TargetKey]Fact{{Resolver: "bind-1", Check: "rec"}: {State: health.Down, Since: t0, Fresh: true}}
	st := p.Plan(partial, nil, t0.Add(time.Second))
	if st.Apply || st.Decided || len(st.Events) != 0 || p.Warm() || st.Plan.Warm {
		t.Fatalf("partial facts within the warm-up: apply %v decided %v events %v warm %v plan warm %v", st.Apply, st.Decided, st.Events, p.Warm(), st.Plan.Warm)
	}
	if !st.Plan.Pools[0].FailOpen {
		t.Fatalf("partial plan: want failing open (nothing healthy yet), got %s", st.Plan.Pools[0].Detail)
	}
	all := map[TargetKey]Fact{}
	for _, n := range []string{"bind-1", "bind-2", "unbound-1"} {
		all[TargetKey{Resolver: n, Check: "rec"}] = Fact{State: health.Up, Since: t0, Fresh: true}
	}
	all[TargetKey{Resolver: "bind-1", Check: "rec"}] = Fact{State: health.Down, Since: t0, Fresh: true}
	st = p.Plan(all, nil, t0.Add(2*time.Second))
	if !st.Apply || !st.JustWarmed || !st.Decided || !p.Warm() || !st.Plan.Warm {
		t.Fatalf("every target decided: apply %v warmed %v decided %v plan warm %v", st.Apply, st.JustWarmed, st.Decided, st.Plan.Warm)
	}
	// The plan that ends the warm-up says so itself, with its members:
	// a reader of one plan never sees warm beside an undecided member.
	for _, m := range st.Plan.Pools[0].Members {
		if m.State == health.Unknown {
			t.Errorf("warm plan with %s undecided", m.Name)
		}
	}
	if ps := st.Plan.Pools[0]; ps.FailOpen {
		t.Errorf("first applied plan held failing open by the warm-up's partial plan: %s", ps.Detail)
	}
	if len(st.Events) != 1 || st.Events[0].From != NoFacts || st.Events[0].To != Degraded {
		t.Errorf("first events %+v, want no-facts -> degraded", st.Events)
	}
	st = p.Plan(all, nil, t0.Add(3*time.Second))
	if !st.Apply || st.JustWarmed || len(st.Events) != 0 {
		t.Errorf("next plan: apply %v warmed %v events %v", st.Apply, st.JustWarmed, st.Events)
	}

	// Undecided targets past the deadline: warm all the same.
	p = NewPlanner()
	p.Configure(cfg, t0, false)
	if st := p.Plan(partial, nil, t0.Add(4*time.Second)); st.Apply {
		t.Fatal("undecided before the deadline: applied")
	}
	if st := p.Plan(partial, nil, t0.Add(4500*time.Millisecond)); !st.Apply || !st.JustWarmed || st.Decided {
		t.Fatalf("undecided at the deadline: apply %v warmed %v decided %v", st.Apply, st.JustWarmed, st.Decided)
	}

	// A target undecided at the deadline with its latest probe failed (a
	// down verdict on its way) holds the warm-up until it is decided, up
	// to one more warm-up.
	failing := maps.Clone(all)
	failing[TargetKey{Resolver: "bind-1", Check: "rec"}] = Fact{State: health.Unknown, Since: t0, Fresh: true, Failing: true}
	p = NewPlanner()
	p.Configure(cfg, t0, false)
	if st := p.Plan(failing, nil, t0.Add(5*time.Second)); st.Apply || p.Warm() {
		t.Fatal("a down verdict on its way at the deadline: warm without it")
	}
	st = p.Plan(all, nil, t0.Add(5100*time.Millisecond))
	if !st.Apply || !st.JustWarmed || !st.Decided {
		t.Fatalf("the verdict came within the grace: apply %v warmed %v decided %v", st.Apply, st.JustWarmed, st.Decided)
	}
	for _, m := range st.Plan.Pools[0].Members {
		if m.State == health.Unknown {
			t.Errorf("warm plan with %s undecided", m.Name)
		}
	}
	p = NewPlanner()
	p.Configure(cfg, t0, false)
	if st := p.Plan(failing, nil, t0.Add(8900*time.Millisecond)); st.Apply {
		t.Fatal("within the grace (two warm-ups): applied")
	}
	if st := p.Plan(failing, nil, t0.Add(9*time.Second)); !st.Apply || !st.JustWarmed || st.Decided {
		t.Fatalf("still undecided after two warm-ups: apply %v warmed %v decided %v", st.Apply, st.JustWarmed, st.Decided)
	}
}

// TestPlannerCurrent: the plan in force is current only when it was
// settled and neither a fact (freshness included) nor a rule changed; a
// pool turning to failing open takes one more plan before it settles.
// This is the policy behind the daemon's tick skip.
func TestPlannerCurrent(t *testing.T) {
	cfg := threeConfig()
	p := NewPlanner()
	p.Configure(cfg, t0, false)
	fresh := map[TargetKey]Fact{}
	for _, n := range cfg.Pools[0].Members {
		fresh[TargetKey{Resolver: n, Check: "rec"}] = Fact{State: health.Up, Since: t0, Fresh: true}
	}
	seq := func(f map[TargetKey]Fact) func(func(TargetKey, Fact) bool) { return maps.All(f) }
	if p.Current(nil, seq(fresh)) {
		t.Fatal("current before any plan")
	}
	p.Plan(maps.Clone(fresh), nil, t0)
	if p.Current(nil, seq(fresh)) {
		t.Fatal("current before Settle")
	}
	p.Settle(true)
	if !p.Current(nil, seq(fresh)) {
		t.Fatal("settled plan with the same facts not current")
	}
	if p.Current([]Rule{{Resolver: "bind-1", Override: Drain}}, seq(fresh)) {
		t.Error("current under other rules")
	}
	fewer := maps.Clone(fresh)
	delete(fewer, TargetKey{Resolver: "bind-1", Check: "rec"})
	if p.Current(nil, seq(fewer)) {
		t.Error("current with a target gone")
	}
	stale := maps.Clone(fresh)
	for k, f := range stale {
		f.Fresh = false
		stale[k] = f
	}
	if p.Current(nil, seq(stale)) {
		t.Fatal("current with stale facts")
	}
	p.Plan(maps.Clone(stale), nil, t0.Add(time.Second))
	p.Settle(true)
	if p.Settled() || p.Current(nil, seq(stale)) {
		t.Fatal("the plan that turned the pool to failing open settled: the next plan reads its memory")
	}
	st := p.Plan(maps.Clone(stale), nil, t0.Add(2*time.Second))
	p.Settle(true)
	if !st.Plan.Pools[0].FailOpen || !p.Current(nil, seq(stale)) {
		t.Fatalf("second plan of the stale facts: fail-open %v, current %v", st.Plan.Pools[0].FailOpen, p.Current(nil, seq(stale)))
	}
	// A dirty apply leaves nothing settled; so does a new configuration.
	p.Settle(false)
	if p.Current(nil, seq(stale)) {
		t.Error("current after an unclean apply")
	}
	p.Settle(true)
	p.Configure(cfg, t0.Add(3*time.Second), true)
	if p.Current(nil, seq(stale)) {
		t.Error("current after Configure")
	}
}

// TestPlannerCurrentAllocs: a tick with nothing changed allocates nothing
// per target: as much over a thousand targets as over three.
func TestPlannerCurrentAllocs(t *testing.T) {
	allocs := func(extra int) float64 {
		cfg := threeConfig()
		p := NewPlanner()
		p.Configure(cfg, t0, false)
		facts := map[TargetKey]Fact{}
		for i := range extra {
			facts[TargetKey{Resolver: "r" + strconv.Itoa(i), Check: "rec"}] = Fact{State: health.Up, Since: t0, Fresh: true}
		}
		for _, n := range cfg.Pools[0].Members {
			facts[TargetKey{Resolver: n, Check: "rec"}] = Fact{State: health.Up, Since: t0, Fresh: true}
		}
		p.Plan(maps.Clone(facts), nil, t0)
		p.Settle(true)
		seq := maps.All(facts)
		if !p.Current(nil, seq) {
			t.Fatal("not current")
		}
		return testing.AllocsPerRun(10, func() { p.Current(nil, seq) })
	}
	if few, many := allocs(0), allocs(1000); many != few {
		t.Errorf("Current allocates %v times over 1003 targets, %v over 3: want the same", many, few)
	}
}

// TestWhatIf: the plan other rules would give, with the planner's memory,
// changes nothing in the planner.
func TestWhatIf(t *testing.T) {
	w := newWorld(t, threeConfig(), map[string]health.State{"bind-1": health.Up, "bind-2": health.Down, "unbound-1": health.Down})
	w.plan()
	if !w.p.Current(nil, maps.All(w.facts())) {
		t.Fatal("not current")
	}
	got := w.p.WhatIf(w.facts(), []Rule{{Resolver: "bind-1", Override: Disable}}, w.now)
	if udp(got) != bind2+"=101 "+unb1+"=102" || !got.Pools[0].FailOpen {
		t.Errorf("what if bind-1 were disabled: table %s fail-open %v, want the two down members (no enabled last good member)", udp(got), got.Pools[0].FailOpen)
	}
	if !w.p.Current(nil, maps.All(w.facts())) {
		t.Error("WhatIf changed the planner")
	}
}

// TestPlanDest: the plan indexes every member's destination per service,
// in traffic or not, with the reason.
func TestPlanDest(t *testing.T) {
	cfg := testConfig("nat", true, 1)
	f := facts(map[string]health.State{"bind-1": health.Up, "bind-2": health.Down, "unbound-1": health.Up, "unbound-2": health.Up}, nil)
	p := Compute(Input{Config: cfg, Facts: f, Overrides: []Rule{{Resolver: "unbound-1", Override: Drain}, {Resolver: "unbound-2", Override: Disable}}, Now: t0})
	key := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.53"), Port: 53, Proto: vip.TCP}
	for _, tc := range []struct {
		addr, member string
		code         WhyCode
		in           bool
	}{
		{"198.51.100.10:5353", "bind-1", WhyHealthy, true},
		{"198.51.100.11:5353", "bind-2", WhyDown, false},
		{"198.51.100.12:5353", "unbound-1", WhyDrained, true},
		{"198.51.100.13:5353", "unbound-2", WhyDisabled, false},
	} {
		ps, m, ok := p.Dest(key, netip.MustParseAddrPort(tc.addr))
		if !ok || ps.Name != "main" || m.Name != tc.member || m.Why.Code != tc.code || m.InTraffic != tc.in {
			t.Errorf("Dest(%s) = %v %+v; want pool main member %s why %s in traffic %v", tc.addr, ok, m, tc.member, tc.code, tc.in)
		}
	}
	if _, _, ok := p.Dest(key, netip.MustParseAddrPort("198.51.100.10:53")); ok {
		t.Error("Dest found a member at a port none has (nat keeps the resolver's port)")
	}
	other := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.54"), Port: 53, Proto: vip.TCP}
	if _, _, ok := p.Dest(other, netip.MustParseAddrPort("198.51.100.10:5353")); ok {
		t.Error("Dest found a member in a service of no VIP")
	}
	if s := WhyHeldFailOpen.String(); s != "held-fail-open" {
		t.Errorf("WhyHeldFailOpen = %q", s)
	}
}

// TestFailOpenCollapseWindow: members killed together are detected a
// probe or two apart, so the pool takes the first ones out while the
// last survivor still meets min_healthy. When the last one fails, the
// members that failed within collapse_window before it are held with it;
// a member that failed earlier, or was down long before, stays out. The
// times come from the facts (when each check went down), not from when
// the planner happens to run.
func TestFailOpenCollapseWindow(t *testing.T) {
	const w45 = 4500 * time.Millisecond // (fall 3 + 1) × 1s + 500ms
	tests := []struct {
		name   string
		window time.Duration
		// downs are the members that fail, in order, each this long
		// after the one before; the last one takes the pool below
		// min_healthy.
		downs []string
		gaps  []time.Duration
		late  time.Duration // how long after the last failure the planner runs
		whys  string
		table string
	}{
		{name: "a probe apart", window: w45, downs: []string{"bind-1", "bind-2"}, gaps: []time.Duration{0, time.Second},
			whys: "bind-1=held-fail-open bind-2=held-fail-open unbound-1=out-fail-open", table: bind1 + "=100 " + bind2 + "=101"},
		{name: "at the edge of the window", window: w45, downs: []string{"bind-1", "bind-2"}, gaps: []time.Duration{0, w45},
			whys: "bind-1=held-fail-open bind-2=held-fail-open unbound-1=out-fail-open", table: bind1 + "=100 " + bind2 + "=101"},
		{name: "planner late", window: w45, downs: []string{"bind-1", "bind-2"}, gaps: []time.Duration{0, 2 * time.Second}, late: 30 * time.Second,
			whys: "bind-1=held-fail-open bind-2=held-fail-open unbound-1=out-fail-open", table: bind1 + "=100 " + bind2 + "=101"},
		{name: "before the window", window: w45, downs: []string{"bind-1", "bind-2"}, gaps: []time.Duration{0, w45 + time.Millisecond},
			whys: "bind-1=out-fail-open bind-2=held-fail-open unbound-1=out-fail-open", table: bind2 + "=101"},
		{name: "window zero: the last good set alone", window: 0, downs: []string{"bind-1", "bind-2"}, gaps: []time.Duration{0, time.Second},
			whys: "bind-1=out-fail-open bind-2=held-fail-open unbound-1=out-fail-open", table: bind2 + "=101"},
		{name: "three in a row", window: w45, downs: []string{"unbound-1", "bind-1", "bind-2"}, gaps: []time.Duration{0, 2 * time.Second, 2 * time.Second},
			whys: "bind-1=held-fail-open bind-2=held-fail-open unbound-1=held-fail-open", table: bind1 + "=100 " + bind2 + "=101 " + unb1 + "=102"},
		{name: "three, the first too early", window: w45, downs: []string{"unbound-1", "bind-1", "bind-2"}, gaps: []time.Duration{0, 3 * time.Second, 2 * time.Second},
			whys: "bind-1=held-fail-open bind-2=held-fail-open unbound-1=out-fail-open", table: bind1 + "=100 " + bind2 + "=101"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := threeConfig()
			cfg.Pools[0].CollapseWindow.Duration = tc.window
			w := newWorld(t, cfg, map[string]health.State{"bind-1": health.Up, "bind-2": health.Up, "unbound-1": health.Up})
			if len(tc.downs) == 2 {
				// unbound-1 broke an hour ago, for reasons of its own.
				w.states["unbound-1"], w.since["unbound-1"] = health.Down, t0
			}
			w.plan()
			w.now = w.now.Add(time.Hour)
			var st Step
			for i, name := range tc.downs {
				w.now = w.now.Add(tc.gaps[i])
				w.states[name], w.since[name], w.reason[name] = health.Down, w.now, "timeout"
				if i == len(tc.downs)-1 {
					w.now = w.now.Add(tc.late)
				}
				st = w.plan()
				if ps := st.Plan.Pools[0]; ps.FailOpen != (i == len(tc.downs)-1) {
					t.Fatalf("after %s failed: fail-open %v (%s)", name, ps.FailOpen, ps.Detail)
				}
			}
			ps := st.Plan.Pools[0]
			if got := whys(ps); got != tc.whys {
				t.Errorf("whys %q, want %q (%s)", got, tc.whys, ps.Detail)
			}
			if got := udp(st.Plan); got != tc.table {
				t.Errorf("table %s, want %s", got, tc.table)
			}
			// The set held is the memory: the next plans keep holding it.
			w.now = w.now.Add(time.Minute)
			if got := whys(w.plan().Plan.Pools[0]); got != tc.whys {
				t.Errorf("a minute later: whys %q, want %q", got, tc.whys)
			}
		})
	}
}

// TestFailOpenCollapseRecovery: the members held by the collapse window
// are the pool's last good set while it fails open; once recovered, a
// member that fails and recovers in between leaves no trace, and the
// next collapse counts only failures within its own window.
func TestFailOpenCollapseRecovery(t *testing.T) {
	cfg := threeConfig()
	cfg.Pools[0].CollapseWindow.Duration = 4500 * time.Millisecond
	w := newWorld(t, cfg, map[string]health.State{"bind-1": health.Up, "bind-2": health.Up, "unbound-1": health.Up})
	w.plan()
	down := func(name string, after time.Duration) Step {
		w.now = w.now.Add(after)
		w.states[name], w.since[name], w.reason[name] = health.Down, w.now, "timeout"
		return w.plan()
	}
	up := func(name string, after time.Duration) Step {
		w.now = w.now.Add(after)
		w.states[name], w.since[name], w.reason[name] = health.Up, w.now, ""
		return w.plan()
	}
	// bind-1 fails and recovers: no trace once healthy again.
	down("bind-1", time.Hour)
	up("bind-1", time.Minute)
	if m, _ := w.p.Memory("main"); len(m.Left) != 0 || len(m.LastGood) != 3 {
		t.Fatalf("after bind-1 recovered: memory %+v, want three good, none left", m)
	}
	down("unbound-1", time.Minute)
	down("bind-1", 2*time.Second)
	st := down("bind-2", 2*time.Second)
	if got, want := whys(st.Plan.Pools[0]), "bind-1=held-fail-open bind-2=held-fail-open unbound-1=held-fail-open"; got != want {
		t.Fatalf("collapse: whys %q, want %q", got, want)
	}
	if m, _ := w.p.Memory("main"); !m.FailOpen || !slices.Equal(m.LastGood, []string{"bind-1", "bind-2", "unbound-1"}) {
		t.Errorf("failing open: memory %+v, want the three held", m)
	}
	up("bind-1", time.Minute)
	st = up("bind-2", time.Second)
	if ps := st.Plan.Pools[0]; ps.FailOpen || whys(ps) != "bind-1=healthy bind-2=healthy unbound-1=down" {
		t.Fatalf("recovered: fail-open %v whys %q", ps.FailOpen, whys(ps))
	}
	// unbound-1 stayed down through the recovery: it is not in the last
	// good set, nor among the members that left it, so the next collapse
	// keeps it out whatever the window.
	down("bind-1", time.Hour)
	st = down("bind-2", time.Second)
	if got, want := whys(st.Plan.Pools[0]), "bind-1=held-fail-open bind-2=held-fail-open unbound-1=out-fail-open"; got != want {
		t.Errorf("second collapse: whys %q, want %q", got, want)
	}
}

// TestCollapseWindowReload: a reload that changes the pool forgets the
// members that left its last good set with the set itself; one that does
// not keeps them.
func TestCollapseWindowReload(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *configs.Config)
		forget bool
	}{
		{"pacing only", func(c *configs.Config) { c.Checks["rec"].Interval.Duration = 2 * time.Second }, false},
		{"address changed", func(c *configs.Config) { c.Resolvers[0].AddrPort = netip.MustParseAddrPort("198.51.100.99:53") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := threeConfig()
			cfg.Pools[0].CollapseWindow.Duration = 4500 * time.Millisecond
			w := newWorld(t, cfg, map[string]health.State{"bind-1": health.Up, "bind-2": health.Up, "unbound-1": health.Up})
			w.plan()
			w.set(health.Down, "timeout", "bind-1")
			w.plan()
			if m, _ := w.p.Memory("main"); len(m.Left) != 1 || m.Left[0].Name != "bind-1" || !m.Left[0].At.Equal(w.now) {
				t.Fatalf("memory %+v, want bind-1 left at %s", m, w.now)
			}
			next := threeConfig()
			next.Pools[0].CollapseWindow.Duration = 4500 * time.Millisecond
			tc.change(next)
			w.p.Configure(next, w.now, true)
			if m, _ := w.p.Memory("main"); (len(m.Left) == 0) != tc.forget || (m.LastGood == nil) != tc.forget {
				t.Errorf("after the reload: memory %+v, want forgotten %v", m, tc.forget)
			}
		})
	}
}

// TestDrainedNotCountedHealthy: a drained or disabled member counts as
// healthy neither in the pool's count nor in its vendor's, so that the
// two agree; a healthy drained member still proves its vendor works (the
// pool is not diagnosed vendor-wide failure for it).
func TestDrainedNotCountedHealthy(t *testing.T) {
	cfg := testConfig("nat", true, 1)
	f := facts(map[string]health.State{"bind-1": health.Up, "bind-2": health.Up, "unbound-1": health.Up, "unbound-2": health.Up}, nil)
	p := Compute(Input{Config: cfg, Facts: f, Overrides: []Rule{{Resolver: "unbound-1", Override: Drain}, {Resolver: "unbound-2", Override: Disable}}, Now: t0})
	ps := p.Pools[0]
	if ps.Healthy != 2 {
		t.Errorf("pool healthy %d, want 2 (bind-1, bind-2)", ps.Healthy)
	}
	if got := ps.Vendors["unbound"]; got.Healthy != 0 || got.Total != 2 {
		t.Errorf("vendor unbound %d/%d, want 0/2 (one drained, one disabled)", got.Healthy, got.Total)
	}
	if got := ps.Vendors["bind"]; got.Healthy != 2 {
		t.Errorf("vendor bind healthy %d, want 2", got.Healthy)
	}
	sum := 0
	for _, v := range ps.Vendors {
		sum += v.Healthy
	}
	if sum != ps.Healthy {
		t.Errorf("vendor healthy counts sum to %d, pool healthy %d", sum, ps.Healthy)
	}
	if ps.Diagnosis == VendorWide {
		t.Errorf("diagnosis %s: a drained vendor is not a failed one", ps.Diagnosis)
	}
}
