//go:build linux

package announce_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"lbdns/announce"
	"lbdns/configs"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/testkit/bird"
	"lbdns/testkit/ecmp"
	"lbdns/testkit/leakcheck"
	"lbdns/testkit/testlog"
)

// Our AS and the router's.
const (
	ourAS    = 65001
	routerAS = 65000
)

// bgpConfig returns a configuration with VIPs at 192.0.2.53 (v1) and
// 192.0.2.54 (v2), announced to the bird's router.
func bgpConfig(b *bird.Router, drainDelay time.Duration) *configs.Config {
	cfg := &configs.Config{VIPs: []configs.VIP{
		{Name: "v1", Addr: netip.MustParseAddr("192.0.2.53")},
		{Name: "v2", Addr: netip.MustParseAddr("192.0.2.54")},
	}}
	cfg.BGP = configs.BGP{
		Enabled: true, RouterAddr: b.Host().RootAddrV4(), LocalAS: ourAS, ListenPort: -1,
		MEDUp: 100, MEDDegraded: 1000,
		Up: []configs.Community{ourAS<<16 | 100}, Degraded: []configs.Community{ourAS<<16 | 200},
		DrainDelay: configs.Duration{Duration: drainDelay},
		Peers: []configs.BGPPeer{{
			Addr: b.Host().AddrV4(), AS: routerAS, Port: 179,
			HoldTime: configs.Duration{Duration: 3 * time.Second}, Keepalive: configs.Duration{Duration: time.Second},
		}},
	}
	return cfg
}

func verdict(name, addr string, serving, degraded bool) hub.Verdict {
	return hub.Verdict{Name: name, Addr: netip.MustParseAddr(addr), Serving: serving, Degraded: degraded, Reason: "test"}
}

// TestBirdAnnouncer runs the Announcer over a hub against BIRD and asserts
// on BIRD's table at each step: a serving VIP's route appears with MED
// 100 and community (65001,100); degraded it stays with MED 1000 and
// (65001,200); dead it is withdrawn; a host drain adds (65535,0) and
// withdraws after the delay; enabling announces again; a reload removing
// a VIP withdraws exactly that route.
func TestBirdAnnouncer(t *testing.T) {
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS})
	h := hub.New(func() hub.Facts { return nil })
	cfg := bgpConfig(b, 2*time.Second)
	h.Config.Publish(cfg)
	var changes []announce.Change
	changed := make(chan announce.Change, 100)
	logs := &testlog.Buffer{}
	spk := announce.NewGoBGP(slog.New(slog.NewTextHandler(logs, nil)))
	a := announce.New(announce.Options{Hub: h, Speaker: spk, OnChange: func(c announce.Change) { changed <- c }})
	stop := runAnnouncer(t, a)

	b.Established()
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false), verdict("v2", "192.0.2.54", true, false)})
	b.WaitRoute("v1 announced", "192.0.2.53/32", "100", "(65001,100)")
	b.WaitRoute("v2 announced", "192.0.2.54/32", "100", "(65001,100)")

	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, true), verdict("v2", "192.0.2.54", true, false)})
	b.WaitRoute("v1 degraded: worse MED", "192.0.2.53/32", "1000", "(65001,200)")

	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", false, false), verdict("v2", "192.0.2.54", true, false)})
	b.WaitGone("v1 dead: withdrawn", "192.0.2.53/32")
	if _, ok := b.Routes()["192.0.2.54/32"]; !ok {
		t.Fatalf("v2 withdrawn with v1")
	}

	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false), verdict("v2", "192.0.2.54", true, false)})
	b.WaitRoute("v1 back", "192.0.2.53/32", "100", "(65001,100)")

	h.Intent.Publish(hub.Intent{State: intent.State{Host: &intent.HostDrain{Set: time.Now(), Reason: "test", By: "uid 0"}}, Revision: 1})
	b.WaitRoute("drain: graceful shutdown", "192.0.2.53/32", "100", "(65001,100) (65535,0)")
	b.WaitRoute("drain: v2 graceful shutdown", "192.0.2.54/32", "100", "(65001,100) (65535,0)")
	b.WaitGone("drained: v1 withdrawn after the delay", "192.0.2.53/32")
	b.WaitGone("drained: v2 withdrawn after the delay", "192.0.2.54/32")

	h.Intent.Publish(hub.Intent{Revision: 2})
	b.WaitRoute("enabled: v1 announced", "192.0.2.53/32", "100", "(65001,100)")
	b.WaitRoute("enabled: v2 announced", "192.0.2.54/32", "100", "(65001,100)")

	reloaded := *cfg
	reloaded.VIPs = cfg.VIPs[:1]
	h.Config.Publish(&reloaded)
	b.WaitGone("reload removed v2: withdrawn", "192.0.2.54/32")
	if r, ok := b.Routes()["192.0.2.53/32"]; !ok || r.MED != "100" {
		t.Fatalf("v1 after the reload: %+v %v", r, ok)
	}

	// A verdict for an address that is not a VIP of the configuration
	// never reaches the router.
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false), verdict("x", "203.0.113.9", true, false)})
	b.WaitRoute("v1 still announced", "192.0.2.53/32", "100", "(65001,100)")
	if _, ok := b.Routes()["203.0.113.9/32"]; ok {
		t.Fatalf("a foreign address was announced")
	}

	st := a.Status()
	if len(st.Peers) != 1 || st.Peers[0].State != announce.StateEstablished || st.Peers[0].Since.IsZero() || st.Peers[0].LastError != "" {
		t.Errorf("status peers = %+v, want one established, with no last error (the steps up are none)", st.Peers)
	}
	stop()
	b.WaitGone("stopped: v1 withdrawn", "192.0.2.53/32")
	if out := logs.String(); strings.Contains(out, "level=ERROR") {
		t.Errorf("a clean session and stop logged errors:\n%s", out)
	}
	close(changed)
	for c := range changed {
		changes = append(changes, c)
	}
	var text []string
	for _, c := range changes {
		text = append(text, c.Subject+": "+c.Message)
	}
	joined := strings.Join(text, "\n")
	for _, want := range []string{"established", "192.0.2.53/32: vip v1 announced, MED 100", "MED 1000", "withdrawn", "65535:0", "no longer in the configuration", "speaker stopped"} {
		if !strings.Contains(joined, want) {
			t.Errorf("changes lack %q:\n%s", want, joined)
		}
	}
}

