package monitor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/check"
)

// fakeFlusher holds the checks its batch checkers start until Flush, which
// answers each of them OK; it records when each target's checks started.
type fakeFlusher struct {
	mu      sync.Mutex
	held    []func(check.Result)
	flushes int
	checks  int
	starts  map[string][]time.Time
}

// Flush answers the held checks.
func (f *fakeFlusher) Flush() {
	f.mu.Lock()
	held := f.held
	f.held = nil
	f.flushes++
	f.mu.Unlock()
	for _, done := range held {
		done(check.Result{OK: true, Detail: "NOERROR"})
	}
}

// batchChecker is a BatchChecker of one target through a fakeFlusher.
type batchChecker struct {
	f  *fakeFlusher
	id string
}

func (c batchChecker) Check(context.Context) check.Result {
	panic("batchChecker: Check called, want StartHeld")
}

func (c batchChecker) StartCheck(time.Time, func(check.Result)) {
	panic("batchChecker: StartCheck called, want StartHeld")
}

func (c batchChecker) StartHeld(_ time.Time, done func(check.Result)) Flusher {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.held = append(c.f.held, done)
	c.f.checks++
	c.f.starts[c.id] = append(c.f.starts[c.id], time.Now())
	return c.f
}

// TestBatchCheckerCoalesced: the checks of a BatchChecker started in one
// wake-up are flushed together (about one Flush per default coalescing
// window, not one per check); a check started early does not shorten the
// interval (gaps average the interval), and a short interval keeps a
// window of a 50th of it.
func TestBatchCheckerCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slow, fast = 1000, 10
		f := &fakeFlusher{starts: map[string][]time.Time{}}
		m := New(Options{})
		var targets []Target
		for i := range slow + fast {
			s := Schedule{Interval: time.Second, Timeout: 500 * time.Millisecond, Rise: 2, Fall: 3}
			id := fmt.Sprint("slow", i)
			if i >= slow {
				s.Interval, s.Timeout = 100*time.Millisecond, 50*time.Millisecond
				id = fmt.Sprint("fast", i)
			}
			targets = append(targets, Target{Key: key(id), Addr: addr(i % 250), Schedule: s, Checker: batchChecker{f, id}, Spec: "batch"})
		}
		m.Update(targets)
		stop := start(t, m)
		time.Sleep(10 * time.Second)
		stop()

		f.mu.Lock()
		defer f.mu.Unlock()
		if f.checks < slow*9 {
			t.Fatalf("%d checks in 10 s, want at least %d", f.checks, slow*9)
		}
		if f.flushes > f.checks/10 {
			t.Errorf("%d flushes for %d checks, want them batched (at most %d)", f.flushes, f.checks, f.checks/10)
		}
		var sum time.Duration
		var gaps int
		minFast := time.Hour
		for id, ts := range f.starts {
			for i := 1; i < len(ts); i++ {
				gap := ts[i].Sub(ts[i-1])
				if id[:4] == "fast" {
					minFast = min(minFast, gap)
					continue
				}
				sum += gap
				gaps++
			}
		}
		if mean := sum / time.Duration(gaps); mean < time.Second-3*time.Millisecond || mean > time.Second+3*time.Millisecond {
			t.Errorf("mean gap between checks %v, want the interval 1s", mean)
		}
		// 100 ms - 2% jitter - a window of 100 ms / 50.
		if want := 96 * time.Millisecond; minFast < want {
			t.Errorf("shortest gap of a 100 ms target %v, want at least %v", minFast, want)
		}
	})
}
