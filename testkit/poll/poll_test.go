package poll_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/testkit/poll"
)

// fakeT records a Fatalf and ends its goroutine, as testing.T does.
type fakeT struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls poll.Until with f in a goroutine of its own (Fatalf ends it)
// and reports whether Until returned, and what it returned.
func (f *fakeT) run(timeout time.Duration, what string, cond func() (bool, string)) (returned bool, at time.Time) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		at = poll.Until(f, timeout, what, cond)
		returned = true
	}()
	<-done
	return returned, at
}

func TestUntilReturnsWhenTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		f := &fakeT{TB: t}
		returned, at := f.run(time.Second, "third call", func() (bool, string) {
			calls++
			return calls == 3, fmt.Sprintf("call %d", calls)
		})
		if !returned || f.msg != "" {
			t.Fatalf("Until failed the test: %q", f.msg)
		}
		if calls != 3 {
			t.Errorf("cond called %d times, want 3", calls)
		}
		// Pauses of 10ms then 20ms before the third call.
		if want := start.Add(30 * time.Millisecond); !at.Equal(want) {
			t.Errorf("Until returned %v after the start, want 30ms", at.Sub(start))
		}
	})
}

func TestUntilFirstCallNoPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := &fakeT{TB: t}
		returned, at := f.run(time.Second, "at once", func() (bool, string) { return true, "" })
		if !returned || !at.Equal(start) {
			t.Errorf("returned %v at +%v, want true at +0", returned, at.Sub(start))
		}
	})
}

func TestUntilFailsWithTheLastDetail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		var last time.Time
		f := &fakeT{TB: t}
		returned, _ := f.run(200*time.Millisecond, "never", func() (bool, string) {
			calls++
			last = time.Now()
			return false, fmt.Sprintf("attempt %d", calls)
		})
		if returned {
			t.Fatal("Until returned although the condition never held")
		}
		for _, s := range []string{"never", "200ms", fmt.Sprintf("attempt %d", calls)} {
			if !strings.Contains(f.msg, s) {
				t.Errorf("failure %q lacks %q", f.msg, s)
			}
		}
		// Attempts at 0, 10, 30, 70, 120, 170, 220ms: the last one is the
		// first after the deadline, and the pause never exceeds 50ms.
		if calls != 7 || !last.Equal(start.Add(220*time.Millisecond)) {
			t.Errorf("%d attempts, last at +%v; want 7, last at +220ms", calls, last.Sub(start))
		}
	})
}

func TestTrue(t *testing.T) {
	if ok, _ := poll.True(func() bool { return true })(); !ok {
		t.Error("True(true) does not hold")
	}
	if ok, detail := poll.True(func() bool { return false })(); ok || detail == "" {
		t.Errorf("True(false) = %v, %q; want false with a detail", ok, detail)
	}
}
