package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/internal/lab/vendors"
	"lbdns/testkit/netns"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
)

// The GSLB zone of the responder tests, delegated from the BIND parent
// zone example.test.
const (
	respZone   = "gslb.example.test"
	respWWW    = "www." + respZone + "."
	respStatic = "static." + respZone + "."
	respWhoami = "whoami." + respZone + "."
)

// respWorld is lbdnsd serving respZone on 127.0.0.1:port and, when the
// machine lets us bind port 53 (root), on deleg:53 for the delegation;
// its members are probed by TCP at a Go listener on 127.0.0.1.
type respWorld struct {
	*world
	port  uint16
	deleg netip.Addr // invalid when port 53 could not be had
	d     *lbdnsd
	url   string // the status endpoint
}

// freeLoopback53 returns an address of 127.53.0.0/16 whose port 53 is
// free for UDP and TCP, or an invalid address when none is (not root).
func freeLoopback53(t *testing.T) netip.Addr {
	for i := range 50 {
		a := netip.AddrFrom4([4]byte{127, 53, byte(os.Getpid() % 250), byte(1 + (i*7+os.Getpid())%250)})
		ap := netip.AddrPortFrom(a, 53)
		pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		if err != nil {
			if errors.Is(err, syscall.EACCES) {
				t.Logf("cannot bind port 53 (%v): the delegation is not tested", err)
				return netip.Addr{}
			}
			continue
		}
		ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(ap))
		pc.Close()
		if err != nil {
			continue
		}
		ln.Close()
		return a
	}
	return netip.Addr{}
}

// acceptLoop accepts and closes connections on l until it is closed.
func acceptLoop(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// newRespWorld writes the configuration and starts lbdnsd.
func newRespWorld(t *testing.T) *respWorld {
	t.Helper()
	rw := &respWorld{world: newWorld(t, layout{})}
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { acceptLoop(probe); close(done) }()
	t.Cleanup(func() { probe.Close(); <-done })
	if rw.port, err = vendors.FreePort(); err != nil {
		t.Fatal(err)
	}
	rw.deleg = freeLoopback53(t)
	listen := fmt.Sprintf("%q", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), rw.port))
	ns1 := "127.0.0.1"
	if rw.deleg.IsValid() {
		listen += fmt.Sprintf(", %q", netip.AddrPortFrom(rw.deleg, 53))
		ns1 = rw.deleg.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = \"127.0.0.1:0\"\n", rw.stateDir, rw.socket)
	fmt.Fprintf(&b, "\n[check.tcp]\nkind = \"tcp\"\ninterval = \"200ms\"\ntimeout = \"100ms\"\nrise = 1\nfall = 2\n\n[check.tcp.tcp]\nport = %d\n",
		probe.Addr().(*net.TCPAddr).Port)
	fmt.Fprintf(&b, "\n[gslb]\npolicy_order = [\"region\", \"global\"]\nwhoami = %q\n", strings.TrimSuffix(respWhoami, "."))
	fmt.Fprintf(&b, "\n[gslb.server]\nlisten = [%s]\n", listen)
	fmt.Fprintf(&b, "\n[[gslb.zone]]\nname = %q\nns = [\"ns1.%s.\"]\n", respZone, respZone)
	fmt.Fprintf(&b, "\n[[gslb.zone.record]]\nname = \"ns1\"\ntype = \"A\"\nvalue = %q\n", ns1)
	fmt.Fprintf(&b, "\n[[gslb.zone.record]]\nname = \"static\"\ntype = \"A\"\nvalue = \"192.0.2.80\"\n")
	fmt.Fprintf(&b, "\n[[gslb.name]]\nname = %q\necs = true\nttl = 300\n", strings.TrimSuffix(respWWW, "."))
	fmt.Fprintf(&b, "\n[[gslb.name.policy]]\nmatch = { region = \"east\" }\npool = \"east\"\n")
	fmt.Fprintf(&b, "\n[[gslb.name.policy]]\nmatch = { region = \"west\" }\npool = \"west\"\n")
	fmt.Fprintf(&b, "\n[[gslb.name.policy]]\npool = \"west\"\n")
	for _, p := range []struct{ pool, member, addr string }{{"east", "e1", "192.0.2.1"}, {"west", "w1", "192.0.2.2"}} {
		fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = %q\nmonitors = [\"tcp\"]\n\n[[gslb.pool.member]]\nname = %q\naddress = %q\nprobe_address = \"127.0.0.1\"\n",
			p.pool, p.member, p.addr)
	}
	fmt.Fprintf(&b, "\n[[gslb.topology.net]]\nprefix = \"127.0.0.0/25\"\nlabels = { region = \"east\" }\n")
	fmt.Fprintf(&b, "\n[[gslb.topology.net]]\nprefix = \"127.0.0.128/25\"\nlabels = { region = \"west\" }\n")
	if err := os.WriteFile(rw.cfgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	rw.d = rw.spawn()
	rw.d.waitReady()
	rw.url = rw.d.statusURL() + "/metrics"
	return rw
}

