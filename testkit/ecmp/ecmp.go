//go:build linux

// Package ecmp is a test topology for route announcement with several LB
// hosts: a BIRD 2 router in its own network namespace that installs the
// LB hosts' routes to one VIP as an ECMP route in its kernel, a client
// namespace behind the router, and one namespace per LB host with a
// plain UDP responder on the VIP (standing in for IPVS) and a route
// announcer (announce.Announcer with GoBGP) in a process of its own,
// driven by lines on its stdin.
//
// The announcer processes are the test binary run again: the package's
// TestMain must call SpeakerMain first. Tests skip without root, iproute2
// or bird2 (bird.Require), or fail with LBDNS_REQUIRE_NETNS=1.
package ecmp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"lbdns/testkit/bird"
	"lbdns/testkit/netns"
	"lbdns/testkit/testlog"
)

// VIP is the address every LB host announces and answers on.
var VIP = netip.MustParseAddrPort("192.0.2.53:53")

// The LB hosts' AS and the router's.
const (
	lbAS     = 65001
	routerAS = 65000
)

// The variables that make the test binary an LB host's announcer: its
// router id and its router's address.
const (
	envID   = "LBDNS_ECMP_SPEAKER_ID"
	envPeer = "LBDNS_ECMP_SPEAKER_PEER"
)

// SpeakerMain runs an LB host's announcer when the test binary was run
// as one (it returns its exit code and true), else returns false at
// once. The announcer reads lines on stdin: "serve" and "dead" set its
// VIP's verdict, "drain" and "enable" the host drain (drain delay 2 s);
// it withdraws and exits when stdin closes.
func SpeakerMain() (int, bool) {
	id := os.Getenv(envID)
	if id == "" {
		return 0, false
	}
	cfg := &configs.Config{VIPs: []configs.VIP{{Name: "v1", Addr: VIP.Addr()}}}
	cfg.BGP = configs.BGP{Enabled: true, RouterAddr: netip.MustParseAddr(id), LocalAS: lbAS, ListenPort: -1, MEDUp: 100, MEDDegraded: 1000,
		DrainDelay: configs.Duration{Duration: 2 * time.Second},
		Peers: []configs.BGPPeer{{Addr: netip.MustParseAddr(os.Getenv(envPeer)), AS: routerAS, Port: 179,
			HoldTime: configs.Duration{Duration: 3 * time.Second}, Keepalive: configs.Duration{Duration: time.Second}}}}
	h := hub.New(func() hub.Facts { return nil })
	h.Config.Publish(cfg)
	stop := runUntil(announce.New(announce.Options{Hub: h, Speaker: announce.NewGoBGP(nil)}))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "serve":
			h.VIPs.Publish([]hub.Verdict{{Name: "v1", Addr: VIP.Addr(), Serving: true, Reason: "test"}})
		case "dead":
			h.VIPs.Publish([]hub.Verdict{{Name: "v1", Addr: VIP.Addr(), Reason: "test: dead"}})
		case "drain":
			h.Intent.Publish(hub.Intent{State: intent.State{Host: &intent.HostDrain{Set: time.Now(), By: "test"}}, Revision: 1})
		case "enable":
			h.Intent.Publish(hub.Intent{Revision: 2})
		}
	}
	stop()
	return 0, true
}

// runUntil runs a until stop is called; stop returns once a has
// withdrawn (within 5 s) and returned. Calling stop again does nothing.
func runUntil(a *announce.Announcer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Second)
		})
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// RunAnnouncer runs a until the test ends, or until the stop it returns
// is called; a stopping announcer withdraws, within 5 s.
func RunAnnouncer(t testing.TB, a *announce.Announcer) (stop func()) {
	stop = runUntil(a)
	t.Cleanup(stop)
	return stop
}

// Net is the topology.
type Net struct {
	t      testing.TB
	Router *netns.Host
	Client *netns.Host
	LBs    []*LB
	sock   string // birdc's socket
	conns  []net.PacketConn
}

