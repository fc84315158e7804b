package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/internal/lab/vendors"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
)

// quickstartWorld is the shipped quick start (configs/quickstart.toml) run
// by lbdns-quickstart as a process, on free ports and a temporary state
// directory: the only changes made to the shipped file.
type quickstartWorld struct {
	t            *testing.T
	socket, page string
	dnsPort      string
	out          *testlog.Buffer
	resolverPid  map[string]int
	memberPid    map[string]int
	cmd          *exec.Cmd
	done         chan struct{}
}

// quickstartConfig rewrites the shipped quick start's configuration onto
// free ports and dir, and returns the file's path and the new ports.
func quickstartConfig(t *testing.T, dir string) (path string, ports map[string]uint16) {
	t.Helper()
	b, err := os.ReadFile("../configs/quickstart.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	ports = map[string]uint16{}
	replace := func(old, new string) {
		if !strings.Contains(s, old) {
			t.Fatalf("configs/quickstart.toml has no %q any more: update this test with the walk-through", old)
		}
		s = strings.ReplaceAll(s, old, new)
	}
	free := func(name string) uint16 {
		p, err := vendors.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[name] = p
		return p
	}
	replace(`"/tmp/lbdns-quickstart`, `"`+dir)
	replace(`"127.0.0.1:9353"`, fmt.Sprintf(`"127.0.0.1:%d"`, free("page")))
	replace(`"127.0.0.1:5300"`, fmt.Sprintf(`"127.0.0.1:%d"`, free("gslb")))
	replace("port   = 5380", fmt.Sprintf("port   = %d", free("member")))
	for i, v := range []string{"bind", "unbound", "powerdns", "knot", "dnsmasq"} {
		replace(fmt.Sprintf(`"127.0.0.1:%d"`, 5301+i), fmt.Sprintf(`"127.0.0.1:%d"`, free(v)))
	}
	path = filepath.Join(dir, "quickstart.toml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, ports
}

// startQuickstart runs lbdns-quickstart over the rewritten configuration
// and waits until it prints the daemon's page line (every resolver and
// member started).
func startQuickstart(t *testing.T) *quickstartWorld {
	t.Helper()
	for _, v := range vendors.All() {
		if _, err := vendors.LookPath(v); err != nil {
			if os.Getenv("CI") == "true" || os.Getenv("LBDNS_REQUIRE_VENDORS") == "1" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	}
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skipf("dig not installed: %v", err)
	}
	dir := t.TempDir()
	cfg, ports := quickstartConfig(t, dir)
	q := &quickstartWorld{t: t, socket: filepath.Join(dir, "lbdns.sock"), page: fmt.Sprintf("http://127.0.0.1:%d/", ports["page"]),
		dnsPort: strconv.Itoa(int(ports["gslb"])), out: &testlog.Buffer{}, done: make(chan struct{})}
	q.cmd = exec.Command(binaries.quickstart, "-config", cfg, "-install=false")
	q.cmd.Stdout, q.cmd.Stderr = q.out, q.out
	q.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := q.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = q.cmd.Wait(); close(q.done) }()
	t.Cleanup(func() {
		_ = q.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-q.done:
		case <-time.After(30 * time.Second):
			_ = q.cmd.Process.Kill()
			<-q.done
			t.Error("the quick start did not stop within 30 s of SIGINT")
		}
		if t.Failed() {
			t.Logf("quick start output:\n%s", q.out.String())
		}
	})
	poll.Until(t, 90*time.Second, "the quick start printing where to look", func() (bool, string) {
		select {
		case <-q.done:
			t.Fatalf("the quick start exited:\n%s", q.out.String())
		default:
		}
		return strings.Contains(q.out.String(), "quickstart: gslb:    dig @127.0.0.1 -p "+q.dnsPort), "not yet"
	})
	q.resolverPid = pids(t, q.out.String(), `resolver (\w+) \(\w+\) pid (\d+)`)
	q.memberPid = pids(t, q.out.String(), `gslb member \w+/([\w-]+) pid (\d+)`)
	if len(q.resolverPid) != 5 || len(q.memberPid) != 4 {
		t.Fatalf("pids printed: resolvers %v, gslb members %v; want 5 and 4", q.resolverPid, q.memberPid)
	}
	return q
}