// addr is the responder's test address.
func (rw *respWorld) addr() string {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), rw.port).String()
}

// ask sends one query to server and returns the reply.
func ask(server, name string, qtype uint16, ecs netip.Prefix) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	if ecs.IsValid() {
		m.SetEdns0(1232, false)
		fam := uint16(1)
		if ecs.Addr().Is6() {
			fam = 2
		}
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(ecs.Bits()), Address: ecs.Addr().AsSlice()})
	}
	c := &dns.Client{Timeout: time.Second}
	r, _, err := c.Exchange(m, server)
	return r, err
}

// digTool runs a DNS client tool (dig, kdig) and returns its output.
func digTool(t *testing.T, tool string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("LBDNS_REQUIRE_VENDORS") == "1" {
			t.Fatalf("%s: %v", tool, err)
		}
		t.Skipf("%s not installed: %v", tool, err)
	}
	r := run(t, tool, args...)
	if r.code != 0 {
		t.Fatalf("%s %q: %s", tool, args, r)
	}
	return r.stdout
}

// lines splits a tool's output into its non-empty lines, trimmed.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// counter is the sum of family name's samples that have labels.
func counter(t *testing.T, url, name string, labels map[string]string) float64 {
	t.Helper()
	var sum float64
	for _, s := range scrape(t, url).match(name, labels) {
		sum += s.value
	}
	return sum
}

// product is a resolver product started with a configuration of the
// test's own (internal/lab/vendors starts them forwarding only).
type product struct {
	cmd  *exec.Cmd
	log  *testlog.Buffer
	done chan struct{}
}

// startProduct starts vendor v's binary with args in dir and waits until
// it answers at addr; the test's cleanup kills it.
func startProduct(t *testing.T, v vendors.Vendor, dir string, addr netip.AddrPort, args ...string) *product {
	t.Helper()
	path, err := vendors.LookPath(v)
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("LBDNS_REQUIRE_VENDORS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	p := &product{log: &testlog.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", v, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s log:\n%s", v, p.log.String())
		}
	})
	poll.Until(t, vendors.ReadyTimeout, string(v)+" answering", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("%s exited: %s", v, p.log.String())
		default:
		}
		m := new(dns.Msg)
		m.SetQuestion("version.bind.", dns.TypeTXT)
		m.Question[0].Qclass = dns.ClassCHAOS
		_, _, err := (&dns.Client{Timeout: 200 * time.Millisecond}).Exchange(m, addr.String())
		return err == nil, fmt.Sprint(err)
	})
	return p
}

// startUnbound starts unbound on 127.0.0.1 with the server clauses extra
// and the zone clauses zones.
func startUnbound(t *testing.T, extra, zones string) netip.AddrPort {
	t.Helper()
	port, err := vendors.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
	conf := fmt.Sprintf(`server:
	do-daemonize: no
	username: ""
	chroot: ""
	directory: %q
	pidfile: ""
	use-syslog: no
	logfile: ""
	verbosity: 1
	interface: 127.0.0.1@%d
	port: %d
	do-ip6: no
	so-reuseport: no
	num-threads: 1
	access-control: 127.0.0.0/8 allow
	do-not-query-localhost: no
	qname-minimisation: no
	target-fetch-policy: "0 0 0 0 0"
	local-zone: "test." nodefault
	msg-cache-size: 4m
	rrset-cache-size: 8m
%sremote-control:
	control-enable: no
%s`, dir, port, port, extra, zones)
	path := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	startProduct(t, vendors.Unbound, dir, addr, "-d", "-p", "-c", path)
	return addr
}

