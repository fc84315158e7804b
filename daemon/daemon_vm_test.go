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
	"lbdns/testkit/ipvsvm"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
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

// status returns the daemon's status as the control socket serves it.
func (v *vmDaemon) status(t *testing.T) *control.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := v.d.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return st
}

// ops returns the reconciler's counters: IPVS operations applied and
// failed since the daemon started.
func (v *vmDaemon) ops(t *testing.T) (applied, failed uint64) {
	t.Helper()
	st := v.status(t)
	return st.Daemon.IPVSOps, st.Daemon.IPVSErrors
}

// waitWarm waits until the daemon says it is warm and returns that status.
func (v *vmDaemon) waitWarm(t *testing.T) *control.Status {
	t.Helper()
	var st *control.Status
	poll.Until(t, vmWait, "daemon warm", func() (bool, string) {
		st = v.status(t)
		return st.Daemon.Warm, "not warm"
	})
	return st
}

// wantOps fails t unless the daemon has applied exactly want IPVS
// operations since it started, none failed.
func (v *vmDaemon) wantOps(t *testing.T, what string, want uint64) {
	t.Helper()
	if applied, failed := v.ops(t); applied != want || failed != 0 {
		t.Errorf("%s: %d IPVS operations applied, %d failed; want %d applied, none failed", what, applied, failed, want)
	}
}

// vmWait bounds every wait for the daemon or the kernel to reach a state
// (software emulation is slow).
const vmWait = 15 * time.Second

// vmWorld is one subtest's installation inside the VM: a dummy interface
// of its own carrying three IPv4 and three IPv6 back-end addresses (and a
// fourth of each, unserved until a test starts it), two VIPs, a
// configuration file, a state directory, and a service made by hand on
// another address, which the daemon must leave alone. Worlds built with
// different numbers share no interface, address or service, so a failed
// subtest cannot break the next one.
type vmWorld struct {
	n        int // the world's number: 10.n.0.0/16, fdNN::/16, lbdnsN
	ifname   string
	path     string // the configuration file
	stateDir string
	vip4     netip.AddrPort
	vip6     netip.AddrPort
	keys4    []string // the v4 VIP's services as ipvsadm names them
	keys6    []string
	all4     []string // back ends r4-1..3 as "ADDR:PORT"
	all6     []string
	names4   []string // what back ends r4-1..3 answer (their address)
	names6   []string
	b4, b6   map[int]*vmBackend
	handKey  string
	hand     ipvsvm.Service
}

// newVMWorld builds world number n (1 to 99) and removes it when t ends.
func newVMWorld(t *testing.T, n int) *vmWorld {
	t.Helper()
	w := &vmWorld{
		n:      n,
		ifname: fmt.Sprintf("lbdns%d", n),
		vip4:   netip.MustParseAddrPort(fmt.Sprintf("10.%d.0.53:53", n)),
		vip6:   netip.MustParseAddrPort(fmt.Sprintf("[fd%02d::53]:53", n)),
		b4:     map[int]*vmBackend{},
		b6:     map[int]*vmBackend{},
	}
	w.keys4 = []string{"-u " + w.vip4.String(), "-t " + w.vip4.String()}
	w.keys6 = []string{"-u " + w.vip6.String(), "-t " + w.vip6.String()}
	for i := 1; i <= 3; i++ {
		w.all4 = append(w.all4, w.addr4(i).String())
		w.all6 = append(w.all6, w.addr6(i).String())
		w.names4 = append(w.names4, w.addr4(i).Addr().String())
		w.names6 = append(w.names6, w.addr6(i).Addr().String())
	}
	w.handKey = fmt.Sprintf("-u 10.%d.9.9:53", n)

	ipvsvm.Sh(t, fmt.Sprintf("ip link add %[1]s type dummy && ip link set %[1]s up", w.ifname))
	t.Cleanup(func() {
		// Best effort: the world's services and interface (with its
		// addresses) go, whatever state the test left them in.
		var del []string
		for _, k := range append(append([]string{w.handKey}, w.keys4...), w.keys6...) {
			del = append(del, "ipvsadm -D "+k+" 2>/dev/null")
		}
		ipvsvm.Sh(t, strings.Join(del, "; ")+"; ip link del "+w.ifname+"; true")
	})
	for i := 1; i <= 4; i++ {
		ipvsvm.Sh(t, fmt.Sprintf("ip addr add %s/32 dev %s && ip addr add %s/128 dev %s", w.addr4(i).Addr(), w.ifname, w.addr6(i).Addr(), w.ifname))
	}
	for i := 1; i <= 3; i++ {
		w.b4[i] = startVMBackend(t, w.addr4(i))
		w.b6[i] = startVMBackend(t, w.addr6(i))
	}
	if got := w.vipAddrs(t); got != "" {
		t.Fatalf("VIP addresses on %s before the daemon started: %s", w.ifname, got)
	}
	ipvsvm.Sh(t, fmt.Sprintf("ipvsadm -A %[1]s -s rr && ipvsadm -a %[1]s -r %[2]s -m -w 5", w.handKey, w.addr4(1)))
	w.hand = ipvsvm.Dump(t)[w.handKey]

	dir := t.TempDir()
	w.path = filepath.Join(dir, "lbdns.toml")
	w.stateDir = filepath.Join(dir, "state")
	w.writeConfig(t, w.config(false))
	return w
}

