package responder

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/monitor"
	"lbdns/testkit/poll"
)

// gslbConfig parses a configuration of one GSLB pool p with members
// named members (monitor c), its state in dir, the responder listening
// on 127.0.0.1:0 unless off.
func gslbConfig(t *testing.T, dir string, off bool, members ...string) *configs.Config {
	t.Helper()
	doc := fmt.Sprintf("[daemon]\nstate_dir = %q\n\n[check.c.dns]\nqname = \"example.com\"\n\n[[gslb.pool]]\nname = \"p\"\nmonitors = [\"c\"]\n", dir)
	for i, m := range members {
		doc += fmt.Sprintf("\n[[gslb.pool.member]]\nname = %q\naddress = \"192.0.2.%d\"\n", m, i+1)
	}
	if !off {
		doc += "\n[gslb.server]\nlisten = [\"127.0.0.1:0\"]\n"
	}
	cfg, err := configs.Parse([]byte(doc), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// tagBuilders build fakes whose www TXT tells the serial and the states
// of the members, and count the builds.
func tagBuilders(builds *int, mu *sync.Mutex) Builders {
	return Builders{Snapshot: func(in SnapshotInput) (gslb.Answerer, error) {
		mu.Lock()
		*builds++
		mu.Unlock()
		var states []string
		for _, p := range in.Pools {
			for _, m := range p.Members {
				states = append(states, m.Name+"="+m.State.String())
			}
		}
		if in.Locator == nil {
			return nil, fmt.Errorf("no locator")
		}
		return &fake{Tag: fmt.Sprintf("%d %s", in.Serial, strings.Join(states, ","))}, nil
	}}
}

// tag asks the responder at addr for www's TXT.
func tag(t *testing.T, addr string) string {
	t.Helper()
	r := exchange(t, addr, "udp", query("www."+zone, dns.TypeTXT, 0))
	if len(r.Answer) != 1 {
		t.Fatalf("www TXT: %v", r)
	}
	return r.Answer[0].(*dns.TXT).Txt[0]
}

func upStatus(state health.State) map[monitor.Key]monitor.TargetStatus {
	k := gslb.MonitorKey("p", "m1", "c")
	return map[monitor.Key]monitor.TargetStatus{k: {Key: k, Health: health.Status{State: state}}}
}

// TestResponderUpdate: a configuration opens the listeners and moves the
// serial; a member's state change rebuilds the snapshot under the same
// serial; nothing new rebuilds nothing; a new configuration moves the
// serial, and one without listeners closes them.
func TestResponderUpdate(t *testing.T) {
	dir := t.TempDir()
	var builds int
	var mu sync.Mutex
	reg := prometheus.NewRegistry()
	clock := time.Unix(1_800_000_000, 0)
	r := NewResponder(ResponderOptions{Registerer: reg, Now: func() time.Time { return clock }, Build: tagBuilders(&builds, &mu)})
	defer r.Stop(context.Background())

	cfg := gslbConfig(t, dir, false, "m1")
	if err := r.Update(cfg, gslb.Evaluate(cfg, nil, clock)); err != nil {
		t.Fatal(err)
	}
	if len(r.Addrs()) != 1 {
		t.Fatalf("Addrs = %v, want one", r.Addrs())
	}
	addr := r.Addrs()[0].String()
	if got := tag(t, addr); got != "1 m1=unknown" {
		t.Errorf("first snapshot %q", got)
	}
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Up), clock)); err != nil {
		t.Fatal(err)
	}
	if got := tag(t, addr); got != "1 m1=up" {
		t.Errorf("after m1 up: %q", got)
	}
	_ = r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Up), clock.Add(time.Second)))
	if builds != 2 {
		t.Errorf("%d builds, want 2 (no rebuild when nothing changed)", builds)
	}
	if v := metricValue(t, reg, "lbdns_gslb_snapshot_builds_total", "ok"); v != 2 {
		t.Errorf("builds metric %v, want 2", v)
	}

	// The same configuration loaded again: the serial stays.
	again := gslbConfig(t, dir, false, "m1")
	_ = r.Update(again, gslb.Evaluate(again, upStatus(health.Up), clock))
	if r.Serial() != 1 || r.Addrs()[0].String() != addr {
		t.Errorf("same configuration: serial %d addrs %v, want the serial and listeners kept", r.Serial(), r.Addrs())
	}
	// A member added: the serial moves.
	cfg2 := gslbConfig(t, dir, false, "m1", "m2")
	_ = r.Update(cfg2, gslb.Evaluate(cfg2, upStatus(health.Up), clock))
	if got := tag(t, addr); got != "2 m1=up,m2=unknown" {
		t.Errorf("after a member added: %q", got)
	}
	// Snapshot failures keep the last answers.
	r.o.Build.Snapshot = func(SnapshotInput) (gslb.Answerer, error) { return nil, fmt.Errorf("boom") }
	if err := r.Update(cfg2, gslb.Evaluate(cfg2, upStatus(health.Down), clock)); err == nil {
		t.Error("Update with a failing build succeeded")
	}
	if got := tag(t, addr); got != "2 m1=up,m2=unknown" {
		t.Errorf("after a failed build: %q", got)
	}
	// Off: the listeners close.
	r.o.Build.Snapshot = tagBuilders(&builds, &mu).Snapshot
	off := gslbConfig(t, dir, true, "m1", "m2")
	if err := r.Update(off, gslb.Evaluate(off, nil, clock)); err != nil || r.Addrs() != nil {
		t.Errorf("responder off: %v, addrs %v", err, r.Addrs())
	}
	c := &dns.Client{Timeout: 300 * time.Millisecond}
	if _, _, err := c.Exchange(query("www."+zone, dns.TypeTXT, 0), addr); err == nil {
		t.Error("still answering after the listeners closed")
	}
}

