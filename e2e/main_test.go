package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// binaries are the programs under test, built once per test binary run by
// TestMain (package state set before any test runs and only read after).
var binaries struct {
	lbdnsd, lbctl, quickstart string
}

// TestMain builds lbdnsd and lbctl into a temporary directory, runs the
// tests, removes the directory, and fails the run when goroutines (the
// readers of a child process's output) outlive the tests. It does not use
// testkit/leakcheck.Main, which exits before the directory could be
// removed.
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lbdns-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binaries.lbdnsd = filepath.Join(dir, "lbdnsd")
	binaries.lbctl = filepath.Join(dir, "lbctl")
	binaries.quickstart = filepath.Join(dir, "lbdns-quickstart")

	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if err := settle(before, 3*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			code = 1
		}
	}
	return code
}

// build compiles lbdnsd, lbctl and lbdns-quickstart into dir. When the tests run with the
// race detector, lbdnsd is built with it too (a race in the daemon fails
// the test that started it); lbctl is not: its own tests run it under the
// detector in-process, and here it is started dozens of times at once.
func build(dir string) error {
	out := dir + string(filepath.Separator)
	daemon := []string{"build", "-o", out}
	if raceBuild {
		daemon = append(daemon, "-race")
	}
	for _, args := range [][]string{append(daemon, "lbdns/cmd/lbdnsd"), {"build", "-o", out, "lbdns/lbctl"}, {"build", "-o", out, "lbdns/cmd/lbdns-quickstart"}} {
		if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
		}
	}
	return nil
}

// settle waits up to wait for the goroutines started by the tests to end
// and reports those left with their stacks.
func settle(before int, wait time.Duration) error {
	end := time.Now().Add(wait)
	for runtime.NumGoroutine() > before {
		if time.Now().After(end) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("goroutine leak: %d goroutines after the tests, %d before:\n%s",
				runtime.NumGoroutine(), before, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
