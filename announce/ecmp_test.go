//go:build linux

package announce_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/announce"
	"lbdns/configs"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/internal/bird"
	"lbdns/internal/netns"
)

// vipAddr is the VIP both LB hosts announce.
var vipAddr = netip.MustParseAddrPort("192.0.2.53:53")

// ecmpEnv names the variables that make the test binary an LB host's
// speaker for TestECMP: its router id and its router's address.
const (
	ecmpEnvID   = "LBDNS_BGP_ECMP_ID"
	ecmpEnvPeer = "LBDNS_BGP_ECMP_PEER"
)

// ecmpSpeaker is an LB host's announcer, driven by lines on stdin:
// "serve" and "dead" set its VIP's verdict, "drain" and "enable" the
// host drain (drain delay 2 s); it runs until stdin closes.
func ecmpSpeaker(id, peer string) int {
	cfg := &configs.Config{VIPs: []configs.VIP{{Name: "v1", Addr: vipAddr.Addr()}}}
	cfg.BGP = configs.BGP{Enabled: true, RouterAddr: netip.MustParseAddr(id), LocalAS: ourAS, ListenPort: -1, MEDUp: 100, MEDDegraded: 1000,
		DrainDelay: configs.Duration{Duration: 2 * time.Second},
		Peers: []configs.BGPPeer{{Addr: netip.MustParseAddr(peer), AS: routerAS, Port: 179,
			HoldTime: configs.Duration{Duration: 3 * time.Second}, Keepalive: configs.Duration{Duration: time.Second}}}}
	h := hub.New(func() hub.Facts { return nil })
	h.Config.Publish(cfg)
	a := announce.New(announce.Options{Hub: h, Speaker: announce.NewGoBGP(nil)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Second)
		})
	}()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "serve":
			h.VIPs.Publish([]hub.Verdict{{Name: "v1", Addr: vipAddr.Addr(), Serving: true, Reason: "test"}})
		case "dead":
			h.VIPs.Publish([]hub.Verdict{{Name: "v1", Addr: vipAddr.Addr(), Reason: "test: dead"}})
		case "drain":
			h.Intent.Publish(hub.Intent{State: intent.State{Host: &intent.HostDrain{Set: time.Now(), By: "test"}}, Revision: 1})
		case "enable":
			h.Intent.Publish(hub.Intent{Revision: 2})
		}
	}
	cancel()
	<-done
	return 0
}

// lbHost is one LB host: its namespace, its speaker process and the
// queries its UDP responder on the VIP answered.
type lbHost struct {
	name  string
	host  *netns.Host
	stdin io.WriteCloser
	mu    sync.Mutex
	count int
}

func (l *lbHost) answered() int { l.mu.Lock(); defer l.mu.Unlock(); return l.count }

func (l *lbHost) say(t *testing.T, cmd string) {
	t.Helper()
	if _, err := fmt.Fprintln(l.stdin, cmd); err != nil {
		t.Fatalf("%s: %v", l.name, err)
	}
}

