//go:build linux

package announce_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lbdns/announce"
	"lbdns/configs"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/internal/netns"
)

// Our AS and the router's.
const (
	ourAS    = 65001
	routerAS = 65000
)

// bird is a BIRD 2 daemon running as the router in its own network
// namespace, reached from the test's (root) namespace, where the speaker
// runs, through the namespace's veth pair.
type bird struct {
	t    *testing.T
	host *netns.Host
	sock string
}

// requireBird skips t when BIRD 2 is not installed, or fails it when
// LBDNS_REQUIRE_NETNS=1 (as in CI, where scripts/install-test-deps.sh
// installs it); it also needs network namespaces (netns.Require).
func requireBird(t *testing.T) {
	t.Helper()
	netns.Require(t)
	for _, c := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(c); err != nil {
			if os.Getenv(netns.EnvRequire) == "1" {
				t.Fatalf("%s not found (apt-get install bird2, see scripts/install-test-deps.sh) with %s=1", c, netns.EnvRequire)
			}
			t.Skipf("%s not found (apt-get install bird2); skipping (set %s=1 to fail instead)", c, netns.EnvRequire)
		}
	}
}

// startBird starts BIRD in a new namespace with one BGP protocol "lb"
// towards the test's namespace (the speaker); extra is added to the
// protocol's body.
func startBird(t *testing.T, extra string) *bird {
	t.Helper()
	requireBird(t)
	h := netns.New(t, "bird")
	dir := t.TempDir()
	b := &bird{t: t, host: h, sock: filepath.Join(dir, "bird.ctl")}
	conf := fmt.Sprintf(`router id %s;
log stderr all;
protocol device { scan time 1; }
protocol bgp lb {
	local %s as %d;
	neighbor %s as %d;
	hold time 3;
	keepalive time 1;
	connect retry time 1;
	error wait time 1, 2;
	ipv4 { import all; export none; };
%s
}
`, h.AddrV4(), h.AddrV4(), routerAS, h.RootAddrV4(), ourAS, extra)
	path := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := h.Command("bird", "-f", "-c", path, "-s", b.sock)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start bird: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bird's log:\n%s", logs.String())
		}
	})
	b.eventually("bird answers on its control socket", func(string) bool { return true }, "show status")
	return b
}

// birdc runs one birdc command and returns its output.
func (b *bird) birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.sock}, args...)...).CombinedOutput()
	return string(out), err
}

