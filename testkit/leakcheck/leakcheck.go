// Package leakcheck fails a test binary whose goroutines outlive its tests.
// Packages that start goroutines (servers, probes, monitors, processes)
// call it from TestMain.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Settle is how long Main waits for goroutines to finish after the tests.
const Settle = 3 * time.Second

// Main runs the tests and then exits non-zero if goroutines leaked. With
// no markers, a leak is any goroutine beyond those alive before the tests
// (the signal loop of the fuzzing engine excepted); with markers, a leak
// is a goroutine whose stack contains one of them, for example
// "miekg/dns.(*Server)".
func Main(m *testing.M, markers ...string) {
	os.Exit(Run(m, markers...))
}

// Run is Main that returns the exit code instead of exiting, for a
// TestMain that has something to stop after the check (a server shared
// by the tests).
func Run(m *testing.M, markers ...string) int {
	before := len(goroutines(nil))
	code := m.Run()
	if code == 0 {
		if err := settle(before, markers, Settle); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

// goroutines returns the stacks of live goroutines, only those containing
// a marker when markers are given.
func goroutines(markers []string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "os/signal.loop") {
			continue
		}
		if len(markers) > 0 && !containsAny(g, markers) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// settle waits up to wait for the leftovers to go, then reports them with
// their stacks.
func settle(before int, markers []string, wait time.Duration) error {
	limit := before
	if len(markers) > 0 {
		limit = 0
	}
	end := time.Now().Add(wait)
	for {
		gs := goroutines(markers)
		if len(gs) <= limit {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("goroutine leak: %d goroutines left after the tests (allowed %d):\n%s",
				len(gs), limit, strings.Join(gs, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
