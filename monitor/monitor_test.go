package monitor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/check"
	"lbdns/health"
	"lbdns/testkit/poll"
)

const (
	testInterval = 20 * time.Millisecond
	testTimeout  = 10 * time.Millisecond
	waitLimit    = 5 * time.Second
)

// addr returns a loopback address; no test here sends a packet to it.
func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}), 53)
}

// sched is the test schedule with rise and fall.
func sched(rise, fall int) Schedule {
	return Schedule{Interval: testInterval, Timeout: testTimeout, Rise: rise, Fall: fall}
}

// key is the key of test target id.
func key(id string) Key { return Key{Kind: "test", Member: id, Check: "chk"} }

// newTarget returns test target id at a with schedule s, checked by fn.
func newTarget(id string, a netip.AddrPort, s Schedule, fn func(ctx context.Context) check.Result) Target {
	return Target{Key: key(id), Addr: a, Schedule: s, Checker: check.Func(fn), Spec: "question"}
}

// nop is a check that fails at once.
func nop(context.Context) check.Result { return check.Result{} }

// fakeProbe is a scripted probe: per address it fails with a set detail or
// succeeds, optionally sleeping (ignoring its context, like a misbehaving
// probe) and counting calls and concurrent calls.
type fakeProbe struct {
	mu          sync.Mutex
	fail        map[netip.AddrPort]string
	delay       map[netip.AddrPort]time.Duration
	calls       map[netip.AddrPort]int
	inflight    map[netip.AddrPort]int
	maxInflight map[netip.AddrPort]int
	badDeadline int
}

func newFakeProbe() *fakeProbe {
	return &fakeProbe{
		fail:        map[netip.AddrPort]string{},
		delay:       map[netip.AddrPort]time.Duration{},
		calls:       map[netip.AddrPort]int{},
		inflight:    map[netip.AddrPort]int{},
		maxInflight: map[netip.AddrPort]int{},
	}
}

// newTarget returns test target id at a with schedule s, checked by f.
func (f *fakeProbe) newTarget(id string, a netip.AddrPort, s Schedule) Target {
	return newTarget(id, a, s, func(ctx context.Context) check.Result { return f.probe(ctx, a, s.Timeout) })
}

func (f *fakeProbe) probe(ctx context.Context, a netip.AddrPort, timeout time.Duration) check.Result {
	dl, ok := ctx.Deadline()
	f.mu.Lock()
	if !ok || time.Until(dl) > timeout {
		f.badDeadline++
	}
	f.calls[a]++
	f.inflight[a]++
	f.maxInflight[a] = max(f.maxInflight[a], f.inflight[a])
	d := f.delay[a]
	f.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight[a]--
	if detail := f.fail[a]; detail != "" {
		return check.Result{OK: false, RTT: time.Millisecond, Detail: detail}
	}
	return check.Result{OK: true, RTT: time.Millisecond, Detail: "NOERROR"}
}

func (f *fakeProbe) setFail(a netip.AddrPort, detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[a] = detail
}

