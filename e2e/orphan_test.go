package e2e

import (
	"strings"
	"testing"
)

// TestOrphanedOverride: an override whose resolver a reload removed is
// kept and shown as orphaned; when the resolver comes back it applies
// again.
func TestOrphanedOverride(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(3))
	w.startReady()
	w.mustLbctl("disable", "r3", "--reason", "retiring")
	w.waitTable("r3 disabled", w.wantTable(nil, []string{"r3"}))

	full := w.layout
	w.write(full.without("r3"))
	w.mustLbctl("reload")
	w.waitTable("r3 gone from the config", w.wantTable(nil, nil))
	r := w.mustLbctl("status")
	row := rowOf(t, tableRows(t, r.stdout, overrideColumns...), "RESOLVER", "r3")
	if row["ACTION"] != "disable" || row["REASON"] != "retiring" || row["+1"] != "ORPHANED" {
		t.Errorf("override row of the removed r3: %v, want disable (retiring) marked ORPHANED\n%s", row, r.stdout)
	}
	st := w.statusJSON()
	if len(st.Overrides) != 1 || !st.Overrides[0].Orphaned || st.Overrides[0].Resolver != "r3" || st.Overrides[0].Reason != "retiring" {
		t.Errorf("overrides %+v, want r3's, orphaned", st.Overrides)
	}
	if _, ok := member(st, "main", "r3"); ok {
		t.Errorf("r3 is still a member after the reload removed it")
	}
	checkOverridesFile(t, w, "r3 disable retiring")
	found := false
	for _, ev := range w.events() {
		found = found || ev.Subject == "r3" && strings.Contains(ev.Message, "orphaned override kept")
	}
	if !found {
		t.Errorf("no event says r3's override was kept as an orphan")
	}

	// Back in the config: the override applies again. Wait until r3 is up,
	// or its absence from the table would prove nothing.
	w.write(full)
	w.mustLbctl("reload")
	st = w.waitUp("r3")
	if m, _ := member(st, "main", "r3"); m.Override != "disable" || m.OverrideReason != "retiring" || m.InTraffic {
		t.Errorf("r3 back in the config: %+v, want disabled (retiring), out of traffic", m)
	}
	if len(st.Overrides) != 1 || st.Overrides[0].Orphaned {
		t.Errorf("overrides %+v, want r3's, no longer orphaned", st.Overrides)
	}
	w.waitTable("r3 back and still disabled", w.wantTable(nil, []string{"r3"}))
	if r := w.mustLbctl("status"); strings.Contains(r.stdout, "ORPHANED") {
		t.Errorf("status still shows an orphan:\n%s", r.stdout)
	}
}
