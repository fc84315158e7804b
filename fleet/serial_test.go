package fleet

import (
	"fmt"
	"testing"
)

// TestVersionsAssign: a hash keeps its version for every node whose
// floor it meets; new data, a rollback to data served before and a node
// ahead of the register are given a version above every other (the
// node's floor when it is higher), never one another hash has; the
// register keeps the MaxVersions most recent hashes.
func TestVersionsAssign(t *testing.T) {
	var v Versions
	step := func(name, hash string, floor, want uint32, wantChanged bool) {
		t.Helper()
		got, changed := v.Assign(hash, floor)
		if got != want || changed != wantChanged {
			t.Errorf("%s: Assign(%s, %d) = %d, %v; want %d, %v", name, hash, floor, got, changed, want, wantChanged)
		}
	}
	step("first node, empty register", "A", 1, 1, true)
	step("second node, empty state", "A", 1, 1, false)
	step("a node restarted on A", "A", 1, 1, false)
	step("rolling change: first node", "B", 2, 2, true)
	step("rolling change: second node", "B", 2, 2, false)
	step("late joiner on B, empty state", "B", 1, 2, false)
	step("node still on A (lagging)", "A", 1, 1, false)
	step("rollback B→A: first node", "A", 3, 3, true)
	step("rollback B→A: second node", "A", 3, 3, false)
	step("the lagging node on A moves up", "A", 1, 3, false)
	step("a node ahead of the register (own history 40)", "C", 41, 41, true)
	step("others on C follow it", "C", 4, 41, false)
	step("a node whose own version on A is ahead", "A", 50, 50, true)
	if v.Max != 50 {
		t.Errorf("Max = %d, want 50", v.Max)
	}
	seen := map[uint32]string{}
	for h, n := range v.Hashes {
		if o, ok := seen[n]; ok {
			t.Errorf("hashes %s and %s share version %d", h, o, n)
		}
		seen[n] = h
	}

	for i := range MaxVersions + 10 {
		v.Assign(fmt.Sprint("h", i), v.Max+1)
	}
	if len(v.Hashes) != MaxVersions {
		t.Errorf("%d hashes kept, want %d", len(v.Hashes), MaxVersions)
	}
	if _, ok := v.Hashes["h0"]; ok {
		t.Error("the oldest hash is still kept")
	}
	if _, ok := v.Hashes[fmt.Sprint("h", MaxVersions+9)]; !ok {
		t.Error("the newest hash is not kept")
	}
	top := v.Max
	step("a pruned hash served again", "A", 51, top+1, true)
}