func (f *fakeProbe) callCount(a netip.AddrPort) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[a]
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) on(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// of returns the transitions of one target as "from>to" strings.
func (r *recorder) of(id string) []string {
	var out []string
	for _, e := range r.all() {
		if e.Key == key(id) {
			out = append(out, e.Transition.From.String()+">"+e.Transition.To.String())
		}
	}
	return out
}

// start runs m until the returned stop is called (also at cleanup); stop
// fails the test if Run does not return within waitLimit.
func start(t *testing.T, m *Monitor) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(waitLimit):
				t.Fatalf("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func state(m *Monitor, id string) health.State {
	return m.Status()[key(id)].Health.State
}

func TestTransitionEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := newFakeProbe()
		rec := &recorder{}
		m := New(Options{OnEvent: rec.on})
		a := addr(1)
		m.Update([]Target{fp.newTarget("a", a, sched(2, 2))})
		start(t, m)

		poll.Until(t, waitLimit, "a up", poll.True(func() bool { return len(rec.of("a")) == 1 }))
		fp.setFail(a, "rcode SERVFAIL")
		poll.Until(t, waitLimit, "a down", poll.True(func() bool { return len(rec.of("a")) == 2 }))

		ev := rec.all()[1]
		if ev.Transition.From != health.Up || ev.Transition.To != health.Down {
			t.Errorf("transition = %v>%v, want up>down", ev.Transition.From, ev.Transition.To)
		}
		if ev.Transition.Reason != "rcode SERVFAIL" || ev.Result.Detail != "rcode SERVFAIL" || ev.Result.OK {
			t.Errorf("event reason %q result %+v, want the failing result", ev.Transition.Reason, ev.Result)
		}
		if ev.Addr != a || ev.Key != key("a") {
			t.Errorf("event target %v %v", ev.Key, ev.Addr)
		}
		st := m.Status()[key("a")]
		if st.Health.State != health.Down || st.Health.LastFailReason != "rcode SERVFAIL" {
			t.Errorf("status = %+v", st.Health)
		}
		if !st.Fresh(time.Now()) {
			t.Errorf("status of a running target is not fresh: %+v", st)
		}

		fp.setFail(a, "")
		poll.Until(t, waitLimit, "a up again", poll.True(func() bool { return len(rec.of("a")) == 3 }))
		if got, want := rec.of("a"), []string{"unknown>up", "up>down", "down>up"}; !slices.Equal(got, want) {
			t.Errorf("events = %v, want %v", got, want)
		}
		if f := m.Status()[key("a")].Health.Flaps; f != 2 {
			t.Errorf("flaps = %d, want 2", f)
		}
		fp.mu.Lock()
		defer fp.mu.Unlock()
		if fp.badDeadline != 0 {
			t.Errorf("%d probes without a deadline within the timeout", fp.badDeadline)
		}
	})
}

func TestUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := newFakeProbe()
		rec := &recorder{}
		m := New(Options{OnEvent: rec.on})
		a, b, c, d := addr(1), addr(2), addr(3), addr(4)
		m.Update([]Target{
			fp.newTarget("a", a, sched(2, 2)),
			fp.newTarget("b", b, sched(2, 2)),
			fp.newTarget("c", c, sched(2, 2)),
			fp.newTarget("d", d, sched(2, 2)),
		})
		start(t, m)
		poll.Until(t, waitLimit, "all up", poll.True(func() bool { return len(rec.all()) == 4 }))

		checksA := m.Status()[key("a")].Health.Checks
		checksD := m.Status()[key("d")].Health.Checks
		changed := fp.newTarget("b", b, sched(3, 2))
		changed.Spec = "another question"          // facts do not carry
		paced := fp.newTarget("d", d, sched(3, 2)) // only the pacing changed: facts carry
		paced.Schedule.Interval = testInterval * 2
		m.Update([]Target{
			fp.newTarget("a", a, sched(2, 2)), // equal values, a new checker
			changed,
			paced,
		})
		callsC := fp.callCount(c)

		st := m.Status()
		{ // unchanged target keeps state
			if st[key("a")].Health.State != health.Up {
				t.Errorf("a = %v, want up", st[key("a")].Health.State)
			}
		}
		{ // changed target restarts from unknown
			if st[key("b")].Health.State != health.Unknown || st[key("b")].Health.Checks != 0 {
				t.Errorf("b = %+v, want a fresh unknown tracker", st[key("b")].Health)
			}
			if st[key("b")].Health.Rise != 3 {
				t.Errorf("b rise = %d, want 3", st[key("b")].Health.Rise)
			}
		}
		{ // paced target keeps its facts
			if st[key("d")].Health.State != health.Up || st[key("d")].Health.Checks < checksD || st[key("d")].Health.Rise != 3 {
				t.Errorf("d = %+v, want up with its checks kept and rise 3", st[key("d")].Health)
			}
		}
		{ // removed target leaves status
			if _, ok := st[key("c")]; ok {
				t.Errorf("c still in status")
			}
		}

		poll.Until(t, waitLimit, "b up again", poll.True(func() bool { return len(rec.of("b")) == 2 }))
		poll.Until(t, waitLimit, "a probed 5 more times", poll.True(func() bool { return m.Status()[key("a")].Health.Checks >= checksA+5 }))
		// c would have been probed several times by now.
		poll.Until(t, waitLimit, "b probed 5 more times", poll.True(func() bool { return m.Status()[key("b")].Health.Checks >= 8 }))

		{ // no new event for unchanged target
			if got := rec.of("a"); !slices.Equal(got, []string{"unknown>up"}) {
				t.Errorf("a events = %v", got)
			}
			if got := rec.of("d"); !slices.Equal(got, []string{"unknown>up"}) {
				t.Errorf("d events = %v", got)
			}
		}
		{ // changed target decides again
			if got := rec.of("b"); !slices.Equal(got, []string{"unknown>up", "unknown>up"}) {
				t.Errorf("b events = %v", got)
			}
		}
		{ // removed target is not probed
			if got := fp.callCount(c); got != callsC {
				t.Errorf("c probed %d times after removal", got-callsC)
			}
			if got := rec.of("c"); len(got) != 1 {
				t.Errorf("c events = %v", got)
			}
		}
		{ // unchanged target never overlapped
			fp.mu.Lock()
			defer fp.mu.Unlock()
			for _, x := range []netip.AddrPort{a, b, c, d} {
				if fp.maxInflight[x] != 1 {
					t.Errorf("%v: max in flight %d", x, fp.maxInflight[x])
				}
			}
		}
	})
}

func TestSlowProbeNeverOverlaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := newFakeProbe()
		m := New(Options{})
		var targets []Target
		for i := 1; i <= 3; i++ {
			fp.delay[addr(i)] = 3 * testInterval // longer than the interval, ignoring ctx
			targets = append(targets, fp.newTarget(fmt.Sprint(i), addr(i), sched(1, 1)))
		}
		m.Update(targets)
		start(t, m)
		for i := 1; i <= 3; i++ {
			poll.Until(t, waitLimit, "5 probes", poll.True(func() bool { return fp.callCount(addr(i)) >= 5 }))
		}
		fp.mu.Lock()
		defer fp.mu.Unlock()
		for i := 1; i <= 3; i++ {
			if n := fp.maxInflight[addr(i)]; n != 1 {
				t.Errorf("target %d: %d probes in flight at once", i, n)
			}
		}
	})
}

func TestRunStopsAllGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	fp := newFakeProbe()
	m := New(Options{OnEvent: func(Event) {}})
	var targets []Target
	for i := range 100 {
		a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 1, byte(i / 256), byte(i % 256)}), 53)
		if i%2 == 0 {
			fp.delay[a] = testInterval // some probes are in flight at cancel
		}
		targets = append(targets, fp.newTarget(fmt.Sprint(i), a, sched(1, 1)))
	}
	m.Update(targets)
	stop := start(t, m)
	total := func() int {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		n := 0
		for _, c := range fp.calls {
			n += c
		}
		return n
	}
	poll.Until(t, waitLimit, "300 probes", poll.True(func() bool { return total() >= 300 }))
	stop()

	after := total()
	time.Sleep(5 * testInterval)
	if got := total(); got != after {
		t.Errorf("%d probes after Run returned", got-after)
	}
	poll.Until(t, waitLimit, "goroutines to settle", poll.True(func() bool { return runtime.NumGoroutine() <= base }))
}

func TestRunAgainKeepsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := newFakeProbe()
		rec := &recorder{}
		m := New(Options{OnEvent: rec.on})
		m.Update([]Target{fp.newTarget("a", addr(1), sched(1, 1))})

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		poll.Until(t, waitLimit, "a up", poll.True(func() bool { return state(m, "a") == health.Up }))
		{ // second concurrent Run is refused
			if err := m.Run(context.Background()); !errors.Is(err, ErrRunning) {
				t.Errorf("Run = %v, want ErrRunning", err)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		checks := m.Status()[key("a")].Health.Checks

		start(t, m)
		poll.Until(t, waitLimit, "a probed again", poll.True(func() bool { return m.Status()[key("a")].Health.Checks > checks }))
		if s := state(m, "a"); s != health.Up {
			t.Errorf("a = %v after restart, want up", s)
		}
		if got := rec.of("a"); !slices.Equal(got, []string{"unknown>up"}) {
			t.Errorf("events = %v, want one", got)
		}
	})
}

// fakeClock is a manually stepped clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestHandleResult(t *testing.T) {
	clk := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	var results []string
	m := New(Options{
		Now:      clk.Now,
		OnResult: func(k Key, r check.Result) { results = append(results, k.Member+":"+r.Detail) },
	})
	m.Update([]Target{newTarget("a", addr(1), sched(1, 2), nop)})
	tg := m.targets[key("a")]
	ctx := context.Background()

	steps := []struct {
		name   string
		r      check.Result
		event  string // "" for none
		reason string
	}{
		{"first success with rise 1 turns up", check.Result{OK: true, Detail: "NOERROR"}, "unknown>up", "NOERROR"},
		{"one failure below fall", check.Result{Detail: "timeout after 10ms"}, "", ""},
		{"second failure turns down", check.Result{Detail: "rcode SERVFAIL"}, "up>down", "rcode SERVFAIL"},
		{"failure while down", check.Result{Detail: "rcode REFUSED"}, "", ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.step(time.Second)
			m.handleResult(ctx, tg, s.r)
			var got []queuedEvent
			for len(m.events) > 0 {
				got = append(got, <-m.events)
			}
			if s.event == "" {
				if len(got) != 0 {
					t.Fatalf("events = %+v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("events = %+v, want one", got)
			}
			tr := got[0].ev.Transition
			if tr.From.String()+">"+tr.To.String() != s.event || tr.Reason != s.reason || !tr.At.Equal(clk.Now()) {
				t.Errorf("transition = %+v, want %s %q at %v", tr, s.event, s.reason, clk.Now())
			}
			if !reflect.DeepEqual(got[0].ev.Result, s.r) {
				t.Errorf("result = %+v, want %+v", got[0].ev.Result, s.r)
			}
		})
	}
	if len(results) != len(steps) || results[2] != "a:rcode SERVFAIL" {
		t.Errorf("OnResult calls = %v", results)
	}
	st := m.Status()[key("a")]
	if !st.LastAt.Equal(clk.Now()) || st.Last.Detail != "rcode REFUSED" {
		t.Errorf("last = %+v at %v", st.Last, st.LastAt)
	}
}

func TestHandleEventDropsStale(t *testing.T) {
	var got []string
	m := New(Options{
		OnEvent: func(e Event) { got = append(got, e.Key.Member) },
	})
	m.Update([]Target{
		newTarget("keep", addr(1), sched(1, 1), nop),
		newTarget("gone", addr(2), sched(1, 1), nop),
		newTarget("changed", addr(3), sched(1, 1), nop),
	})
	old := map[string]*target{}
	for k, tg := range m.targets {
		old[k.Member] = tg
	}
	m.Update([]Target{
		newTarget("keep", addr(1), sched(1, 1), nop),
		newTarget("changed", addr(4), sched(1, 1), nop),
	})
	for _, id := range []string{"keep", "gone", "changed"} {
		m.handleEvent(queuedEvent{t: old[id], ev: Event{Key: key(id)}})
	}
	m.handleEvent(queuedEvent{t: m.targets[key("changed")], ev: Event{Key: key("changed")}})
	if want := []string{"keep", "changed"}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
}

