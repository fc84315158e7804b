package responder

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/gslb/topology"
	"lbdns/health"
	"lbdns/monitor"
)

// writeBigReload writes the configuration of bench/responder/run.sh's
// reload test into dir, at 1/div of its size (div 1: 10,000 names, 50,000
// members, 1,000,000 prefixes in 100 files), and returns its path.
func writeBigReload(tb testing.TB, dir string, div int) string {
	tb.Helper()
	names, members, prefixes, files := 10_000/div, 50_000/div, 1_000_000/div, 100
	per := members / names
	if err := os.MkdirAll(filepath.Join(dir, "nets"), 0o755); err != nil {
		tb.Fatal(err)
	}
	perFile := prefixes / files
	for k := range files {
		f, err := os.Create(filepath.Join(dir, "nets", "r"+strconv.Itoa(k)+".txt"))
		if err != nil {
			tb.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for i := k * perFile; i < (k+1)*perFile; i++ {
			p := 1<<24 + i*256
			fmt.Fprintf(w, "%d.%d.%d.0/24\n", p>>24, p>>16&255, p>>8&255)
		}
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
	f, err := os.Create(filepath.Join(dir, "lbdns.toml"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "[daemon]\nstate_dir = %q\n\n[check.tcp]\nkind = \"tcp\"\ninterval = \"20s\"\ntimeout = \"1s\"\nrise = 1\nfall = 3\n\n[check.tcp.tcp]\nport = 8053\n\n", dir)
	fmt.Fprintf(w, "[gslb]\npolicy_order = [\"region\", \"global\"]\n\n[gslb.server]\nlisten = [\"127.0.0.1:5301\"]\n\n[gslb.topology]\nlevels = [\"region\"]\n\n")
	for k := range files {
		fmt.Fprintf(w, "[[gslb.topology.file]]\npath = \"nets/r%d.txt\"\nlabels = { region = \"r%d\" }\n\n", k, k)
	}
	for p := range names {
		fmt.Fprintf(w, "[[gslb.pool]]\nname = \"p%d\"\nmonitors = [\"tcp\"]\n\n", p)
		for j := range per {
			i := p*per + j
			fmt.Fprintf(w, "[[gslb.pool.member]]\nname = \"m%d\"\naddress = \"127.%d.%d.%d\"\n\n", j, 20+i/62500, i/250%250, i%250+1)
		}
	}
	fmt.Fprintf(w, "[[gslb.zone]]\nname = \"bench.test\"\nns = [\"ns1.bench.test.\"]\n\n")
	for s := range 100 {
		fmt.Fprintf(w, "[[gslb.zone.record]]\nname = \"s%d\"\ntype = \"A\"\nvalue = \"198.18.0.%d\"\n\n", s, s+1)
	}
	for k := range names {
		fmt.Fprintf(w, "[[gslb.name]]\nname = \"dyn%d.bench.test\"\nttl = 30\necs = true\n\n", k)
		fmt.Fprintf(w, "[[gslb.name.policy]]\nmatch = { region = \"r%d\" }\npool = \"p%d\"\n\n", k%files, k)
		fmt.Fprintf(w, "[[gslb.name.policy]]\npool = \"p%d\"\n\n", (k+1)%names)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(dir, "lbdns.toml")
}

// cpuRun runs the sub-benchmark fn as b.Run does and reports, beside
// the wall time, the process's CPU time per operation (user and system,
// every thread: the garbage collector's included), which a machine
// shared with other work inflates less than the wall time.
func cpuRun(b *testing.B, name string, fn func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		before := cpuTime(b)
		fn(b)
		b.ReportMetric(float64(cpuTime(b)-before)/1e6/float64(b.N), "cpu-ms/op")
	})
}

// cpuTime is the process's CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBigReload times, stage by stage, what a reload of
// bench/responder/run.sh's big configuration costs lbdnsd outside the
// monitor: decoding and validating the configuration, building the GSLB
// members' checkers (a stub here), loading the topology, the serial's
// hash, evaluating the members and building the snapshot; "all" is the
// whole, as the daemon and the responder run it on a reload (the
// topology loaded by a Responder's builders that loaded it before:
// the prefix files are read and hashed, not parsed); "topology-cached"
// is that load alone.
// LBDNS_BIG_DIV=10 runs it at a tenth of the size.
func BenchmarkBigReload(b *testing.B) {
	div := 1
	if s := os.Getenv("LBDNS_BIG_DIV"); s != "" {
		div, _ = strconv.Atoi(s)
	}
	path := writeBigReload(b, b.TempDir(), div)
	cfg, err := configs.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	stub := func(*configs.Check, netip.AddrPort) (check.Checker, error) { return nil, nil }
	now := time.Unix(1e9, 0)
	loc, err := topology.Load(cfg)
	if err != nil {
		b.Fatal(err)
	}
	pools := gslb.Evaluate(cfg, nil, now)
	build := DefaultBuilders()
	if _, err := build.Locator(cfg); err != nil {
		b.Fatal(err)
	}
	cpuRun(b, "configs.Load", func(b *testing.B) {
		for b.Loop() {
			if _, err := configs.Load(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	cpuRun(b, "targets", func(b *testing.B) {
		for b.Loop() {
			if _, err := gslb.Targets(cfg, stub); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The monitor holds the members' targets; a reload that keeps them
	// gives it the same targets again (new checkers), and the responder
	// reads every status to evaluate the members.
	mon := monitor.New(monitor.Options{})
	probe := check.Func(func(context.Context) check.Result { return check.Result{OK: true} })
	real := func(*configs.Check, netip.AddrPort) (check.Checker, error) { return probe, nil }
	tgs, err := gslb.Targets(cfg, real)
	if err != nil {
		b.Fatal(err)
	}
	mon.Update(tgs)
	cpuRun(b, "monitor-update", func(b *testing.B) {
		for b.Loop() {
			tgs, _ := gslb.Targets(cfg, real)
			mon.Update(tgs)
		}
	})
	cpuRun(b, "statuses", func(b *testing.B) {
		for b.Loop() {
			mon.Status()
		}
	})
	cpuRun(b, "evaluate-up", func(b *testing.B) {
		st := mon.Status()
		for k, ts := range st {
			ts.Health.State = health.Up // as on the bench's reload
			st[k] = ts
		}
		for b.Loop() {
			gslb.Evaluate(cfg, st, now)
		}
	})
	cpuRun(b, "topology", func(b *testing.B) {
		for b.Loop() {
			if _, err := topology.Load(cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
	cpuRun(b, "topology-cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := build.Locator(cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
	cpuRun(b, "hash", func(b *testing.B) {
		for b.Loop() {
			ConfigHash(cfg)
		}
	})
	cpuRun(b, "evaluate", func(b *testing.B) {
		for b.Loop() {
			gslb.Evaluate(cfg, nil, now)
		}
	})
	cpuRun(b, "snapshot", func(b *testing.B) {
		for b.Loop() {
			gslb.NewSnapshot(cfg, pools, loc, 1)
		}
	})
	cpuRun(b, "all", func(b *testing.B) {
		for b.Loop() {
			c, err := configs.Load(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := gslb.Targets(c, stub); err != nil {
				b.Fatal(err)
			}
			l, err := build.Locator(c)
			if err != nil {
				b.Fatal(err)
			}
			ConfigHash(c)
			gslb.NewSnapshot(c, gslb.Evaluate(c, nil, now), l, 1)
		}
	})
}
