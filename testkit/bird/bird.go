// Package bird is a test harness for BIRD 2 as a BGP router: Start runs
// the bird daemon in its own network namespace (testkit/netns) with one
// BGP session towards the test's (root) namespace, and the test asserts
// on the router's table (`birdc show route all`), not on the speaker's
// own account of what it announced.
//
// It needs what netns needs (root, iproute2) and Debian's bird2 package:
// without them Start skips the test, or fails it when
// LBDNS_REQUIRE_NETNS=1 (as in CI, where scripts/install-test-deps.sh
// installs bird2).
package bird

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/netns"
)

// Wait is how long the Wait methods wait for the router's table or
// session to show what they expect.
const Wait = 20 * time.Second

// Options configure the router.
type Options struct {
	// AS is the router's AS; PeerAS the speaker's (in the root namespace,
	// at Host.RootAddrV4()).
	AS, PeerAS uint32
	// HoldTime is the hold time the router proposes, in seconds (3 when
	// 0); keepalives go every third of it.
	HoldTime int
	// Extra is added to the BGP protocol's body (BIRD syntax), such as
	// "neighbor port 1790;".
	Extra string
	// BFD runs BIRD's BFD protocol and ties the session to it.
	BFD bool
	// IPv6 makes the session run between the IPv6 addresses
	// (Host().AddrV6() and Host().RootAddrV6()) and carry IPv6 routes.
	IPv6 bool
}

// Router is a running bird.
type Router struct {
	t    testing.TB
	host *netns.Host
	sock string
}

// Require skips t (or fails it, see the package doc) unless bird can run
// here.
func Require(t testing.TB) {
	t.Helper()
	netns.Require(t)
	for _, c := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(c); err != nil {
			if os.Getenv(netns.EnvRequire) == "1" {
				t.Fatalf("bird: %s not found (apt-get install bird2, see scripts/install-test-deps.sh) with %s=1", c, netns.EnvRequire)
			}
			t.Skipf("bird: %s not found (apt-get install bird2); skipping (set %s=1 to fail instead)", c, netns.EnvRequire)
		}
	}
}

// Start runs bird for t in a new namespace, with one BGP protocol "lb"
// from Host().AddrV4() to the root namespace's Host().RootAddrV4() (or
// between their IPv6 addresses, see Options.IPv6), importing every route
// and exporting none. It is stopped when t
// ends, and its log is printed when t failed.
func Start(t testing.TB, opts Options) *Router {
	t.Helper()
	Require(t)
	if opts.HoldTime == 0 {
		opts.HoldTime = 3
	}
	h := netns.New(t, "bird")
	dir := t.TempDir()
	r := &Router{t: t, host: h, sock: filepath.Join(dir, "bird.ctl")}
	top, extra := "", opts.Extra
	if opts.BFD {
		top, extra = "protocol bfd { interface \"*\" { min rx interval 100 ms; min tx interval 100 ms; multiplier 3; }; }\n", extra+"\tbfd on;\n"
	}
	local, peer, channel := h.AddrV4().String(), h.RootAddrV4().String(), "ipv4"
	if opts.IPv6 {
		local, peer, channel = h.AddrV6().String(), h.RootAddrV6().String(), "ipv6"
	}
	conf := top + fmt.Sprintf(`router id %[1]s;
log stderr all;
protocol device { scan time 1; }
protocol bgp lb {
	local %[8]s as %[2]d;
	neighbor %[3]s as %[4]d;
	hold time %[5]d;
	keepalive time %[6]d;
	connect retry time 1;
	error wait time 1, 2;
	%[9]s { import all; export none; };
%[7]s
}
`, h.AddrV4(), opts.AS, peer, opts.PeerAS, opts.HoldTime, max(opts.HoldTime/3, 1), extra, local, channel)
	path := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := h.Command("bird", "-f", "-c", path, "-s", r.sock)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("bird: start: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bird's log:\n%s", logs.String())
		}
	})
	r.Eventually("bird answers on its control socket", func(string) bool { return true }, "show", "status")
	return r
}

// Host returns the router's namespace.
func (r *Router) Host() *netns.Host { return r.host }

// Birdc runs one birdc command and returns its output.
func (r *Router) Birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", r.sock}, args...)...).CombinedOutput()
	return string(out), err
}

// Eventually runs birdc cmd until ok accepts its output, for at most
// Wait, and returns that output; it fails the test otherwise.
func (r *Router) Eventually(what string, ok func(string) bool, cmd ...string) string {
	r.t.Helper()
	deadline := time.Now().Add(Wait)
	var out string
	var err error
	for time.Now().Before(deadline) {
		out, err = r.Birdc(cmd...)
		if err == nil && ok(out) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
	proto, _ := r.Birdc("show", "protocols", "all", "lb")
	r.t.Fatalf("bird: %s: not seen within %v; last `birdc %s` (err %v):\n%s\nprotocol:\n%s", what, Wait, strings.Join(cmd, " "), err, out, proto)
	return ""
}

// Route is one route of the router's table.
type Route struct {
	// MED is BGP.med ("" when absent); Communities is BGP.community as
	// BIRD prints it ("(65001,100) (65535,0)"; "" when none).
	MED, Communities string
}

// Routes returns the router's table, prefix → route.
func (r *Router) Routes() map[string]Route {
	r.t.Helper()
	out, err := r.Birdc("show", "route", "all")
	if err != nil {
		r.t.Fatalf("bird: show route all: %v: %s", err, out)
	}
	return ParseRoutes(out)
}

var prefixLine = regexp.MustCompile(`^([0-9a-f.:]+/\d+)\s+`)

// ParseRoutes parses the output of `birdc show route all`.
func ParseRoutes(out string) map[string]Route {
	got := map[string]Route{}
	var cur string
	for _, line := range strings.Split(out, "\n") {
		if m := prefixLine.FindStringSubmatch(line); m != nil {
			cur = m[1]
			got[cur] = Route{}
			continue
		}
		if cur == "" {
			continue
		}
		l := strings.TrimSpace(line)
		rt := got[cur]
		switch {
		case strings.HasPrefix(l, "BGP.med:"):
			rt.MED = strings.TrimSpace(strings.TrimPrefix(l, "BGP.med:"))
		case strings.HasPrefix(l, "BGP.community:"):
			rt.Communities = strings.TrimSpace(strings.TrimPrefix(l, "BGP.community:"))
		}
		got[cur] = rt
	}
	return got
}

// WaitRoute waits until the table has prefix with med and communities.
func (r *Router) WaitRoute(what, prefix, med, communities string) {
	r.t.Helper()
	r.Eventually(what, func(out string) bool {
		rt, ok := ParseRoutes(out)[prefix]
		return ok && rt.MED == med && rt.Communities == communities
	}, "show", "route", "all")
}

// WaitGone waits until the table does not have prefix.
func (r *Router) WaitGone(what, prefix string) {
	r.t.Helper()
	r.Eventually(what, func(out string) bool {
		_, ok := ParseRoutes(out)[prefix]
		return !ok
	}, "show", "route", "all")
}

// Established waits for the session to be established.
func (r *Router) Established() {
	r.t.Helper()
	r.Eventually("session established", func(out string) bool { return strings.Contains(out, "Established") }, "show", "protocols", "lb")
}