func TestUpdateSkipsInvalid(t *testing.T) {
	zero := newTarget("zero", addr(3), sched(1, 1), nop)
	zero.Schedule.Interval = 0
	noTimeout := newTarget("notimeout", addr(4), sched(1, 1), nop)
	noTimeout.Schedule.Timeout = 0
	noChecker := newTarget("nil", addr(2), sched(1, 1), nop)
	noChecker.Checker = nil
	empty := newTarget("", addr(1), sched(1, 1), nop)
	empty.Key = Key{}
	m := New(Options{})
	m.Update([]Target{
		empty,
		noChecker,
		zero,
		noTimeout,
		newTarget("ok", addr(5), sched(1, 1), nop),
		newTarget("ok", addr(6), sched(1, 1), nop),
	})
	st := m.Status()
	if len(st) != 1 || st[key("ok")].Addr != addr(5) {
		t.Errorf("status = %+v, want only the first ok", st)
	}
}

// TestUpdateDecidesBySpec: Update keeps a target (goroutine, checker and
// all) when its address, spec and schedule are equal; carries its facts
// when only the schedule changed; starts it from unknown otherwise. The
// monitor compares values it is given, knowing no check kind.
func TestUpdateDecidesBySpec(t *testing.T) {
	tests := []struct {
		name   string
		change func(tg *Target)
		kept   bool // the same *target
		facts  bool // health state carried
	}{
		{"identical values, new checker", func(*Target) {}, true, true},
		{"spec", func(tg *Target) { tg.Spec = "other" }, false, false},
		{"address", func(tg *Target) { tg.Addr = addr(9) }, false, false},
		{"interval", func(tg *Target) { tg.Schedule.Interval = time.Second }, false, true},
		{"fast interval", func(tg *Target) { tg.Schedule.FastInterval = time.Millisecond }, false, true},
		{"timeout", func(tg *Target) { tg.Schedule.Timeout = time.Second }, false, true},
		{"rise", func(tg *Target) { tg.Schedule.Rise = 5 }, false, true},
		{"fall", func(tg *Target) { tg.Schedule.Fall = 5 }, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Options{})
			m.Update([]Target{newTarget("a", addr(1), sched(1, 1), nop)})
			old := m.targets[key("a")]
			m.handleResult(context.Background(), old, check.Result{OK: true})
			tg := newTarget("a", addr(1), sched(1, 1), nop)
			tc.change(&tg)
			m.Update([]Target{tg})
			cur := m.targets[key("a")]
			if got := cur == old; got != tc.kept {
				t.Errorf("kept = %v, want %v", got, tc.kept)
			}
			if got := cur.status().Health.State == health.Up; got != tc.facts {
				t.Errorf("facts carried = %v (state %v), want %v", got, cur.status().Health.State, tc.facts)
			}
		})
	}
}

func TestDelays(t *testing.T) {
	m := New(Options{Rand: rand.New(rand.NewPCG(1, 2))})
	for _, iv := range []time.Duration{time.Nanosecond, 7 * time.Nanosecond, 20 * time.Millisecond, 2 * time.Second} {
		t.Run(iv.String(), func(t *testing.T) {
			firsts, nexts := map[time.Duration]bool{}, map[time.Duration]bool{}
			for range 1000 {
				f := m.firstDelay(iv)
				if f < 0 || f >= iv {
					t.Fatalf("first delay %v outside [0, %v)", f, iv)
				}
				n := m.nextDelay(iv)
				if n < iv-iv/50 || n > iv+iv/50 {
					t.Fatalf("next delay %v outside %v ± 2%%", n, iv)
				}
				firsts[f], nexts[n] = true, true
			}
			if iv >= time.Millisecond && (len(firsts) < 100 || len(nexts) < 100) {
				t.Errorf("delays not spread: %d first, %d next distinct values", len(firsts), len(nexts))
			}
		})
	}
}

