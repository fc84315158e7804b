package control

import (
	"errors"
	"testing"
)

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

// TestErrorfWraps: a %w in Errorf keeps its error in the chain (a
// refusal says its kind and still names its cause), with the message
// fmt.Errorf would give.
func TestErrorfWraps(t *testing.T) {
	cause := errors.New("revision 3, now 4")
	e := Errorf(Conflict, "the intent changed meanwhile: %w", cause)
	if !errors.Is(e, cause) || e.Message != "the intent changed meanwhile: revision 3, now 4" || e.Kind != Conflict {
		t.Errorf("Errorf with %%w: %+v (is cause: %v)", e, errors.Is(e, cause))
	}
	if e := Errorf(Malformed, "plain %s", "text"); e.Unwrap() != nil || e.Message != "plain text" {
		t.Errorf("Errorf without %%w: %+v", e)
	}
}