// eventually runs birdc cmd until ok accepts its output, for at most 20
// seconds, and returns that output; it fails the test otherwise.
func (b *bird) eventually(what string, ok func(string) bool, cmd ...string) string {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var out string
	var err error
	for time.Now().Before(deadline) {
		out, err = b.birdc(cmd...)
		if err == nil && ok(out) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
	proto, _ := b.birdc("show", "protocols", "all", "lb")
	b.t.Fatalf("%s: not seen within 20s; last `birdc %s` (err %v):\n%s\nprotocol:\n%s", what, strings.Join(cmd, " "), err, out, proto)
	return ""
}

// route is one route of BIRD's table as `show route all` prints it.
type route struct {
	med         string
	communities string
}

// routes parses `birdc show route all` into prefix → route.
func (b *bird) routes() map[string]route {
	b.t.Helper()
	out, err := b.birdc("show", "route", "all")
	if err != nil {
		b.t.Fatalf("birdc show route all: %v: %s", err, out)
	}
	return parseRoutes(out)
}

var prefixLine = regexp.MustCompile(`^([0-9a-f.:]+/\d+)\s+`)

// parseRoutes parses the output of `show route all`.
func parseRoutes(out string) map[string]route {
	got := map[string]route{}
	var cur string
	for _, line := range strings.Split(out, "\n") {
		if m := prefixLine.FindStringSubmatch(line); m != nil {
			cur = m[1]
			got[cur] = route{}
			continue
		}
		if cur == "" {
			continue
		}
		l := strings.TrimSpace(line)
		r := got[cur]
		switch {
		case strings.HasPrefix(l, "BGP.med:"):
			r.med = strings.TrimSpace(strings.TrimPrefix(l, "BGP.med:"))
		case strings.HasPrefix(l, "BGP.community:"):
			r.communities = strings.TrimSpace(strings.TrimPrefix(l, "BGP.community:"))
		}
		got[cur] = r
	}
	return got
}

// waitRoute waits until BIRD's table has prefix with med and communities
// ("" for none), or, with absent, until it does not have prefix.
func (b *bird) waitRoute(what, prefix, med, communities string, absent bool) {
	b.t.Helper()
	b.eventually(what, func(out string) bool {
		r, ok := parseRoutes(out)[prefix]
		if absent {
			return !ok
		}
		return ok && r.med == med && r.communities == communities
	}, "show", "route", "all")
}

// established waits for the session to be established.
func (b *bird) established() {
	b.t.Helper()
	b.eventually("session lb established", func(out string) bool { return strings.Contains(out, "Established") }, "show", "protocols", "lb")
}

// bgpConfig returns a configuration with VIPs at 192.0.2.53 (v1) and
// 192.0.2.54 (v2), announced to the bird's router.
func bgpConfig(b *bird, drainDelay time.Duration) *configs.Config {
	cfg := &configs.Config{VIPs: []configs.VIP{
		{Name: "v1", Addr: netip.MustParseAddr("192.0.2.53")},
		{Name: "v2", Addr: netip.MustParseAddr("192.0.2.54")},
	}}
	cfg.BGP = configs.BGP{
		Enabled: true, RouterAddr: b.host.RootAddrV4(), LocalAS: ourAS, ListenPort: -1,
		MEDUp: 100, MEDDegraded: 1000,
		Up: []configs.Community{ourAS<<16 | 100}, Degraded: []configs.Community{ourAS<<16 | 200},
		DrainDelay: configs.Duration{Duration: drainDelay},
		Peers: []configs.BGPPeer{{
			Addr: b.host.AddrV4(), AS: routerAS, Port: 179,
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
	b := startBird(t, "")
	h := hub.New(func() hub.Facts { return nil })
	cfg := bgpConfig(b, 2*time.Second)
	h.Config.Publish(cfg)
	var changes []announce.Change
	changed := make(chan announce.Change, 100)
	spk := announce.NewGoBGP(nil)
	a := announce.New(announce.Options{Hub: h, Speaker: spk, OnChange: func(c announce.Change) { changed <- c }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Second)
		})
	}()
	t.Cleanup(func() { cancel(); <-done })

	b.established()
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false), verdict("v2", "192.0.2.54", true, false)})
	b.waitRoute("v1 announced", "192.0.2.53/32", "100", "(65001,100)", false)
	b.waitRoute("v2 announced", "192.0.2.54/32", "100", "(65001,100)", false)

	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, true), verdict("v2", "192.0.2.54", true, false)})
	b.waitRoute("v1 degraded: worse MED", "192.0.2.53/32", "1000", "(65001,200)", false)

	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", false, false), verdict("v2", "192.0.2.54", true, false)})
	b.waitRoute("v1 dead: withdrawn", "192.0.2.53/32", "", "", true)
	if _, ok := b.routes()["192.0.2.54/32"]; !ok {
		t.Fatalf("v2 withdrawn with v1")
	}

	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false), verdict("v2", "192.0.2.54", true, false)})
	b.waitRoute("v1 back", "192.0.2.53/32", "100", "(65001,100)", false)

	h.Intent.Publish(hub.Intent{State: intent.State{Host: &intent.HostDrain{Set: time.Now(), Reason: "test", By: "uid 0"}}, Revision: 1})
	b.waitRoute("drain: graceful shutdown", "192.0.2.53/32", "100", "(65001,100) (65535,0)", false)
	b.waitRoute("drain: v2 graceful shutdown", "192.0.2.54/32", "100", "(65001,100) (65535,0)", false)
	b.waitRoute("drained: v1 withdrawn after the delay", "192.0.2.53/32", "", "", true)
	b.waitRoute("drained: v2 withdrawn after the delay", "192.0.2.54/32", "", "", true)

	h.Intent.Publish(hub.Intent{Revision: 2})
	b.waitRoute("enabled: v1 announced", "192.0.2.53/32", "100", "(65001,100)", false)
	b.waitRoute("enabled: v2 announced", "192.0.2.54/32", "100", "(65001,100)", false)

	reloaded := *cfg
	reloaded.VIPs = cfg.VIPs[:1]
	h.Config.Publish(&reloaded)
	b.waitRoute("reload removed v2: withdrawn", "192.0.2.54/32", "", "", true)
	if r, ok := b.routes()["192.0.2.53/32"]; !ok || r.med != "100" {
		t.Fatalf("v1 after the reload: %+v %v", r, ok)
	}

	// A verdict for an address that is not a VIP of the configuration
	// never reaches the router.
	h.VIPs.Publish([]hub.Verdict{verdict("v1", "192.0.2.53", true, false), verdict("x", "203.0.113.9", true, false)})
	b.waitRoute("v1 still announced", "192.0.2.53/32", "100", "(65001,100)", false)
	if _, ok := b.routes()["203.0.113.9/32"]; ok {
		t.Fatalf("a foreign address was announced")
	}

	st := a.Status()
	if len(st.Peers) != 1 || st.Peers[0].State != announce.StateEstablished || st.Peers[0].Since.IsZero() {
		t.Errorf("status peers = %+v", st.Peers)
	}
	cancel()
	<-done
	b.waitRoute("stopped: v1 withdrawn", "192.0.2.53/32", "", "", true)
	close(changed)
	for c := range changed {
		changes = append(changes, c)
	}
	var text []string
	for _, c := range changes {
		text = append(text, c.Subject+": "+c.Message)
	}
	joined := strings.Join(text, "\n")
	for _, want := range []string{"established", "192.0.2.53/32: vip v1 announced, MED 100", "MED 1000", "withdrawn", "65535:0", "no longer in the configuration", "lbdnsd stopping"} {
		if !strings.Contains(joined, want) {
			t.Errorf("changes lack %q:\n%s", want, joined)
		}
	}
}