// LB is one LB host: its namespace, its announcer's stdin and the
// queries its responder answered.
type LB struct {
	Name  string
	Host  *netns.Host
	stdin interface{ Write([]byte) (int, error) }
	mu    sync.Mutex
	count int
	mute  bool // the responder drops every query (its back ends are dead)
}

// Answered returns how many queries the LB host's responder answered.
func (l *LB) Answered() int { l.mu.Lock(); defer l.mu.Unlock(); return l.count }

// Mute makes the LB host's responder drop (true) or answer (false) the
// queries it gets, as a host whose back ends all died would.
func (l *LB) Mute(on bool) { l.mu.Lock(); l.mute = on; l.mu.Unlock() }

// Say sends one command line to the LB host's announcer.
func (l *LB) Say(t testing.TB, cmd string) {
	t.Helper()
	if _, err := fmt.Fprintln(l.stdin, cmd); err != nil {
		t.Fatalf("%s: %v", l.Name, err)
	}
}

// New builds the topology with n LB hosts (lb1, lb2, ...; lb i on
// 10.0.i.0/30 to the router, the client on 10.0.250.0/30), starts BIRD
// and every host's announcer with its VIP serving, and opens 32 client
// sockets; all of it goes when the test ends.
func New(t testing.TB, n int) *Net {
	bird.Require(t)
	nw := &Net{t: t, Router: netns.New(t, "ecmp-router"), Client: netns.New(t, "ecmp-client")}
	netns.Link(t, nw.Router, "to-client", "10.0.250.1", nw.Client, "eth1", "10.0.250.2")
	netns.IP(t, "-n", nw.Client.Name(), "route", "replace", "default", "via", "10.0.250.1")
	nw.Router.Sysctl("net.ipv4.ip_forward=1")
	nw.Router.Sysctl("net.ipv4.fib_multipath_hash_policy=1") // spread flows by port too
	nw.Router.Sysctl("net.ipv4.conf.all.rp_filter=0")
	var protocols strings.Builder
	for i := 1; i <= n; i++ {
		lb := &LB{Name: fmt.Sprintf("lb%d", i), Host: netns.New(t, fmt.Sprintf("ecmp-lb%d", i))}
		netns.Link(t, nw.Router, "to-"+lb.Name, fmt.Sprintf("10.0.%d.1", i), lb.Host, "eth1", fmt.Sprintf("10.0.%d.2", i))
		netns.IP(t, "-n", lb.Host.Name(), "route", "replace", "default", "via", fmt.Sprintf("10.0.%d.1", i))
		netns.IP(t, "-n", lb.Host.Name(), "addr", "add", VIP.Addr().String()+"/32", "dev", "lo")
		lb.Host.Sysctl("net.ipv4.conf.all.rp_filter=0")
		lb.respond(t)
		fmt.Fprintf(&protocols, "protocol bgp %s from lb { local 10.0.%d.1 as %d; neighbor 10.0.%d.2 as %d; }\n", lb.Name, i, routerAS, i, lbAS)
		nw.LBs = append(nw.LBs, lb)
	}
	nw.startBird(protocols.String())
	for i, lb := range nw.LBs {
		lb.startSpeaker(t, fmt.Sprintf("10.0.%d.2", i+1), fmt.Sprintf("10.0.%d.1", i+1))
		lb.Say(t, "serve")
	}
	for range 32 {
		c, err := nw.Client.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		nw.conns = append(nw.conns, c)
	}
	return nw
}

// respond answers every query to the VIP with the query and the host's
// name, until the test ends.
func (l *LB) respond(t testing.TB) {
	pc, err := l.Host.ListenPacket("udp4", VIP.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			l.mu.Lock()
			mute := l.mute
			if !mute {
				l.count++
			}
			l.mu.Unlock()
			if !mute {
				_, _ = pc.WriteTo(append(buf[:n:n], l.Name...), from)
			}
		}
	}()
}

