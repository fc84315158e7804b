package monitor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/probes"
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

func testCheck(rise, fall int) *configs.Check {
	rd := true
	return &configs.Check{
		Name: "chk", Kind: "dns", QName: "example.test.", QType: "A", QClass: "IN",
		RD: &rd, Transport: "udp", Rcodes: []string{"NOERROR"},
		Interval: configs.Duration{Duration: testInterval},
		Timeout:  configs.Duration{Duration: testTimeout},
		Rise:     rise, Fall: fall,
	}
}

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

func (f *fakeProbe) probe(ctx context.Context, a netip.AddrPort, chk *configs.Check) probes.Result {
	dl, ok := ctx.Deadline()
	f.mu.Lock()
	if !ok || time.Until(dl) > chk.Timeout.Duration {
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
		return probes.Result{OK: false, RTT: time.Millisecond, Detail: detail}
	}
	return probes.Result{OK: true, RTT: time.Millisecond, Detail: "NOERROR"}
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
		if e.TargetID == id {
			out = append(out, e.Transition.From.String()+">"+e.Transition.To.String())
		}
	}
	return out
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
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
	return m.Status()[id].Health.State
}

func TestTransitionEvents(t *testing.T) {
	fp := newFakeProbe()
	rec := &recorder{}
	m := New(Options{Probe: fp.probe, OnEvent: rec.on})
	a := addr(1)
	m.Update([]Target{{ID: "a", Addr: a, Check: testCheck(2, 2)}})
	start(t, m)

	waitFor(t, "a up", func() bool { return len(rec.of("a")) == 1 })
	fp.setFail(a, "rcode SERVFAIL")
	waitFor(t, "a down", func() bool { return len(rec.of("a")) == 2 })

	ev := rec.all()[1]
	if ev.Transition.From != health.Up || ev.Transition.To != health.Down {
		t.Errorf("transition = %v>%v, want up>down", ev.Transition.From, ev.Transition.To)
	}
	if ev.Transition.Reason != "rcode SERVFAIL" || ev.Result.Detail != "rcode SERVFAIL" || ev.Result.OK {
		t.Errorf("event reason %q result %+v, want the failing result", ev.Transition.Reason, ev.Result)
	}
	if ev.Addr != a || ev.TargetID != "a" {
		t.Errorf("event target %q %v", ev.TargetID, ev.Addr)
	}
	st := m.Status()["a"]
	if st.Health.State != health.Down || st.Health.LastFailReason != "rcode SERVFAIL" {
		t.Errorf("status = %+v", st.Health)
	}
	if !st.Fresh(time.Now()) {
		t.Errorf("status of a running target is not fresh: %+v", st)
	}

	fp.setFail(a, "")
	waitFor(t, "a up again", func() bool { return len(rec.of("a")) == 3 })
	if got, want := rec.of("a"), []string{"unknown>up", "up>down", "down>up"}; !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if f := m.Status()["a"].Health.Flaps; f != 2 {
		t.Errorf("flaps = %d, want 2", f)
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.badDeadline != 0 {
		t.Errorf("%d probes without a deadline within the timeout", fp.badDeadline)
	}
}

func TestUpdate(t *testing.T) {
	fp := newFakeProbe()
	rec := &recorder{}
	m := New(Options{Probe: fp.probe, OnEvent: rec.on})
	a, b, c, d := addr(1), addr(2), addr(3), addr(4)
	m.Update([]Target{
		{ID: "a", Addr: a, Check: testCheck(2, 2)},
		{ID: "b", Addr: b, Check: testCheck(2, 2)},
		{ID: "c", Addr: c, Check: testCheck(2, 2)},
		{ID: "d", Addr: d, Check: testCheck(2, 2)},
	})
	start(t, m)
	waitFor(t, "all up", func() bool { return len(rec.all()) == 4 })

	checksA := m.Status()["a"].Health.Checks
	checksD := m.Status()["d"].Health.Checks
	changed := testCheck(3, 2)
	changed.QName = "other.test." // asks another question: facts do not carry
	paced := testCheck(3, 2)      // only the pacing changed: facts carry
	paced.Interval.Duration = testInterval * 2
	m.Update([]Target{
		{ID: "a", Addr: a, Check: testCheck(2, 2)}, // equal values, new pointers
		{ID: "b", Addr: b, Check: changed},
		{ID: "d", Addr: d, Check: paced},
	})
	callsC := fp.callCount(c)

	st := m.Status()
	t.Run("unchanged target keeps state", func(t *testing.T) {
		if st["a"].Health.State != health.Up {
			t.Errorf("a = %v, want up", st["a"].Health.State)
		}
	})
	t.Run("changed target restarts from unknown", func(t *testing.T) {
		if st["b"].Health.State != health.Unknown || st["b"].Health.Checks != 0 {
			t.Errorf("b = %+v, want a fresh unknown tracker", st["b"].Health)
		}
		if st["b"].Health.Rise != 3 {
			t.Errorf("b rise = %d, want 3", st["b"].Health.Rise)
		}
	})
	t.Run("paced target keeps its facts", func(t *testing.T) {
		if st["d"].Health.State != health.Up || st["d"].Health.Checks < checksD || st["d"].Health.Rise != 3 {
			t.Errorf("d = %+v, want up with its checks kept and rise 3", st["d"].Health)
		}
	})
	t.Run("removed target leaves status", func(t *testing.T) {
		if _, ok := st["c"]; ok {
			t.Errorf("c still in status")
		}
	})

	waitFor(t, "b up again", func() bool { return len(rec.of("b")) == 2 })
	waitFor(t, "a probed 5 more times", func() bool { return m.Status()["a"].Health.Checks >= checksA+5 })
	// c would have been probed several times by now.
	waitFor(t, "b probed 5 more times", func() bool { return m.Status()["b"].Health.Checks >= 8 })

	t.Run("no new event for unchanged target", func(t *testing.T) {
		if got := rec.of("a"); !slices.Equal(got, []string{"unknown>up"}) {
			t.Errorf("a events = %v", got)
		}
		if got := rec.of("d"); !slices.Equal(got, []string{"unknown>up"}) {
			t.Errorf("d events = %v", got)
		}
	})
	t.Run("changed target decides again", func(t *testing.T) {
		if got := rec.of("b"); !slices.Equal(got, []string{"unknown>up", "unknown>up"}) {
			t.Errorf("b events = %v", got)
		}
	})
	t.Run("removed target is not probed", func(t *testing.T) {
		if got := fp.callCount(c); got != callsC {
			t.Errorf("c probed %d times after removal", got-callsC)
		}
		if got := rec.of("c"); len(got) != 1 {
			t.Errorf("c events = %v", got)
		}
	})
	t.Run("unchanged target never overlapped", func(t *testing.T) {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		for _, x := range []netip.AddrPort{a, b, c, d} {
			if fp.maxInflight[x] != 1 {
				t.Errorf("%v: max in flight %d", x, fp.maxInflight[x])
			}
		}
	})
}

func TestSlowProbeNeverOverlaps(t *testing.T) {
	fp := newFakeProbe()
	m := New(Options{Probe: fp.probe})
	var targets []Target
	for i := 1; i <= 3; i++ {
		fp.delay[addr(i)] = 3 * testInterval // longer than the interval, ignoring ctx
		targets = append(targets, Target{ID: fmt.Sprint(i), Addr: addr(i), Check: testCheck(1, 1)})
	}
	m.Update(targets)
	start(t, m)
	for i := 1; i <= 3; i++ {
		waitFor(t, "5 probes", func() bool { return fp.callCount(addr(i)) >= 5 })
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for i := 1; i <= 3; i++ {
		if n := fp.maxInflight[addr(i)]; n != 1 {
			t.Errorf("target %d: %d probes in flight at once", i, n)
		}
	}
}

func TestRunStopsAllGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	fp := newFakeProbe()
	m := New(Options{Probe: fp.probe, OnEvent: func(Event) {}})
	var targets []Target
	for i := range 100 {
		a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 1, byte(i / 256), byte(i % 256)}), 53)
		if i%2 == 0 {
			fp.delay[a] = testInterval // some probes are in flight at cancel
		}
		targets = append(targets, Target{ID: fmt.Sprint(i), Addr: a, Check: testCheck(1, 1)})
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
	waitFor(t, "300 probes", func() bool { return total() >= 300 })
	stop()

	after := total()
	time.Sleep(5 * testInterval)
	if got := total(); got != after {
		t.Errorf("%d probes after Run returned", got-after)
	}
	waitFor(t, "goroutines to settle", func() bool { return runtime.NumGoroutine() <= base })
}

