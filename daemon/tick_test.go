package daemon

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/control"
	"lbdns/health"
	"lbdns/intent"
	"lbdns/report"
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
// still noticed at the next tick. The policy is tested pure in resolvers
// (TestPlannerCurrent); this proves the wiring: the daemon's facts at the
// tick's time, the planner's verdict, and the overrides in force.
func TestTickSkipsUnchangedPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, _, clk := frozenDaemon(t)
		ctx := context.Background()

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
		if !d.planner.Warm() || d.plans != 1 || healthy() != 3 {
			t.Fatalf("after first tick: warm %v, plans %d, healthy %d; want true, 1, 3", d.planner.Warm(), d.plans, healthy())
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
		if !d.Plan().Pools[0].FailOpen {
			t.Fatalf("every member stale: pool not failing open: %+v", d.Plan().Pools[0])
		}
		// The pool turned to failing open, which the next plan reads (Memory):
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
		// An override change makes the settled plan not current.
		d.setOverrides(intent.State{Overrides: []intent.Override{{Resolver: "bind-1", Action: intent.ActionDrain}}}, d.rev)
		d.handleTick(ctx)
		if d.plans != 4 {
			t.Fatalf("tick after an override change: plans = %d, want 4", d.plans)
		}
		// Setting the same overrides again changes nothing.
		d.setOverrides(intent.State{Overrides: []intent.Override{{Resolver: "bind-1", Action: intent.ActionDrain}}}, d.rev)
		clk.add(100 * time.Millisecond)
		d.handleTick(ctx)
		d.handleTick(ctx)
		if d.plans != 4 {
			t.Fatalf("ticks after the same overrides again: plans = %d, want 4", d.plans)
		}
	})
}

// frozenDaemon returns a daemon (not running: the test drives its loop
// by hand) on a fake clock whose three targets were probed until up, with
// the monitor then stopped, so that the facts change only by the clock.
// It runs inside a testing/synctest bubble (every test that calls it wraps its body in synctest.Test): the monitor's
// schedule waits on the bubble's clock, not on real time.
func frozenDaemon(t *testing.T) (*Daemon, *vip.MemClient, *fakeClock) {
	t.Helper()
	dir := t.TempDir()
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	mc := vip.NewMemClient()
	d, err := New(Options{ConfigPath: writeConfig(t, dir, ""), Client: mc, Probe: fp.probe, Identify: noIdentify, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.ctlLn.Close(); d.statusLn.Close() })
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.mon.Run(mctx) }()
	// In the bubble this sleep is the fake clock's: every check due in
	// the first second (rise 1, interval 100 ms) has run when it returns.
	time.Sleep(time.Second)
	up := 0
	for _, s := range d.mon.Status() {
		if s.Health.State == health.Up {
			up++
		}
	}
	if up != 3 {
		t.Fatalf("%d of 3 targets up after 1s", up)
	}
	cancel()
	<-done
	return d, mc, clk
}

// upDaemon is frozenDaemon with its first plan applied and settled.
func upDaemon(t *testing.T) (*Daemon, *vip.MemClient, *fakeClock) {
	t.Helper()
	d, mc, clk := frozenDaemon(t)
	d.handleTick(context.Background())
	if !d.planner.Warm() || !d.planner.Settled() {
		t.Fatalf("warm %v settled %v", d.planner.Warm(), d.planner.Settled())
	}
	return d, mc, clk
}

// TestTickRepairsDirtyCache: a Sync that met a surprise from the kernel
// (a delete that found the destination gone) returns no error but marks
// the reconciler's cache dirty; the next tick must turn that into a
// Resync (vip/doc.go: "the next Sync is then a Resync"), as it did before
// the tick skip. With the skip, the drift waits for the resync ticker.
func TestTickRepairsDirtyCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, mc, clk := upDaemon(t)
		ctx := context.Background()
		a := netip.MustParseAddrPort("127.0.0.1:5301")
		b := netip.MustParseAddrPort("127.0.0.1:5302")
		// Drift by hand: both a and b deleted from the UDP service.
		for _, x := range []netip.AddrPort{a, b} {
			if err := mc.DeleteDestination(svcUDP, x); err != nil {
				t.Fatal(err)
			}
		}
		// The operator disables a (handleOverride's loop path): deleting a
		// finds it gone, a surprise that marks the cache dirty, no error.
		d.setOverrides(intent.State{Overrides: []intent.Override{{Resolver: "bind-1", Action: control.ActionDisable}}}, d.rev)
		d.reconcile(ctx, false)
		if !d.rec.Dirty() {
			t.Fatal("cache not dirty after the surprise")
		}
		clk.add(100 * time.Millisecond)
		d.handleTick(ctx)
		if _, ok := mc.Table()[svcUDP].Dests[b]; !ok {
			t.Fatalf("tick after a surprise left the drift in place: dirty %v, settled %v, kernel %v",
				d.rec.Dirty(), d.planner.Settled(), mc.Table()[svcUDP].Dests)
		}
	})
}

// TestTickRetriesOwnedSave: a failed save of the owned services was
// retried at the next tick before the skip; now it waits for an event or
// the resync ticker.
func TestTickRetriesOwnedSave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, _, clk := frozenDaemon(t)
		owned := filepath.Join(d.cfg.Daemon.StateDir, vip.OwnedFile)
		// A directory in the file's place makes the rename fail.
		if err := os.MkdirAll(filepath.Join(owned, "x"), 0o750); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d.handleTick(ctx)
		if !d.owned.Unsaved() {
			t.Fatal("owned save did not fail")
		}
		if err := os.RemoveAll(owned); err != nil {
			t.Fatal(err)
		}
		clk.add(100 * time.Millisecond)
		d.handleTick(ctx)
		if _, err := os.Stat(owned); err != nil {
			t.Fatalf("owned services not saved at the tick after the failure: %v (settled %v)", err, d.planner.Settled())
		}
	})
}

// TestScopedEnableUnderWiderOverride: R is disabled in all pools and
// drained in pool main; "enable R --pool main" removes the drain and
// must say that R stays disabled everywhere, not that it is back under
// health-driven control.
func TestScopedEnableUnderWiderOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, _, _ := upDaemon(t)
		ctx := context.Background()
		call := func(req control.OverrideRequest) (*control.OverrideReply, error) {
			out, err := d.handleChange(ctx, change{ctx: ctx, c: d.overrideChange(req, "test")})
			if err != nil {
				return nil, err
			}
			return &control.OverrideReply{Message: out.Result.Message, Changed: out.Result.Changed, Overrides: report.Overrides(d.cfg, out.State.Overrides)}, nil
		}
		for _, req := range []control.OverrideRequest{
			{Resolver: "bind-1", Action: control.ActionDisable},
			{Resolver: "bind-1", Pool: "main", Action: control.ActionDrain},
		} {
			if _, err := call(req); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := call(control.OverrideRequest{Resolver: "bind-1", Pool: "main", Action: control.ActionEnable})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(rep.Message, "back under health-driven control") || !strings.Contains(rep.Message, "still disabled in all pools") {
			t.Fatalf("scoped enable under a wider disable says %q; overrides left %+v", rep.Message, rep.Overrides)
		}
	})
}