// TestBirdUnknownPeer: a router that is not a peer of the configuration
// cannot open a session with the speaker, and learns no route.
func TestBirdUnknownPeer(t *testing.T) {
	bird.Require(t)
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// BIRD connects to the speaker's port; the speaker's only peer is
	// another address.
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS, Extra: fmt.Sprintf("\tneighbor port %d;\n", port)})
	cfg := bgpConfig(b, time.Second)
	cfg.BGP.ListenPort = port
	cfg.BGP.Peers[0].Addr = netip.MustParseAddr("192.0.2.1")
	spk := announce.NewGoBGP(nil)
	ctx := context.Background()
	if err := spk.Configure(ctx, cfg.BGP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spk.Close(ctx) })
	if err := spk.Announce(ctx, []announce.Path{{Prefix: netip.MustParsePrefix("192.0.2.53/32"), MED: 100}}); err != nil {
		t.Fatal(err)
	}
	// BIRD tries, the speaker closes the connection: BIRD records the
	// failure and never gets past connecting.
	out := b.Eventually("bird's attempt refused", func(out string) bool {
		return strings.Contains(out, "Last error") && !strings.Contains(out, "Established")
	}, "show", "protocols", "all", "lb")
	t.Logf("bird: %s", out)
	if _, ok := b.Routes()["192.0.2.53/32"]; ok {
		t.Fatalf("an unknown router learnt the route")
	}
}

// helperEnv names the variable that makes the test binary a speaker
// process for TestBirdKill9 (its value: the router's address).
const helperEnv = "LBDNS_BGP_HELPER_PEER"

// TestMain runs a helper speaker when asked to, else the tests, and
// fails the package when an Announcer or a speaker outlives its test.
func TestMain(m *testing.M) {
	if peer := os.Getenv(helperEnv); peer != "" {
		os.Exit(helperSpeaker(peer, os.Getenv(helperEnv+"_ID")))
	}
	if code, ok := ecmp.SpeakerMain(); ok {
		os.Exit(code)
	}
	leakcheck.Main(m, "lbdns/announce.(*Announcer)", "lbdns/announce.(*GoBGP)")
}