// TestResponderRun: Run builds from the hub's configuration, rebuilds on
// a new version of the facts and of the configuration, and closes its
// listeners when ctx ends; it publishes its state and the pools' states
// to the hub.
func TestResponderRun(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var builds int
	statuses := upStatus(health.Unknown)
	h := hub.New(func() hub.Facts { mu.Lock(); defer mu.Unlock(); return statuses })
	h.Config.Publish(gslbConfig(t, dir, false, "m1"))
	r := NewResponder(ResponderOptions{Hub: h, Build: tagBuilders(&builds, &mu)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	poll.Until(t, 5*time.Second, "responder listening", poll.True(func() bool { return len(r.Addrs()) == 1 }))
	addr := r.Addrs()[0].String()
	serial := r.Serial()
	if got := tag(t, addr); got != fmt.Sprint(serial, " m1=unknown") {
		t.Fatalf("first snapshot %q", got)
	}
	if st, _ := h.Responder.Load(); !st.On || len(st.Listeners) != 1 || !st.Listeners[0].Serving || st.Serial != serial {
		t.Errorf("the hub's responder state: %+v", st)
	}

	mu.Lock()
	statuses = upStatus(health.Up)
	mu.Unlock()
	h.Facts.Touch()
	poll.Until(t, 5*time.Second, "m1 up in the answers", func() (bool, string) {
		got := tag(t, addr)
		return got == fmt.Sprint(serial, " m1=up"), got
	})
	poll.Until(t, 5*time.Second, "m1 up in the hub's GSLB plan", poll.True(func() bool {
		p, _ := h.GSLB.Load()
		return len(p.Pools) == 1 && len(p.Pools[0].Members) == 1 && p.Pools[0].Members[0].State == health.Up
	}))

	h.Config.Publish(gslbConfig(t, dir, false, "m1", "m2"))
	poll.Until(t, 5*time.Second, "the reload in the answers", func() (bool, string) {
		addrs := r.Addrs()
		if len(addrs) != 1 {
			return false, "not listening"
		}
		got := tag(t, addrs[0].String())
		return got == fmt.Sprint(serial+1, " m1=up,m2=unknown"), got
	})

	cancel()
	<-done
	if r.Addrs() != nil {
		t.Errorf("still listening after Run returned: %v", r.Addrs())
	}
	if st, _ := h.Responder.Load(); len(st.Listeners) != 1 || st.Listeners[0].Serving {
		t.Errorf("the hub's responder state after the stop: %+v", st)
	}
}

// metricValue returns the value of the series of family name whose label
// values include label (0 when none).
func metricValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestResponderPrepare: the topology and hash that Prepare built are the
// ones the Update of that configuration uses (the Locator runs once, not
// again in Update); an Update of another configuration builds its own;
// a failed prepared topology fails that Update and keeps the last
// answers.
func TestResponderPrepare(t *testing.T) {
	dir := t.TempDir()
	var builds int
	var mu sync.Mutex
	clock := time.Unix(1_800_000_000, 0)
	build := tagBuilders(&builds, &mu)
	var located []*configs.Config
	fail := map[*configs.Config]bool{}
	build.Locator = func(cfg *configs.Config) (gslb.Locator, error) {
		mu.Lock()
		defer mu.Unlock()
		located = append(located, cfg)
		if fail[cfg] {
			return nil, fmt.Errorf("bad topology")
		}
		return DefaultBuilders().Locator(cfg)
	}
	r := NewResponder(ResponderOptions{Now: func() time.Time { return clock }, Build: build})
	defer r.Stop(context.Background())

	cfg := gslbConfig(t, dir, false, "m1")
	r.Prepare(cfg)
	if err := r.Update(cfg, gslb.Evaluate(cfg, nil, clock)); err != nil {
		t.Fatal(err)
	}
	addr := r.Addrs()[0].String()
	if got := tag(t, addr); got != "1 m1=unknown" {
		t.Errorf("prepared snapshot %q", got)
	}
	if len(located) != 1 || located[0] != cfg {
		t.Errorf("Locator ran for %d configurations, want once for cfg", len(located))
	}

	// Prepared for cfg2, updated to cfg3: cfg3 is built by Update.
	cfg2 := gslbConfig(t, dir, false, "m1", "m2")
	cfg3 := gslbConfig(t, dir, false, "m1", "m2", "m3")
	r.Prepare(cfg2)
	if err := r.Update(cfg3, gslb.Evaluate(cfg3, nil, clock)); err != nil {
		t.Fatal(err)
	}
	if got := tag(t, addr); got != "2 m1=unknown,m2=unknown,m3=unknown" {
		t.Errorf("cfg3 snapshot %q", got)
	}
	if len(located) != 3 || located[1] != cfg2 || located[2] != cfg3 {
		t.Errorf("Locator ran %d times, want 3 (cfg, cfg2 prepared, cfg3 in Update)", len(located))
	}

	// A prepared topology that failed: the Update fails, the answers stay.
	cfg4 := gslbConfig(t, dir, false, "m4")
	fail[cfg4] = true
	r.Prepare(cfg4)
	if err := r.Update(cfg4, gslb.Evaluate(cfg4, nil, clock)); err == nil || !strings.Contains(err.Error(), "bad topology") {
		t.Errorf("Update of a failed prepared topology: %v", err)
	}
	if got := tag(t, addr); got != "2 m1=unknown,m2=unknown,m3=unknown" {
		t.Errorf("after the failed topology: %q", got)
	}
	if len(located) != 4 {
		t.Errorf("Locator ran %d times, want 4 (cfg4 prepared only)", len(located))
	}
}

// TestResponderPrepareSnapshot: the snapshot Prepare built from the
// members' states and the intent of its time is the one the Update of
// that configuration serves, with the serial Update gives it; when the
// states Update is given are not those, or the intent changed in
// between, Update builds the snapshot again from its own.
func TestResponderPrepareSnapshot(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_800_000_000, 0)
	load := func(ttl int) *configs.Config { return wwwConfig(t, dir, ttl) }
	var mu sync.Mutex
	var builds int
	statuses := upStatus(health.Up) // what Prepare sees
	var said intent.State
	r := NewResponder(ResponderOptions{Now: func() time.Time { return clock },
		Statuses: func() map[monitor.Key]monitor.TargetStatus { mu.Lock(); defer mu.Unlock(); return statuses },
		Intent:   func() intent.State { mu.Lock(); defer mu.Unlock(); return said },
		Build: Builders{Snapshot: func(in SnapshotInput) (gslb.Answerer, error) {
			mu.Lock()
			builds++
			mu.Unlock()
			return DefaultBuilders().Snapshot(in)
		}}})
	defer r.Stop(context.Background())
	// www answers rcode and TTL "rcode/ttl" and the SOA serial.
	www := func(addr string) (string, uint32) {
		m := exchange(t, addr, "udp", query("www."+zone, dns.TypeA, 0))
		got := dns.RcodeToString[m.Rcode]
		if len(m.Answer) == 1 {
			got += fmt.Sprintf("/%d", m.Answer[0].Header().Ttl)
		}
		soa := exchange(t, addr, "udp", query(zone, dns.TypeSOA, 0))
		if len(soa.Answer) != 1 {
			t.Fatalf("SOA: %v", soa)
		}
		return got, soa.Answer[0].(*dns.SOA).Serial
	}

	cfg := load(30)
	r.Prepare(cfg)
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Up), clock)); err != nil {
		t.Fatal(err)
	}
	addr := r.Addrs()[0].String()
	if got, serial := www(addr); got != "NOERROR/30" || serial != 1 || builds != 1 {
		t.Errorf("prepared: www %s serial %d after %d builds, want NOERROR/30, 1, 1 build", got, serial, builds)
	}

	// The member went down after Prepare read the states.
	cfg = load(31)
	r.Prepare(cfg)
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Down), clock)); err != nil {
		t.Fatal(err)
	}
	if got, serial := www(addr); got != "SERVFAIL" || serial != 2 || builds != 3 {
		t.Errorf("states changed: www %s serial %d after %d builds, want SERVFAIL, 2, 3 builds", got, serial, builds)
	}

	// The same states, but a TTL raise said after Prepare read the intent.
	mu.Lock()
	statuses = upStatus(health.Down)
	mu.Unlock()
	cfg = load(32)
	r.Prepare(cfg)
	r.prepMu.Lock()
	p := r.prep
	r.prepMu.Unlock()
	<-p.done // built from the intent without the raise
	mu.Lock()
	said = intent.State{TTLRaises: []intent.TTLRaise{{Zone: zone, Seconds: 600}}}
	mu.Unlock()
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Down), clock)); err != nil {
		t.Fatal(err)
	}
	if got, serial := www(addr); got != "SERVFAIL" || serial != 3 || builds != 5 {
		t.Errorf("intent changed: www %s serial %d after %d builds, want SERVFAIL, 3, 5 builds", got, serial, builds)
	}
	soa := exchange(t, addr, "udp", query("nx."+zone, dns.TypeA, 0))
	if len(soa.Ns) != 1 || soa.Ns[0].(*dns.SOA).Serial != 3 {
		t.Errorf("NXDOMAIN authority %v, want the SOA of serial 3", soa.Ns)
	}

	// States and intent as Prepare saw them: its snapshot, raised TTL.
	mu.Lock()
	statuses = upStatus(health.Up)
	mu.Unlock()
	cfg = load(33)
	r.Prepare(cfg)
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Up), clock)); err != nil {
		t.Fatal(err)
	}
	if got, serial := www(addr); got != "NOERROR/600" || serial != 4 || builds != 6 {
		t.Errorf("prepared under the raise: www %s serial %d after %d builds, want NOERROR/600, 4, 6 builds", got, serial, builds)
	}
}