// TestECMP: two LB hosts announce the same VIP to BIRD, which installs
// both as an ECMP route in its kernel; a client behind the router sends
// queries to the VIP, which a UDP responder on each LB host answers
// (standing in for IPVS). Both hosts get queries; a host drain moves
// every query to the other host with none lost (BIRD's import filter
// honours GRACEFUL_SHUTDOWN as RFC 8326 asks, by local preference 0),
// and after the drain delay the drained host's route is gone; when the
// other host's VIP dies, its route goes, and the queries reach the first
// host again once it is enabled.
func TestECMP(t *testing.T) {
	bird.Require(t)
	router := netns.New(t, "ecmp-router")
	client := netns.New(t, "ecmp-client")
	lbs := []*lbHost{{name: "lb1", host: netns.New(t, "ecmp-lb1")}, {name: "lb2", host: netns.New(t, "ecmp-lb2")}}
	netns.Link(t, router, "to-client", "10.0.3.1", client, "eth1", "10.0.3.2")
	netns.IP(t, "-n", client.Name(), "route", "replace", "default", "via", "10.0.3.1")
	router.Sysctl("net.ipv4.ip_forward=1")
	router.Sysctl("net.ipv4.fib_multipath_hash_policy=1") // spread flows by port too
	for i, lb := range lbs {
		n := i + 1
		netns.Link(t, router, "to-"+lb.name, fmt.Sprintf("10.0.%d.1", n), lb.host, "eth1", fmt.Sprintf("10.0.%d.2", n))
		netns.IP(t, "-n", lb.host.Name(), "route", "replace", "default", "via", fmt.Sprintf("10.0.%d.1", n))
		netns.IP(t, "-n", lb.host.Name(), "addr", "add", vipAddr.Addr().String()+"/32", "dev", "lo")
		for _, h := range []*netns.Host{router, lb.host} {
			h.Sysctl("net.ipv4.conf.all.rp_filter=0")
		}
		pc, err := lb.host.ListenPacket("udp4", vipAddr.String())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			buf := make([]byte, 512)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				lb.mu.Lock()
				lb.count++
				lb.mu.Unlock()
				_, _ = pc.WriteTo(append(buf[:n:n], lb.name...), from)
			}
		}()
	}

	dir := t.TempDir()
	sock := filepath.Join(dir, "bird.ctl")
	conf := `router id 10.0.3.1;
log stderr all;
protocol device { scan time 1; }
protocol kernel { ipv4 { import none; export all; }; merge paths on; }
filter gshut { if (65535, 0) ~ bgp_community then bgp_local_pref = 0; accept; }
template bgp lb { local as 65000; hold time 3; keepalive time 1; connect retry time 1; error wait time 1, 2;
	ipv4 { import filter gshut; export none; }; }
protocol bgp lb1 from lb { local 10.0.1.1 as 65000; neighbor 10.0.1.2 as 65001; }
protocol bgp lb2 from lb { local 10.0.2.1 as 65000; neighbor 10.0.2.2 as 65001; }
`
	if err := os.WriteFile(filepath.Join(dir, "bird.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var birdLog bytes.Buffer
	bc := router.Command("bird", "-f", "-c", filepath.Join(dir, "bird.conf"), "-s", sock)
	bc.Stdout, bc.Stderr = &birdLog, &birdLog
	if err := bc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bird's log:\n%s", birdLog.String())
		}
	})

	for i, lb := range lbs {
		n := i + 1
		cmd := lb.host.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), ecmpEnvID+"="+fmt.Sprintf("10.0.%d.2", n), ecmpEnvPeer+"="+fmt.Sprintf("10.0.%d.1", n))
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lb.stdin = in
		t.Cleanup(func() {
			_ = in.Close()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("%s's speaker:\n%s", lb.name, out.String())
			}
		})
		lb.say(t, "serve")
	}

	// kernelRoute is the router's kernel route to the VIP.
	kernelRoute := func() string {
		out, _ := exec.Command("ip", "-n", router.Name(), "route", "show", vipAddr.Addr().String()+"/32").CombinedOutput()
		return string(out)
	}
	waitKernel := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if ok(kernelRoute()) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		b, _ := exec.Command("birdc", "-s", sock, "show", "route", "all").CombinedOutput()
		t.Fatalf("%s: not seen in 20s; router's kernel route: %q\nbird:\n%s", what, kernelRoute(), b)
	}
	via := func(n int) string { return fmt.Sprintf("via 10.0.%d.2", n) }
	waitKernel("ECMP route over both LB hosts", func(r string) bool { return strings.Contains(r, via(1)) && strings.Contains(r, via(2)) })

	// The client's sockets: 32 source ports, so that the router's hash
	// spreads them over both hosts.
	var conns []net.PacketConn
	for range 32 {
		c, err := client.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// query sends one query from conns[i] and returns who answered ("" on
	// a timeout of 1 s: a lost query).
	query := func(i int) string {
		c := conns[i%len(conns)]
		msg := fmt.Appendf(nil, "q%d:", i)
		if _, err := c.WriteTo(msg, net.UDPAddrFromAddrPort(vipAddr)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 512)
		for {
			n, _, err := c.ReadFrom(buf)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return ""
			}
			if err != nil {
				t.Fatal(err)
			}
			if bytes.HasPrefix(buf[:n], msg) {
				return string(buf[len(msg):n])
			}
		}
	}
	who := map[string]int{}
	for i := range 200 {
		who[query(i)]++
	}
	if who[""] != 0 || who["lb1"] == 0 || who["lb2"] == 0 {
		t.Fatalf("before the drain, answers by host: %v (want both, none lost)", who)
	}
	t.Logf("before the drain, answers by host: %v", who)

	// Drain lb1 while the client queries without pause, until its route
	// is withdrawn: BIRD first shows it marked (65535,0) (and the kernel
	// route leaves lb1), then the route goes; no query is lost.
	birdRoutes := func() string {
		b, _ := exec.Command("birdc", "-s", sock, "show", "route", "all").CombinedOutput()
		return string(b)
	}
	lb2Before := lbs[1].answered()
	lbs[0].say(t, "drain")
	lost, i, marked := 0, 0, false
	deadline := time.Now().Add(20 * time.Second)
	for ; time.Now().Before(deadline); i++ {
		if query(i) == "" {
			lost++
		}
		if i%10 != 0 {
			continue
		}
		r := birdRoutes()
		if strings.Contains(r, "(65535,0)") {
			marked = true
		}
		if !strings.Contains(r, "10.0.1.2") {
			break
		}
	}
	t.Logf("drain of lb1: %d queries sent until its route was withdrawn, %d lost", i, lost)
	if !marked {
		t.Errorf("the router never saw lb1's route marked GRACEFUL_SHUTDOWN (65535,0) before the withdrawal")
	}
	if strings.Contains(birdRoutes(), "10.0.1.2") {
		t.Fatalf("lb1's route not withdrawn after the drain delay:\n%s", birdRoutes())
	}
	if lost != 0 {
		t.Errorf("%d of %d queries lost during the drain of lb1", lost, i)
	}
	waitKernel("lb1 drained: route over lb2 only", func(r string) bool { return !strings.Contains(r, via(1)) && strings.Contains(r, via(2)) })
	lb1 := lbs[0].answered()
	who = map[string]int{}
	for i := range 100 {
		who[query(i)]++
	}
	if who["lb2"] != 100 || lbs[0].answered() != lb1 {
		t.Errorf("after the drain, answers by host: %v (want all by lb2)", who)
	}
	if lbs[1].answered() <= lb2Before {
		t.Errorf("lb2 answered nothing during the drain")
	}

	// lb1 enabled: both again; then lb2's VIP dies: its route goes, and
	// every query reaches lb1.
	lbs[0].say(t, "enable")
	waitKernel("lb1 enabled: ECMP again", func(r string) bool { return strings.Contains(r, via(1)) && strings.Contains(r, via(2)) })
	lbs[1].say(t, "dead")
	waitKernel("lb2 dead: route over lb1 only", func(r string) bool { return strings.Contains(r, via(1)) && !strings.Contains(r, via(2)) })
	who = map[string]int{}
	for i := range 100 {
		who[query(i)]++
	}
	if who["lb1"] != 100 {
		t.Errorf("after lb2's VIP died, answers by host: %v (want all by lb1)", who)
	}
}
