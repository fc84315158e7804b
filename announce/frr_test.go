//go:build linux

package announce_test

import (
	"net/netip"
	"testing"
	"time"

	"lbdns/announce"
	"lbdns/configs"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/testkit/ecmp"
	"lbdns/testkit/frr"
)

// TestFRRAnnouncer: the same decisions seen in FRR's table: announced
// with MED 100 and 65001:100, degraded with MED 1000 and 65001:200, drained
// with graceful-shutdown added then withdrawn, dead withdrawn.
func TestFRRAnnouncer(t *testing.T) {
	r := frr.Start(t, frr.Options{AS: routerAS, PeerAS: ourAS})
	h := hub.New(func() hub.Facts { return nil })
	cfg := &configs.Config{VIPs: []configs.VIP{{Name: "v1", Addr: netip.MustParseAddr("192.0.2.53")}}}
	cfg.BGP = configs.BGP{
		Enabled: true, RouterAddr: r.Host().RootAddrV4(), LocalAS: ourAS, ListenPort: -1, MEDUp: 100, MEDDegraded: 1000,
		Up: []configs.Community{ourAS<<16 | 100}, Degraded: []configs.Community{ourAS<<16 | 200}, DrainDelay: configs.Duration{Duration: 2 * time.Second},
		Peers: []configs.BGPPeer{{Addr: r.Host().AddrV4(), AS: routerAS, Port: 179,
			HoldTime: configs.Duration{Duration: 3 * time.Second}, Keepalive: configs.Duration{Duration: time.Second}}},
	}
	h.Config.Publish(cfg)
	a := announce.New(announce.Options{Hub: h, Speaker: announce.NewGoBGP(nil)})
	runAnnouncer(t, a)
	r.Established()
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false)})
	r.WaitRoute("announced", "192.0.2.53/32", 100, "65001:100")
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, true)})
	r.WaitRoute("degraded", "192.0.2.53/32", 1000, "65001:200")
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false)})
	h.Intent.Publish(hub.Intent{State: intent.State{Host: &intent.HostDrain{Set: time.Now()}}, Revision: 1})
	r.WaitRoute("drain: graceful shutdown", "192.0.2.53/32", 100, "65001:100 graceful-shutdown")
	r.WaitGone("drained: withdrawn after the delay", "192.0.2.53/32")
	h.Intent.Publish(hub.Intent{Revision: 2})
	r.WaitRoute("enabled", "192.0.2.53/32", 100, "65001:100")
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", false, false)})
	r.WaitGone("dead: withdrawn", "192.0.2.53/32")
}

// runAnnouncer runs a until the test ends, or until the stop it returns
// is called.
func runAnnouncer(t *testing.T, a *announce.Announcer) (stop func()) { return ecmp.RunAnnouncer(t, a) }