// pids reads NAME → pid from the quick start's output.
func pids(t *testing.T, out, re string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, s := range regexp.MustCompile(re).FindAllStringSubmatch(out, -1) {
		pid, err := strconv.Atoi(s[2])
		if err != nil {
			t.Fatal(err)
		}
		m[s[1]] = pid
	}
	return m
}

// lbctl runs lbctl with the quick start's socket, as the README writes it
// (-socket first).
func (q *quickstartWorld) lbctl(args ...string) result {
	q.t.Helper()
	return run(q.t, binaries.lbctl, append([]string{"-socket", q.socket}, args...)...)
}

// mustLbctl is lbctl that fails the test unless it exits 0.
func (q *quickstartWorld) mustLbctl(args ...string) string {
	q.t.Helper()
	r := q.lbctl(args...)
	if r.code != 0 {
		q.t.Fatalf("lbctl %q: %s", args, r)
	}
	return r.stdout
}

// dig runs dig at the responder with the README's options and returns
// the answer's addresses (sorted) and TTL.
func (q *quickstartWorld) dig(name string, opts ...string) (addrs []string, ttl int, out string) {
	q.t.Helper()
	args := append([]string{"@127.0.0.1", "-p", q.dnsPort, name, "+tries=1", "+time=2"}, opts...)
	r := run(q.t, "dig", args...)
	for _, m := range digRR.FindAllStringSubmatch(r.stdout, -1) {
		ttl, _ = strconv.Atoi(m[1])
		addrs = append(addrs, m[2])
	}
	slices.Sort(addrs)
	return addrs, ttl, r.stdout
}

// waitDig polls dig until its answer is want.
func (q *quickstartWorld) waitDig(what, name string, want []string, opts ...string) {
	q.t.Helper()
	poll.Until(q.t, 30*time.Second, what, func() (bool, string) {
		got, _, out := q.dig(name, opts...)
		return slices.Equal(got, want), out
	})
}

// getPage returns the status page's HTML.
func (q *quickstartWorld) getPage() string {
	q.t.Helper()
	resp, err := http.Get(q.page)
	if err != nil {
		q.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		q.t.Fatal(err)
	}
	return string(b)
}