func TestRunAgainKeepsState(t *testing.T) {
	fp := newFakeProbe()
	rec := &recorder{}
	m := New(Options{Probe: fp.probe, OnEvent: rec.on})
	m.Update([]Target{{ID: "a", Addr: addr(1), Check: testCheck(1, 1)}})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitFor(t, "a up", func() bool { return state(m, "a") == health.Up })
	t.Run("second concurrent Run is refused", func(t *testing.T) {
		if err := m.Run(context.Background()); !errors.Is(err, ErrRunning) {
			t.Errorf("Run = %v, want ErrRunning", err)
		}
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	checks := m.Status()["a"].Health.Checks

	start(t, m)
	waitFor(t, "a probed again", func() bool { return m.Status()["a"].Health.Checks > checks })
	if s := state(m, "a"); s != health.Up {
		t.Errorf("a = %v after restart, want up", s)
	}
	if got := rec.of("a"); !slices.Equal(got, []string{"unknown>up"}) {
		t.Errorf("events = %v, want one", got)
	}
}

func TestIdentify(t *testing.T) {
	fp := newFakeProbe()
	var mu sync.Mutex
	calls := map[netip.AddrPort]int{}
	last := map[netip.AddrPort]time.Time{}
	every := 5 * testInterval
	identify := func(ctx context.Context, a netip.AddrPort) (string, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("identify without deadline")
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if prev, ok := last[a]; ok && now.Sub(prev) < every {
			t.Errorf("%v identified again after %v, want at least %v", a, now.Sub(prev), every)
		}
		last[a] = now
		calls[a]++
		if a == addr(3) && calls[a] > 1 {
			return "", errors.New("rcode SERVFAIL")
		}
		return fmt.Sprintf("unbound 1.17.%d", calls[a]), nil
	}
	count := func(a netip.AddrPort) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[a]
	}
	m := New(Options{Probe: fp.probe, Identify: identify, IdentifyEvery: every})
	off := false
	noIdent := testCheck(1, 1)
	noIdent.Identify = &off
	m.Update([]Target{
		{ID: "a", Addr: addr(1), Check: testCheck(1, 1)},
		{ID: "off", Addr: addr(2), Check: noIdent},
		{ID: "err", Addr: addr(3), Check: testCheck(1, 1)},
	})
	start(t, m)

	waitFor(t, "a identified twice", func() bool { return count(addr(1)) >= 2 })
	waitFor(t, "err identified twice", func() bool { return count(addr(3)) >= 2 })
	waitFor(t, "off probed 10 times", func() bool { return fp.callCount(addr(2)) >= 10 })
	st := m.Status()
	if got := st["a"].Identity; got == "" || got == "unbound 1.17.1" {
		t.Errorf("a identity = %q, want a later answer", got)
	}
	if st["a"].IdentifiedAt.IsZero() {
		t.Errorf("a IdentifiedAt not set")
	}
	if got := count(addr(2)); got != 0 {
		t.Errorf("identify called %d times for a check with identify = false", got)
	}
	if st["err"].Identity != "unbound 1.17.1" || st["err"].IdentityErr != "rcode SERVFAIL" {
		t.Errorf("err identity %q / %q, want the last good one and the error", st["err"].Identity, st["err"].IdentityErr)
	}
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
		Probe:    func(context.Context, netip.AddrPort, *configs.Check) probes.Result { return probes.Result{} },
		Now:      clk.Now,
		OnResult: func(id string, r probes.Result) { results = append(results, id+":"+r.Detail) },
	})
	m.Update([]Target{{ID: "a", Addr: addr(1), Check: testCheck(1, 2)}})
	tg := m.targets["a"]
	ctx := context.Background()

	steps := []struct {
		name   string
		r      probes.Result
		event  string // "" for none
		reason string
	}{
		{"first success with rise 1 turns up", probes.Result{OK: true, Detail: "NOERROR"}, "unknown>up", "NOERROR"},
		{"one failure below fall", probes.Result{Detail: "timeout after 10ms"}, "", ""},
		{"second failure turns down", probes.Result{Detail: "rcode SERVFAIL"}, "up>down", "rcode SERVFAIL"},
		{"failure while down", probes.Result{Detail: "rcode REFUSED"}, "", ""},
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
			if got[0].ev.Result != s.r {
				t.Errorf("result = %+v, want %+v", got[0].ev.Result, s.r)
			}
		})
	}
	if len(results) != len(steps) || results[2] != "a:rcode SERVFAIL" {
		t.Errorf("OnResult calls = %v", results)
	}
	st := m.Status()["a"]
	if !st.LastAt.Equal(clk.Now()) || st.Last.Detail != "rcode REFUSED" {
		t.Errorf("last = %+v at %v", st.Last, st.LastAt)
	}
}

