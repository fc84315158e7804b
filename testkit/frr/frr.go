// Package frr is a test harness for FRR's bgpd as a BGP router: Start runs
// bgpd (without zebra) in its own network namespace (testkit/netns) with
// one neighbor in the test's (root) namespace, and the test asserts on the
// router's table through vtysh (`show bgp ipv4 unicast json`), not on the
// speaker's own account of what it announced.
//
// It needs what netns needs (root, iproute2) and Debian's frr package:
// without them Start skips the test, or fails it when
// LBDNS_REQUIRE_NETNS=1 (as in CI, where scripts/install-test-deps.sh
// installs frr).
package frr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/netns"
)

// Wait is how long the Wait methods wait for the router's table or
// session to show what they expect.
const Wait = 20 * time.Second

// bgpd is where Debian installs FRR's BGP daemon.
const bgpd = "/usr/lib/frr/bgpd"

// Options configure the router.
type Options struct {
	// AS is the router's AS; PeerAS the speaker's (in the root namespace,
	// at Host.RootAddrV4()).
	AS, PeerAS uint32
	// HoldTime is the hold time in seconds (3 when 0), keepalives every
	// third of it.
	HoldTime int
}

// Router is a running bgpd.
type Router struct {
	t    testing.TB
	host *netns.Host
	dir  string
}

// Require skips t (or fails it, see the package doc) unless bgpd can run
// here.
func Require(t testing.TB) {
	t.Helper()
	netns.Require(t)
	for _, c := range []string{bgpd, "vtysh"} {
		if _, err := exec.LookPath(c); err != nil {
			if os.Getenv(netns.EnvRequire) == "1" {
				t.Fatalf("frr: %s not found (apt-get install frr, see scripts/install-test-deps.sh) with %s=1", c, netns.EnvRequire)
			}
			t.Skipf("frr: %s not found (apt-get install frr); skipping (set %s=1 to fail instead)", c, netns.EnvRequire)
		}
	}
}

// Start runs bgpd for t in a new namespace, with one neighbor: the root
// namespace's Host().RootAddrV4(). It is stopped when t ends, and its log
// is printed when t failed.
func Start(t testing.TB, opts Options) *Router {
	t.Helper()
	Require(t)
	if opts.HoldTime == 0 {
		opts.HoldTime = 3
	}
	h := netns.New(t, "frr")
	dir, err := os.MkdirTemp("/tmp", "lbdns-frr-") // vty socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	r := &Router{t: t, host: h, dir: dir}
	peer := h.RootAddrV4()
	conf := fmt.Sprintf(`frr defaults traditional
hostname lbdns-test-router
router bgp %[1]d
 bgp router-id %[2]s
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor %[3]s remote-as %[4]d
 neighbor %[3]s timers %[5]d %[6]d
 neighbor %[3]s timers connect 1
 address-family ipv4 unicast
  neighbor %[3]s activate
 exit-address-family
`, opts.AS, h.AddrV4(), peer, opts.PeerAS, max(opts.HoldTime/3, 1), opts.HoldTime)
	path := filepath.Join(dir, "bgpd.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := h.Command(bgpd, "-f", path, "-i", filepath.Join(dir, "bgpd.pid"), "--vty_socket", dir, "-Z", "-n", "-S", "-P", "0", "--log", "stdout")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("frr: start bgpd: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bgpd's log:\n%s", logs.String())
		}
	})
	r.Eventually("bgpd answers vtysh", func(string) bool { return true }, "show bgp summary")
	return r
}

// Host returns the router's namespace.
func (r *Router) Host() *netns.Host { return r.host }

// Vtysh runs one vtysh command against the router's bgpd.
func (r *Router) Vtysh(cmd string) (string, error) {
	out, err := exec.Command("vtysh", "--vty_socket", r.dir, "-d", "bgpd", "-c", cmd).CombinedOutput()
	return string(out), err
}

// Eventually runs cmd until ok accepts its output, for at most Wait, and
// returns that output; it fails the test otherwise.
func (r *Router) Eventually(what string, ok func(string) bool, cmd string) string {
	r.t.Helper()
	deadline := time.Now().Add(Wait)
	var out string
	var err error
	for time.Now().Before(deadline) {
		out, err = r.Vtysh(cmd)
		if err == nil && ok(out) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
	sum, _ := r.Vtysh("show bgp summary")
	r.t.Fatalf("frr: %s: not seen within %v; last `%s` (err %v):\n%s\nsummary:\n%s", what, Wait, cmd, err, out, sum)
	return ""
}

// Route is the valid path of one prefix of the router's table.
type Route struct {
	// MED is the path's MED (-1 when absent); Communities its
	// communities as FRR prints them ("65001:100 graceful-shutdown").
	MED         int
	Communities string
}

// prefixJSON is the part of `show bgp ipv4 unicast PREFIX json` read.
type prefixJSON struct {
	Paths []struct {
		Metric    *int `json:"metric"`
		Community *struct {
			String string `json:"string"`
		} `json:"community"`
		Valid bool `json:"valid"`
	} `json:"paths"`
}

// parsePrefix parses the output of `show bgp ipv4 unicast PREFIX json`.
func parsePrefix(out string) (Route, bool) {
	var doc prefixJSON
	if json.Unmarshal([]byte(out), &doc) != nil {
		return Route{}, false
	}
	for _, p := range doc.Paths {
		if !p.Valid {
			continue
		}
		rt := Route{MED: -1}
		if p.Metric != nil {
			rt.MED = *p.Metric
		}
		if p.Community != nil {
			rt.Communities = p.Community.String
		}
		return rt, true
	}
	return Route{}, false
}

// WaitRoute waits until prefix's path has med and communities.
func (r *Router) WaitRoute(what, prefix string, med int, communities string) {
	r.t.Helper()
	r.Eventually(what, func(out string) bool {
		rt, ok := parsePrefix(out)
		return ok && rt.MED == med && rt.Communities == communities
	}, "show bgp ipv4 unicast "+prefix+" json")
}

// WaitGone waits until the table has no valid path for prefix.
func (r *Router) WaitGone(what, prefix string) {
	r.t.Helper()
	r.Eventually(what, func(out string) bool {
		_, ok := parsePrefix(out)
		return !ok
	}, "show bgp ipv4 unicast "+prefix+" json")
}

// Established waits for the session to be established.
func (r *Router) Established() {
	r.t.Helper()
	r.Eventually("session established", func(out string) bool { return strings.Contains(out, `"bgpState":"Established"`) },
		"show bgp neighbors "+r.host.RootAddrV4().String()+" json")
}