// TestBirdUnknownPeer: a router that is not a peer of the configuration
// cannot open a session with the speaker, and learns no route.
func TestBirdUnknownPeer(t *testing.T) {
	requireBird(t)
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// BIRD connects to the speaker's port; the speaker's only peer is
	// another address.
	b := startBird(t, fmt.Sprintf("\tneighbor port %d;\n", port))
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
	out := b.eventually("bird's attempt refused", func(out string) bool {
		return strings.Contains(out, "Last error") && !strings.Contains(out, "Established")
	}, "show", "protocols", "all", "lb")
	t.Logf("bird: %s", out)
	if _, ok := b.routes()["192.0.2.53/32"]; ok {
		t.Fatalf("an unknown router learnt the route")
	}
}

// helperEnv names the variable that makes the test binary a speaker
// process for TestBirdKill9 (its value: the router's address).
const helperEnv = "LBDNS_BGP_HELPER_PEER"

// TestMain runs the helper speaker when asked to.
func TestMain(m *testing.M) {
	if peer := os.Getenv(helperEnv); peer != "" {
		os.Exit(helperSpeaker(peer, os.Getenv(helperEnv+"_ID")))
	}
	os.Exit(m.Run())
}

// helperSpeaker announces 192.0.2.53/32 to peer until it is killed.
func helperSpeaker(peer, id string) int {
	b := configs.BGP{Enabled: true, RouterAddr: netip.MustParseAddr(id), LocalAS: ourAS, ListenPort: -1,
		Peers: []configs.BGPPeer{{Addr: netip.MustParseAddr(peer), AS: routerAS, Port: 179,
			HoldTime: configs.Duration{Duration: 3 * time.Second}, Keepalive: configs.Duration{Duration: time.Second}}}}
	spk := announce.NewGoBGP(nil)
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
	b := startBird(t, "")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+b.host.AddrV4().String(), helperEnv+"_ID="+b.host.RootAddrV4().String())
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
	b.waitRoute("route announced by the speaker process", "192.0.2.53/32", "100", "", false)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	b.waitRoute("route dropped after the speaker was killed", "192.0.2.53/32", "", "", true)
}

// TestBirdHoldTime: when the speaker's host goes silent (nothing more
// reaches the router: a dead host, a cut link), the router drops the
// route when the hold time (3 s) runs out.
func TestBirdHoldTime(t *testing.T) {
	b := startBird(t, "")
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
	b.waitRoute("route announced", "192.0.2.53/32", "100", "", false)
	b.host.Drop("tcp", 179)
	b.waitRoute("route dropped when the hold time ran out", "192.0.2.53/32", "", "", true)
	st := b.eventually("session down", func(out string) bool { return !strings.Contains(out, "Established") }, "show", "protocols", "all", "lb")
	if !strings.Contains(st, "Hold timer expired") {
		t.Errorf("the session did not end by the hold timer:\n%s", st)
	}
}

// TestParseRoutes pins the parser on BIRD 2's output.
func TestParseRoutes(t *testing.T) {
	out := `BIRD 2.0.12 ready.
Table master4:
192.0.2.53/32        unicast [lb 12:00:00.000] * (100) [AS65001i]
	via 198.18.0.1 on eth0
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 65001
	BGP.next_hop: 198.18.0.1
	BGP.med: 1000
	BGP.local_pref: 100
	BGP.community: (65001,200) (65535,0)
192.0.2.54/32        unicast [lb 12:00:00.000] * (100) [AS65001i]
	via 198.18.0.1 on eth0
	BGP.med: 100
`
	got := parseRoutes(out)
	if got["192.0.2.53/32"] != (route{med: "1000", communities: "(65001,200) (65535,0)"}) || got["192.0.2.54/32"] != (route{med: "100"}) || len(got) != 2 {
		t.Errorf("got %+v", got)
	}
}
