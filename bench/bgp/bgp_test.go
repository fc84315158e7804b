//go:build bgpbench && linux

package bgpbench_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"lbdns/announce"
	"lbdns/configs"
	"lbdns/hub"
	"lbdns/testkit/bird"
	"lbdns/testkit/ecmp"
)

const (
	ourAS, routerAS = 65001, 65000
	prefix          = "192.0.2.53/32"
	rounds          = 10
	helperPeer      = "LBDNS_BGPBENCH_PEER"
	helperID        = "LBDNS_BGPBENCH_ID"
)

func TestMain(m *testing.M) {
	if code, ok := ecmp.SpeakerMain(); ok {
		os.Exit(code)
	}
	if peer := os.Getenv(helperPeer); peer != "" {
		spk := announce.NewGoBGP(nil)
		ctx := context.Background()
		if err := spk.Configure(ctx, speakerConfig(netip.MustParseAddr(os.Getenv(helperID)), netip.MustParseAddr(peer), false).BGP); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := spk.Announce(ctx, []announce.Path{{Prefix: netip.MustParsePrefix(prefix), MED: 100}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		select {}
	}
	os.Exit(m.Run())
}

// speakerConfig announces VIP v1 (192.0.2.53) to peer, hold 3 s.
func speakerConfig(id, peer netip.Addr, bfd bool) *configs.Config {
	cfg := &configs.Config{VIPs: []configs.VIP{{Name: "v1", Addr: netip.MustParseAddr("192.0.2.53")}}}
	cfg.BGP = configs.BGP{Enabled: true, RouterAddr: id, LocalAS: ourAS, ListenPort: -1, MEDUp: 100, MEDDegraded: 1000,
		Peers: []configs.BGPPeer{{Addr: peer, AS: routerAS, Port: 179, BFD: bfd,
			HoldTime: configs.Duration{Duration: 3 * time.Second}, Keepalive: configs.Duration{Duration: time.Second}}}}
	return cfg
}

// until polls bird's table every 2 ms until has(prefix) is want, and
// returns how long it took from start.
func until(t *testing.T, r *bird.Router, start time.Time, want bool) time.Duration {
	t.Helper()
	deadline := start.Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out, err := r.Birdc("show", "route", "all")
		if _, has := bird.ParseRoutes(out)[prefix]; err == nil && has == want {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("route %s present=%v not seen in 20s", prefix, want)
	return 0
}

func summary(ds []time.Duration) string {
	slices.Sort(ds)
	return fmt.Sprintf("median %v, min %v, max %v over %d rounds", ds[len(ds)/2].Round(time.Millisecond), ds[0].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), len(ds))
}

// TestVerdictToWithdrawal: a dead verdict published on the hub → the
// route gone from BIRD's table (goal: ≤ 100 ms plus the router's
// processing; birdc itself takes a few ms a call).
func TestVerdictToWithdrawal(t *testing.T) {
	r := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS})
	h := hub.New(func() hub.Facts { return nil })
	h.Config.Publish(speakerConfig(r.Host().RootAddrV4(), r.Host().AddrV4(), false))
	ecmp.RunAnnouncer(t, announce.New(announce.Options{Hub: h, Speaker: announce.NewGoBGP(nil)}))
	r.Established()
	v := func(serving bool) []hub.Verdict {
		return []hub.Verdict{{Name: "v1", Addr: netip.MustParseAddr("192.0.2.53"), Serving: serving}}
	}
	var gone, back []time.Duration
	for range rounds {
		start := time.Now()
		h.VIPs.Publish(v(true))
		back = append(back, until(t, r, start, true))
		start = time.Now()
		h.VIPs.Publish(v(false))
		gone = append(gone, until(t, r, start, false))
	}
	fmt.Printf("bgp: verdict dead -> route gone at BIRD: %s (goal <= 100 ms + router)\n", summary(gone))
	fmt.Printf("bgp: verdict serving -> route at BIRD: %s\n", summary(back))
}

// TestKill9: kill -9 of the speaker's process → the route gone (the
// kernel closes the session at once).
func TestKill9(t *testing.T) {
	r := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS})
	var ds []time.Duration
	for range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperPeer+"="+r.Host().AddrV4().String(), helperID+"="+r.Host().RootAddrV4().String())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		until(t, r, time.Now(), true)
		start := time.Now()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		ds = append(ds, until(t, r, start, false))
	}
	fmt.Printf("bgp: kill -9 -> route gone at BIRD: %s (goal <= 3.5 s)\n", summary(ds))
}

// TestSilentHost: the speaker's host goes silent (its packets dropped at
// the router) → the route gone: by the hold time (3 s), and with BFD.
func TestSilentHost(t *testing.T) {
	for _, bfd := range []bool{false, true} {
		r := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS, BFD: bfd})
		spk := announce.NewGoBGP(nil)
		ctx := context.Background()
		if err := spk.Configure(ctx, speakerConfig(r.Host().RootAddrV4(), r.Host().AddrV4(), bfd).BGP); err != nil {
			t.Fatal(err)
		}
		if err := spk.Announce(ctx, []announce.Path{{Prefix: netip.MustParsePrefix(prefix), MED: 100}}); err != nil {
			t.Fatal(err)
		}
		until(t, r, time.Now(), true)
		if bfd {
			r.Eventually("BFD up", func(out string) bool { return strings.Contains(out, "Up") }, "show", "bfd", "sessions")
		}
		start := time.Now()
		r.Host().Drop("tcp", 179)
		r.Host().Drop("udp", 3784)
		d := until(t, r, start, false)
		what := "hold time 3 s, goal <= 3.5 s"
		if bfd {
			what = "BFD 300 ms x 3, goal < 1 s"
		}
		fmt.Printf("bgp: host silent -> route gone at BIRD: %v (%s)\n", d.Round(time.Millisecond), what)
		_ = spk.Close(ctx)
	}
}