// addr4 and addr6 are back end i's addresses.
func (w *vmWorld) addr4(i int) netip.AddrPort {
	return netip.MustParseAddrPort(fmt.Sprintf("10.%d.1.%d:53", w.n, i))
}

func (w *vmWorld) addr6(i int) netip.AddrPort {
	return netip.MustParseAddrPort(fmt.Sprintf("[fd%02d::1:%d]:53", w.n, i))
}

// vipAddrs returns the VIP addresses on the world's interface, as ip
// lists them, space separated.
func (w *vmWorld) vipAddrs(t *testing.T) string {
	t.Helper()
	out := ipvsvm.Run(t, "ip", "addr", "show", "dev", w.ifname)
	var got []string
	for _, a := range []string{w.vip4.Addr().String() + "/32", w.vip6.Addr().String() + "/128"} {
		got = append(got, strings.Repeat(a+" ", strings.Count(out, " "+a+" ")))
	}
	return strings.TrimSpace(strings.Join(got, ""))
}

// config is the daemon's configuration of the world; with r44, resolver
// r4-4 (the fourth IPv4 back end) joins pool p4.
func (w *vmWorld) config(r44 bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %[1]q\ncontrol_socket = \"%[1]s/ctl.sock\"\nstatus_listen = \"127.0.0.1:0\"\nlog_level = \"debug\"\n", w.stateDir)
	fmt.Fprintf(&b, "\n[ipvs]\nresync_interval = \"1s\"\n")
	for _, v := range []struct {
		name, pool string
		addr       netip.Addr
	}{{"v4", "p4", w.vip4.Addr()}, {"v6", "p6", w.vip6.Addr()}} {
		fmt.Fprintf(&b, "\n[[vip]]\nname = %q\naddress = %q\nforwarding = \"nat\"\nscheduler = \"rr\"\ninterface = %q\npool = %q\n", v.name, v.addr, w.ifname, v.pool)
	}
	p4 := `"r4-1", "r4-2", "r4-3"`
	if r44 {
		p4 += `, "r4-4"`
	}
	fmt.Fprintf(&b, "\n[[pool]]\nname = \"p4\"\nmembers = [%s]\ncheck = \"rec\"\n", p4)
	fmt.Fprintf(&b, "\n[[pool]]\nname = \"p6\"\nmembers = [\"r6-1\", \"r6-2\", \"r6-3\"]\ncheck = \"rec\"\n")
	vendors := []string{"bind", "unbound", "knot", "powerdns"}
	last := 3
	if r44 {
		last = 4
	}
	for i := 1; i <= last; i++ {
		fmt.Fprintf(&b, "\n[[resolver]]\nname = \"r4-%d\"\naddress = %q\nvendor = %q\n", i, w.addr4(i), vendors[i-1])
	}
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&b, "\n[[resolver]]\nname = \"r6-%d\"\naddress = %q\nvendor = %q\n", i, w.addr6(i), vendors[i-1])
	}
	fmt.Fprintf(&b, "\n[check.rec]\ninterval = \"400ms\"\ntimeout = \"300ms\"\nrise = 2\nfall = 2\n\n[check.rec.dns]\nzone = \"vm.test\"\n")
	return b.String()
}

