package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/control"
)

// TestOverrideNeverAddsFailingBackEnd: with r3 and r4 down, r1 and r2
// take the queries. Disabling r1 leaves r2 (min_healthy 1 is met); then
// disabling r2 would put the pool below its minimum, so that it fails
// open and sends queries to the down r3 and r4. lbctl is refused (exit 1,
// naming them), and neither the table nor the state file changes.
func TestOverrideNeverAddsFailingBackEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(4))
	w.startReady()
	for _, name := range []string{"r3", "r4"} {
		if err := w.backend(name).Stop(); err != nil {
			t.Fatal(err)
		}
	}
	w.waitTable("r3 and r4 down", w.wantTable(nil, []string{"r3", "r4"}))
	w.mustLbctl("disable", "r1", "--reason", "rma")
	want := w.wantTable(nil, []string{"r1", "r3", "r4"})
	w.waitTable("r1 disabled", want)
	before, err := os.ReadFile(w.stateDir + "/overrides.json")
	if err != nil {
		t.Fatal(err)
	}

	r := w.lbctl("disable", "r2", "--reason", "would fail open")
	if r.code != 1 {
		t.Fatalf("disable of the last healthy member: exit %d, want 1\n%s", r.code, r)
	}
	for _, s := range []string{"refused", "fail open", w.addr("r3"), w.addr("r4")} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("refusal %q does not mention %q", r.stderr, s)
		}
	}
	tb, err := w.readTable()
	if err != nil || !tb.equal(want) {
		t.Errorf("refused override changed the table:\n%swant:\n%s", tb, want)
	}
	after, err := os.ReadFile(w.stateDir + "/overrides.json")
	if err != nil || string(after) != string(before) {
		t.Errorf("refused override changed the state file:\n%s\nwas:\n%s", after, before)
	}
	if st := w.statusJSON(); st.Pools[0].FailOpen {
		t.Errorf("pool failed open after a refused override: %s", st.Pools[0].Detail)
	}
}

// TestFailOpenKeepsLastGood is issue 7's case end to end: r2 and r3 are
// down (broken in their own ways) long before r1, the last good one,
// dies. The pool fails open to r1 alone, the set in traffic just before
// the collapse; r2 and r3 stay out. When r2 recovers it comes back at
// once (the pool keeps failing open until recover_healthy members are
// healthy), and r3 still stays out.
func TestFailOpenKeepsLastGood(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(3))
	w.startReady()
	for _, name := range []string{"r2", "r3"} {
		if err := w.backend(name).Stop(); err != nil {
			t.Fatal(err)
		}
	}
	lastGood := w.wantTable(nil, []string{"r2", "r3"})
	w.waitTable("r2 and r3 down", lastGood)
	// Down before the pool's collapse window: (fall+1) × interval +
	// timeout = 700ms before r1 fails.
	w.waitDownFor("main", 700*time.Millisecond, "r2", "r3")

	if err := w.backend("r1").Stop(); err != nil {
		t.Fatal(err)
	}
	w.waitStatus("the pool failing open with r1 down", func(st *control.Status) (bool, string) {
		r1, _ := member(st, "main", "r1")
		return st.Pools[0].FailOpen && r1.State == "down", fmt.Sprintf("fail-open %v, r1 %s: %s", st.Pools[0].FailOpen, r1.State, st.Pools[0].Detail)
	})
	tb, err := w.readTable()
	if err != nil || !tb.equal(lastGood) {
		t.Errorf("failing open: table\n%swant the last good set (r1 alone):\n%s(err %v)", tb, lastGood, err)
	}
	st := w.statusJSON()
	for name, why := range map[string]string{"r1": control.WhyHeldFailOpen, "r2": control.WhyOutFailOpen, "r3": control.WhyOutFailOpen} {
		if m, _ := member(st, "main", name); m.Why != why || m.WhyText == "" {
			t.Errorf("failing open: %s why %q (%q), want %q", name, m.Why, m.WhyText, why)
		}
	}

	if err := w.backend("r2").Restart(); err != nil {
		t.Fatal(err)
	}
	w.waitTable("r2 back, r1 held, r3 out", w.wantTable(nil, []string{"r3"}))
	if st := w.statusJSON(); !st.Pools[0].FailOpen {
		t.Errorf("one member healthy of recover_healthy 2: pool stopped failing open: %s", st.Pools[0].Detail)
	}
}

