package e2e

import (
	"os"
	"strings"
	"testing"
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
