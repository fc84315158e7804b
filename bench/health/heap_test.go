package healthbench

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lbdns/daemon"
	"lbdns/monitor"
	"lbdns/probes"
)

// heapFigures reads the live heap after a collection and reports it, the
// goroutines and the process's RSS and peak RSS (the in-process
// responder's included) as the benchmark's metrics; with
// LBDNS_HEAPPROFILE set it writes the heap profile there (with
// LBDNS_GOROUTINES the goroutines' stacks), taken while
// everything measured is still running.
func heapFigures(b *testing.B, what string, alloc0 uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MB")
	b.ReportMetric(float64(ms.HeapAlloc)/benchTargets, "live-B/target")
	b.ReportMetric(float64(ms.StackInuse)/(1<<20), "stack-MB")
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MB")
	b.ReportMetric(float64(ms.TotalAlloc)/(1<<20), "total-alloc-MB")
	b.ReportMetric(float64(ms.TotalAlloc-alloc0)/(1<<20), "run-alloc-MB")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
	if st, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) == 3 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					b.ReportMetric(kb/1024, strings.ToLower(strings.TrimSuffix(f[0], ":"))+"-MB")
				}
			}
		}
	}
	if path := os.Getenv("LBDNS_GOROUTINES"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("goroutine").WriteTo(f, 1); err != nil {
			b.Fatalf("%s: goroutine profile: %v", what, err)
		}
	}
	if path := os.Getenv("LBDNS_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatalf("%s: heap profile: %v", what, err)
		}
	}
}

// heapWarm is how long the heap benchmarks run before they count: the
// first check of every target, and the daemon's start-up, are over.
const heapWarm = 3 * time.Second

// totalAlloc returns the bytes allocated so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// BenchmarkDaemonHeap runs the whole daemon (-dry-run) with run.sh's
// configuration (5,000 back ends checked every second) against the
// in-process responder for heapWarm and b.N seconds and then, still
// running, reports
// its live heap, stacks and goroutines (heapFigures; LBDNS_HEAPPROFILE
// names a file for the heap profile):
//
//	LBDNS_HEAPPROFILE=heap.out go test ./bench/health -run '^$' -bench DaemonHeap -benchtime 8x
func BenchmarkDaemonHeap(b *testing.B) {
	startResponder(b)
	d, err := daemon.New(daemon.Options{ConfigPath: writeConfig(b, b.TempDir()), DryRun: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	time.Sleep(heapWarm)
	b.ReportAllocs()
	alloc0 := totalAlloc()
	b.ResetTimer()
	time.Sleep(time.Duration(b.N) * time.Second)
	b.StopTimer()
	heapFigures(b, "daemon", alloc0)
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEngineHeap is BenchmarkDaemonHeap without the daemon: the
// monitor and the DNS checkers of the batch engine only, 5,000 targets
// at a 1 s interval, b.N seconds of checks.
func BenchmarkEngineHeap(b *testing.B) {
	startResponder(b)
	p := probes.NewDNSProber()
	defer func() {
		if err := p.Close(); err != nil {
			b.Error(err)
		}
	}()
	var results, failed atomic.Int64
	m := monitor.New(monitor.Options{
		OnEvent: func(monitor.Event) {},
		OnResult: func(_ monitor.Key, r probes.Result) {
			results.Add(1)
			if !r.OK {
				failed.Add(1)
			}
		},
	})
	chk := benchCheck()
	build := probes.NewBuilder(probes.Deps{DNS: p})
	targets := make([]monitor.Target, benchTargets)
	for i := range targets {
		a := netip.AddrPortFrom(loopback, uint16(benchBasePort+i))
		c, err := build.Build(chk, a)
		if err != nil {
			b.Fatal(err)
		}
		targets[i] = monitor.Target{Key: monitor.Key{Kind: "resolver", Member: fmt.Sprint("r", i), Check: chk.Name}, Addr: a, Checker: c,
			Spec: chk.ProbeIdentity(), Schedule: monitor.Schedule{Interval: chk.Interval.Duration, Timeout: chk.Timeout.Duration, Rise: chk.Rise, Fall: chk.Fall}}
	}
	m.Update(targets)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	time.Sleep(heapWarm)
	b.ReportAllocs()
	alloc0 := totalAlloc()
	b.ResetTimer()
	time.Sleep(time.Duration(b.N) * time.Second)
	b.StopTimer()
	heapFigures(b, "engine", alloc0)
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(results.Load()), "checks")
	if n := failed.Load(); n > 0 {
		b.Errorf("%d of %d checks failed", n, results.Load())
	}
}

// steadyWarm is how long BenchmarkDaemonSteady runs before it counts:
// the daemon's start-up, the first identifications and the first
// verdicts (rise 2 at 1 s) are over.
const steadyWarm = 8 * time.Second

// BenchmarkDaemonSteady runs the whole daemon (-dry-run) with run.sh's
// configuration and, after steadyWarm, counts b.N seconds of the steady
// state, as run.sh measures it: the checks the responder received, the
// process's CPU per check (the in-process responder's included) and, with
// LBDNS_CPUPROFILE set, a CPU profile of that window only.
func BenchmarkDaemonSteady(b *testing.B) {
	r := startResponder(b)
	d, err := daemon.New(daemon.Options{ConfigPath: writeConfig(b, b.TempDir()), DryRun: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	time.Sleep(steadyWarm)
	if path := os.Getenv("LBDNS_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	q0, cpu0 := r.Queries(), cpuTime(b)
	b.ResetTimer()
	time.Sleep(time.Duration(b.N) * time.Second)
	b.StopTimer()
	q, cpu := r.Queries()-q0, cpuTime(b)-cpu0
	pprof.StopCPUProfile()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(q)/float64(b.N), "checks/s")
	if q > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(q), "cpu-ns/check")
	}
}