func TestStatusSlow(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := TargetStatus{Timeout: time.Second}
	if s.Slow(now) {
		t.Error("no probe in flight, but slow")
	}
	s.InFlightSince = now.Add(-400 * time.Millisecond)
	if s.Slow(now) {
		t.Error("in flight for 400ms of a 1s timeout, but slow")
	}
	s.InFlightSince = now.Add(-600 * time.Millisecond)
	if !s.Slow(now) {
		t.Error("in flight for 600ms of a 1s timeout, but not slow")
	}
}

func TestInFlightSinceReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		probe := func(ctx context.Context) check.Result {
			select {
			case started <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return check.Result{OK: true}
		}
		m := New(Options{})
		s := Schedule{Interval: 100 * time.Millisecond, Timeout: 90 * time.Millisecond, Rise: 1, Fall: 1}
		m.Update([]Target{newTarget("a", addr(1), s, probe)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		defer func() { close(release); cancel(); <-done }()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("probe never started")
		}
		if m.Status()[key("a")].InFlightSince.IsZero() {
			t.Fatal("probe in flight but InFlightSince is zero")
		}
	})
}

// TestFastIntervalWhileTransitioning: once an up target fails, it is
// probed every fast_interval until the state settles, then at interval
// again.
func TestFastIntervalWhileTransitioning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var calls []time.Time
		probe := func(ctx context.Context) check.Result {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			// Up for the first 3 probes (rise 2), then failing for good.
			return check.Result{OK: len(calls) <= 3}
		}
		const iv, fast = 400 * time.Millisecond, 40 * time.Millisecond
		s := Schedule{Interval: iv, FastInterval: fast, Timeout: 20 * time.Millisecond, Rise: 2, Fall: 3}
		m := New(Options{})
		m.Update([]Target{newTarget("a", addr(1), s, probe)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		poll.Until(t, waitLimit, "8 probes", poll.True(func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= 8 }))
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		gap := func(i int) time.Duration { return calls[i].Sub(calls[i-1]) }
		// Probe 2 follows an unknown state (fast); probe 3 follows up (slow);
		// probes 5 and 6 follow failures while up (fast); after the third
		// failure the target is down and settled (slow again).
		if g := gap(1); g >= iv*3/4 {
			t.Errorf("unknown target: gap %v, want the fast interval", g)
		}
		if g := gap(3); g < iv*3/4 {
			t.Errorf("settled up target: gap %v, want about %v", g, iv)
		}
		for _, i := range []int{4, 5} {
			if g := gap(i); g >= iv*3/4 {
				t.Errorf("failing up target, probe %d: gap %v, want the fast interval", i+1, g)
			}
		}
		if g := gap(6); g < iv*3/4 {
			t.Errorf("settled down target: gap %v, want about %v", g, iv)
		}
	})
}

