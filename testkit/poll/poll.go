// Package poll is the one polling helper of lbdns's tests: wait until a
// condition holds, or fail the test with what the condition last saw.
//
// It sleeps between attempts, so inside a testing/synctest bubble it waits
// on the bubble's fake clock and costs no real time.
package poll

import (
	"testing"
	"time"
)

// MinInterval and MaxInterval bound the pause between two attempts: the
// first pause is MinInterval, each next one doubles up to MaxInterval.
const (
	MinInterval = 10 * time.Millisecond
	MaxInterval = 50 * time.Millisecond
)

// Until calls cond until it reports true and returns the time of the
// attempt that saw it hold (taken just before that call). When cond has
// not held within timeout, Until fails t with what, the timeout and the
// detail of cond's last attempt, and does not return.
func Until(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, detail string)) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := MinInterval
	for {
		now := time.Now()
		ok, detail := cond()
		if ok {
			return now
		}
		if now.After(deadline) {
			t.Fatalf("%s: not within %v; last seen: %s", what, timeout, detail)
			return now // only reached when t's Fatalf returns (a fake)
		}
		time.Sleep(pause)
		pause = min(2*pause, MaxInterval)
	}
}

// True adapts a condition that has nothing to say when it does not hold.
func True(cond func() bool) func() (bool, string) {
	return func() (bool, string) {
		if cond() {
			return true, ""
		}
		return false, "condition false"
	}
}
