package control

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// fleetBackend is a fakeBackend in a fleet.
type fleetBackend struct {
	*fakeBackend
	st  *FleetStatus
	err error
}

func (f fleetBackend) Fleet(context.Context) (*FleetStatus, error) { return f.st, f.err }

// TestFleetEndpoint: GET /v1/fleet answers the backend's fleet view, or
// that the daemon is in no fleet when the backend has none.
func TestFleetEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alone := startServer(t, ServerOptions{Backend: &fakeBackend{}})
	st, err := NewClient(alone.path).Fleet(ctx)
	if err != nil || st.On || len(st.Nodes) != 0 {
		t.Fatalf("no fleet: %+v, %v", st, err)
	}
	want := &FleetStatus{On: true, Node: "lb1", Heartbeat: true, Nodes: []FleetNode{{Name: "lb1", Serial: 7, Odd: []string{"SOA serial 7, most nodes answer 8"}}}}
	in := startServer(t, ServerOptions{Backend: fleetBackend{fakeBackend: &fakeBackend{}, st: want}})
	st, err = NewClient(in.path).Fleet(ctx)
	if err != nil || !st.On || len(st.Nodes) != 1 || st.Nodes[0].Odd[0] != want.Nodes[0].Odd[0] {
		t.Fatalf("fleet: %+v, %v", st, err)
	}
	bad := startServer(t, ServerOptions{Backend: fleetBackend{fakeBackend: &fakeBackend{}, err: Errorf(Unavailable, "etcd unreachable")}})
	_, err = NewClient(bad.path).Fleet(ctx)
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != http.StatusServiceUnavailable {
		t.Fatalf("backend error: %v, want a 503 *Error", err)
	}
}