// waitDownFor waits until the named members of pool have been down for
// longer than d, by the daemon's clock (the status's generation time
// against each member's since).
func (w *world) waitDownFor(pool string, d time.Duration, names ...string) {
	w.t.Helper()
	w.waitStatus(fmt.Sprintf("%v down for more than %s", names, d), func(st *control.Status) (bool, string) {
		for _, name := range names {
			m, _ := member(st, pool, name)
			if m.State != "down" || m.Since.IsZero() || st.Generated.Sub(m.Since) <= d {
				return false, fmt.Sprintf("%s: %s since %s, status at %s", name, m.State, m.Since, st.Generated)
			}
		}
		return true, ""
	})
}

// TestFailOpenMembersKilledTogether: ten resolvers behind two pools, each
// pool of one product (so that the upstream diagnosis, which needs two
// vendors, does not fail the pool open early), two and three of them
// good, the others down long before. The good ones are killed at once;
// their checks go down a probe or so apart, so each pool takes the first
// ones out while the last still meets min_healthy. When the last one
// goes, the pool fails open holding every good member (they failed within
// its collapse window, (fall+1) × interval + timeout = 700ms here), not
// the last survivor alone; the ones down before stay out.
func TestFailOpenMembersKilledTogether(t *testing.T) {
	t.Parallel()
	l := layout{pools: []poolSpec{
		{name: "main", vip: "v4", vipAddr: "192.0.2.53", members: []string{"r1", "r2", "r3", "r4", "r5"}},
		{name: "other", vip: "v4b", vipAddr: "192.0.2.54", members: []string{"r6", "r7", "r8", "r9", "r10"}},
	}}
	for i, name := range resolverNames(10) {
		vendor := "bind"
		if i >= 5 {
			vendor = "unbound"
		}
		l.resolvers = append(l.resolvers, resolverSpec{name: name, vendor: vendor, weight: 10 * (i + 1)})
	}
	good := map[string][]string{"main": {"r1", "r2"}, "other": {"r6", "r7", "r8"}}
	bad := []string{"r3", "r4", "r5", "r9", "r10"}
	w := newWorld(t, l)
	w.startReady()
	for _, name := range bad {
		if err := w.backend(name).Stop(); err != nil {
			t.Fatal(err)
		}
	}
	held := w.wantTable(nil, bad)
	w.waitTable("the broken ones out", held)
	w.waitDownFor("main", 700*time.Millisecond, "r3", "r4", "r5")
	w.waitDownFor("other", 700*time.Millisecond, "r9", "r10")

	// Killed together: every good back end stopped at once.
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for _, names := range good {
		for _, name := range names {
			srv := w.backend(name)
			wg.Go(func() { errs <- srv.Stop() })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.waitStatus("both pools failing open with every member down", func(st *control.Status) (bool, string) {
		var b strings.Builder
		ok := true
		for _, p := range st.Pools {
			fmt.Fprintf(&b, "%s: fail-open %v: %s\n", p.Name, p.FailOpen, p.Detail)
			ok = ok && p.FailOpen
			for _, m := range p.Members {
				ok = ok && m.State == "down"
			}
		}
		return ok, b.String()
	})
	tb, err := w.readTable()
	if err != nil || !tb.equal(held) {
		t.Errorf("failing open: table\n%swant every good member held:\n%s(err %v)", tb, held, err)
	}
	st := w.statusJSON()
	for pool, names := range good {
		for _, name := range names {
			if m, _ := member(st, pool, name); m.Why != control.WhyHeldFailOpen {
				t.Errorf("%s/%s: why %q (%s), want %q", pool, name, m.Why, m.WhyText, control.WhyHeldFailOpen)
			}
		}
	}
	for _, p := range st.Pools {
		for _, m := range p.Members {
			if slices.Contains(bad, m.Resolver) && m.Why != control.WhyOutFailOpen {
				t.Errorf("%s/%s (down before): why %q (%s), want %q", p.Name, m.Resolver, m.Why, m.WhyText, control.WhyOutFailOpen)
			}
		}
	}
}
