package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/testkit/netns"
	"lbdns/testkit/nginx"
	"lbdns/testkit/poll"
)

// GSLB monitor timing of TestGSLBMembers: a member goes down within
// fall × interval + timeout (+ gslbMargin for lbctl and a busy machine),
// up within rise × interval + timeout (+ the margin).
const (
	gslbInterval = 250 * time.Millisecond
	gslbTimeout  = 200 * time.Millisecond
	gslbRise     = 2
	gslbFall     = 2
	gslbMargin   = 2500 * time.Millisecond
	gslbTCPPort  = 8080
)

// tcpMember is a TCP service inside a host: a Go listener that accepts
// and closes connections, which can be closed and reopened.
type tcpMember struct {
	t    *testing.T
	host *netns.Host
	mu   sync.Mutex
	l    net.Listener
	wg   sync.WaitGroup
}

// newTCPMember listens on every address of h at gslbTCPPort until the
// test ends.
func newTCPMember(t *testing.T, h *netns.Host) *tcpMember {
	m := &tcpMember{t: t, host: h}
	m.open()
	t.Cleanup(m.close)
	return m
}

// open starts listening (again).
func (m *tcpMember) open() {
	m.t.Helper()
	l, err := m.host.Listen("tcp", fmt.Sprintf(":%d", gslbTCPPort))
	if err != nil {
		m.t.Fatalf("listen in %s: %v", m.host.Name(), err)
	}
	m.mu.Lock()
	m.l = l
	m.mu.Unlock()
	m.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	})
}

// close closes the listener (connections are then refused) and waits for
// its accept loop to end.
func (m *tcpMember) close() {
	m.mu.Lock()
	l := m.l
	m.l = nil
	m.mu.Unlock()
	if l != nil {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			m.t.Errorf("close listener: %v", err)
		}
	}
	m.wg.Wait()
}

// gslbWorld is a world whose configuration is GSLB members only.
type gslbWorld struct {
	*world
	tcp, nat, web, ping *netns.Host
}

// renderGSLB returns the configuration of TestGSLBMembers: one pool
// "site" whose members each break in their own way.
func (g *gslbWorld) renderGSLB() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = \"127.0.0.1:0\"\n", g.stateDir, g.socket)
	common := fmt.Sprintf("interval = %q\ntimeout = %q\nrise = %d\nfall = %d\n", gslbInterval, gslbTimeout, gslbRise, gslbFall)
	fmt.Fprintf(&b, "\n[check.tcp]\nkind = \"tcp\"\n%s\n[check.tcp.tcp]\nport = %d\n", common, gslbTCPPort)
	fmt.Fprintf(&b, "\n[check.web]\nkind = \"http\"\n%s\n[check.web.http]\npath = \"/health\"\nbody_regexp = \"^healthy\"\n", common)
	fmt.Fprintf(&b, "\n[check.ping]\nkind = \"icmp\"\n%s\n[check.ping.icmp]\ncount = 3\ninterval = \"20ms\"\n", common)
	fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = \"site\"\nmonitors = [\"tcp\"]\n")
	fmt.Fprintf(&b, "\n[[gslb.pool.member]]\nname = \"tcp-1\"\naddress = %q\n", g.tcp.AddrV4())
	fmt.Fprintf(&b, "\n[[gslb.pool.member]]\nname = \"nat-1\"\naddress = \"2001:db8::10\"\nprobe_address = %q\nweight = 50\npriority = 1\n", g.nat.AddrV6())
	fmt.Fprintf(&b, "\n[[gslb.pool.member]]\nname = \"web-1\"\naddress = %q\nmonitors = [\"web\"]\n", g.web.AddrV4())
	fmt.Fprintf(&b, "\n[[gslb.pool.member]]\nname = \"ping-1\"\naddress = %q\nmonitors = [\"ping\"]\n", g.ping.AddrV4())
	return b.String()
}

