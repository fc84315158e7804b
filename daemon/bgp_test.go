//go:build linux

package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/testkit/bird"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// bgpSection announces to r with a drain delay of 2s, with the [bgp]
// keys of keys too.
func bgpSection(r *bird.Router, keys ...string) string {
	return fmt.Sprintf(`
[bgp]
router_id = %q
local_as = 65001
listen_port = -1
drain_delay = "2s"
communities_up = ["65001:100"]
`+strings.Join(keys, "\n")+`
[[bgp.peer]]
address = %q
as = 65000
hold_time = "3s"
keepalive = "1s"
`, r.Host().RootAddrV4(), r.Host().AddrV4())
}

// TestBGPDaemon runs lbdnsd with [bgp] against BIRD and asserts on the
// router's table: the VIP is announced with MED 100 while its pool
// serves, with MED 1000 while the pool fails open, marked (65535,0) by
// lbctl host drain then withdrawn after the drain delay; the drain
// survives a restart (nothing announced after it), lbctl host enable
// announces again, a reload without [bgp] withdraws it and closes the
// session (and one with [bgp] announces again), and stopping lbdnsd
// (SIGTERM) withdraws the route.
func TestBGPDaemon(t *testing.T) {
	r := bird.Start(t, bird.Options{AS: 65000, PeerAS: 65001})
	dir := t.TempDir()
	path := writeConfig(t, dir, bgpSection(r))
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	h := start(t, path, mc, fp)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
	r.WaitRoute("VIP announced while its pool serves", "192.0.2.53/32", "100", "(65001,100)")

	for _, a := range []string{"127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303"} {
		fp.set(a, true)
	}
	r.WaitRoute("VIP announced with the worse MED while its pool fails open", "192.0.2.53/32", "1000", "")
	for _, a := range []string{"127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303"} {
		fp.set(a, false)
	}
	r.WaitRoute("VIP back to MED 100", "192.0.2.53/32", "100", "(65001,100)")

	ctx := context.Background()
	// lbctl host drain, through the control socket.
	rep, err := control.NewClient(h.d.ControlSocket()).SetHost(ctx, control.HostRequest{Action: control.HostDrain, Reason: "kernel upgrade"})
	if err != nil || !rep.Changed || rep.Drain == nil {
		t.Fatalf("drain: %+v %v", rep, err)
	}
	r.WaitRoute("drain: GRACEFUL_SHUTDOWN", "192.0.2.53/32", "100", "(65001,100) (65535,0)")
	r.WaitGone("drain: withdrawn after the delay", "192.0.2.53/32")
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303") // IPVS left as it is
	st, _ := h.d.Status(ctx)
	if st.BGP == nil || st.BGP.Drain == nil || len(st.BGP.Prefixes) != 1 || st.BGP.Prefixes[0].Announced || len(st.BGP.Peers) != 1 || st.BGP.Peers[0].State != "established" {
		t.Fatalf("status bgp = %+v", st.BGP)
	}
	if st.BGP.Drain.By == "" || st.BGP.Drain.Reason != "kernel upgrade" {
		t.Errorf("drain (by from the socket's peer credentials) = %+v", st.BGP.Drain)
	}

	h.stop()
	h = start(t, path, mc, fp)
	r.Established()
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
	poll.Until(t, 5*time.Second, "the drain kept across the restart", func() (bool, string) {
		st, _ := h.d.Status(ctx)
		return st.BGP != nil && st.BGP.Drain != nil && len(st.BGP.Prefixes) == 1 && !st.BGP.Prefixes[0].Announced, fmt.Sprintf("%+v", st.BGP)
	})
	if _, ok := r.Routes()["192.0.2.53/32"]; ok {
		t.Fatalf("a drained host announced after its restart")
	}
	if _, err := control.NewClient(h.d.ControlSocket()).SetHost(ctx, control.HostRequest{Action: control.HostEnable}); err != nil {
		t.Fatal(err)
	}
	r.WaitRoute("enable: announced again", "192.0.2.53/32", "100", "(65001,100)")

	// A reload without [bgp] withdraws and closes the session; one with
	// it announces again.
	writeConfig(t, dir, "")
	if err := h.d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	r.WaitGone("reload without [bgp]: withdrawn", "192.0.2.53/32")
	r.Eventually("reload without [bgp]: session closed", func(out string) bool { return !strings.Contains(out, "Established") }, "show", "protocols", "lb")
	writeConfig(t, dir, bgpSection(r))
	if err := h.d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	r.WaitRoute("reload with [bgp]: announced", "192.0.2.53/32", "100", "(65001,100)")

	h.stop()
	r.WaitGone("lbdnsd stopped: withdrawn", "192.0.2.53/32")
}

// TestBGPDrainOnStop: with drain_on_stop, stopping lbdnsd (the SIGTERM
// path: Run's context done) first marks the route GRACEFUL_SHUTDOWN at
// the router, keeps it drain_on_stop_delay (2 s) while lbdnsd still
// runs, then withdraws it before Run returns.
func TestBGPDrainOnStop(t *testing.T) {
	r := bird.Start(t, bird.Options{AS: 65000, PeerAS: 65001})
	path := writeConfig(t, t.TempDir(), bgpSection(r, "drain_on_stop = true", `drain_on_stop_delay = "2s"`))
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	h := start(t, path, vip.NewMemClient(), fp)
	r.WaitRoute("VIP announced while its pool serves", "192.0.2.53/32", "100", "(65001,100)")

	t0 := time.Now()
	h.cancel() // what SIGTERM does in lbdnsd's main
	r.WaitRoute("stopping: GRACEFUL_SHUTDOWN", "192.0.2.53/32", "100", "(65001,100) (65535,0)")
	select {
	case err := <-h.done:
		h.once.Do(func() {})
		t.Fatalf("Run returned (%v) while the route was still marked, %v after the stop", err, time.Since(t0))
	default:
	}
	err := <-h.done
	h.once.Do(func() {}) // stopped: the cleanup has nothing to wait for
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	r.WaitGone("stopped: withdrawn", "192.0.2.53/32")
	if took < 2*time.Second {
		t.Errorf("Run returned %v after the stop, before drain_on_stop_delay (2s)", took)
	}
	t.Logf("stop with drain_on_stop_delay 2s took %v", took)
}