// TestEachKind: Each reads every target, EachKind (and OfKind's Each) only
// those of its kind (and none for the empty kind).
func TestEachKind(t *testing.T) {
	other := newTarget("b", addr(2), sched(1, 1), nop)
	other.Key.Kind = "other"
	m := New(Options{})
	m.Update([]Target{newTarget("a", addr(1), sched(1, 1), nop), other, newTarget("c", addr(3), sched(1, 1), nop)})
	read := func(each func(func(TargetStatus))) []string {
		var got []string
		each(func(s TargetStatus) { got = append(got, s.Key.Kind+"/"+s.Key.Member) })
		slices.Sort(got)
		return got
	}
	for _, tc := range []struct {
		name string
		each func(func(TargetStatus))
		want []string
	}{
		{"Each", m.Each, []string{"other/b", "test/a", "test/c"}},
		{"EachKind test", func(fn func(TargetStatus)) { m.EachKind("test", fn) }, []string{"test/a", "test/c"}},
		{"EachKind other", func(fn func(TargetStatus)) { m.EachKind("other", fn) }, []string{"other/b"}},
		{"EachKind none", func(fn func(TargetStatus)) { m.EachKind("none", fn) }, nil},
		{"EachKind empty", func(fn func(TargetStatus)) { m.EachKind("", fn) }, nil},
		{"OfKind test", m.OfKind("test").Each, []string{"test/a", "test/c"}},
	} {
		if got := read(tc.each); !slices.Equal(got, tc.want) {
			t.Errorf("%s: read %v, want %v", tc.name, got, tc.want)
		}
	}
	// An Update that removes a kind's last target and replaces another
	// (a new schedule) leaves no stale or doubled target in the kinds.
	m.Update([]Target{newTarget("a", addr(1), sched(2, 1), nop), newTarget("c", addr(3), sched(1, 1), nop)})
	if got := read(func(fn func(TargetStatus)) { m.EachKind("other", fn) }); got != nil {
		t.Errorf("EachKind other after its removal: %v, want none", got)
	}
	if got, want := read(func(fn func(TargetStatus)) { m.EachKind("test", fn) }), []string{"test/a", "test/c"}; !slices.Equal(got, want) {
		t.Errorf("EachKind test after the update: %v, want %v", got, want)
	}
}

// TestChanges: the count moves on every state transition and on every
// Update that adds, replaces or removes a target, and stays on a result
// that changes no state and on an Update that keeps every target.
func TestChanges(t *testing.T) {
	m := New(Options{})
	ctx := context.Background()
	last := m.Changes()
	step := func(name string, moves bool, do func()) {
		t.Helper()
		do()
		if got := m.Changes() != last; got != moves {
			t.Errorf("%s: count moved = %v, want %v", name, got, moves)
		}
		last = m.Changes()
	}
	two := func() []Target {
		return []Target{newTarget("a", addr(1), sched(1, 2), nop), newTarget("b", addr(2), sched(1, 2), nop)}
	}
	step("targets added", true, func() { m.Update(two()) })
	step("the same targets again", false, func() { m.Update(two()) })
	step("unknown to up", true, func() { m.handleResult(ctx, m.targets[key("a")], check.Result{OK: true}) })
	step("up, a success", false, func() { m.handleResult(ctx, m.targets[key("a")], check.Result{OK: true}) })
	step("up, one failure below fall", false, func() { m.handleResult(ctx, m.targets[key("a")], check.Result{}) })
	step("up to down", true, func() { m.handleResult(ctx, m.targets[key("a")], check.Result{}) })
	step("a spec changed", true, func() {
		tgs := two()
		tgs[1].Spec = "other"
		m.Update(tgs)
	})
	step("a schedule changed", true, func() {
		tgs := two()
		tgs[1].Spec = "other"
		tgs[1].Schedule.Interval = time.Second
		m.Update(tgs)
	})
	step("a target removed", true, func() { m.Update(two()[:1]) })
	step("an invalid and a duplicate target skipped", false, func() {
		tgs := append(two()[:1], newTarget("a", addr(3), sched(1, 2), nop), Target{Key: key("c")})
		m.Update(tgs)
	})
	if st := m.Status(); len(st) != 1 || st[key("a")].Addr != addr(1) {
		t.Errorf("status %v, want a at %v only", st, addr(1))
	}
}

// BenchmarkEachKindFew reads the 100 targets of one kind among 50,000 of
// another (the daemon's resolver facts beside a big GSLB configuration).
func BenchmarkEachKindFew(b *testing.B) {
	var ts []Target
	for i := range 50_100 {
		tg := newTarget(fmt.Sprint(i), netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 53), sched(1, 1), nop)
		if i >= 100 {
			tg.Key.Kind = "other"
		}
		ts = append(ts, tg)
	}
	m := New(Options{})
	m.Update(ts)
	for b.Loop() {
		n := 0
		m.EachKind("test", func(TargetStatus) { n++ })
		if n != 100 {
			b.Fatalf("%d targets of kind test, want 100", n)
		}
	}
}