// startBird runs BIRD in the router's namespace with the BGP protocols
// given.
func (nw *Net) startBird(protocols string) {
	nw.sock = StartRouter(nw.t, nw.Router, "10.0.250.1", protocols)
}

// StartRouter runs BIRD 2 in router's namespace until the test ends, as
// the LB hosts' router: router id id, every BGP route imported (a route
// marked GRACEFUL_SHUTDOWN with local preference 0) and installed in the
// namespace's kernel table, several LB hosts' paths to one prefix merged
// into one ECMP route. protocols are BGP protocols from the template "lb"
// (local AS 65000, hold time 3 s, keepalive 1 s), such as
// "protocol bgp lb1 from lb { local 10.0.1.1 as 65000; neighbor 10.0.1.2 as 65001; }".
// It returns birdc's socket; BIRD's log is printed when the test failed.
func StartRouter(t testing.TB, router *netns.Host, id, protocols string) (sock string) {
	t.Helper()
	dir := t.TempDir()
	sock = filepath.Join(dir, "bird.ctl")
	conf := "router id " + id + `;
log stderr all;
protocol device { scan time 1; }
protocol kernel { ipv4 { import none; export all; }; merge paths on; }
filter gshut { if (65535, 0) ~ bgp_community then bgp_local_pref = 0; accept; }
template bgp lb { local as 65000; hold time 3; keepalive time 1; connect retry time 1; error wait time 1, 2;
	ipv4 { import filter gshut; export none; }; }
` + protocols
	if err := os.WriteFile(filepath.Join(dir, "bird.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var birdLog testlog.Buffer // written by the command's copier while read at cleanup
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
	return sock
}

// startSpeaker runs the host's announcer process in its namespace.
func (l *LB) startSpeaker(t testing.TB, id, peer string) {
	cmd := l.Host.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envID+"="+id, envPeer+"="+peer)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l.stdin = in
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s's speaker:\n%s", l.Name, out.String())
		}
	})
}

// KernelRoute is the router's kernel route to the VIP.
func (nw *Net) KernelRoute() string {
	out, _ := exec.Command("ip", "-n", nw.Router.Name(), "route", "show", VIP.Addr().String()+"/32").CombinedOutput()
	return string(out)
}

// Via is how the router's kernel route names LB host i (1-based).
func Via(i int) string { return fmt.Sprintf("via 10.0.%d.2", i) }

// Gateway is LB host i's address as BIRD's table shows it.
func Gateway(i int) string { return fmt.Sprintf("10.0.%d.2", i) }

// WaitKernel waits up to 20 s for the router's kernel route to satisfy
// ok, failing the test with BIRD's table when it does not.
func (nw *Net) WaitKernel(what string, ok func(route string) bool) {
	nw.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if ok(nw.KernelRoute()) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	nw.t.Fatalf("%s: not seen in 20s; router's kernel route: %q\nbird:\n%s", what, nw.KernelRoute(), nw.BirdRoutes())
}

// BirdRoutes is BIRD's table (birdc show route all).
func (nw *Net) BirdRoutes() string {
	b, _ := exec.Command("birdc", "-s", nw.sock, "show", "route", "all").CombinedOutput()
	return string(b)
}

// Conns are the client's 32 sockets (32 source ports, so that the
// router's hash spreads them over the hosts).
func (nw *Net) Conns() []net.PacketConn { return nw.conns }

// Query sends query i from socket i mod 32 and returns the name of the
// host that answered ("" on a timeout of 1 s: a lost query).
func (nw *Net) Query(i int) string {
	c := nw.conns[i%len(nw.conns)]
	msg := fmt.Appendf(nil, "q%d:", i)
	if _, err := c.WriteTo(msg, net.UDPAddrFromAddrPort(VIP)); err != nil {
		nw.t.Fatal(err)
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
			nw.t.Fatal(err)
		}
		if bytes.HasPrefix(buf[:n], msg) {
			return string(buf[len(msg):n])
		}
	}
}
