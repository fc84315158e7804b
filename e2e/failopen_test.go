package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

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
