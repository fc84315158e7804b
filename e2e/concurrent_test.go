package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentLbctl runs 20 lbctl processes at once, twice: overrides on
// distinct resolvers while others read the status. Every one succeeds and
// the overrides in force, in status and on disk, are exactly the ones
// asked for.
func TestConcurrentLbctl(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(6))
	w.startReady()

	round := func(name string, overrides [][]string, want []string, drained, disabled []string) {
		t.Helper()
		calls := overrides
		for i := len(calls); i < 20; i++ {
			if i%2 == 0 {
				calls = append(calls, []string{"status"})
			} else {
				calls = append(calls, []string{"-o", "json", "status"})
			}
		}
		results := runAll(t, w, calls)
		for i, r := range results {
			if r.code != 0 {
				t.Errorf("%s: lbctl %q: %s", name, calls[i], r)
			}
		}
		// Each status call saw a whole table, with every member.
		for i, r := range results {
			if calls[i][0] == "status" && r.code == 0 && len(tableRows(t, r.stdout, memberColumns...)) != 6 {
				t.Errorf("%s: status output without the 6 members:\n%s", name, r.stdout)
			}
		}
		var got []string
		for _, o := range w.statusJSON().Overrides {
			got = append(got, overrideText(o.Resolver, o.Pool, o.VIP, o.Action, o.Reason))
		}
		if !sameSet(got, want) {
			t.Errorf("%s: overrides %q, want %q", name, got, want)
		}
		checkOverridesFileSet(t, w, want)
		w.waitTable(name, w.wantTable(drained, disabled))
	}

	round("round 1", [][]string{
		{"drain", "r1", "--reason", "one"},
		{"drain", "r2", "--reason", "two"},
		{"drain", "r3", "--reason", "three"},
		{"disable", "r4", "--reason", "four"},
		{"enable", "r6"}, // nothing to enable: a no-op, exit 0
	}, []string{"r1 drain one", "r2 drain two", "r3 drain three", "r4 disable four"},
		[]string{"r1", "r2", "r3"}, []string{"r4"})

	round("round 2", [][]string{
		{"enable", "r1"}, {"enable", "r2"}, {"enable", "r3"}, {"enable", "r4"},
		{"drain", "r5", "--reason", "five"},
	}, []string{"r5 drain five"}, []string{"r5"}, nil)
}

// runAll starts lbctl with each args at once and returns how each ended.
func runAll(t *testing.T, w *world, calls [][]string) []result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	results := make([]result, len(calls))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, args := range calls {
		cmd := command(ctx, binaries.lbctl, append([]string{"-socket", w.socket}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		wg.Go(func() {
			<-start
			err := cmd.Run()
			code := -1
			if cmd.ProcessState != nil {
				code = cmd.ProcessState.ExitCode()
			}
			if code == -1 {
				fmt.Fprintf(&stderr, "\n(run: %v)", err)
			}
			results[i] = result{code: code, stdout: stdout.String(), stderr: stderr.String()}
		})
	}
	close(start)
	wg.Wait()
	return results
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
		if count[s] < 0 {
			return false
		}
	}
	return true
}

// checkOverridesFileSet is checkOverridesFile in any order.
func checkOverridesFileSet(t *testing.T, w *world, want []string) {
	t.Helper()
	doc := readOverridesFile(t, w)
	var got []string
	for _, o := range doc.Overrides {
		got = append(got, overrideText(o.Resolver, o.Pool, o.VIP, o.Action, o.Reason))
	}
	if doc.Version != 1 || !sameSet(got, want) {
		t.Errorf("overrides file (version %d): %q, want version 1 with %q", doc.Version, got, want)
	}
}
