package e2e

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/internal/lab/vendors"
	"lbdns/testkit/poll"
)

// emergencyWorld is lbdnsd serving zone g.test. on loopback with two
// members (TCP listeners on 127.0.0.2 and 127.0.0.3) behind the ECS name
// www (static set 198.51.100.9) and the name api (no static set).
type emergencyWorld struct {
	*world
	dnsPort, memberPort int
	members             map[string]net.Listener
}

// newEmergencyWorld writes the configuration and opens the members.
func newEmergencyWorld(t *testing.T) *emergencyWorld {
	e := &emergencyWorld{world: newWorld(t, layout{}), members: map[string]net.Listener{}}
	e.dnsPort = freeUDPTCPPort(t)
	// The members' port: free on 127.0.0.2 and 127.0.0.3.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	e.memberPort = l.Addr().(*net.TCPAddr).Port
	e.members["127.0.0.2"] = l
	e.openMember("127.0.0.3")
	for _, l := range e.members {
		go acceptAndClose(l)
	}
	t.Cleanup(func() {
		for _, l := range e.members {
			l.Close()
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = \"127.0.0.1:0\"\n", e.stateDir, e.socket)
	fmt.Fprintf(&b, "\n[check.tcp]\nkind = \"tcp\"\ninterval = \"200ms\"\ntimeout = \"150ms\"\nrise = 1\nfall = 1\n\n[check.tcp.tcp]\nport = %d\n", e.memberPort)
	b.WriteString("\n[[gslb.pool]]\nname = \"site\"\nmonitors = [\"tcp\"]\nalgorithm = \"all\"\n")
	b.WriteString("\n[[gslb.pool.member]]\nname = \"m2\"\naddress = \"127.0.0.2\"\n")
	b.WriteString("\n[[gslb.pool.member]]\nname = \"m3\"\naddress = \"127.0.0.3\"\n")
	b.WriteString("\n[[gslb.zone]]\nname = \"g.test\"\nns = [\"ns1.g.test.\"]\n")
	b.WriteString("\n[[gslb.name]]\nname = \"www.g.test\"\necs = true\nstatic = [\"198.51.100.9\"]\n\n[[gslb.name.policy]]\npool = \"site\"\n")
	b.WriteString("\n[[gslb.name]]\nname = \"api.g.test\"\n\n[[gslb.name.policy]]\npool = \"site\"\n")
	fmt.Fprintf(&b, "\n[gslb.server]\nlisten = [\"127.0.0.1:%d\"]\n", e.dnsPort)
	if err := os.WriteFile(e.cfgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// openMember listens on addr at the members' port.
func (e *emergencyWorld) openMember(addr string) {
	l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", addr, e.memberPort))
	if err != nil {
		e.t.Fatal(err)
	}
	e.members[addr] = l
}

func acceptAndClose(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// freeUDPTCPPort returns a port free on 127.0.0.1 for UDP and TCP.
func freeUDPTCPPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		pc.Close()
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// digAnswer is what dig printed of one answer.
type digAnswer struct {
	addrs []string // sorted
	ttl   int
	scope int // the ECS scope prefix length, -1 without ECS in the reply
	out   string
}

var (
	digRR    = regexp.MustCompile(`(?m)^\S+\s+(\d+)\s+IN\s+A\s+(\S+)$`)
	digScope = regexp.MustCompile(`CLIENT-SUBNET: [0-9./]+/(\d+)`)
)

// dig asks the responder for qname A with ECS 10.1.2.0/24, with dig.
func (e *emergencyWorld) dig(qname string) (digAnswer, error) {
	return e.digAt(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(e.dnsPort)), qname, "+subnet=10.1.2.0/24", "+norecurse")
}

// digAt asks server for qname A with dig.
func (e *emergencyWorld) digAt(server netip.AddrPort, qname string, opts ...string) (digAnswer, error) {
	return digA(e.t, server, qname, opts...)
}

// digA asks server for qname A with dig (Debian's bind9-dnsutils).
func digA(t *testing.T, server netip.AddrPort, qname string, opts ...string) (digAnswer, error) {
	args := append([]string{"@" + server.Addr().String(), "-p", strconv.Itoa(int(server.Port())), qname, "A", "+tries=1", "+time=1"}, opts...)
	r := run(t, "dig", args...)
	a := digAnswer{scope: -1, out: r.stdout}
	if r.code != 0 || !strings.Contains(r.stdout, "status: NOERROR") {
		return a, fmt.Errorf("dig %s: %s", qname, r)
	}
	for _, m := range digRR.FindAllStringSubmatch(r.stdout, -1) {
		a.ttl, _ = strconv.Atoi(m[1])
		a.addrs = append(a.addrs, m[2])
	}
	slices.Sort(a.addrs)
	if m := digScope.FindStringSubmatch(r.stdout); m != nil {
		a.scope, _ = strconv.Atoi(m[1])
	}
	return a, nil
}

// waitDig polls dig every 50ms until ok holds, and returns how long that
// took.
func (e *emergencyWorld) waitDig(what, qname string, budget time.Duration, ok func(digAnswer) bool) time.Duration {
	e.t.Helper()
	start := time.Now()
	var last digAnswer
	for polls := 1; time.Since(start) < budget+5*time.Second; polls++ {
		a, err := e.dig(qname)
		if err == nil && ok(a) {
			took := time.Since(start)
			if took > budget {
				e.t.Errorf("%s: took %v, more than %v", what, took.Round(time.Millisecond), budget)
			}
			e.t.Logf("%s: %v, %d dig(s)", what, took.Round(time.Millisecond), polls)
			return took
		}
		last = a
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("%s: not within %v; last answer:\n%s", what, budget+5*time.Second, last.out)
	return 0
}

func isStatic(a digAnswer) bool {
	return slices.Equal(a.addrs, []string{"198.51.100.9"}) && a.scope == 0
}

func isMembers(want ...string) func(digAnswer) bool {
	return func(a digAnswer) bool { return slices.Equal(a.addrs, want) }
}

// TestGSLBEmergency: lbctl gslb off switches a name to its static set
// within a second (ECS scope 0), a TTL raise shows in the answers, the
// switch survives kill -9 and a reload, a member dying while off changes
// nothing, gslb on brings dynamic answers back, and malformed or
// unknown-name requests change nothing.
func TestGSLBEmergency(t *testing.T) {
	t.Parallel()
	e := newEmergencyWorld(t)
	d := e.start()
	e.waitDig("dynamic answers", "www.g.test.", 10*time.Second, isMembers("127.0.0.2", "127.0.0.3"))

	// Malformed and unknown names: exit 1 with a message, nothing changed.
	stateFile := filepath.Join(e.stateDir, "overrides.json")
	before, _ := os.ReadFile(stateFile)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gslb", "off", "--name", "ww.g.test", "--reason", "x"}, `unknown GSLB name "ww.g.test." (did you mean "www.g.test."?)`},
		{[]string{"gslb", "off", "--zone", "g.tst", "--reason", "x"}, `unknown GSLB zone "g.tst."`},
		{[]string{"gslb", "on", "--name", "www.g.test", "--reason", "a\tb"}, "reason: no control characters"},
	} {
		r := e.lbctl(tc.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: want exit 1 with %q, got %s", tc.args, tc.want, r)
		}
	}
	// A TTL out of range is refused by lbctl before it is sent: a usage
	// error (exit 2).
	if r := e.lbctl("gslb", "ttl", "999999", "--reason", "x"); r.code != 2 || !strings.Contains(r.stderr, "from 1 to 86400") {
		t.Errorf("gslb ttl 999999: want exit 2 naming the range, got %s", r)
	}
	if r := e.lbctl("gslb", "ttl", "soon"); r.code != 2 {
		t.Errorf("gslb ttl soon: want a usage error (exit 2), got %s", r)
	}
	if r := e.lbctl("gslb", "off", "--name", "www.g.test"); r.code != 2 || !strings.Contains(r.stderr, "--reason is required") {
		t.Errorf("gslb off without --reason: want a usage error (exit 2) naming --reason, got %s", r)
	}
	if after, _ := os.ReadFile(stateFile); string(after) != string(before) {
		t.Errorf("refused requests changed the state file:\n%s", after)
	}
	if a, err := e.dig("www.g.test."); err != nil || !isMembers("127.0.0.2", "127.0.0.3")(a) {
		t.Fatalf("after refused requests: %v %v", a.addrs, err)
	}

	// Off: static answers within 1s of the command returning.
	r := e.mustLbctl("gslb", "off", "--name", "www.g.test", "--reason", "wrong answers")
	if !strings.Contains(r.stdout, "intelligent resolution off for name www.g.test.") {
		t.Errorf("gslb off said: %s", r)
	}
	took := e.waitDig("static answers after gslb off", "www.g.test.", time.Second, isStatic)
	t.Logf("gslb off in force %v after the command returned", took.Round(time.Millisecond))
	if a, _ := e.dig("api.g.test."); !isMembers("127.0.0.2", "127.0.0.3")(a) {
		t.Errorf("api (not switched off): %v", a.addrs)
	}

	// TTL raise for the zone, in the answers of both names.
	e.mustLbctl("gslb", "ttl", "600", "--zone", "g.test", "--reason", "authoritative load")
	e.waitDig("TTL 600 on www", "www.g.test.", time.Second, func(a digAnswer) bool { return isStatic(a) && a.ttl == 600 })
	e.waitDig("TTL 600 on api", "api.g.test.", time.Second, func(a digAnswer) bool { return a.ttl == 600 })

	// Through Debian's unbound (a forwarder to the responder): the static
	// set, and the raised TTL (counting down in its cache).
	ub := vendors.Start(t, vendors.Unbound, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(e.dnsPort)))
	for _, qname := range []string{"www.g.test.", "api.g.test."} {
		a, err := e.digAt(ub.Addr, qname)
		if err != nil || a.ttl <= 30 || a.ttl > 600 {
			t.Errorf("%s through unbound: %v ttl %d (%v), want the raised TTL", qname, a.addrs, a.ttl, err)
		}
		if qname == "www.g.test." && !slices.Equal(a.addrs, []string{"198.51.100.9"}) {
			t.Errorf("www through unbound: %v, want the static set", a.addrs)
		}
	}

	// Visible: lbctl status, lbctl gslb status, events, metrics.
	st := e.mustLbctl("status").stdout
	if !strings.HasPrefix(st, "MAJOR  intelligent resolution is OFF for name www.g.test.") || !strings.Contains(st, "\nMINOR  the TTL of zone g.test. is raised to 600 s") ||
		!strings.Contains(st, "!! GSLB EMERGENCY: intelligent resolution OFF for name www.g.test.") || !strings.Contains(st, "!! GSLB TTL RAISED: zone g.test. to 600s") {
		t.Errorf("lbctl status has no banner:\n%s", st)
	}
	gs := e.mustLbctl("gslb", "status").stdout
	uid := fmt.Sprintf("uid %d", os.Geteuid())
	for _, want := range []string{"!! GSLB EMERGENCY", "wrong answers", "authoritative load", uid, "www.g.test.,api.g.test."} {
		if !strings.Contains(gs, want) {
			t.Errorf("lbctl gslb status lacks %q:\n%s", want, gs)
		}
	}
	var status control.Status
	decodeStrict(t, e.mustLbctl("-o", "json", "status").stdout, &status)
	if len(status.GSLBIntent) != 2 || status.GSLBIntent[0].By != uid || status.GSLBIntent[0].Reason != "wrong answers" || status.GSLBIntent[0].Set.IsZero() {
		t.Errorf("status gslb_intent: %+v", status.GSLBIntent)
	}
	evs := e.mustLbctl("events").stdout
	if !strings.Contains(evs, "intelligent resolution off for name www.g.test.: static answers, ECS scope 0 (reason: wrong answers) by "+uid) {
		t.Errorf("no gslb event:\n%s", evs)
	}
	fams := scrape(t, d.statusURL()+"/metrics")
	if u := undocumented(t, slices.Collect(maps.Keys(fams))); len(u) > 0 {
		t.Errorf("metrics exported but not in docs/status-and-metrics.md: %q", u)
	}
	fams.want(t, "lbdns_gslb_emergency", "GAUGE", map[string]string{"name": "www.g.test."}, eq(1))
	fams.want(t, "lbdns_gslb_ttl_raised_seconds", "GAUGE", map[string]string{"name": "api.g.test."}, eq(600))

	// A member dying while off changes nothing.
	e.members["127.0.0.2"].Close()
	poll.Until(t, 10*time.Second, "m2 down", func() (bool, string) {
		r := e.lbctl("gslb", "members")
		return regexp.MustCompile(`m2\s+127\.0\.0\.2\s+\S+\s+\S+\s+down`).MatchString(r.stdout), r.stdout
	})
	e.waitDig("api without m2", "api.g.test.", 2*time.Second, isMembers("127.0.0.3"))
	if a, _ := e.dig("www.g.test."); !isStatic(a) || a.ttl != 600 {
		t.Errorf("www after m2 died while off: %v ttl %d scope %d", a.addrs, a.ttl, a.scope)
	}

	// kill -9 and restart: still off, from the first answer.
	d.kill9()
	d = e.spawn()
	e.waitDig("static answers after kill -9 and restart", "www.g.test.", 10*time.Second, func(a digAnswer) bool { return true })
	if a, _ := e.dig("www.g.test."); !isStatic(a) || a.ttl != 600 {
		t.Errorf("after restart: %v ttl %d scope %d", a.addrs, a.ttl, a.scope)
	}
	d.waitReady()

	// Reload: still off.
	e.mustLbctl("reload")
	if a, _ := e.dig("www.g.test."); !isStatic(a) {
		t.Errorf("after reload: %v scope %d", a.addrs, a.scope)
	}

	// On: dynamic answers again (m2 is down), TTLs restored.
	e.mustLbctl("gslb", "on", "--name", "www.g.test")
	took = e.waitDig("dynamic answers after gslb on", "www.g.test.", time.Second, isMembers("127.0.0.3"))
	t.Logf("gslb on in force %v after the command returned", took.Round(time.Millisecond))
	e.mustLbctl("gslb", "ttl", "--clear")
	e.waitDig("configured TTL after gslb ttl --clear", "www.g.test.", time.Second, func(a digAnswer) bool { return a.ttl == 30 })
	if st := e.mustLbctl("status").stdout; strings.Contains(st, "!! GSLB") {
		t.Errorf("banner left after gslb on and ttl --clear:\n%s", st)
	}
	if r := e.mustLbctl("gslb", "on"); !strings.Contains(r.stdout, "nothing changed") {
		t.Errorf("gslb on with nothing off: %s", r)
	}
}
