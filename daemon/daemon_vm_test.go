//go:build ipvsvm

package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/daemon"
	"lbdns/internal/ipvsvm"
	"lbdns/internal/testlog"
)

// Back-end behaviours, switched at run time by the test.
const (
	modeOK       int32 = iota // answer correctly
	modeServfail              // answer every query with SERVFAIL
	modeSilent                // answer nothing
)

// vmWho is the fixed name every back end answers with a TXT record holding
// its own name; vmZone is the check zone, under which back ends answer
// NXDOMAIN.
const (
	vmWho  = "who.vm.test."
	vmZone = "vm.test."
)

// vmBackend is a DNS server on one real-server address inside the VM.
type vmBackend struct {
	name string
	mode atomic.Int32
	// hits counts the vmWho queries it answered with its name.
	hits atomic.Int64
}

func (b *vmBackend) serveDNS(w dns.ResponseWriter, q *dns.Msg) {
	mode := b.mode.Load()
	if mode == modeSilent || len(q.Question) != 1 {
		return
	}
	m := new(dns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	qq := q.Question[0]
	name := strings.ToLower(qq.Name)
	switch {
	case mode == modeServfail:
		m.Rcode = dns.RcodeServerFailure
	case qq.Qclass == dns.ClassCHAOS && name == "version.bind.":
		m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS}, Txt: []string{"lbdns-vm-backend"}}}
	case name == vmWho && qq.Qtype == dns.TypeTXT:
		b.hits.Add(1)
		m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 0}, Txt: []string{b.name}}}
	case dns.IsSubDomain(vmZone, name):
		m.Rcode = dns.RcodeNameError
	default:
		m.Rcode = dns.RcodeRefused
	}
	w.WriteMsg(m)
}

// startVMBackend serves UDP and TCP DNS on a until the test ends. The
// sockets are bound before it returns, so no start-up wait is needed.
func startVMBackend(t *testing.T, a netip.AddrPort) *vmBackend {
	t.Helper()
	b := &vmBackend{name: a.Addr().String()}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", b.serveDNS)
	pc, err := net.ListenPacket("udp", a.String())
	if err != nil {
		t.Fatalf("listen udp %s: %v", a, err)
	}
	ln, err := net.Listen("tcp", a.String())
	if err != nil {
		t.Fatalf("listen tcp %s: %v", a, err)
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: mux}, {Listener: ln, Handler: mux, ReadTimeout: 2 * time.Second}} {
		go srv.ActivateAndServe()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.ShutdownContext(ctx)
		})
	}
	return b
}