// wwwConfig is a configuration of one zone whose name www answers with
// TTL ttl from pool p (member m1, monitor c), SERVFAIL without a member
// up, its state in dir.
func wwwConfig(t *testing.T, dir string, ttl int) *configs.Config {
	t.Helper()
	doc := fmt.Sprintf(`[daemon]
state_dir = %q

[check.c.dns]
qname = "example.com"

[gslb.server]
listen = ["127.0.0.1:0"]

[[gslb.pool]]
name = "p"
monitors = ["c"]

[[gslb.pool.member]]
name = "m1"
address = "192.0.2.1"

[[gslb.zone]]
name = %q
ns = ["ns1.example.test."]

[[gslb.name]]
name = "www.example.test"
ttl = %d
last_resort = "servfail"

[[gslb.name.policy]]
pool = "p"
`, dir, zone, ttl)
	cfg, err := configs.Parse([]byte(doc), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestResponderRefreshPrepared: a refresh of the configuration Prepare
// built takes Prepare's members' states when the monitor's states have
// not changed since, and evaluates them again when they have; statuses
// are read again only when the monitor's states changed since the last
// read.
func TestResponderRefreshPrepared(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	var changes uint64
	var reads int
	cfg := wwwConfig(t, dir, 30)
	statuses := upStatus(health.Up)
	r := NewResponder(ResponderOptions{Now: func() time.Time { return clock },
		Config: func() *configs.Config { mu.Lock(); defer mu.Unlock(); return cfg },
		Statuses: func() map[monitor.Key]monitor.TargetStatus {
			mu.Lock()
			defer mu.Unlock()
			reads++
			return statuses
		},
		Changes: func() uint64 { mu.Lock(); defer mu.Unlock(); return changes },
	})
	defer r.Stop(context.Background())
	r.Refresh()
	addr := r.Addrs()[0].String()
	www := func() string {
		m := exchange(t, addr, "udp", query("www."+zone, dns.TypeA, 0))
		if len(m.Answer) == 1 {
			return fmt.Sprintf("%s/%d", dns.RcodeToString[m.Rcode], m.Answer[0].Header().Ttl)
		}
		return dns.RcodeToString[m.Rcode]
	}
	if got := www(); got != "NOERROR/30" || reads != 1 {
		t.Fatalf("first: www %s after %d reads", got, reads)
	}

	// Nothing changed since the first read: no read at all.
	next := wwwConfig(t, dir, 31)
	r.Prepare(next)
	mu.Lock()
	cfg = next
	mu.Unlock()
	r.Refresh()
	if got := www(); got != "NOERROR/31" || reads != 1 {
		t.Errorf("unchanged states: www %s after %d reads, want NOERROR/31 after 1", got, reads)
	}

	// The member went down after Prepare read the states: read again.
	next = wwwConfig(t, dir, 32)
	r.Prepare(next)
	r.prepMu.Lock()
	p := r.prep
	r.prepMu.Unlock()
	<-p.done
	mu.Lock()
	cfg, statuses, changes = next, upStatus(health.Down), changes+1
	mu.Unlock()
	r.Refresh()
	if got := www(); got != "SERVFAIL" || reads != 2 {
		t.Errorf("changed states: www %s after %d reads, want SERVFAIL after 2", got, reads)
	}
	mu.Lock()
	statuses = upStatus(health.Up) // a change the monitor did not count: not read
	mu.Unlock()
	r.Refresh()
	if got := www(); got != "SERVFAIL" || reads != 2 {
		t.Errorf("no change counted: www %s after %d reads, want SERVFAIL after 2", got, reads)
	}
	mu.Lock()
	changes++
	mu.Unlock()
	r.Refresh()
	if got := www(); got != "NOERROR/32" || reads != 3 {
		t.Errorf("a change counted: www %s after %d reads, want NOERROR/32 after 3", got, reads)
	}
}

// TestWaitIntent: WaitIntent returns once Run has updated under the
// intent version asked (not before, and not on an older one), and
// returns the context's error when no update comes.
func TestWaitIntent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hub.New(func() hub.Facts { return nil })
		h.Config.Publish(&configs.Config{})
		r := NewResponder(ResponderOptions{Hub: h})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		synctest.Wait()
		h.Intent.Publish(hub.Intent{Revision: 7})
		v := h.Intent.Version()
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		if err := r.WaitIntent(wctx, v); err != nil {
			t.Fatalf("WaitIntent(%d) after the publish: %v", v, err)
		}
		wcancel()
		short, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		if err := r.WaitIntent(short, v+1); err == nil {
			t.Fatalf("WaitIntent(%d) with no such version published: nil, want the deadline", v+1)
		}
		cancel()
		<-done
	})
}
