package monitor

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"lbdns/check"
)

// cpuTime returns the process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSchedule runs a monitor with n targets at interval and an instant
// fake probe until b.N × perOp probes were made. It reports probes per
// second, CPU nanoseconds per probe, and the share of one core that 5,000
// targets at a 1 s interval would use at that cost.
func benchSchedule(b *testing.B, n int, interval time.Duration, perOp int) {
	var count atomic.Int64
	want := int64(b.N) * int64(perOp)
	done := make(chan struct{})
	var once sync.Once
	probe := check.Func(func(context.Context) check.Result {
		if count.Add(1) == want {
			once.Do(func() { close(done) })
		}
		return check.Result{OK: true, Detail: "NOERROR"}
	})
	m := New(Options{OnEvent: func(Event) {}})
	s := Schedule{Interval: interval, Timeout: interval / 2, Rise: 2, Fall: 3}
	targets := make([]Target, n)
	for i := range targets {
		a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 2, byte(i >> 8), byte(i)}), 53)
		targets[i] = Target{Key: Key{Kind: "bench", Member: fmt.Sprint(i), Check: "bench"}, Addr: a, Schedule: s, Checker: probe, Spec: "bench"}
	}
	m.Update(targets)

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	b.ReportAllocs()
	cpu0, wall0 := cpuTime(b), time.Now()
	b.ResetTimer()
	go func() { ran <- m.Run(ctx) }()
	<-done
	b.StopTimer()
	cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	cpuPerProbe := float64(cpu.Nanoseconds()) / float64(want)
	b.ReportMetric(float64(want)/wall.Seconds(), "probes/s")
	b.ReportMetric(cpuPerProbe, "cpu-ns/probe")
	b.ReportMetric(cpuPerProbe*5000/1e9*100, "%core@5k/s")
}

// BenchmarkMonitorSchedule saturates the scheduler: 5,000 targets at a
// 1 ms interval with an instant probe; one op is one probe.
func BenchmarkMonitorSchedule(b *testing.B) {
	benchSchedule(b, 5000, time.Millisecond, 1)
}

// BenchmarkMonitor5000At1s is the sizing case itself: 5,000 targets at a
// 1 s interval; one op is 5,000 probes (about one second).
func BenchmarkMonitor5000At1s(b *testing.B) {
	benchSchedule(b, 5000, time.Second, 5000)
}