// helperSpeaker announces 192.0.2.53/32 to peer until it is killed;
// with helperEnv_BFD set, over a session with BFD and a hold time of
// 30 s, logging GoBGP's warnings to stderr.
func helperSpeaker(peer, id string) int {
	b := configs.BGP{Enabled: true, RouterAddr: netip.MustParseAddr(id), LocalAS: ourAS, ListenPort: -1,
		Peers: []configs.BGPPeer{{Addr: netip.MustParseAddr(peer), AS: routerAS, Port: 179,
			HoldTime: configs.Duration{Duration: 3 * time.Second}, Keepalive: configs.Duration{Duration: time.Second}}}}
	var log *slog.Logger
	if os.Getenv(helperEnv+"_BFD") != "" {
		b.Peers[0].BFD = true
		b.Peers[0].HoldTime.Duration, b.Peers[0].Keepalive.Duration = 30*time.Second, 10*time.Second
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	spk := announce.NewGoBGP(log)
	ctx := context.Background()
	if err := spk.Configure(ctx, b); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := spk.Announce(ctx, []announce.Path{{Prefix: netip.MustParsePrefix("192.0.2.53/32"), MED: 100}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("announced")
	select {}
}

// TestBirdKill9: when the speaker's process is killed (kill -9), its
// kernel closes the session and the router drops the route.
func TestBirdKill9(t *testing.T) {
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+b.Host().AddrV4().String(), helperEnv+"_ID="+b.Host().RootAddrV4().String())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("speaker process:\n%s", out.String())
		}
	})
	b.WaitRoute("route announced by the speaker process", "192.0.2.53/32", "100", "")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	b.WaitGone("route dropped after the speaker was killed", "192.0.2.53/32")
}

// TestBirdHoldTime: when the speaker's host goes silent (nothing more
// reaches the router: a dead host, a cut link), the router drops the
// route when the hold time (3 s) runs out.
func TestBirdHoldTime(t *testing.T) {
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS})
	spk := announce.NewGoBGP(nil)
	ctx := context.Background()
	cfg := bgpConfig(b, time.Second)
	if err := spk.Configure(ctx, cfg.BGP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spk.Close(ctx) })
	if err := spk.Announce(ctx, []announce.Path{{Prefix: netip.MustParsePrefix("192.0.2.53/32"), MED: 100}}); err != nil {
		t.Fatal(err)
	}
	b.WaitRoute("route announced", "192.0.2.53/32", "100", "")
	b.Host().Drop("tcp", 179)
	b.WaitGone("route dropped when the hold time ran out", "192.0.2.53/32")
	st := b.Eventually("session down", func(out string) bool { return !strings.Contains(out, "Established") }, "show", "protocols", "all", "lb")
	if !strings.Contains(st, "Hold timer expired") {
		t.Errorf("the session did not end by the hold timer:\n%s", st)
	}
}