func TestHandleEventDropsStale(t *testing.T) {
	var got []string
	m := New(Options{
		Probe:   func(context.Context, netip.AddrPort, *configs.Check) probes.Result { return probes.Result{} },
		OnEvent: func(e Event) { got = append(got, e.TargetID) },
	})
	m.Update([]Target{
		{ID: "keep", Addr: addr(1), Check: testCheck(1, 1)},
		{ID: "gone", Addr: addr(2), Check: testCheck(1, 1)},
		{ID: "changed", Addr: addr(3), Check: testCheck(1, 1)},
	})
	old := map[string]*target{}
	for id, tg := range m.targets {
		old[id] = tg
	}
	m.Update([]Target{
		{ID: "keep", Addr: addr(1), Check: testCheck(1, 1)},
		{ID: "changed", Addr: addr(4), Check: testCheck(1, 1)},
	})
	for _, id := range []string{"keep", "gone", "changed"} {
		m.handleEvent(queuedEvent{t: old[id], ev: Event{TargetID: id}})
	}
	m.handleEvent(queuedEvent{t: m.targets["changed"], ev: Event{TargetID: "changed"}})
	if want := []string{"keep", "changed"}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
}

func TestUpdateSkipsInvalid(t *testing.T) {
	zero := testCheck(1, 1)
	zero.Interval.Duration = 0
	noTimeout := testCheck(1, 1)
	noTimeout.Timeout.Duration = 0
	m := New(Options{Probe: func(context.Context, netip.AddrPort, *configs.Check) probes.Result { return probes.Result{} }})
	m.Update([]Target{
		{ID: "", Addr: addr(1), Check: testCheck(1, 1)},
		{ID: "nil", Addr: addr(2)},
		{ID: "zero", Addr: addr(3), Check: zero},
		{ID: "notimeout", Addr: addr(4), Check: noTimeout},
		{ID: "ok", Addr: addr(5), Check: testCheck(1, 1)},
		{ID: "ok", Addr: addr(6), Check: testCheck(1, 1)},
	})
	st := m.Status()
	if len(st) != 1 || st["ok"].Addr != addr(5) {
		t.Errorf("status = %+v, want only the first ok", st)
	}
}