// vmDaemon is one real daemon (kernel IPVS client, real DNS probes) run by
// the test, with its logs captured.
type vmDaemon struct {
	d      *daemon.Daemon
	logs   *testlog.Buffer
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startVMDaemon(t *testing.T, name, path string) *vmDaemon {
	t.Helper()
	logs := &testlog.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("daemon", name)
	d, err := daemon.New(daemon.Options{ConfigPath: path, Logger: log, TickInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("daemon.New (%s): %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	v := &vmDaemon{d: d, logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { v.done <- d.Run(ctx) }()
	t.Cleanup(func() {
		v.stop(t)
		if t.Failed() {
			t.Logf("logs of daemon %s:\n%s", name, logs)
		}
	})
	return v
}

// stop cancels the daemon's context and waits (bounded) for Run to return.
func (v *vmDaemon) stop(t *testing.T) {
	t.Helper()
	v.once.Do(func() {
		v.cancel()
		select {
		case err := <-v.done:
			if err != nil {
				t.Errorf("Run returned %v after stop", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("daemon did not stop within 10s")
		}
	})
}

// waitFor polls cond every 100ms until it holds or timeout passes; then it
// fails t with what and cond's last detail.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last: %s", what, timeout, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// destsOf returns the sorted destinations of service key ("-u ADDR:PORT")
// in tab; nil when the service is absent.
func destsOf(tab ipvsvm.Table, key string) []string {
	s, ok := tab[key]
	if !ok {
		return nil
	}
	out := []string{}
	for a := range s.Dests {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// waitDests waits until every service in keys has exactly the destinations
// want (in "ADDR:PORT" form, any order) in the kernel's table.
func waitDests(t *testing.T, keys []string, want []string, timeout time.Duration) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	waitFor(t, fmt.Sprintf("services %v with destinations %v", keys, want), timeout, func() (bool, string) {
		tab := ipvsvm.Dump(t)
		for _, k := range keys {
			if got := destsOf(tab, k); !slices.Equal(got, want) {
				return false, fmt.Sprintf("%s has %v\n%s", k, got, tab)
			}
		}
		return true, ""
	})
}

// askVIP sends n TXT queries for vmWho to v over network, each from a new
// socket (so IPVS schedules each afresh), and returns how many each back
// end answered. Every query must be answered with exactly one TXT record.
func askVIP(t *testing.T, network string, v netip.AddrPort, n int) map[string]int {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	got := map[string]int{}
	for i := range n {
		q := new(dns.Msg)
		q.SetQuestion(vmWho, dns.TypeTXT)
		r, _, err := c.Exchange(q, v.String())
		if err != nil {
			t.Fatalf("%s query %d to %s: %v", network, i, v, err)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("%s query %d to %s: rcode %s, %d answers, want NOERROR with 1", network, i, v, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		txt, ok := r.Answer[0].(*dns.TXT)
		if !ok || len(txt.Txt) != 1 {
			t.Fatalf("%s query %d to %s: answer %v", network, i, v, r.Answer[0])
		}
		got[txt.Txt[0]]++
	}
	return got
}

// answeredBy asks the VIP over UDP and TCP and fails t unless the set of
// answering back ends is exactly want.
func answeredBy(t *testing.T, v netip.AddrPort, want ...string) {
	t.Helper()
	slices.Sort(want)
	const queries = 30
	for _, network := range []string{"udp", "tcp"} {
		got := askVIP(t, network, v, queries)
		names := slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(names, want) {
			t.Errorf("%s queries to %s answered by %v, want exactly %v", network, v, got, want)
		}
	}
}

// vmConfigTmpl is the daemon config of the test: %[1]s state dir, %[2]s
// extra members of pool p4, %[3]s extra resolvers.
const vmConfigTmpl = `
[daemon]
state_dir = %[1]q
control_socket = "%[1]s/ctl.sock"
status_listen = "127.0.0.1:0"
log_level = "debug"

[ipvs]
resync_interval = "1s"

[[vip]]
name = "v4"
address = "10.255.0.53"
forwarding = "nat"
scheduler = "rr"
interface = "lbdns0"
pool = "p4"

[[vip]]
name = "v6"
address = "fd00::53"
forwarding = "nat"
scheduler = "rr"
interface = "lbdns0"
pool = "p6"

[[pool]]
name = "p4"
members = ["r4-1", "r4-2", "r4-3"%[2]s]
check = "rec"

[[pool]]
name = "p6"
members = ["r6-1", "r6-2", "r6-3"]
check = "rec"

[[resolver]]
name = "r4-1"
address = "10.255.1.1:53"
vendor = "bind"

[[resolver]]
name = "r4-2"
address = "10.255.1.2:53"
vendor = "unbound"

[[resolver]]
name = "r4-3"
address = "10.255.1.3:53"
vendor = "knot"

[[resolver]]
name = "r6-1"
address = "[fd00::1:1]:53"
vendor = "bind"

[[resolver]]
name = "r6-2"
address = "[fd00::1:2]:53"
vendor = "unbound"

[[resolver]]
name = "r6-3"
address = "[fd00::1:3]:53"
vendor = "knot"
%[3]s
[check.rec]
interval = "400ms"
timeout = "300ms"
rise = 2
fall = 2

[check.rec.dns]
zone = "vm.test"
`

func writeVMConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVMDaemonEndToEnd runs the real daemon (kernel IPVS client, real DNS
// probes, VIP addresses) inside the VM against three DNS back ends per
// family, and checks the kernel's table (read with ipvsadm) and the data
// path through the VIPs as back ends fail and recover, as the table drifts
// by hand, across a restart, and across reloads.
func TestVMDaemonEndToEnd(t *testing.T) {
	ipvsvm.Require(t)
	ipvsvm.Run(t, "ipvsadm", "-C")
	t.Cleanup(func() { ipvsvm.Run(t, "ipvsadm", "-C") })

	// --- setup: interface, real-server addresses, back ends, config ---
	ipvsvm.Sh(t, "ip link add lbdns0 type dummy && ip link set lbdns0 up")
	t.Cleanup(func() { ipvsvm.Sh(t, "ip link del lbdns0") })
	for i := 1; i <= 4; i++ {
		ipvsvm.Sh(t, fmt.Sprintf("ip addr add 10.255.1.%d/32 dev lbdns0 && ip addr add fd00::1:%d/128 dev lbdns0", i, i))
	}
	vip4 := netip.MustParseAddrPort("10.255.0.53:53")
	vip6 := netip.MustParseAddrPort("[fd00::53]:53")
	b4 := map[int]*vmBackend{}
	b6 := map[int]*vmBackend{}
	for i := 1; i <= 3; i++ {
		b4[i] = startVMBackend(t, netip.MustParseAddrPort(fmt.Sprintf("10.255.1.%d:53", i)))
		b6[i] = startVMBackend(t, netip.MustParseAddrPort(fmt.Sprintf("[fd00::1:%d]:53", i)))
	}
	for _, a := range []string{"10.255.0.53/32", "fd00::53/128"} {
		if out := ipvsvm.Run(t, "ip", "addr", "show", "dev", "lbdns0"); strings.Contains(out, a) {
			t.Fatalf("VIP %s already on lbdns0 before the daemon started:\n%s", a, out)
		}
	}

	// A service made by hand on another address: not the daemon's.
	ipvsvm.Sh(t, "ipvsadm -A -u 10.255.9.9:53 -s rr && ipvsadm -a -u 10.255.9.9:53 -r 10.255.1.1:53 -m -w 5")
	const handKey = "-u 10.255.9.9:53"
	handBefore := ipvsvm.Dump(t)[handKey]
	checkHand := func(t *testing.T) {
		t.Helper()
		got, ok := ipvsvm.Dump(t)[handKey]
		if !ok {
			t.Fatalf("hand-made service %s was removed", handKey)
		}
		if fmt.Sprint(got) != fmt.Sprint(handBefore) {
			t.Fatalf("hand-made service %s changed: %v, was %v", handKey, got, handBefore)
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "lbdns.toml")
	stateDir := filepath.Join(dir, "state")
	writeVMConfig(t, path, fmt.Sprintf(vmConfigTmpl, stateDir, "", ""))

	keys4 := []string{"-u 10.255.0.53:53", "-t 10.255.0.53:53"}
	keys6 := []string{"-u [fd00::53]:53", "-t [fd00::53]:53"}
	all4 := []string{"10.255.1.1:53", "10.255.1.2:53", "10.255.1.3:53"}
	all6 := []string{"[fd00::1:1]:53", "[fd00::1:2]:53", "[fd00::1:3]:53"}
	names4 := []string{"10.255.1.1", "10.255.1.2", "10.255.1.3"}
	names6 := []string{"fd00::1:1", "fd00::1:2", "fd00::1:3"}
	const wait = 15 * time.Second

	// --- 2: start; services, destinations, VIP addresses, data path ---
	d1 := startVMDaemon(t, "first", path)
	t.Run("start", func(t *testing.T) {
		waitFor(t, "VIP addresses on lbdns0", wait, func() (bool, string) {
			out := ipvsvm.Run(t, "ip", "addr", "show", "dev", "lbdns0")
			return strings.Contains(out, "10.255.0.53/32") && strings.Contains(out, "fd00::53/128"), out
		})
		waitDests(t, keys4, all4, wait)
		waitDests(t, keys6, all6, wait)
		tab := ipvsvm.Dump(t)
		for _, k := range append(slices.Clone(keys4), keys6...) {
			s := tab[k]
			if s.Scheduler != "rr" {
				t.Errorf("%s scheduler %q, want rr", k, s.Scheduler)
			}
			for a, dst := range s.Dests {
				if dst.Forward != "m" || dst.Weight != 100 {
					t.Errorf("%s -> %s: forward %q weight %d, want m 100", k, a, dst.Forward, dst.Weight)
				}
			}
		}
		if n := d1.logs.Count("VIP address added"); n != 2 {
			t.Errorf("%d \"VIP address added\" log lines, want 2", n)
		}
		answeredBy(t, vip4, names4...)
		answeredBy(t, vip6, names6...)
		checkHand(t)
	})
	if t.Failed() {
		t.FailNow()
	}

	// --- 3: back ends fail (SERVFAIL, silence) and recover ---
	t.Run("failure and recovery", func(t *testing.T) {
		steps := []struct {
			name    string
			b       *vmBackend
			mode    int32
			keys    []string
			dests   []string
			answers []string
			vip     netip.AddrPort
		}{
			{"v4 backend 2 servfail", b4[2], modeServfail, keys4, []string{all4[0], all4[2]}, []string{names4[0], names4[2]}, vip4},
			{"v4 backend 2 restored", b4[2], modeOK, keys4, all4, names4, vip4},
			{"v6 backend 3 silent", b6[3], modeSilent, keys6, all6[:2], names6[:2], vip6},
			{"v6 backend 3 restored", b6[3], modeOK, keys6, all6, names6, vip6},
		}
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				st.b.mode.Store(st.mode)
				waitDests(t, st.keys, st.dests, wait)
				before := st.b.hits.Load()
				answeredBy(t, st.vip, st.answers...)
				if st.mode != modeOK {
					if n := st.b.hits.Load() - before; n != 0 {
						t.Errorf("failed back end %s answered %d queries through the VIP", st.b.name, n)
					}
				}
			})
		}
		// The other family's services were not touched meanwhile.
		waitDests(t, keys4, all4, wait)
		checkHand(t)
	})
	if t.Failed() {
		t.FailNow()
	}

	// --- 4: drift by hand is repaired by the periodic resync ---
	t.Run("drift repaired", func(t *testing.T) {
		// The resync (every second) may repair the drift before the test
		// can look, so the proof is the daemon's own operations: it
		// re-creates the deleted destination and resets the weight.
		const recreate = "create-dest udp/10.255.0.53:53 -> 10.255.1.1:53"
		const reweight = "update-dest tcp/[fd00::53]:53 -> [fd00::1:2]:53"
		ops := func(op string) int { return strings.Count(d1.logs.String(), op) }
		created, updated := ops(recreate), ops(reweight)
		ipvsvm.Run(t, "ipvsadm", "-d", "-u", "10.255.0.53:53", "-r", "10.255.1.1:53")
		ipvsvm.Run(t, "ipvsadm", "-e", "-t", "[fd00::53]:53", "-r", "[fd00::1:2]:53", "-m", "-w", "7")
		waitFor(t, "hand-made drift repaired", wait, func() (bool, string) {
			tab := ipvsvm.Dump(t)
			ok := slices.Equal(destsOf(tab, keys4[0]), all4) && tab[keys6[1]].Dests[all6[1]].Weight == 100 &&
				ops(recreate) > created && ops(reweight) > updated
			return ok, tab.String() + "\n" + d1.logs.String()
		})
		checkHand(t)
	})
	if t.Failed() {
		t.FailNow()
	}

	// --- 5: stop leaves the table; a new daemon adopts it without ops ---
	// The second daemon runs until the end of the whole test, so it is
	// started with the top-level t (its cleanup stops it).
	top := t
	var d2 *vmDaemon
	t.Run("restart adopts table", func(t *testing.T) {
		if n := d1.logs.Count("ipvs op applied"); n == 0 {
			t.Fatalf("first daemon logged no \"ipvs op applied\"; the log check below would prove nothing")
		}
		// Back end 3 is down across the restart, so a daemon that did
		// not wait for its verdict (no facts: all members, fail-open)
		// would put it back and take it out again.
		b4[3].mode.Store(modeServfail)
		waitDests(t, keys4, all4[:2], wait)
		before := ipvsvm.Dump(t).String()
		d1.stop(t)
		if !strings.Contains(d1.logs.String(), "IPVS table left in place") {
			t.Errorf("first daemon did not log its stop")
		}
		time.Sleep(500 * time.Millisecond)
		if after := ipvsvm.Dump(t).String(); after != before {
			t.Fatalf("stopping the daemon changed the kernel table\n--- before:\n%s\n--- after:\n%s", before, after)
		}

		d2 = startVMDaemon(top, "second", path)
		waitFor(t, "second daemon warm", wait, func() (bool, string) {
			return d2.logs.Count("warm-up over; reconciling IPVS table") == 1, d2.logs.String()
		})
		// Two resync periods and many ticks after warm-up.
		time.Sleep(2500 * time.Millisecond)
		if n := d2.logs.Count("ipvs op applied"); n != 0 {
			t.Errorf("restarted daemon applied %d operations to a correct table:\n%s", n, d2.logs)
		}
		if n := d2.logs.Count("VIP address added"); n != 0 {
			t.Errorf("restarted daemon added %d VIP addresses that were there", n)
		}
		if !strings.Contains(d2.logs.String(), "all_targets_decided=true") {
			t.Errorf("restarted daemon's warm-up ended without every target decided")
		}
		if after := ipvsvm.Dump(t).String(); after != before {
			t.Fatalf("restarted daemon changed the kernel table\n--- before:\n%s\n--- after:\n%s", before, after)
		}
		answeredBy(t, vip4, names4[:2]...)

		b4[3].mode.Store(modeOK)
		waitDests(t, keys4, all4, wait)
	})
	if t.Failed() {
		t.FailNow()
	}

	// --- 6: reload, good and bad ---
	t.Run("reload", func(t *testing.T) {
		b4[4] = startVMBackend(t, netip.MustParseAddrPort("10.255.1.4:53"))
		extra := "\n[[resolver]]\nname = \"r4-4\"\naddress = \"10.255.1.4:53\"\nvendor = \"powerdns\"\n"
		good := fmt.Sprintf(vmConfigTmpl, stateDir, `, "r4-4"`, extra)
		writeVMConfig(t, path, good)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d2.d.Reload(ctx); err != nil {
			t.Fatalf("Reload of a good config: %v", err)
		}
		all := append(slices.Clone(all4), "10.255.1.4:53")
		waitDests(t, keys4, all, wait)
		waitDests(t, keys6, all6, wait)
		answeredBy(t, vip4, append(slices.Clone(names4), "10.255.1.4")...)

		bad := strings.Replace(good, `interval = "400ms"`, `interval = "50ms"`, 1)
		bad = strings.Replace(bad, `vendor = "powerdns"`, `vendor = "bogus"`, 1)
		writeVMConfig(t, path, bad)
		before := ipvsvm.Dump(t).String()
		ops := d2.logs.Count("ipvs op applied")
		err := d2.d.Reload(ctx)
		if err == nil {
			t.Fatal("Reload accepted a bad config")
		}
		for _, want := range []string{"interval", "50ms", "vendor", "bogus"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Reload error %q does not name %q", err, want)
			}
		}
		time.Sleep(1500 * time.Millisecond) // past a resync
		if after := ipvsvm.Dump(t).String(); after != before {
			t.Errorf("rejected reload changed the kernel table\n--- before:\n%s\n--- after:\n%s", before, after)
		}
		if n := d2.logs.Count("ipvs op applied"); n != ops {
			t.Errorf("rejected reload was followed by %d ipvs operations", n-ops)
		}
		if n := len(d2.d.Config().Resolvers); n != 7 {
			t.Errorf("running config has %d resolvers after a rejected reload, want 7", n)
		}
		checkHand(t)
	})
	if t.Failed() {
		t.FailNow()
	}

	// --- 7: operator control over the control socket (what lbctl sends):
	// drain keeps weight 0 in the kernel and gets no new queries, disable
	// removes, enable restores; the kernel's per-destination counters
	// reach /status and /metrics. ---
	t.Run("operator control and kernel stats", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl := control.NewClient(d2.d.ControlSocket())
		// The reload step's back end r4-4 stopped with that step: the
		// daemon takes it out first.
		waitDests(t, keys4, all4, wait)

		if _, err := cl.SetOverride(ctx, control.OverrideRequest{Action: control.ActionDrain, Resolver: "r4-1", Reason: "vm test"}); err != nil {
			t.Fatalf("drain: %v", err)
		}
		waitFor(t, "r4-1 at weight 0 in the kernel", wait, func() (bool, string) {
			tab := ipvsvm.Dump(t)
			for _, k := range keys4 {
				d, ok := tab[k].Dests[all4[0]]
				if !ok || d.Weight != 0 {
					return false, tab.String()
				}
			}
			return true, ""
		})
		answeredBy(t, vip4, names4[1:]...)

		if _, err := cl.SetOverride(ctx, control.OverrideRequest{Action: control.ActionDisable, Resolver: "r4-2", Pool: "p4"}); err != nil {
			t.Fatalf("disable: %v", err)
		}
		waitDests(t, keys4, []string{all4[0], all4[2]}, wait)
		waitDests(t, keys6, all6, wait)

		// Kernel counters: the back ends that answered have packets.
		var st *control.Status
		waitFor(t, "kernel stats in /status", wait, func() (bool, string) {
			var err error
			st, err = cl.Status(ctx)
			if err != nil {
				return false, err.Error()
			}
			for _, v := range st.VIPs {
				for _, s := range v.Services {
					for _, d := range s.Destinations {
						if v.Name == "v4" && s.Proto == "udp" && d.Resolver == "r4-3" && d.Stats != nil && d.Stats.PacketsIn > 0 && d.Stats.PacketsOut > 0 {
							return true, ""
						}
					}
				}
			}
			return false, fmt.Sprintf("%+v", st.VIPs)
		})
		for _, p := range st.Pools {
			for _, m := range p.Members {
				if m.Resolver == "r4-1" && (m.Override != "drain" || m.OverrideReason != "vm test" || m.Weight != 0 || !m.InTraffic) {
					t.Errorf("r4-1 in status: %+v", m)
				}
			}
		}
		mfs, err := d2.d.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() != "lbdns_ipvs_destination_packets_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["resolver"] == "r4-3" && labels["direction"] == "in" && m.GetCounter().GetValue() > 0 {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("no lbdns_ipvs_destination_packets_total for r4-3 with packets")
		}

		for _, r := range []string{"r4-1", "r4-2"} {
			if _, err := cl.SetOverride(ctx, control.OverrideRequest{Action: control.ActionEnable, Resolver: r}); err != nil {
				t.Fatalf("enable %s: %v", r, err)
			}
		}
		waitDests(t, keys4, all4, wait)
		waitFor(t, "weights restored", wait, func() (bool, string) {
			tab := ipvsvm.Dump(t)
			for _, k := range keys4 {
				for _, a := range all4 {
					if tab[k].Dests[a].Weight != 100 {
						return false, tab.String()
					}
				}
			}
			return true, ""
		})
		answeredBy(t, vip4, names4...)
		checkHand(t)
	})
	t.Logf("ipvsadm -Ln at the end:\n%s", ipvsvm.Run(t, "ipvsadm", "-Ln"))
}
