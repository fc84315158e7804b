package healthbench

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/daemon"
	"lbdns/monitor"
	"lbdns/probes"
)

// Sizing of the in-process benchmarks; ports stay clear of run.sh's
// (20000-24999) and of the ephemeral range.
const (
	benchTargets  = 5000
	benchPoolSize = 10
	benchBasePort = 25000
)

var loopback = netip.MustParseAddr("127.0.0.1")

func TestAnswer(t *testing.T) {
	query := func(name string, qtype, qclass uint16) []byte {
		m := new(dns.Msg)
		m.Id = 4711
		m.RecursionDesired = true
		m.Question = []dns.Question{{Name: name, Qtype: qtype, Qclass: qclass}}
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	reply := func(t *testing.T, b []byte) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			t.Fatalf("unpack reply: %v", err)
		}
		return m
	}
	t.Run("IN query gets NXDOMAIN with the question", func(t *testing.T) {
		r := reply(t, Answer(query("lbdns-0123.probe.bench.test.", dns.TypeA, dns.ClassINET), nil))
		if r.Id != 4711 || !r.Response || !r.RecursionDesired || r.Rcode != dns.RcodeNameError {
			t.Fatalf("header: %+v", r.MsgHdr)
		}
		if len(r.Question) != 1 || r.Question[0].Name != "lbdns-0123.probe.bench.test." || len(r.Answer) != 0 {
			t.Fatalf("sections: %v", r)
		}
	})
	t.Run("CHAOS version.bind gets the version", func(t *testing.T) {
		r := reply(t, Answer(query("version.bind.", dns.TypeTXT, dns.ClassCHAOS), nil))
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("reply: %v", r)
		}
		if txt, ok := r.Answer[0].(*dns.TXT); !ok || strings.Join(txt.Txt, "") != VersionText {
			t.Fatalf("answer: %v", r.Answer[0])
		}
	})
	t.Run("other CHAOS query is refused", func(t *testing.T) {
		if r := reply(t, Answer(query("hostname.bind.", dns.TypeTXT, dns.ClassCHAOS), nil)); r.Rcode != dns.RcodeRefused {
			t.Fatalf("rcode %s", dns.RcodeToString[r.Rcode])
		}
	})
	t.Run("a response gets no reply", func(t *testing.T) {
		q := query("x.test.", dns.TypeA, dns.ClassINET)
		q[2] |= 0x80
		if b := Answer(q, nil); b != nil {
			t.Fatalf("got %d bytes", len(b))
		}
	})
	t.Run("garbage gets no reply", func(t *testing.T) {
		if b := Answer([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, nil); b != nil {
			t.Fatalf("got %d bytes", len(b))
		}
	})
}

func TestResponderWithDNSProbe(t *testing.T) {
	// Three ports free now: a fixed range may be taken by another
	// program of the machine (a benchmark's responder left running).
	var r *Responder
	var err error
	var base uint16
	for try := range 50 {
		base = uint16(20000 + 700*try)
		if r, err = Listen(loopback, base, base+2, map[uint16]bool{base + 1: true}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2", r.Len())
	}
	chk := benchCheck()
	for _, tc := range []struct {
		name string
		port uint16
		ok   bool
	}{
		{"served port", base, true},
		{"skipped port", base + 1, false},
		{"last port", base + 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := probes.DNS(context.Background(), netip.AddrPortFrom(loopback, tc.port), chk)
			if res.OK != tc.ok {
				t.Fatalf("probe: %+v, want OK %v", res, tc.ok)
			}
		})
	}
	id, err := probes.Identify(context.Background(), netip.AddrPortFrom(loopback, base))
	if err != nil || id != VersionText {
		t.Fatalf("Identify = %q, %v", id, err)
	}
}

func TestListenRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		addr   netip.Addr
		lo, hi uint16
	}{
		{"non-loopback address", netip.MustParseAddr("192.0.2.1"), benchBasePort, benchBasePort},
		{"empty range", loopback, benchBasePort + 1, benchBasePort},
		{"port zero", loopback, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := Listen(tc.addr, tc.lo, tc.hi, nil); err == nil {
				r.Close()
				t.Fatal("Listen succeeded")
			}
		})
	}
}

