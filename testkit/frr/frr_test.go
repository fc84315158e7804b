package frr

import "testing"

// TestParsePrefix pins the parser on FRR 8.4's output.
func TestParsePrefix(t *testing.T) {
	out := `{"prefix":"192.0.2.53/32","paths":[{"origin":"IGP","metric":1000,"valid":true,
	"community":{"string":"65001:200 graceful-shutdown","list":["65001:200","gracefulShutdown"]}}]}`
	if rt, ok := parsePrefix(out); !ok || rt != (Route{MED: 1000, Communities: "65001:200 graceful-shutdown"}) {
		t.Errorf("got %+v %v", rt, ok)
	}
	if _, ok := parsePrefix(`{}`); ok {
		t.Errorf("a prefix without paths parsed as a route")
	}
	if _, ok := parsePrefix(`{"paths":[{"valid":false,"metric":1}]}`); ok {
		t.Errorf("an invalid path parsed as a route")
	}
}
