package monitor

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/check"
	"lbdns/health"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// localFailure is a check that failed for want of a descriptor.
var localFailure = check.Result{Detail: "dial tcp 127.0.0.1:80: socket: too many open files", Cause: check.CauseDescriptors}

// TestLocalResultsAbstain: a target up, then fed far more local failures
// than fall, stays up with no event and no flap; its status says it
// abstains and since when; its verdict is fresh for the hold and stale
// (held, still up) after; the next real result ends the abstention and
// counts again. The prober logs one start and one stop, not one per
// check.
func TestLocalResultsAbstain(t *testing.T) {
	clk := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	var logs syncBuffer
	changes := 0
	m := New(Options{Now: clk.Now, AbstainHold: 30 * time.Second, OnChange: func() { changes++ },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	m.Update([]Target{newTarget("a", addr(1), Schedule{Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 2}, nop)})
	tg := m.targets[key("a")]
	ctx := context.Background()
	m.handleResult(ctx, tg, check.Result{OK: true, Detail: "connected"})
	<-m.events // unknown>up
	changes = 0

	first := clk.Now().Add(time.Second)
	for range 60 {
		clk.step(time.Second)
		m.handleResult(ctx, tg, localFailure)
	}
	if len(m.events) != 0 {
		t.Fatalf("%d events from local failures, want none", len(m.events))
	}
	if changes != 1 {
		t.Errorf("OnChange called %d times for one abstention, want 1", changes)
	}
	st := m.Status()[key("a")]
	if st.Health.State != health.Up || st.Health.ConsecutiveFail != 0 || st.Health.Flaps != 0 {
		t.Fatalf("after 60 local failures with fall 2: %+v, want up with no failure counted", st.Health)
	}
	if !st.Abstaining() || !st.Health.AbstainingSince.Equal(first) || st.Health.LocalFailures != 60 {
		t.Errorf("abstaining %v since %v, %d local failures; want since %v, 60", st.Abstaining(), st.Health.AbstainingSince, st.Health.LocalFailures, first)
	}
	if n, since := m.Abstaining(); n != 1 || !since.Equal(first) {
		t.Errorf("Monitor.Abstaining() = %d, %v; want 1, %v", n, since, first)
	}
	if !st.Fresh(first.Add(29*time.Second)) || st.Stale(first.Add(29*time.Second)) {
		t.Error("verdict not fresh within the hold")
	}
	if st.Fresh(first.Add(31*time.Second)) || !st.Stale(first.Add(31*time.Second)) {
		t.Error("verdict still fresh after the hold")
	}

	clk.step(time.Second)
	m.handleResult(ctx, tg, check.Result{Detail: "connection refused"})
	st = m.Status()[key("a")]
	if st.Abstaining() || st.Health.ConsecutiveFail != 1 || st.Health.State != health.Up {
		t.Errorf("after a real failure: %+v, want up, 1 failure, not abstaining", st.Health)
	}
	if n, _ := m.Abstaining(); n != 0 {
		t.Errorf("Monitor.Abstaining() = %d after the abstention ended", n)
	}
	out := logs.String()
	if strings.Count(out, "prober abstaining") != 1 || strings.Count(out, "prober stopped abstaining") != 1 {
		t.Errorf("logs: want one start and one stop:\n%s", out)
	}
	if !strings.Contains(out, "cause=descriptors") || !strings.Contains(out, "abstentions=1") {
		t.Errorf("start log without its cause, or stop log without its count:\n%s", out)
	}
}

// TestLocalFailuresNeverDown: run by the scheduler (synctest's clock), a
// member whose every check fails for want of descriptors is never marked
// down, however long; when its checks reach it again, it is judged on
// them.
func TestLocalFailuresNeverDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		result := check.Result{OK: true, Detail: "connected"}
		rec := &recorder{}
		m := New(Options{OnEvent: rec.on})
		m.Update([]Target{newTarget("a", addr(1), sched(1, 2), func(context.Context) check.Result {
			mu.Lock()
			defer mu.Unlock()
			return result
		})})
		stop := start(t, m)
		time.Sleep(5 * testInterval)
		mu.Lock()
		result = localFailure
		mu.Unlock()
		time.Sleep(100 * testInterval)
		if got := state(m, "a"); got != health.Up || !m.Status()[key("a")].Abstaining() {
			t.Errorf("after 100 intervals of local failures: %v (abstaining %v), want up, abstaining", got, m.Status()[key("a")].Abstaining())
		}
		mu.Lock()
		result = check.Result{Detail: "connection refused"}
		mu.Unlock()
		time.Sleep(5 * testInterval)
		stop()
		if got, want := rec.of("a"), []string{"unknown>up", "up>down"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("events %v, want %v", got, want)
		}
	})
}
