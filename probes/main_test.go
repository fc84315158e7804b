package probes

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when goroutines outlive the tests: every probe
// and every test server must have stopped all it started.
func TestMain(m *testing.M) {
	before := len(goroutines())
	code := m.Run()
	if code == 0 {
		if err := settleGoroutines(before, 2*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// goroutines returns the stacks of live goroutines, leaving out the signal
// loop that the fuzzing engine starts once and never stops.
func goroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "os/signal.loop") {
			continue
		}
		out = append(out, g)
	}
	return out
}

// settleGoroutines waits up to wait for the goroutine count to fall back to
// before, then reports the leftovers with their stacks.
func settleGoroutines(before int, wait time.Duration) error {
	end := time.Now().Add(wait)
	for {
		gs := goroutines()
		if len(gs) <= before {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("goroutine leak: %d before tests, %d after\n%s",
				before, len(gs), strings.Join(gs, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