// TestBirdPassword: BIRD given a TCP MD5 password refuses a speaker with
// another one (no session in 3 s of retries), and establishes the session
// once a reload gives the speaker the right one (the peer reconfigured).
func TestBirdPassword(t *testing.T) {
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS, Extra: "\tpassword \"s3cret\";\n"})
	cfg := bgpConfig(b, time.Second)
	cfg.BGP.Peers[0].Password = "wrong"
	spk := announce.NewGoBGP(nil)
	ctx := context.Background()
	if err := spk.Configure(ctx, cfg.BGP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spk.Close(ctx) })
	if err := spk.Announce(ctx, []announce.Path{{Prefix: netip.MustParsePrefix("192.0.2.53/32"), MED: 100}}); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		if out, _ := b.Birdc("show", "protocols", "lb"); strings.Contains(out, "Established") {
			t.Fatalf("session established with the wrong password:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cfg.BGP.Peers[0].Password = "s3cret"
	if err := spk.Configure(ctx, cfg.BGP); err != nil {
		t.Fatal(err)
	}
	b.WaitRoute("route announced over the signed session", "192.0.2.53/32", "100", "")
}

// TestBirdBFD: with BFD, a silent host's route is dropped when BFD sees
// it down, well before the hold time (30 s here) would run out; the
// session ends by BFD, not by the hold timer.
func TestBirdBFD(t *testing.T) {
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS, HoldTime: 30, BFD: true})
	cfg := bgpConfig(b, time.Second)
	cfg.BGP.Peers[0].HoldTime.Duration, cfg.BGP.Peers[0].Keepalive.Duration = 30*time.Second, 10*time.Second
	cfg.BGP.Peers[0].BFD = true
	spk := announce.NewGoBGP(nil)
	ctx := context.Background()
	if err := spk.Configure(ctx, cfg.BGP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spk.Close(ctx) })
	if err := spk.Announce(ctx, []announce.Path{{Prefix: netip.MustParsePrefix("192.0.2.53/32"), MED: 100}}); err != nil {
		t.Fatal(err)
	}
	b.WaitRoute("route announced", "192.0.2.53/32", "100", "")
	b.Eventually("BFD session up", func(out string) bool { return strings.Contains(out, "Up") }, "show", "bfd", "sessions")
	b.Host().Drop("udp", 3784)
	b.Host().Drop("tcp", 179)
	b.WaitGone("route dropped when BFD saw the host go silent", "192.0.2.53/32")
	st, _ := b.Birdc("show", "protocols", "all", "lb")
	if !strings.Contains(st, "BFD session down") {
		t.Errorf("the session did not end by BFD:\n%s", st)
	}
}

// TestBirdListener: a GSLB listen address is announced while it serves
// and withdrawn when it does not; 0.0.0.0 is never announced.
func TestBirdListener(t *testing.T) {
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS})
	h := hub.New(func() hub.Facts { return nil })
	cfg := bgpConfig(b, time.Second)
	cfg.GSLB.Server.Listen = []string{"192.0.2.80:53", "0.0.0.0:5353"}
	cfg.GSLB.Server.ListenAddrs = []netip.AddrPort{netip.MustParseAddrPort("192.0.2.80:53"), netip.MustParseAddrPort("0.0.0.0:5353")}
	h.Config.Publish(cfg)
	a := announce.New(announce.Options{Hub: h, Speaker: announce.NewGoBGP(nil)})
	runAnnouncer(t, a)
	listeners := func(serving bool) hub.ResponderState {
		return hub.ResponderState{On: true, Listeners: []hub.Verdict{verdict("192.0.2.80:53", "192.0.2.80", serving, false), verdict("0.0.0.0:5353", "0.0.0.0", true, false)}}
	}
	h.Responder.Publish(listeners(true))
	b.WaitRoute("listen address announced", "192.0.2.80/32", "100", "(65001,100)")
	h.Responder.Publish(listeners(false))
	b.WaitGone("listen address withdrawn", "192.0.2.80/32")
	for p := range b.Routes() {
		t.Errorf("announced %s", p)
	}
}

// TestBirdIPv6: over an IPv6 session a VIP's /128 is announced while it
// serves and withdrawn when it dies; the IPv4 VIP is not sent there.
func TestBirdIPv6(t *testing.T) {
	b := bird.Start(t, bird.Options{AS: routerAS, PeerAS: ourAS, IPv6: true})
	h := hub.New(func() hub.Facts { return nil })
	cfg := bgpConfig(b, time.Second)
	cfg.VIPs = append(cfg.VIPs, configs.VIP{Name: "v6", Addr: netip.MustParseAddr("2001:db8::53")})
	cfg.BGP.Peers[0].Addr = b.Host().AddrV6()
	h.Config.Publish(cfg)
	a := announce.New(announce.Options{Hub: h, Speaker: announce.NewGoBGP(nil)})
	runAnnouncer(t, a)
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false), verdict("v6", "2001:db8::53", true, false)})
	b.WaitRoute("v6 announced", "2001:db8::53/128", "100", "(65001,100)")
	if _, ok := b.Routes()["192.0.2.53/32"]; ok {
		t.Errorf("the IPv4 VIP was sent over the IPv6 session")
	}
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false), verdict("v6", "2001:db8::53", false, false)})
	b.WaitGone("v6 dead: withdrawn", "2001:db8::53/128")
}