func (w *vmWorld) writeConfig(t *testing.T, text string) {
	t.Helper()
	if err := os.WriteFile(w.path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// start starts a daemon over the world's configuration.
func (w *vmWorld) start(t *testing.T, name string) *vmDaemon {
	t.Helper()
	return startVMDaemon(t, name, w.path)
}

// table returns the kernel's table restricted to the world's VIP
// services.
func (w *vmWorld) table(t *testing.T) ipvsvm.Table {
	t.Helper()
	tab := ipvsvm.Dump(t)
	out := ipvsvm.Table{}
	for _, k := range append(slices.Clone(w.keys4), w.keys6...) {
		if s, ok := tab[k]; ok {
			out[k] = s
		}
	}
	return out
}

// waitDests waits until every service in keys has exactly the
// destinations want ("ADDR:PORT", any order) in the kernel's table.
func (w *vmWorld) waitDests(t *testing.T, keys []string, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	poll.Until(t, vmWait, fmt.Sprintf("services %v with destinations %v", keys, want), func() (bool, string) {
		tab := ipvsvm.Dump(t)
		for _, k := range keys {
			if got := destsOf(tab, k); !slices.Equal(got, want) {
				return false, fmt.Sprintf("%s has %v\n%s", k, got, tab)
			}
		}
		return true, ""
	})
}

// ready starts a daemon and waits until the kernel has every back end of
// both VIPs and the daemon's table agrees with it.
func (w *vmWorld) ready(t *testing.T, name string) *vmDaemon {
	t.Helper()
	d := w.start(t, name)
	w.waitDests(t, w.keys4, w.all4)
	w.waitDests(t, w.keys6, w.all6)
	w.checkApplied(t, d)
	return d
}

// checkApplied fails t unless the table the daemon believes it applied is
// the kernel's table of the world's VIPs.
func (w *vmWorld) checkApplied(t *testing.T, d *vmDaemon) {
	t.Helper()
	poll.Until(t, vmWait, "the daemon's applied table is the kernel's", func() (bool, string) {
		applied, kernel := ipvsvm.FromVIP(d.d.Applied()).String(), w.table(t).String()
		return applied == kernel, fmt.Sprintf("applied:\n%s\nkernel:\n%s", applied, kernel)
	})
}

// checkHand fails t unless the hand-made service is as it was made.
func (w *vmWorld) checkHand(t *testing.T) {
	t.Helper()
	got, ok := ipvsvm.Dump(t)[w.handKey]
	if !ok {
		t.Errorf("hand-made service %s was removed", w.handKey)
	} else if fmt.Sprint(got) != fmt.Sprint(w.hand) {
		t.Errorf("hand-made service %s changed: %v, was %v", w.handKey, got, w.hand)
	}
}

// TestVMDaemon runs the real daemon (kernel IPVS client, real DNS probes,
// VIP addresses) inside the VM against three DNS back ends per family,
// and checks the kernel's table (read with ipvsadm), the reconciler's
// counters and the data path through the VIPs as back ends fail and
// recover, as the table drifts by hand, across a restart, across reloads
// and under operator overrides. Each subtest builds a world of its own, so
// one failure does not hide the others.
func TestVMDaemon(t *testing.T) {
	ipvsvm.Require(t)

	t.Run("start", func(t *testing.T) {
		w := newVMWorld(t, 1)
		d := w.ready(t, "start")
		if got, want := w.vipAddrs(t), w.vip4.Addr().String()+"/32 "+w.vip6.Addr().String()+"/128"; got != want {
			t.Errorf("VIP addresses on %s: %q, want %q", w.ifname, got, want)
		}
		for k, s := range w.table(t) {
			if s.Scheduler != "rr" {
				t.Errorf("%s scheduler %q, want rr", k, s.Scheduler)
			}
			for a, dst := range s.Dests {
				if dst.Forward != "m" || dst.Weight != 100 {
					t.Errorf("%s -> %s: forward %q weight %d, want m 100", k, a, dst.Forward, dst.Weight)
				}
			}
		}
		// Four services and twelve destinations, each created once.
		d.wantOps(t, "after start", 16)
		answeredBy(t, w.vip4, w.names4...)
		answeredBy(t, w.vip6, w.names6...)
		w.checkHand(t)
	})

	t.Run("failure and recovery", func(t *testing.T) {
		w := newVMWorld(t, 2)
		d := w.ready(t, "failure")
		ops, _ := d.ops(t)
		steps := []struct {
			name    string
			b       *vmBackend
			mode    int32
			keys    []string
			dests   []string
			answers []string
			vip     netip.AddrPort
		}{
			{"v4 backend 2 servfail", w.b4[2], modeServfail, w.keys4, []string{w.all4[0], w.all4[2]}, []string{w.names4[0], w.names4[2]}, w.vip4},
			{"v4 backend 2 restored", w.b4[2], modeOK, w.keys4, w.all4, w.names4, w.vip4},
			{"v6 backend 3 silent", w.b6[3], modeSilent, w.keys6, w.all6[:2], w.names6[:2], w.vip6},
			{"v6 backend 3 restored", w.b6[3], modeOK, w.keys6, w.all6, w.names6, w.vip6},
		}
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				st.b.mode.Store(st.mode)
				w.waitDests(t, st.keys, st.dests)
				w.checkApplied(t, d)
				before := st.b.hits.Load()
				answeredBy(t, st.vip, st.answers...)
				if st.mode != modeOK {
					if n := st.b.hits.Load() - before; n != 0 {
						t.Errorf("failed back end %s answered %d queries through the VIP", st.b.name, n)
					}
				}
			})
		}
		// The other family's services were not touched meanwhile: each
		// step removed or re-created one destination in two services.
		w.waitDests(t, w.keys4, w.all4)
		w.waitDests(t, w.keys6, w.all6)
		d.wantOps(t, "after two failures and recoveries", ops+8)
		w.checkHand(t)
	})

	t.Run("drift repaired", func(t *testing.T) {
		w := newVMWorld(t, 3)
		d := w.ready(t, "drift")
		ops, _ := d.ops(t)
		// The resync (every second) may repair the drift before the test
		// can look, so the proof is the reconciler's counter: exactly one
		// re-created destination and one reset weight.
		ipvsvm.Run(t, "ipvsadm", "-d", "-u", w.vip4.String(), "-r", w.all4[0])
		ipvsvm.Run(t, "ipvsadm", "-e", "-t", w.vip6.String(), "-r", w.all6[1], "-m", "-w", "7")
		poll.Until(t, vmWait, "hand-made drift repaired", func() (bool, string) {
			tab := ipvsvm.Dump(t)
			applied, failed := d.ops(t)
			ok := slices.Equal(destsOf(tab, w.keys4[0]), w.all4) && tab[w.keys6[1]].Dests[w.all6[1]].Weight == 100 && applied == ops+2
			return ok, fmt.Sprintf("%d ops applied (%d before the drift), %d failed\n%s", applied, ops, failed, tab)
		})
		d.wantOps(t, "after the repair", ops+2)
		w.checkApplied(t, d)
		w.checkHand(t)
	})

	t.Run("restart adopts table", func(t *testing.T) {
		w := newVMWorld(t, 4)
		d1 := w.ready(t, "first")
		if applied, _ := d1.ops(t); applied == 0 {
			t.Fatalf("first daemon applied no IPVS operation; the check of the second would prove nothing")
		}
		// Back end 3 is down across the restart, so a daemon that did
		// not wait for its verdict (no facts: all members, fail-open)
		// would put it back and take it out again.
		w.b4[3].mode.Store(modeServfail)
		w.waitDests(t, w.keys4, w.all4[:2])
		before, addrs := ipvsvm.Dump(t).String(), w.vipAddrs(t)
		d1.stop(t)
		time.Sleep(500 * time.Millisecond)
		if after := ipvsvm.Dump(t).String(); after != before {
			t.Fatalf("stopping the daemon changed the kernel table\n--- before:\n%s\n--- after:\n%s", before, after)
		}

		d2 := w.start(t, "second")
		st := d2.waitWarm(t)
		for _, p := range st.Pools {
			for _, m := range p.Members {
				if m.State == "unknown" {
					t.Errorf("restarted daemon warm with %s/%s undecided", p.Name, m.Resolver)
				}
			}
		}
		// Two resync periods and many ticks after warm-up.
		time.Sleep(2500 * time.Millisecond)
		d2.wantOps(t, "restarted daemon over a correct table", 0)
		if after := ipvsvm.Dump(t).String(); after != before {
			t.Errorf("restarted daemon changed the kernel table\n--- before:\n%s\n--- after:\n%s", before, after)
		}
		if got := w.vipAddrs(t); got != addrs {
			t.Errorf("VIP addresses after the restart: %q, before: %q", got, addrs)
		}
		w.checkApplied(t, d2)
		answeredBy(t, w.vip4, w.names4[:2]...)

		w.b4[3].mode.Store(modeOK)
		w.waitDests(t, w.keys4, w.all4)
		d2.wantOps(t, "after back end 3 came back", 2)
		w.checkHand(t)
	})

	t.Run("reload", func(t *testing.T) {
		w := newVMWorld(t, 5)
		d := w.ready(t, "reload")
		w.b4[4] = startVMBackend(t, w.addr4(4))
		good := w.config(true)
		w.writeConfig(t, good)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ops, _ := d.ops(t)
		if err := d.d.Reload(ctx); err != nil {
			t.Fatalf("Reload of a good config: %v", err)
		}
		all := append(slices.Clone(w.all4), w.addr4(4).String())
		w.waitDests(t, w.keys4, all)
		w.waitDests(t, w.keys6, w.all6)
		w.checkApplied(t, d)
		d.wantOps(t, "after adding r4-4", ops+2)
		answeredBy(t, w.vip4, append(slices.Clone(w.names4), w.addr4(4).Addr().String())...)

		bad := strings.Replace(good, `interval = "400ms"`, `interval = "50ms"`, 1)
		bad = strings.Replace(bad, `vendor = "powerdns"`, `vendor = "bogus"`, 1)
		w.writeConfig(t, bad)
		before := ipvsvm.Dump(t).String()
		ops, _ = d.ops(t)
		err := d.d.Reload(ctx)
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
		d.wantOps(t, "after a rejected reload", ops)
		members := 0
		for _, p := range d.status(t).Pools {
			members += len(p.Members)
		}
		if members != 7 {
			t.Errorf("running config has %d pool members after a rejected reload, want 7", members)
		}
		w.checkHand(t)
	})

	// Operator control over the control socket (what lbctl sends): drain
	// keeps weight 0 in the kernel and gets no new queries, disable
	// removes, enable restores; the kernel's per-destination counters
	// reach /status and /metrics.
	t.Run("operator control and kernel stats", func(t *testing.T) {
		w := newVMWorld(t, 6)
		d := w.ready(t, "operator")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl := control.NewClient(filepath.Join(w.stateDir, "ctl.sock"))
		ops, _ := d.ops(t)

		if _, err := cl.SetOverride(ctx, control.OverrideRequest{Action: control.ActionDrain, Resolver: "r4-1", Reason: "vm test"}); err != nil {
			t.Fatalf("drain: %v", err)
		}
		poll.Until(t, vmWait, "r4-1 at weight 0 in the kernel", func() (bool, string) {
			tab := ipvsvm.Dump(t)
			for _, k := range w.keys4 {
				d, ok := tab[k].Dests[w.all4[0]]
				if !ok || d.Weight != 0 {
					return false, tab.String()
				}
			}
			return true, ""
		})
		d.wantOps(t, "after the drain", ops+2)
		answeredBy(t, w.vip4, w.names4[1:]...)

		if _, err := cl.SetOverride(ctx, control.OverrideRequest{Action: control.ActionDisable, Resolver: "r4-2", Pool: "p4"}); err != nil {
			t.Fatalf("disable: %v", err)
		}
		w.waitDests(t, w.keys4, []string{w.all4[0], w.all4[2]})
		w.waitDests(t, w.keys6, w.all6)
		d.wantOps(t, "after the disable", ops+4)
		w.checkApplied(t, d)

		// Kernel counters: the back ends that answered have packets.
		var st *control.Status
		poll.Until(t, vmWait, "kernel stats in /status", func() (bool, string) {
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
		mfs, err := d.d.Registry().Gather()
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
		w.waitDests(t, w.keys4, w.all4)
		poll.Until(t, vmWait, "weights restored", func() (bool, string) {
			tab := ipvsvm.Dump(t)
			for _, k := range w.keys4 {
				for _, a := range w.all4 {
					if tab[k].Dests[a].Weight != 100 {
						return false, tab.String()
					}
				}
			}
			return true, ""
		})
		// Enable: r4-2 re-created and r4-1 back to its weight, in both
		// services.
		d.wantOps(t, "after the enables", ops+8)
		w.checkApplied(t, d)
		answeredBy(t, w.vip4, w.names4...)
		w.checkHand(t)
	})
}