// TestGSLBResponder runs lbdnsd's GSLB responder for real: dig and kdig
// against it (a dynamic name, a static record, NXDOMAIN, whoami, the
// SOA); lbctl gslb explain saying why; Debian's unbound in front with
// its subnet cache sending ECS, clients in different subnets getting
// their region's answer through a cache that honours the scope; a BIND
// parent zone delegating the subdomain and a CNAME into it, resolved
// end to end through unbound.
func TestGSLBResponder(t *testing.T) {
	t.Parallel()
	rw := newRespWorld(t)
	srv := rw.addr()
	// Both members up (not the warming last resort, which answers both):
	// the source (127.0.0.1, region east) gets e1, region west w1.
	for _, c := range []struct {
		ecs  netip.Prefix
		want string
	}{{netip.Prefix{}, "192.0.2.1"}, {netip.MustParsePrefix("127.0.0.200/32"), "192.0.2.2"}} {
		poll.Until(t, startTimeout, "the responder answering www with "+c.want+" alone", func() (bool, string) {
			r, err := ask(srv, respWWW, dns.TypeA, c.ecs)
			if err != nil {
				return false, err.Error()
			}
			return len(r.Answer) == 1 && strings.HasSuffix(r.Answer[0].String(), c.want), r.String()
		})
	}

	t.Run("dig", func(t *testing.T) {
		p := fmt.Sprint(rw.port)
		if got := lines(digTool(t, "dig", "@127.0.0.1", "-p", p, "+short", "+norec", respWWW, "A")); !slices.Equal(got, []string{"192.0.2.1"}) {
			t.Errorf("dig www: %q, want 192.0.2.1", got)
		}
		// ECS from region west: pool west, scope /25 (the map entry).
		out := digTool(t, "dig", "@127.0.0.1", "-p", p, "+norec", "+subnet=127.0.0.200/32", respWWW, "A")
		if !strings.Contains(out, "CLIENT-SUBNET: 127.0.0.200/32/25") || !strings.Contains(out, "192.0.2.2") || !strings.Contains(out, "flags: qr aa;") {
			t.Errorf("dig +subnet=127.0.0.200/32 www: want 192.0.2.2, scope 25, aa:\n%s", out)
		}
		if got := lines(digTool(t, "kdig", "@127.0.0.1", "-p", p, "+short", "+norec", respStatic, "A")); !slices.Equal(got, []string{"192.0.2.80"}) {
			t.Errorf("kdig static: %q, want 192.0.2.80", got)
		}
		out = digTool(t, "kdig", "@127.0.0.1", "-p", p, "+norec", "nope."+respZone+".", "A")
		if !strings.Contains(out, "status: NXDOMAIN") || !strings.Contains(out, "SOA") {
			t.Errorf("kdig nope: want NXDOMAIN with the SOA:\n%s", out)
		}
		out = digTool(t, "dig", "@127.0.0.1", "-p", p, "+short", "+tcp", "+subnet=198.51.100.0/24", respWhoami, "TXT")
		if got := strings.TrimSpace(out); got != `"resolver=127.0.0.1 ecs=198.51.100.0/24"` {
			t.Errorf("dig whoami TXT over TCP: %q", got)
		}
		out = digTool(t, "dig", "@127.0.0.1", "-p", p, "+short", respZone+".", "SOA")
		if f := strings.Fields(out); len(f) != 7 || f[0] != "ns1."+respZone+"." {
			t.Errorf("dig SOA: %q", out)
		}
		out = digTool(t, "dig", "@127.0.0.1", "-p", p, "www.example.org.", "A")
		if !strings.Contains(out, "status: REFUSED") {
			t.Errorf("dig outside the zone: want REFUSED:\n%s", out)
		}
	})

	t.Run("explain", func(t *testing.T) {
		r := rw.mustLbctl("-o", "json", "gslb", "explain", respWWW, "--ecs", "127.0.0.200/32", "--client", "192.0.2.53")
		var rep control.GSLBExplainReply
		decodeStrict(t, r.stdout, &rep)
		if rep.Location.Labels["region"] != "west" || rep.Scope != 25 || !slices.Equal(rep.Addresses, []string{"192.0.2.2"}) ||
			len(rep.Policies) != 2 || rep.Policies[0].Matched || !rep.Policies[1].Answered || rep.TTL != 300 {
			t.Errorf("explain west: %s", r.stdout)
		}
		text := rw.mustLbctl("gslb", "explain", respWWW, "--ecs", "127.0.0.7").stdout
		for _, want := range []string{"region=east from 127.0.0.0/25", "1. region=east: matched, ANSWERED", "reply:       NOERROR, ttl 300, ECS scope /25"} {
			if !strings.Contains(text, want) {
				t.Errorf("lbctl gslb explain: no %q:\n%s", want, text)
			}
		}
		if r := rw.lbctl("gslb", "explain", "www.example.org"); r.code != 1 || !strings.Contains(r.stderr, "is in no GSLB zone") {
			t.Errorf("explain outside the zones: %s", r)
		}
	})

	t.Run("unbound-ecs", func(t *testing.T) {
		ub := startUnbound(t, "\tmodule-config: \"subnetcache iterator\"\n\tsend-client-subnet: 127.0.0.1\n\tmax-client-subnet-ipv4: 32\n\tclient-subnet-always-forward: yes\n",
			fmt.Sprintf("stub-zone:\n\tname: %q\n\tstub-addr: 127.0.0.1@%d\n", respZone, rw.port))
		p := fmt.Sprint(ub.Port())
		answers := func(pool string) float64 {
			return counter(t, rw.url, "lbdns_gslb_answers_total", map[string]string{"pool": pool})
		}
		east0, west0 := answers("east"), answers("west")
		for _, c := range []struct{ from, want, pool string }{
			{"127.0.0.2", "192.0.2.1", "east"},
			{"127.0.0.3", "192.0.2.1", "east"}, // same /25: from unbound's cache
			{"127.0.0.130", "192.0.2.2", "west"},
			{"127.0.0.131", "192.0.2.2", "west"}, // same /25: from unbound's cache
		} {
			if got := lines(digTool(t, "dig", "@127.0.0.1", "-p", p, "-b", c.from, "+short", respWWW, "A")); !slices.Equal(got, []string{c.want}) {
				t.Errorf("through unbound from %s: %q, want %s (pool %s)", c.from, got, c.want, c.pool)
			}
		}
		// Two clients inside one scope: one upstream query; outside it: two.
		if e, w := answers("east")-east0, answers("west")-west0; e != 1 || w != 1 {
			t.Errorf("queries at lbdnsd: east %v, west %v; want one each (two clients per /25 scope, unbound's cache answering the second)", e, w)
		}
		if n := counter(t, rw.url, "lbdns_gslb_ecs_queries_total", nil); n < 2 {
			t.Errorf("lbdns_gslb_ecs_queries_total = %v, want >= 2 (unbound sent ECS)", n)
		}
	})

	t.Run("bind-delegation", func(t *testing.T) {
		if !rw.deleg.IsValid() {
			t.Skip("port 53 not available: no delegation")
		}
		bport, err := vendors.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		zone := fmt.Sprintf(`$TTL 300
@	IN SOA ns.example.test. hostmaster.example.test. 1 3600 600 604800 60
@	IN NS ns.example.test.
ns	IN A 127.0.0.1
app	IN CNAME %s
gslb	IN NS ns1.gslb.example.test.
ns1.gslb	IN A %s
`, respWWW, rw.deleg)
		conf := fmt.Sprintf(`options {
	directory %q;
	pid-file none;
	session-keyfile none;
	managed-keys-directory %q;
	listen-on port %d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	allow-query { any; };
	dnssec-validation no;
	querylog no;
};
controls { };
zone "example.test" { type primary; file "example.test.zone"; };
`, dir, dir, bport)
		for name, content := range map[string]string{"named.conf": conf, "example.test.zone": zone} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		startProduct(t, vendors.BIND, dir, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), bport), "-g", "-4", "-n", "1", "-c", filepath.Join(dir, "named.conf"))
		ub := startUnbound(t, "\tmodule-config: \"iterator\"\n", fmt.Sprintf("stub-zone:\n\tname: \"example.test\"\n\tstub-addr: 127.0.0.1@%d\n", bport))
		p := fmt.Sprint(ub.Port())
		// The CNAME in the parent, followed through the delegation to
		// lbdnsd on port 53: unbound asks from 127.0.0.1 (region east).
		out := digTool(t, "dig", "@127.0.0.1", "-p", p, "+short", "app.example.test.", "A")
		if got := lines(out); !slices.Equal(got, []string{respWWW, "192.0.2.1"}) {
			t.Errorf("app.example.test through unbound, BIND and lbdnsd: %q, want the CNAME then 192.0.2.1", got)
		}
		if got := lines(digTool(t, "dig", "@127.0.0.1", "-p", p, "+short", respStatic, "A")); !slices.Equal(got, []string{"192.0.2.80"}) {
			t.Errorf("static through the delegation: %q", got)
		}
		out = digTool(t, "kdig", "@127.0.0.1", "-p", p, "+short", respWhoami, "TXT")
		if !strings.Contains(out, "resolver=127.0.0.1") {
			t.Errorf("whoami through the delegation: %q, want unbound's address", out)
		}
	})
}