func TestCheckEqualForUpdate(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name   string
		change func(c *configs.Check)
		same   bool
	}{
		{"identical values", func(*configs.Check) {}, true},
		{"equal bool behind other pointer", func(c *configs.Check) { v := true; c.RD = &v }, true},
		{"name", func(c *configs.Check) { c.Name = "x" }, false},
		{"kind", func(c *configs.Check) { c.Kind = "tcp" }, false},
		{"qname", func(c *configs.Check) { c.QName = "x." }, false},
		{"zone", func(c *configs.Check) { c.Zone = "z." }, false},
		{"qtype", func(c *configs.Check) { c.QType = "AAAA" }, false},
		{"qclass", func(c *configs.Check) { c.QClass = "CH" }, false},
		{"rd", func(c *configs.Check) { c.RD = &no }, false},
		{"rd nil means the default, true", func(c *configs.Check) { c.RD = nil }, true},
		{"cd", func(c *configs.Check) { c.CD = true }, false},
		{"transport", func(c *configs.Check) { c.Transport = "tcp" }, false},
		{"rcodes", func(c *configs.Check) { c.Rcodes = []string{"NXDOMAIN"} }, false},
		{"expect", func(c *configs.Check) { c.Expect = "192.0.2.1" }, false},
		{"expect regexp", func(c *configs.Check) { c.ExpectRegexp = "x" }, false},
		{"interval", func(c *configs.Check) { c.Interval.Duration = time.Second }, false},
		{"timeout", func(c *configs.Check) { c.Timeout.Duration = time.Second }, false},
		{"rise", func(c *configs.Check) { c.Rise = 5 }, false},
		{"fall", func(c *configs.Check) { c.Fall = 5 }, false},
		{"identify true is the default", func(c *configs.Check) { c.Identify = &yes }, true},
		{"identify off", func(c *configs.Check) { c.Identify = &no }, false},
		{"fast interval", func(c *configs.Check) { c.FastInterval.Duration = time.Millisecond }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := testCheck(2, 3), testCheck(2, 3)
			tc.change(b)
			if got := a.Equal(b); got != tc.same {
				t.Errorf("Equal = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestDelays(t *testing.T) {
	m := New(Options{
		Probe: func(context.Context, netip.AddrPort, *configs.Check) probes.Result { return probes.Result{} },
		Rand:  rand.New(rand.NewPCG(1, 2)),
	})
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
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	probe := func(ctx context.Context, _ netip.AddrPort, _ *configs.Check) probes.Result {
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return probes.Result{OK: true}
	}
	m := New(Options{Probe: probe})
	chk := &configs.Check{Name: "c", Interval: configs.Duration{Duration: 100 * time.Millisecond}, Timeout: configs.Duration{Duration: 90 * time.Millisecond}, Rise: 1, Fall: 1}
	m.Update([]Target{{ID: "a", Addr: netip.MustParseAddrPort("127.0.0.1:53"), Check: chk}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { close(release); cancel(); <-done }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("probe never started")
	}
	if m.Status()["a"].InFlightSince.IsZero() {
		t.Fatal("probe in flight but InFlightSince is zero")
	}
}

// TestFastIntervalWhileTransitioning: once an up target fails, it is
// probed every fast_interval until the state settles, then at interval
// again.
func TestFastIntervalWhileTransitioning(t *testing.T) {
	var mu sync.Mutex
	var calls []time.Time
	probe := func(ctx context.Context, _ netip.AddrPort, _ *configs.Check) probes.Result {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		// Up for the first 3 probes (rise 2), then failing for good.
		return probes.Result{OK: len(calls) <= 3}
	}
	const iv, fast = 400 * time.Millisecond, 40 * time.Millisecond
	chk := &configs.Check{Name: "c", Interval: configs.Duration{Duration: iv}, FastInterval: configs.Duration{Duration: fast},
		Timeout: configs.Duration{Duration: 20 * time.Millisecond}, Rise: 2, Fall: 3}
	m := New(Options{Probe: probe})
	m.Update([]Target{{ID: "a", Addr: netip.MustParseAddrPort("127.0.0.1:53"), Check: chk}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitFor(t, "8 probes", func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= 8 })
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
}

// TestIdentifyRetry: a failed identification (the back end was down) is
// tried again after IdentifyRetry, not only after IdentifyEvery.
func TestIdentifyRetry(t *testing.T) {
	fp := newFakeProbe()
	var mu sync.Mutex
	calls := 0
	noVersion := 0
	identify := func(_ context.Context, a netip.AddrPort) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if a == addr(2) {
			noVersion++
			return "", fmt.Errorf("version.bind: rcode SERVFAIL: %w", probes.ErrNoVersion)
		}
		calls++
		if calls == 1 {
			return "", errors.New("connection refused")
		}
		return "unbound 1.17.1", nil
	}
	m := New(Options{Probe: fp.probe, Identify: identify, IdentifyEvery: time.Hour, IdentifyRetry: 2 * testInterval})
	m.Update([]Target{{ID: "a", Addr: addr(1), Check: testCheck(1, 1)}, {ID: "knot", Addr: addr(2), Check: testCheck(1, 1)}})
	start(t, m)
	waitFor(t, "identity after a failed first try", func() bool { return m.Status()["a"].Identity == "unbound 1.17.1" })
	if st := m.Status()["a"]; st.IdentityErr != "" {
		t.Errorf("IdentityErr = %q after a good answer", st.IdentityErr)
	}
	// A back end that answers without a version keeps the normal period.
	waitFor(t, "knot probed 10 times", func() bool { return fp.callCount(addr(2)) >= 10 })
	mu.Lock()
	defer mu.Unlock()
	if noVersion != 1 {
		t.Errorf("a back end without a version was asked %d times within IdentifyEvery, want 1", noVersion)
	}
}
