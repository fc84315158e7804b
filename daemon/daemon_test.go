package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/monitor"
	"lbdns/probes"
	"lbdns/resolvers"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
	"lbdns/testkit/vipfake"
	"lbdns/vip"
)

// fakeProbe answers by target address: healthy unless marked down.
type fakeProbe struct {
	mu   sync.Mutex
	down map[netip.AddrPort]bool
}

func (f *fakeProbe) set(a string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[netip.MustParseAddrPort(a)] = down
}

func (f *fakeProbe) probe(_ context.Context, t netip.AddrPort, _ *configs.Check) probes.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[t] {
		return probes.Result{Detail: "rcode SERVFAIL", RTT: time.Millisecond}
	}
	return probes.Result{OK: true, Detail: "NXDOMAIN", RTT: time.Millisecond}
}

func noIdentify(context.Context, netip.AddrPort) (string, error) { return "", fmt.Errorf("not asked") }

const testConfig = `
[daemon]
state_dir = %[1]q
control_socket = "%[1]s/ctl.sock"
status_listen = "127.0.0.1:0"

[ipvs]
resync_interval = "1s"

[[vip]]
name = "v4"
address = "192.0.2.53"
forwarding = "nat"
pool = "main"

[[pool]]
name = "main"
members = ["bind-1", "unbound-1", "knot-1"]
check = "rec"

[[resolver]]
name = "bind-1"
address = "127.0.0.1:5301"
vendor = "bind"

[[resolver]]
name = "unbound-1"
address = "127.0.0.1:5302"
vendor = "unbound"

[[resolver]]
name = "knot-1"
address = "127.0.0.1:5303"
vendor = "knot"
%s
[check.rec]
interval = "100ms"
timeout = "50ms"
rise = 1
fall = 2

[check.rec.dns]
zone = "lbdns.test"
`

func writeConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	p := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(testConfig, filepath.Join(dir, "state"), extra)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type harness struct {
	d      *Daemon
	probe  *fakeProbe
	client *vip.MemClient
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func start(t *testing.T, path string, client *vip.MemClient, fp *fakeProbe) *harness {
	t.Helper()
	return startOpts(t, Options{ConfigPath: path, Client: client, Probe: fp.probe}, fp)
}

// startOpts runs a daemon of opts (its probe fp's, its IPVS client a
// *vip.MemClient, no vendor identification, ticks of 50ms) until the
// test ends.
func startOpts(t *testing.T, opts Options, fp *fakeProbe) *harness {
	t.Helper()
	opts.Identify, opts.TickInterval = noIdentify, 50*time.Millisecond
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return run(t, d, fp, opts.Client.(*vip.MemClient))
}

// run runs d until the test ends (or h.stop); fp and client are the
// probe and the IPVS client d was built with, for the test to reach.
func run(t testing.TB, d *Daemon, fp *fakeProbe, client *vip.MemClient) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{d: d, probe: fp, client: client, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- d.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.once.Do(func() {
		h.cancel()
		<-h.done
	})
}

var svcUDP = vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.53"), Port: 53, Proto: vip.UDP}

// waitDests waits until the kernel (mem) table's UDP service has exactly
// the given destinations.
func waitDests(t *testing.T, c *vip.MemClient, want ...string) {
	t.Helper()
	poll.Until(t, 5*time.Second, fmt.Sprintf("destinations %v", want), func() (bool, string) {
		var got []string
		if s, ok := c.Table()[svcUDP]; ok {
			for a := range s.Dests {
				got = append(got, a.String())
			}
		}
		return sameSet(got, want), fmt.Sprint(got)
	})
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}

func TestHealthDrivesTable(t *testing.T) {
	dir := t.TempDir()
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	h := start(t, writeConfig(t, dir, ""), mc, fp)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")

	fp.set("127.0.0.1:5302", true)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5303")
	if p := h.d.Plan(); p.Pools[0].Diagnosis != resolvers.Degraded {
		t.Errorf("diagnosis = %s, want degraded", p.Pools[0].Diagnosis)
	}

	fp.set("127.0.0.1:5302", false)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")

	// Every member fails at once: the pool fails open, nothing is removed.
	for _, a := range []string{"127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303"} {
		fp.set(a, true)
	}
	poll.Until(t, 5*time.Second, "pool failing open on an upstream failure", func() (bool, string) {
		p := h.d.Plan().Pools[0]
		return p.Diagnosis == resolvers.Upstream && p.FailOpen, fmt.Sprintf("diagnosis %s, fail-open %v", p.Diagnosis, p.FailOpen)
	})
	if p := h.d.Plan(); p.Pools[0].Diagnosis != resolvers.Upstream || !p.Pools[0].FailOpen {
		t.Fatalf("diagnosis = %s fail-open %v, want upstream-failure, fail-open", p.Pools[0].Diagnosis, p.Pools[0].FailOpen)
	}
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
}

func TestDriftRepairedAndUnownedUntouched(t *testing.T) {
	dir := t.TempDir()
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	other := vip.Service{Key: vip.ServiceKey{Addr: netip.MustParseAddr("198.51.100.1"), Port: 80, Proto: vip.TCP}, Scheduler: "rr"}
	if err := mc.CreateService(other); err != nil {
		t.Fatal(err)
	}
	start(t, writeConfig(t, dir, ""), mc, fp)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")

	// Someone deletes a destination by hand; the periodic resync restores it.
	if err := mc.DeleteDestination(svcUDP, netip.MustParseAddrPort("127.0.0.1:5301")); err != nil {
		t.Fatal(err)
	}
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
	if _, ok := mc.Table()[other.Key]; !ok {
		t.Fatal("unowned service was removed")
	}
}

func TestRestartAdoptsTable(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{netip.MustParseAddrPort("127.0.0.1:5303"): true}}
	mc := vip.NewMemClient()
	h := start(t, path, mc, fp)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302")
	h.stop()
	if len(mc.Table()) != 2 {
		t.Fatalf("stop changed the table: %v", mc.Table())
	}

	// A new daemon over the same table applies nothing once it has
	// re-learned the same health.
	counting := vipfake.NewCountingClient(mc)
	d, err := New(Options{ConfigPath: path, Client: counting, Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	// Run past the warm-up: its end is a full resync of the table (the
	// loop finishes that round before it sees the cancel).
	poll.Until(t, 5*time.Second, "restarted daemon warm, kernel table read", func() (bool, string) {
		return d.Plan().Warm && counting.Counts().Services > 0, fmt.Sprintf("warm %v, %+v", d.Plan().Warm, counting.Counts())
	})
	cancel()
	<-done
	c := counting.Counts()
	if c.Services == 0 {
		t.Fatal("restarted daemon never read the kernel table")
	}
	if c.Writes != 0 {
		t.Fatalf("restart wrote %d operations to an already correct table", c.Writes)
	}
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	h := start(t, path, mc, fp)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
	before := h.d.Monitor().Status()[resolvers.MonitorKey("bind-1", "rec")].Health

	t.Run("bad config rejected whole", func(t *testing.T) {
		bad := strings.Replace(fmt.Sprintf(testConfig, filepath.Join(dir, "state"), ""), `vendor = "knot"`, `vendor = "knotty"`, 1)
		bad = strings.Replace(bad, `rise = 1`, `rise = 0`, 1)
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		err := h.d.Reload(context.Background())
		if err == nil {
			t.Fatal("bad config accepted")
		}
		for _, want := range []string{"vendor", "knotty", "rise"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if n := len(h.d.Config().Resolvers); n != 3 {
			t.Errorf("running config changed: %d resolvers", n)
		}
	})

	t.Run("good config keeps health of unchanged targets", func(t *testing.T) {
		extra := "\n[[resolver]]\nname = \"pdns-1\"\naddress = \"127.0.0.1:5304\"\nvendor = \"powerdns\"\n"
		good := strings.Replace(fmt.Sprintf(testConfig, filepath.Join(dir, "state"), extra), `"knot-1"]`, `"knot-1", "pdns-1"]`, 1)
		if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := h.d.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		after := h.d.Monitor().Status()[resolvers.MonitorKey("bind-1", "rec")].Health
		if after.State != health.Up || !after.Since.Equal(before.Since) {
			t.Errorf("bind-1 health reset by reload: before %v since %v, after %v since %v", before.State, before.Since, after.State, after.Since)
		}
		waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303", "127.0.0.1:5304")
	})
}

func TestDryRunWritesTable(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, DryRun: true, Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	file := filepath.Join(dir, "state", "dry-run-table.txt")
	poll.Until(t, 5*time.Second, "dry-run table complete", func() (bool, string) {
		b, err := os.ReadFile(file)
		return err == nil && strings.Count(string(b), "->") >= 6+1, fmt.Sprintf("%v:\n%s", err, b)
	})
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "NOT applied") {
		t.Fatalf("dry-run table not labelled:\n%s", b)
	}
}

func TestIdentityMismatchWarns(t *testing.T) {
	dir := t.TempDir()
	var buf testlog.Buffer
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	identify := func(_ context.Context, a netip.AddrPort) (string, error) {
		switch a.Port() {
		case 5301: // declared bind
			return "unbound 1.17.1", nil
		case 5302: // declared unbound
			return "unbound 1.17.1", nil
		}
		return "", fmt.Errorf("rcode SERVFAIL") // knot, as Knot Resolver answers
	}
	d, err := New(Options{ConfigPath: writeConfig(t, dir, ""), Client: vip.NewMemClient(), Probe: fp.probe, Identify: identify,
		TickInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 5*time.Second, "bind-1's mismatch and unbound-1 logged", func() (bool, string) {
		out := buf.String()
		return strings.Contains(out, "another vendor") && strings.Contains(out, "resolver=unbound-1"), out
	})
	out := buf.String()
	if !strings.Contains(out, `msg="backend identifies as another vendor than configured" resolver=bind-1`) ||
		!strings.Contains(out, "identified=unbound configured=bind") {
		t.Fatalf("no mismatch warning for bind-1 in log:\n%s", out)
	}
	if !strings.Contains(out, `msg="backend identified" resolver=unbound-1 addr=127.0.0.1:5302 version="unbound 1.17.1" vendor=unbound`) {
		t.Errorf("unbound-1 not logged as identified:\n%s", out)
	}
	if strings.Contains(out, `identified" resolver=knot-1`) || strings.Contains(out, `configured" resolver=knot-1`) {
		t.Errorf("knot-1 gave no version but something was logged for it:\n%s", out)
	}
}

func TestRemovedVIPDeletedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	hand := vip.Service{Key: vip.ServiceKey{Addr: netip.MustParseAddr("198.51.100.1"), Port: 53, Proto: vip.UDP}, Scheduler: "rr"}
	if err := mc.CreateService(hand); err != nil {
		t.Fatal(err)
	}
	h := start(t, path, mc, fp)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
	h.stop()

	// While the daemon is down, the operator moves the VIP to another
	// address. The restarted daemon deletes the old VIP's services (it
	// owned them) and leaves the hand-made one alone.
	moved := strings.Replace(fmt.Sprintf(testConfig, filepath.Join(dir, "state"), ""), `address = "192.0.2.53"`, `address = "192.0.2.54"`, 1)
	if err := os.WriteFile(path, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, path, mc, fp)
	newUDP := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.54"), Port: 53, Proto: vip.UDP}
	// The owned file is written after the reconcile that changed the
	// table, so wait for both.
	ownedPath := filepath.Join(dir, "state", vip.OwnedFile)
	pruned := func(b []byte) bool {
		return !strings.Contains(string(b), "192.0.2.53") && strings.Contains(string(b), "udp/192.0.2.54:53")
	}
	poll.Until(t, 5*time.Second, "old VIP deleted, new one created, owned file pruned", func() (bool, string) {
		tab := mc.Table()
		_, oldThere := tab[svcUDP]
		_, newThere := tab[newUDP]
		b, _ := os.ReadFile(ownedPath)
		return !oldThere && newThere && pruned(b), fmt.Sprintf("old %v, new %v, owned file:\n%s", oldThere, newThere, b)
	})
	tab := mc.Table()
	if _, ok := tab[svcUDP]; ok {
		t.Errorf("old VIP service %s still in the table after restart", svcUDP)
	}
	if _, ok := tab[newUDP]; !ok {
		t.Errorf("new VIP service %s missing", newUDP)
	}
	if _, ok := tab[hand.Key]; !ok {
		t.Errorf("hand-made service %s was removed", hand.Key)
	}
	b, err := os.ReadFile(ownedPath)
	if err != nil {
		t.Fatal(err)
	}
	if !pruned(b) {
		t.Errorf("owned file not pruned:\n%s", b)
	}
}

// TestOnEventDoesNotBlockShutdown: once Run is stopping, a monitor event
// arriving with the queue full must not block the monitor (which Run waits
// for): that was a shutdown deadlock under load.
func TestOnEventDoesNotBlockShutdown(t *testing.T) {
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: writeConfig(t, t.TempDir(), ""), Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify})
	if err != nil {
		t.Fatal(err)
	}
	for len(d.events) < cap(d.events) {
		d.events <- monitor.Event{Key: resolvers.MonitorKey("x", "rec")}
	}
	close(d.stopping)
	returned := make(chan struct{})
	go func() {
		d.onEvent(monitor.Event{Key: resolvers.MonitorKey("y", "rec")})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("onEvent blocked on a full queue while stopping")
	}
}