// gslbMembers runs lbctl gslb members -o json and returns pool "site"'s
// members by name.
func (g *gslbWorld) gslbMembers() (map[string]control.GSLBMember, error) {
	r := g.lbctl("-o", "json", "gslb", "members")
	if r.code != 0 {
		return nil, fmt.Errorf("lbctl gslb members: %s", r)
	}
	var pools []control.GSLBPool
	decodeStrict(g.t, r.stdout, &pools)
	if len(pools) != 1 || pools[0].Name != "site" {
		return nil, fmt.Errorf("want pool site alone, got %s", r.stdout)
	}
	out := map[string]control.GSLBMember{}
	for _, m := range pools[0].Members {
		out[m.Name] = m
	}
	return out, nil
}

// memberText is a member's state and its monitors' for a failure message.
func memberText(m control.GSLBMember) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s (%s)", m.Name, m.State, m.Reason)
	for _, mo := range m.Monitors {
		fmt.Fprintf(&b, " [%s %s: %s]", mo.Check, mo.State, mo.LastResult)
	}
	return b.String()
}

// membersText formats members for a failure message.
func membersText(ms map[string]control.GSLBMember) string {
	var lines []string
	for _, m := range ms {
		lines = append(lines, memberText(m))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// expectation is what a member must show once it reached the state
// waited for: ok reports whether it is the one, with a detail otherwise.
type expectation func(m control.GSLBMember) (bool, string)

// waitMembers polls lbctl gslb members until every member of want
// satisfies its expectation, and fails the test unless each did so
// within budget of its start time. No member may be seen down while
// neverDown holds it.
func (g *gslbWorld) waitMembers(what string, budget time.Duration, start map[string]time.Time, want map[string]expectation, neverDown bool) {
	g.t.Helper()
	seen := map[string]time.Time{}
	poll.Until(g.t, budget+10*time.Second, what, func() (bool, string) {
		ms, err := g.gslbMembers()
		if err != nil {
			return false, err.Error()
		}
		now := time.Now()
		var missing []string
		for name, exp := range want {
			m, ok := ms[name]
			if !ok {
				g.t.Fatalf("%s: no member %s in %v", what, name, ms)
			}
			if neverDown && m.State == "down" {
				g.t.Fatalf("%s: %s seen down during the first probe rounds (unknown expected): %s", what, name, memberText(m))
			}
			if _, done := seen[name]; done {
				continue
			}
			if ok, _ := exp(m); ok {
				seen[name] = now
				continue
			}
			missing = append(missing, name)
		}
		return len(missing) == 0, fmt.Sprintf("waiting for %v:\n%s", missing, membersText(ms))
	})
	for name, at := range seen {
		if took := at.Sub(start[name]); took > budget {
			g.t.Errorf("%s: %s took %v, more than %v", what, name, took.Round(time.Millisecond), budget)
		} else {
			g.t.Logf("%s: %s after %v", what, name, took.Round(time.Millisecond))
		}
	}
}

// up expects a member up with every monitor up.
func up(m control.GSLBMember) (bool, string) {
	if m.State != "up" {
		return false, memberText(m)
	}
	for _, mo := range m.Monitors {
		if mo.State != "up" {
			return false, memberText(m)
		}
	}
	return true, ""
}

// downBy expects a member down, its reason naming monitor check, whose
// last result satisfies result.
func downBy(check string, result func(string) bool) expectation {
	return func(m control.GSLBMember) (bool, string) {
		if m.State != "down" || !strings.Contains(m.Reason, check) {
			return false, memberText(m)
		}
		for _, mo := range m.Monitors {
			if mo.Check == check && mo.State == "down" && result(mo.LastResult) {
				return true, ""
			}
		}
		return false, memberText(m)
	}
}

// TestGSLBMembers runs lbdnsd over GSLB members on hosts in network
// namespaces: a TCP service (a Go listener), an HTTP service (Debian's
// nginx), a host answering pings, and a TCP service probed at an address
// other than the one answered. Every member comes up after rise (never
// down while the first rounds run); then each breaks for real (listener
// closed, nginx's /health answering 503, links down) and goes down with
// the reason within fall × interval + timeout and a margin; then each
// recovers and is up within rise × interval + timeout and the margin. The
// state changes are in lbctl events and in /metrics.
func TestGSLBMembers(t *testing.T) {
	netns.Require(t)
	nginx.Binary(t)
	t.Parallel()
	g := &gslbWorld{world: newWorld(t, layout{})}
	g.tcp = netns.New(t, "gslb-tcp")
	g.nat = netns.New(t, "gslb-nat")
	g.web = netns.New(t, "gslb-web")
	g.ping = netns.New(t, "gslb-ping")
	tcp := newTCPMember(t, g.tcp)
	newTCPMember(t, g.nat)
	web := nginx.Start(t, nginx.Options{Addrs: []netip.Addr{g.web.AddrV4()}, HTTP: 80, Command: g.web.Command})
	if err := os.WriteFile(g.cfgPath, []byte(g.renderGSLB()), 0o644); err != nil {
		t.Fatal(err)
	}

	spawned := time.Now()
	d := g.spawn()
	all := []string{"tcp-1", "nat-1", "web-1", "ping-1"}
	fromStart := map[string]time.Time{}
	allUp := map[string]expectation{}
	for _, name := range all {
		fromStart[name] = spawned
		allUp[name] = up
	}
	g.waitMembers("every member up after rise", startTimeout, fromStart, allUp, true)
	d.waitReady()

	ms, err := g.gslbMembers()
	if err != nil {
		t.Fatal(err)
	}
	if m := ms["nat-1"]; m.Address != "2001:db8::10" || m.ProbeAddress != g.nat.AddrV6().String() || m.Weight != 50 || m.Priority != 1 {
		t.Errorf("nat-1: address %q probe %q weight %d priority %d, want 2001:db8::10 probed at %s, 50, 1",
			m.Address, m.ProbeAddress, m.Weight, m.Priority, g.nat.AddrV6())
	}
	if m := ms["ping-1"]; len(m.Monitors) != 1 || m.Monitors[0].Kind != "icmp" || !hasTextFact(m.Monitors[0], "socket", "raw") ||
		!hasFact(m.Monitors[0], "loss_percent", 0) {
		t.Errorf("ping-1 monitors: %+v, want one icmp monitor on a raw socket with 0%% loss", m.Monitors)
	}
	if m := ms["web-1"]; len(m.Monitors) != 1 || m.Monitors[0].Kind != "http" || m.Monitors[0].RTTMillis <= 0 {
		t.Errorf("web-1 monitors: %+v, want one http monitor with an RTT", m.Monitors)
	}

	// The plain-text table says the same.
	text := g.mustLbctl("gslb", "members").stdout
	if !strings.Contains(text, "gslb pool site (all): 4/4 up") {
		t.Errorf("lbctl gslb members: no header \"gslb pool site (all): 4/4 up\":\n%s", text)
	}
	rows := tableRows(t, text, "MEMBER", "ADDRESS", "WEIGHT", "PRIORITY", "STATE", "SINCE", "REASON")
	for _, name := range all {
		if r := rowOf(t, rows, "MEMBER", name); r["STATE"] != "up" {
			t.Errorf("lbctl gslb members: %s row %v, want up", name, r)
		}
	}
	if r := rowOf(t, rows, "MEMBER", "nat-1"); !strings.Contains(r["ADDRESS"], "2001:db8::10") || !strings.Contains(r["ADDRESS"], g.nat.AddrV6().String()) {
		t.Errorf("lbctl gslb members: nat-1 address %q, want the answer and the probe address", r["ADDRESS"])
	}
	mons := tableRows(t, text, "MEMBER", "CHECK", "KIND", "STATE", "SINCE", "LAST", "RTT", "CERT DAYS", "LOSS", "SOCKET")
	if r := rowOf(t, mons, "MEMBER", "ping-1"); r["KIND"] != "icmp" || r["SOCKET"] != "raw" || r["STATE"] != "up" {
		t.Errorf("lbctl gslb members: ping-1 monitor row %v, want icmp, raw, up", r)
	}
	url := d.statusURL() + "/metrics"
	fs := scrape(t, url)
	for _, name := range all {
		fs.want(t, "lbdns_gslb_member_up", "GAUGE", map[string]string{"pool": "site", "member": name}, eq(1))
	}
	evs := g.events()
	after := evs[len(evs)-1].Seq

	// Break every member, each its own way.
	downBudget := gslbFall*gslbInterval + gslbTimeout + gslbMargin
	broke := map[string]time.Time{}
	broke["tcp-1"] = time.Now()
	tcp.close()
	broke["nat-1"] = time.Now()
	g.nat.LinkDown()
	broke["web-1"] = time.Now()
	web.SetHealthy(t, false)
	broke["ping-1"] = time.Now()
	g.ping.LinkDown()
	contains := func(s string) func(string) bool { return func(r string) bool { return strings.Contains(r, s) } }
	g.waitMembers("every member down", downBudget, broke, map[string]expectation{
		"tcp-1": downBy("tcp", contains("connection refused")),
		// The link is down: the packets go nowhere until the deadline, or
		// the kernel says at once that the address cannot be reached.
		"nat-1": downBy("tcp", func(r string) bool {
			return strings.Contains(r, "timeout") || strings.Contains(r, "unreachable")
		}),
		"web-1":  downBy("web", contains("status 503 not accepted")),
		"ping-1": downBy("ping", contains("no reply to 3 echoes")),
	}, false)
	ms, err = g.gslbMembers()
	if err != nil {
		t.Fatal(err)
	}
	if m := ms["ping-1"]; !hasFact(m.Monitors[0], "loss_percent", 100) {
		t.Errorf("ping-1 down: facts %+v, want a loss of 100%%: %s", m.Monitors[0].Facts, memberText(m))
	}
	fs = scrape(t, url)
	for _, name := range all {
		fs.want(t, "lbdns_gslb_member_up", "GAUGE", map[string]string{"pool": "site", "member": name}, eq(0))
	}
	fs.want(t, "lbdns_gslb_transitions_total", "COUNTER", map[string]string{"pool": "site", "member": "web-1", "check": "web", "to": "down"}, eq(1))
	if got := fs.match("lbdns_backend_transitions_total", map[string]string{"resolver": "web-1"}); len(got) != 0 {
		t.Errorf("GSLB members counted in lbdns_backend_transitions_total: %v", got)
	}

	// Mend every member.
	upBudget := gslbRise*gslbInterval + gslbTimeout + gslbMargin
	mended := map[string]time.Time{}
	mended["tcp-1"] = time.Now()
	tcp.open()
	mended["nat-1"] = time.Now()
	g.nat.LinkUp()
	mended["web-1"] = time.Now()
	web.SetHealthy(t, true)
	mended["ping-1"] = time.Now()
	g.ping.LinkUp()
	g.waitMembers("every member up again", upBudget, mended, allUp, false)
	fs = scrape(t, url)
	for _, name := range all {
		fs.want(t, "lbdns_gslb_member_up", "GAUGE", map[string]string{"pool": "site", "member": name}, eq(1))
	}

	// lbctl events shows every monitor going down and coming back.
	evText := g.mustLbctl("events").stdout
	for _, subject := range []string{"gslb:site/tcp-1/tcp", "gslb:site/nat-1/tcp", "gslb:site/web-1/web", "gslb:site/ping-1/ping"} {
		var down, back bool
		for _, l := range strings.Split(evText, "\n") {
			f := strings.Fields(l)
			if len(f) < 6 || f[3] != control.EventState || f[4] != subject {
				continue
			}
			msg := strings.TrimPrefix(strings.Join(f[5:], " "), "ERROR: ")
			down = down || strings.HasPrefix(msg, "up -> down")
			back = back || (down && strings.HasPrefix(msg, "down -> up"))
		}
		if !down || !back {
			t.Errorf("lbctl events: %s went down %v, came back %v:\n%s", subject, down, back, evText)
		}
	}
	for _, ev := range g.events() {
		if ev.Seq > after && ev.Kind == control.EventState && !strings.HasPrefix(ev.Subject, "gslb:site/") {
			t.Errorf("state event of something else than the GSLB members: %+v", ev)
		}
	}
}

// hasFact reports whether mo has the number fact name with value v.
func hasFact(mo control.GSLBMonitor, name string, v float64) bool {
	f, ok := mo.Fact(name)
	return ok && f.Text == "" && f.Value == v
}

// hasTextFact reports whether mo has the text fact name with text v.
func hasTextFact(mo control.GSLBMonitor, name, v string) bool {
	f, ok := mo.Fact(name)
	return ok && f.Text == v
}