// benchCheck is run.sh's check profile.
func benchCheck() *configs.Check {
	return &configs.Check{
		Name: "bench", Kind: "dns", Interval: configs.Duration{Duration: time.Second},
		Timeout: configs.Duration{Duration: 500 * time.Millisecond}, Rise: 2, Fall: 3,
		DNS: &configs.DNSCheck{Zone: "probe.bench.test", QType: "A", QClass: "IN", Transport: "udp"},
	}
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startResponder serves benchTargets ports for a benchmark.
func startResponder(b *testing.B) *Responder {
	r, err := Listen(loopback, benchBasePort, benchBasePort+benchTargets-1, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	return r
}

// BenchmarkProbeEngine runs the monitor with the real DNS probe against
// 5,000 loopback targets at a 1 s interval, without the daemon above it.
// One op is 5,000 probes (about one second). The CPU figures include the
// in-process responder. "fresh" are checkers without a DNSProber (a
// goroutine and a new socket per probe), "engine" with one (its batch
// engine: shared sockets, sendmmsg/recvmmsg). Every target is probed
// once before the clock starts (steady state).
func BenchmarkProbeEngine(b *testing.B) {
	b.Run("fresh", func(b *testing.B) { benchProbeEngine(b, probes.Deps{}) })
	b.Run("engine", func(b *testing.B) {
		p := probes.NewDNSProber()
		defer func() {
			if err := p.Close(); err != nil {
				b.Error(err)
			}
		}()
		benchProbeEngine(b, probes.Deps{DNS: p})
	})
}

func benchProbeEngine(b *testing.B, deps probes.Deps) {
	startResponder(b)
	var count, failed atomic.Int64
	want := int64(b.N) * benchTargets
	done := make(chan struct{})
	m := monitor.New(monitor.Options{
		OnEvent: func(monitor.Event) {},
		OnResult: func(_ monitor.Key, r probes.Result) {
			if !r.OK {
				failed.Add(1)
			}
			if count.Add(1) == want {
				close(done)
			}
		},
	})
	chk := benchCheck()
	targets := make([]monitor.Target, benchTargets)
	build := probes.NewBuilder(deps)
	for i := range targets {
		a := netip.AddrPortFrom(loopback, uint16(benchBasePort+i))
		c, err := build.Build(chk, a)
		if err != nil {
			b.Fatal(err)
		}
		targets[i] = monitor.Target{Key: monitor.Key{Kind: "bench", Member: fmt.Sprint("r", i), Check: chk.Name}, Addr: a, Checker: c,
			Spec: chk.ProbeIdentity(), Schedule: monitor.Schedule{Interval: chk.Interval.Duration, Timeout: chk.Timeout.Duration, Rise: chk.Rise, Fall: chk.Fall}}
	}
	// Probe every target once before the clock starts, so that the
	// figures are those of the steady state, in which the reusing prober
	// has one socket open per target.
	for _, t := range targets {
		pctx, pcancel := context.WithTimeout(context.Background(), chk.Timeout.Duration)
		r := t.Checker.Check(pctx)
		pcancel()
		if !r.OK {
			b.Fatalf("warm-up probe of %s: %s", t.Addr, r.Detail)
		}
	}
	m.Update(targets)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	b.ReportAllocs()
	cpu0, wall0 := cpuTime(b), time.Now()
	b.ResetTimer()
	go func() { ran <- m.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(time.Duration(b.N)*2*time.Second + 10*time.Second):
		b.Errorf("only %d of %d probes in time", count.Load(), want)
	}
	b.StopTimer()
	cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		b.Errorf("%d probes failed", n)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(want), "cpu-ns/probe")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%core")
}

// writeConfig writes run.sh's configuration for the in-process targets.
func writeConfig(b *testing.B, dir string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "[daemon]\nstate_dir = %[1]q\ncontrol_socket = \"%[1]s/ctl.sock\"\nstatus_listen = \"\"\n\n[check.bench]\ninterval = \"1s\"\ntimeout = \"500ms\"\nrise = 2\nfall = 3\n\n[check.bench.dns]\nzone = \"probe.bench.test\"\n\n", filepath.Join(dir, "state"))
	vendors := []string{"bind", "unbound", "powerdns", "knot", "dnsmasq"}
	for p := range benchTargets / benchPoolSize {
		addr := fmt.Sprintf("192.0.2.%d", p+1)
		if p >= 254 {
			addr = fmt.Sprintf("198.51.100.%d", p-253)
		}
		members := make([]string, benchPoolSize)
		for j := range members {
			members[j] = fmt.Sprintf("%q", fmt.Sprint("r", p*benchPoolSize+j))
		}
		fmt.Fprintf(&s, "[[vip]]\nname = \"v%d\"\naddress = %q\nforwarding = \"nat\"\npool = \"p%d\"\n\n", p, addr, p)
		fmt.Fprintf(&s, "[[pool]]\nname = \"p%d\"\ncheck = \"bench\"\nmembers = [%s]\n\n", p, strings.Join(members, ","))
	}
	for i := range benchTargets {
		fmt.Fprintf(&s, "[[resolver]]\nname = \"r%d\"\naddress = \"127.0.0.1:%d\"\nvendor = %q\n\n", i, benchBasePort+i, vendors[i%len(vendors)])
	}
	path := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(path, []byte(s.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkDaemonDryRun runs the whole daemon (-dry-run, logs discarded)
// with run.sh's configuration against the in-process responder; one op is
// one second of running, from the start (warm-up included). The CPU
// figures include the responder.
func BenchmarkDaemonDryRun(b *testing.B) {
	startResponder(b)
	d, err := daemon.New(daemon.Options{ConfigPath: writeConfig(b, b.TempDir()), DryRun: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(b.N)*time.Second)
	defer cancel()
	b.ReportAllocs()
	cpu0, wall0 := cpuTime(b), time.Now()
	b.ResetTimer()
	if err := d.Run(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%core")
	up := 0
	for _, s := range d.Monitor().Status() {
		if s.Health.State.String() == "up" {
			up++
		}
	}
	b.ReportMetric(float64(up), "targets-up")
}
