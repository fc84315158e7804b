package intent_test

import (
	"testing"

	"lbdns/control"
	"lbdns/intent"
)

// TestScopeWording pins the scope wording, written twice: in intent (the
// daemon's messages) and in control (lbctl, the status page), which may
// import no project package. Only this test imports control.
func TestScopeWording(t *testing.T) {
	for _, tc := range []struct{ pool, vip, want string }{
		{"", "", "all pools"},
		{"main", "", "pool main"},
		{"", "v4", "vip v4"},
	} {
		if got := intent.Scope(tc.pool, tc.vip); got != tc.want {
			t.Errorf("intent.Scope(%q, %q) = %q, want %q", tc.pool, tc.vip, got, tc.want)
		}
		if got := control.Scope(tc.pool, tc.vip); got != tc.want {
			t.Errorf("control.Scope(%q, %q) = %q, want %q", tc.pool, tc.vip, got, tc.want)
		}
		if got, want := (intent.Override{Pool: tc.pool, VIP: tc.vip}).ScopeText(), "in "+tc.want; got != want {
			t.Errorf("ScopeText() = %q, want %q", got, want)
		}
	}
}

// TestActionsMatchControl: the actions are the control API's strings.
func TestActionsMatchControl(t *testing.T) {
	if intent.ActionDrain != control.ActionDrain || intent.ActionDisable != control.ActionDisable || intent.ActionEnable != control.ActionEnable {
		t.Fatal("intent's actions differ from control's")
	}
}

// TestGSLBScopeWording pins the GSLB scope wording and actions, written in
// intent and in control.
func TestGSLBScopeWording(t *testing.T) {
	for _, tc := range []struct{ name, zone, want string }{
		{"", "", "all names"},
		{"www.g.test.", "", "name www.g.test."},
		{"", "g.test.", "zone g.test."},
	} {
		if got := intent.GSLBScope(tc.name, tc.zone); got != tc.want {
			t.Errorf("intent.GSLBScope(%q, %q) = %q, want %q", tc.name, tc.zone, got, tc.want)
		}
		if got := control.GSLBScope(tc.name, tc.zone); got != tc.want {
			t.Errorf("control.GSLBScope(%q, %q) = %q, want %q", tc.name, tc.zone, got, tc.want)
		}
	}
	if intent.ActionOff != control.GSLBOff || intent.ActionOn != control.GSLBOn || intent.ActionTTL != control.GSLBTTL {
		t.Fatal("intent's GSLB actions differ from control's")
	}
}
