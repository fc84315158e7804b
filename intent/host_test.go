package intent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestApplyHost(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	drained := State{Host: &HostDrain{Reason: "maintenance", Set: t0, By: "uid 0"}}
	for _, tc := range []struct {
		name    string
		cur     State
		req     HostRequest
		want    *HostDrain
		changed bool
	}{
		{"drain", State{}, HostRequest{Action: ActionHostDrain, Reason: "maintenance", By: "uid 0", At: t0}, drained.Host, true},
		{"drain again keeps the time", drained, HostRequest{Action: ActionHostDrain, Reason: "maintenance", At: t0.Add(time.Hour)}, drained.Host, false},
		{"drain with a new reason", drained, HostRequest{Action: ActionHostDrain, Reason: "kernel", At: t0.Add(time.Hour)}, &HostDrain{Reason: "kernel", Set: t0, By: "uid 0"}, true},
		{"enable", drained, HostRequest{Action: ActionHostEnable}, nil, true},
		{"enable when enabled", State{}, HostRequest{Action: ActionHostEnable}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, res, err := ApplyHost(tc.cur, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Changed != tc.changed || res.Message == "" {
				t.Errorf("result = %+v", res)
			}
			switch {
			case tc.want == nil && next.Host != nil, tc.want != nil && (next.Host == nil || *next.Host != *tc.want):
				t.Errorf("host = %+v, want %+v", next.Host, tc.want)
			}
			if tc.cur.Host != nil && next.Host == tc.cur.Host && res.Changed {
				t.Errorf("next shares the drain with cur")
			}
		})
	}
	// Without routes to announce, a drain is recorded but its message
	// promises no route change.
	next, res, err := ApplyHost(State{}, HostRequest{Action: ActionHostDrain, At: t0, NoRoutes: true})
	if err != nil || next.Host == nil || !res.Changed {
		t.Fatalf("drain without routes: %+v %+v %v", next.Host, res, err)
	}
	if strings.Contains(res.Message, "GRACEFUL_SHUTDOWN") || !strings.Contains(res.Message, "no route") {
		t.Errorf("drain without routes says %q", res.Message)
	}
	if _, _, err := ApplyHost(State{}, HostRequest{Action: "nope"}); !errors.Is(err, ErrHostAction) {
		t.Errorf("bad action: %v", err)
	}
}

// TestHostDrainOmitted: a state without a drain keeps the file's bytes
// (old files load unchanged), and one with a drain round-trips.
func TestHostDrainOmitted(t *testing.T) {
	b, err := json.Marshal(State{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "host") {
		t.Errorf("empty state = %s", b)
	}
	in := State{Host: &HostDrain{Reason: "r", Set: time.Unix(100, 0).UTC()}}
	b, _ = json.Marshal(in)
	var out State
	if err := json.Unmarshal(b, &out); err != nil || out.Host == nil || *out.Host != *in.Host {
		t.Errorf("round trip %s: %+v %v", b, out.Host, err)
	}
	if c := in.Clone(); c.Host == in.Host {
		t.Errorf("Clone shares the drain")
	}
}
