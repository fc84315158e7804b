package control

import "testing"

// TestKindStatus: every Kind has its own status, and the client reads
// the kind back from it.
func TestKindStatus(t *testing.T) {
	seen := map[int]Kind{}
	for k := Internal; k <= lastKind; k++ {
		code := k.httpStatus()
		if o, dup := seen[code]; dup {
			t.Errorf("%v and %v share status %d", o, k, code)
		}
		seen[code] = k
		if got := kindOf(code); got != k {
			t.Errorf("kindOf(%d) = %v, want %v", code, got, k)
		}
		if e := Errorf(k, "x"); e.Code != code || httpStatus(e) != code {
			t.Errorf("Errorf(%v): Code %d, replied %d, want %d", k, e.Code, httpStatus(e), code)
		}
	}
	if got := kindOf(502); got != Internal {
		t.Errorf("kindOf(502) = %v, want internal", got)
	}
}
