package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// TestFleetHostDrainKept: in a fleet, a host's drain (lbctl host drain)
// is the host's own: another node's write to the shared intent does not
// undo it, it survives a restart, and the other node is not drained.
func TestFleetHostDrainKept(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	fp := &fakeProbe{}
	pathA := fleetConfig(t, c, cr, "a", "c1")
	a := start(t, pathA, vip.NewMemClient(), fp)
	b := start(t, fleetConfig(t, c, cr, "b", "c1"), vip.NewMemClient(), fp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitDests(t, a.client, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
	waitDests(t, b.client, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303") // warm: the override is judged on facts
	if _, err := a.d.bgp.SetHost(ctx, control.HostRequest{Action: control.HostDrain, Reason: "kernel upgrade"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	drained := func(h *harness) bool {
		in, _ := h.d.Hub().Intent.Load()
		return in.State.Host != nil && in.State.Host.Reason == "kernel upgrade"
	}
	if !drained(a) {
		t.Fatal("a not drained")
	}
	if _, err := b.d.SetOverride(ctx, control.OverrideRequest{Action: control.ActionDisable, Resolver: "bind-1", Reason: "fleet test"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "a to apply b's override", func() (bool, string) {
		in, _ := a.d.Hub().Intent.Load()
		return len(in.State.Overrides) == 1, fmt.Sprintf("%+v", in)
	})
	if !drained(a) {
		t.Fatal("b's write undid a's drain")
	}
	if drained(b) {
		t.Fatal("b drained by a's drain")
	}
	a.stop()
	a = start(t, pathA, vip.NewMemClient(), fp)
	if !drained(a) {
		t.Fatal("a's drain lost across a restart")
	}
	if in, _ := a.d.Hub().Intent.Load(); len(in.State.Overrides) != 1 {
		t.Errorf("a after the restart: %+v, want b's override too", in.State)
	}
}
