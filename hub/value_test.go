package hub

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

func TestValueLoadWait(t *testing.T) {
	v := NewValue[string]()
	if got, ver := v.Load(); got != "" || ver != 0 {
		t.Fatalf("new value: %q at %d, want \"\" at 0", got, ver)
	}
	if ver := v.Publish("a"); ver != 1 {
		t.Fatalf("first Publish: version %d, want 1", ver)
	}
	got, ver, err := v.Wait(context.Background(), 0)
	if err != nil || got != "a" || ver != 1 {
		t.Fatalf("Wait(0) = %q, %d, %v; want a, 1, nil", got, ver, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ver, err := v.Wait(ctx, 1); err == nil || ver != 1 {
		t.Fatalf("Wait(1) on a done context = %d, %v; want 1 and the context's error", ver, err)
	}
}

// TestValueWaitNeverMisses publishes as fast as it can while a slow
// waiter follows: the waiter sees coalesced versions but always the
// last one, and never waits past a change.
func TestValueWaitNeverMisses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := NewValue[int]()
		const n = 100000
		var seen atomic.Int64
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		wg.Go(func() {
			var after uint64
			for {
				got, ver, err := v.Wait(ctx, after)
				if err != nil {
					return
				}
				if ver <= after || got != int(ver) {
					t.Errorf("Wait(%d) = %d at %d", after, got, ver)
				}
				after = ver
				seen.Store(int64(ver))
			}
		})
		for i := 1; i <= n; i++ {
			v.Publish(i)
		}
		synctest.Wait() // the waiter is blocked: it has read every version
		if got := seen.Load(); got != n {
			t.Errorf("the waiter's last version is %d, want %d", got, n)
		}
		cancel()
		wg.Wait()
	})
}

func TestValueChangedSelect(t *testing.T) {
	a, b := NewValue[int](), NewValue[int]()
	ca, cb := a.Changed(0), b.Changed(0)
	b.Publish(7)
	select {
	case <-ca:
		t.Fatal("a's channel closed without a Publish")
	case <-cb:
	}
	select {
	case <-b.Changed(0):
	default:
		t.Fatal("Changed(0) after a Publish is not closed")
	}
}

func TestLazyBuildsOncePerVersion(t *testing.T) {
	var src, builds atomic.Int64
	l := NewLazy(func() int64 { builds.Add(1); return src.Load() })
	if v, ver := l.Load(); v != 0 || ver != 0 {
		t.Fatalf("Load = %d at %d", v, ver)
	}
	src.Store(5)
	l.Touch()
	for range 3 {
		if v, ver := l.Load(); v != 5 || ver != 1 {
			t.Fatalf("Load = %d at %d, want 5 at 1", v, ver)
		}
	}
	if b := builds.Load(); b != 2 {
		t.Fatalf("%d builds for two versions, want 2", b)
	}
}

// TestLazyWaitNeverMisses touches the source faster than a reader builds:
// the reader's last value is the source's last.
func TestLazyWaitNeverMisses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var src atomic.Int64
		l := NewLazy(func() int64 { return src.Load() })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var last atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			var after uint64
			for {
				v, ver, err := l.Wait(ctx, after)
				if err != nil {
					return
				}
				if ver <= after {
					t.Errorf("Wait(%d) returned version %d", after, ver)
				}
				after = ver
				last.Store(v)
			}
		})
		const n = 50000
		for i := 1; i <= n; i++ {
			src.Store(int64(i)) // the change, then the mark
			l.Touch()
		}
		synctest.Wait()
		if got := last.Load(); got != n {
			t.Errorf("the reader's last value is %d, want %d", got, n)
		}
		cancel()
		wg.Wait()
	})
}
