package daemon

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"lbdns/health"
	"lbdns/vip"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestTickSkipsUnchangedPlan: a tick recomputes the plan only when some
// fact changed since the last plan; facts going stale by time alone are
// still noticed at the next tick.
func TestTickSkipsUnchangedPlan(t *testing.T) {
	dir := t.TempDir()
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d, err := New(Options{ConfigPath: writeConfig(t, dir, ""), Client: vip.NewMemClient(), Probe: fp.probe,
		Identify: noIdentify, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.ctlLn.Close(); d.statusLn.Close() })
	ctx := context.Background()

	// Probe until every target is up (all observations at the same fake
	// time), then stop probing: the facts change only by the clock.
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.mon.Run(mctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		up := 0
		for _, s := range d.mon.Status() {
			if s.Health.State == health.Up {
				up++
			}
		}
		if up == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 targets up after 5s", up)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done

	healthy := func() int {
		n := 0
		for _, m := range d.Plan().Pools[0].Members {
			if m.Healthy() {
				n++
			}
		}
		return n
	}
	d.handleTick(ctx) // every target decided: warm, first plan
	if !d.warm || d.plans != 1 || healthy() != 3 {
		t.Fatalf("after first tick: warm %v, plans %d, healthy %d; want true, 1, 3", d.warm, d.plans, healthy())
	}
	clk.add(100 * time.Millisecond)
	d.handleTick(ctx)
	if d.plans != 1 {
		t.Fatalf("tick with unchanged facts computed a plan (plans = %d, want 1)", d.plans)
	}
	// Freshness is 3 intervals (300 ms): past it the facts are stale.
	clk.add(250 * time.Millisecond)
	d.handleTick(ctx)
	if d.plans != 2 || healthy() != 0 {
		t.Fatalf("tick with stale facts: plans %d, healthy %d; want 2, 0", d.plans, healthy())
	}
	if !d.plan.Pools[0].FailOpen {
		t.Fatalf("every member stale: pool not failing open: %+v", d.plan.Pools[0])
	}
	// The pool turned to failing open, which the next plan reads (Prev):
	// one more plan, then the plan is settled.
	clk.add(100 * time.Millisecond)
	d.handleTick(ctx)
	if d.plans != 3 {
		t.Fatalf("tick after the pool failed open: plans = %d, want 3", d.plans)
	}
	clk.add(100 * time.Millisecond)
	d.handleTick(ctx)
	if d.plans != 3 {
		t.Fatalf("tick with facts still stale computed a plan (plans = %d, want 3)", d.plans)
	}
	// An override change clears the settled plan.
	d.setOverrides(nil)
	d.handleTick(ctx)
	if d.plans != 4 {
		t.Fatalf("tick after an override change: plans = %d, want 4", d.plans)
	}
}