// Failover timing of TestGSLBResponderFailover.
const (
	foInterval = 200 * time.Millisecond
	foTimeout  = 150 * time.Millisecond
	foFall     = 2
	foRise     = 2
	foSlack    = 100 * time.Millisecond
)

// TestGSLBResponderFailover: name fo answers pool main's member, a TCP
// service in a network namespace; when its listener closes, the answer
// through the responder moves to the fallback pool's member within fall
// × interval + timeout + 100 ms (polled every 50 ms), and comes back
// within rise × interval + timeout + 100 ms once it listens again.
func TestGSLBResponderFailover(t *testing.T) {
	netns.Require(t)
	t.Parallel()
	w := newWorld(t, layout{})
	hm, hb := netns.New(t, "resp-main"), netns.New(t, "resp-backup")
	main := newTCPMember(t, hm)
	newTCPMember(t, hb)
	port, err := vendors.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port).String()
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\n", w.stateDir, w.socket)
	fmt.Fprintf(&b, "\n[check.tcp]\nkind = \"tcp\"\ninterval = %q\ntimeout = %q\nrise = %d\nfall = %d\n\n[check.tcp.tcp]\nport = %d\n",
		foInterval, foTimeout, foRise, foFall, gslbTCPPort)
	fmt.Fprintf(&b, "\n[gslb.server]\nlisten = [%q]\n", srv)
	fmt.Fprintf(&b, "\n[[gslb.zone]]\nname = %q\nns = [\"ns1.%s.\"]\n", respZone, respZone)
	fmt.Fprintf(&b, "\n[[gslb.name]]\nname = \"fo.%s\"\nlast_resort = \"servfail\"\n\n[[gslb.name.policy]]\npool = \"main\"\n", respZone)
	fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = \"main\"\nmonitors = [\"tcp\"]\nfallback = \"backup\"\n\n[[gslb.pool.member]]\nname = \"m1\"\naddress = %q\n", hm.AddrV4())
	fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = \"backup\"\nmonitors = [\"tcp\"]\n\n[[gslb.pool.member]]\nname = \"b1\"\naddress = %q\n", hb.AddrV4())
	if err := os.WriteFile(w.cfgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	w.start()
	fo := "fo." + respZone + "."
	answer := func() (string, string) {
		r, err := ask(srv, fo, dns.TypeA, netip.Prefix{})
		if err != nil {
			return "", err.Error()
		}
		if len(r.Answer) != 1 {
			return "", r.String()
		}
		a, _ := r.Answer[0].(*dns.A)
		if a == nil {
			return "", r.String()
		}
		return a.A.String(), r.String()
	}
	waitFor := func(what, want string) time.Time {
		return poll.Until(t, startTimeout, what, func() (bool, string) {
			got, detail := answer()
			return got == want, detail
		})
	}
	waitFor("fo answering main's member", hm.AddrV4().String())
	poll.Until(t, startTimeout, "both members up", func() (bool, string) {
		st, err := w.status()
		if err != nil {
			return false, err.Error()
		}
		up := 0
		for _, p := range st.GSLB {
			up += p.Up
		}
		return up == 2, fmt.Sprintf("%+v", st.GSLB)
	})

	budget := foFall*foInterval + foTimeout + foSlack
	broke := time.Now()
	main.close()
	took := waitFor("fo answering the fallback's member", hb.AddrV4().String()).Sub(broke)
	t.Logf("failover: the answer moved %v after the member died (budget fall × interval + timeout + 100ms = %v)", took.Round(time.Millisecond), budget)
	if took > budget {
		t.Errorf("failover took %v, more than %v", took.Round(time.Millisecond), budget)
	}
	r := w.mustLbctl("gslb", "explain", fo)
	if !strings.Contains(r.stdout, "pool main (rr): 0 up") || !strings.Contains(r.stdout, "pool backup (rr, fallback 1): 1 up") {
		t.Errorf("lbctl gslb explain after the failover: want main with none up, then backup:\n%s", r.stdout)
	}

	budget = foRise*foInterval + foTimeout + foSlack
	mended := time.Now()
	main.open()
	took = waitFor("fo answering main's member again", hm.AddrV4().String()).Sub(mended)
	t.Logf("failback: the answer came back %v after the member listened again (budget rise × interval + timeout + 100ms = %v)", took.Round(time.Millisecond), budget)
	if took > budget {
		t.Errorf("failback took %v, more than %v", took.Round(time.Millisecond), budget)
	}
}