// TestQuickstartWalkThrough follows the README's walk-through on the
// shipped quick start: the resolver steps (status, the page, a killed
// resolver leaving, drain and enable) and the GSLB steps (dig with and
// without +subnet getting each region's answer, the static name and
// whoami, lbctl gslb explain, a member stopped with kill -STOP and the
// answer moving, kill -CONT bringing it back, lbctl gslb off with static
// answers and the page's banner, on, a TTL raise and its clearing), and
// the summary of the broken quick start (east's members stopped, a
// resolver killed) first on the page and in lbctl status.
func TestQuickstartWalkThrough(t *testing.T) {
	q := startQuickstart(t)
	const www, api = "www.gslb.quickstart.test", "api.gslb.quickstart.test"

	// 1. Status: the pool healthy with 5 of 5, DRY RUN said.
	poll.Until(t, 90*time.Second, "pool local healthy with 5 of 5 and every GSLB member up", func() (bool, string) {
		st, err := control.NewClient(q.socket).Status(t.Context())
		if err != nil {
			return false, err.Error()
		}
		up := 0
		for _, p := range st.GSLB {
			up += p.Up
		}
		return len(st.Pools) == 1 && st.Pools[0].Healthy == 5 && up == 4, fmt.Sprintf("pools %+v, gslb members up %d", st.Pools, up)
	})
	if out := q.mustLbctl("status"); !strings.Contains(out, "DRY RUN") || !strings.Contains(out, "pool local (check recursive): healthy, 5 of 5 up") {
		t.Errorf("lbctl status:\n%s", out)
	}
	// Flags after the command, as well.
	run(t, binaries.lbctl, "status", "-socket", q.socket)

	// 2. The page.
	page := q.getPage()
	for _, want := range []string{"pool local", "GSLB responder", `<h2 id="events">Recent events`, `data-kind="state"`, `<div id="legend">`, `lbdnsd <span id="daemon-version">`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if st, err := control.NewClient(q.socket).Status(t.Context()); err != nil || !strings.Contains(st.Daemon.Version, " rev ") {
		t.Errorf("/status has no daemon version: %v", err)
	}

	// GSLB: dig without ECS is answered for the loopback (west), with
	// +subnet in 10.1.0.0/16 for east.
	q.waitDig("www without ECS: west-1", www, []string{"127.0.0.21"})
	q.waitDig("www with +subnet=10.1.2.3/32: east-1", www, []string{"127.0.0.11"}, "+subnet=10.1.2.3/32")
	if _, _, out := q.dig(www, "+subnet=10.1.2.3/32"); !strings.Contains(out, "CLIENT-SUBNET: 10.1.2.3/32/16") {
		t.Errorf("www with ECS: the reply's scope is not /16:\n%s", out)
	}
	q.waitDig("api (no ECS) with +subnet: still west", api, []string{"127.0.0.21"}, "+subnet=10.1.2.3/32")
	if got, _, out := q.dig("static.gslb.quickstart.test"); !slices.Equal(got, []string{"127.0.0.80"}) {
		t.Errorf("static name: %v\n%s", got, out)
	}
	if _, _, out := q.dig("whoami.gslb.quickstart.test", "TXT", "+short", "+subnet=10.1.2.3/32"); !strings.Contains(out, `"resolver=127.0.0.1 ecs=10.1.2.3/32"`) {
		t.Errorf("whoami:\n%s", out)
	}
	ex := q.mustLbctl("gslb", "explain", www, "--ecs", "10.1.2.3")
	for _, want := range []string{"location:    region=east from 10.1.0.0/16", "1. region=east: matched, ANSWERED", "answer:      127.0.0.11"} {
		if !strings.Contains(ex, want) {
			t.Errorf("gslb explain lacks %q:\n%s", want, ex)
		}
	}

	// Stop east-1: east's answer moves to east-2; start it: back.
	east1 := q.memberPid["east-1"]
	if err := syscall.Kill(east1, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	q.waitDig("east-1 stopped: east-2 answers", www, []string{"127.0.0.12"}, "+subnet=10.1.2.3/32")
	if err := syscall.Kill(east1, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	q.waitDig("east-1 started again: east-1 answers", www, []string{"127.0.0.11"}, "+subnet=10.1.2.3/32")

	// lbctl gslb off: the static set, the page's banner; on: dynamic.
	q.mustLbctl("gslb", "off", "--name", www, "--reason", "quick start")
	q.waitDig("gslb off: the static set", www, []string{"127.0.0.11", "127.0.0.21"}, "+subnet=10.1.2.3/32")
	if page := q.getPage(); !strings.Contains(page, "GSLB EMERGENCY: intelligent resolution OFF for name "+www) {
		t.Errorf("the page has no emergency banner for %s", www)
	}
	if out := q.mustLbctl("gslb", "status"); !strings.Contains(out, "OFF") {
		t.Errorf("gslb status does not say OFF:\n%s", out)
	}
	q.mustLbctl("gslb", "on")
	q.waitDig("gslb on: dynamic again", www, []string{"127.0.0.11"}, "+subnet=10.1.2.3/32")

	// A TTL raise, then its clearing.
	q.mustLbctl("gslb", "ttl", "300", "--name", www, "--reason", "quick start")
	poll.Until(t, 10*time.Second, "TTL 300", func() (bool, string) {
		_, ttl, out := q.dig(www)
		return ttl == 300, out
	})
	q.mustLbctl("gslb", "ttl", "--clear", "--name", www)
	poll.Until(t, 10*time.Second, "TTL 30 again", func() (bool, string) {
		_, ttl, out := q.dig(www)
		return ttl == 30, out
	})

	// 3. Kill one resolver and watch it leave.
	if err := syscall.Kill(q.resolverPid["unbound"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "unbound down, the pool degraded with 4 of 5", func() (bool, string) {
		st, err := control.NewClient(q.socket).Status(t.Context())
		if err != nil {
			return false, err.Error()
		}
		p := st.Pools[0]
		return p.Healthy == 4 && p.Diagnosis == "degraded", fmt.Sprintf("%s %d", p.Diagnosis, p.Healthy)
	})

	// The summary, first on the page and in lbctl status: with east's
	// two members stopped too, east is down and its clients go to west
	// (critical, first), the pool runs on 4 of 5 (minor), a dry run.
	if out := q.mustLbctl("status"); !strings.HasPrefix(out, "MINOR  pool local: 4 of 5 resolvers healthy") {
		t.Errorf("lbctl status does not start with the pool's incident:\n%s", out)
	}
	for _, m := range []string{"east-1", "east-2"} {
		if err := syscall.Kill(q.memberPid[m], syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 60*time.Second, "the summary: east down, answered from west, first", func() (bool, string) {
		st, err := control.NewClient(q.socket).Status(t.Context())
		if err != nil {
			return false, err.Error()
		}
		s := st.Summary
		return len(s) >= 3 && s[0].Severity == "critical" && strings.Contains(s[0].Summary, "GSLB pool east DOWN: 0 of 2 members up") &&
			strings.Contains(s[0].Effect, "answered from pool west") && strings.Contains(s[1].Summary, "pool local: 4 of 5 resolvers healthy") &&
			s[len(s)-1].What == "dry run", fmt.Sprintf("%+v", s)
	})
	out := q.mustLbctl("status")
	first := strings.SplitN(out, "\n", 2)[0]
	if !strings.HasPrefix(first, "CRITICAL  GSLB pool east DOWN: 0 of 2 members up") || !strings.Contains(first, "answered from pool west") || !strings.Contains(first, " ago)") {
		t.Errorf("lbctl status's first line: %q", first)
	}
	page = q.getPage()
	at := strings.Index(page, `<div class="incident critical" data-what="GSLB pool east">`)
	if at < 0 || at > strings.Index(page, "<table") || !strings.Contains(page[at:], "answered from pool west") {
		t.Errorf("the page does not start with east's incident")
	}
	for _, m := range []string{"east-1", "east-2"} {
		if err := syscall.Kill(q.memberPid[m], syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	q.waitDig("east started again: east-1 answers", www, []string{"127.0.0.11"}, "+subnet=10.1.2.3/32")

	// 4. Drain and enable.
	q.mustLbctl("drain", "bind", "--reason", "disk full")
	st, err := control.NewClient(q.socket).Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Pools[0]; p.Healthy != 3 {
		t.Errorf("after drain: pool healthy %d, want 3 (bind drained, unbound down)", p.Healthy)
	}
	if page := q.getPage(); !strings.Contains(page, "disk full") {
		t.Error("the page does not list the drain under its overrides")
	}
	q.mustLbctl("enable", "bind")
	if events := q.mustLbctl("events"); !strings.Contains(events, "unbound") {
		t.Errorf("lbctl events does not list unbound's change:\n%s", events)
	}

	// Every metric the daemon exports is in the metrics guide.
	resp, err := http.Get(strings.TrimSuffix(q.page, "/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	undocumented := undocumentedMetrics(t, string(metrics))
	if len(undocumented) > 0 {
		t.Errorf("metrics exported but not in docs/status-and-metrics.md: %q", undocumented)
	}
}

// undocumentedMetrics returns the lbdns_ metric families of the
// exposition text that the metrics guide's table does not name.
func undocumentedMetrics(t *testing.T, exposition string) []string {
	t.Helper()
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (lbdns_\S+) `).FindAllStringSubmatch(exposition, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Error("the exposition has no lbdns_ metric at all")
	}
	return undocumented(t, names)
}

// undocumented returns the lbdns_ metric family names of names that the
// metrics guide's table does not name (it names them without the prefix,
// in backquotes), sorted.
func undocumented(t *testing.T, names []string) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/status-and-metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if short, ok := strings.CutPrefix(n, "lbdns_"); ok && !strings.Contains(string(doc), "`"+short+"`") {
			out = append(out, short)
		}
	}
	slices.Sort(out)
	return out
}
