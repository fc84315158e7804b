package healthbench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"lbdns/monitor"
	"lbdns/probes"
)

// Pacing of BenchmarkCheck: benchTargets targets every checkInterval,
// checks due within checkCoalesce started in one wake-up. That is 500
// checks a second in wake-ups of about 100 checks, the batches of
// run.sh's 5,000 checks a second in 20 ms windows, at a rate that
// callgrind's slowed-down process keeps up with.
const (
	checkInterval = 10 * time.Second
	checkCoalesce = 200 * time.Millisecond
	// checkWarm is the checks before the count starts: two of every
	// target and a few more.
	checkWarm = 2*benchTargets + 500
)

// BenchmarkCheck measures one check end to end, the way the daemon makes
// it: the monitor schedules it, the DNS checker builds the query, the
// batch engine sends it (sendmmsg, with the others of its wake-up),
// receives the reply (recvmmsg), matches, parses and judges it, and the
// monitor records the result in the target's tracker and queues the next
// check. One op is one check. The count starts after checkWarm checks,
// so that only the steady state counts: the engine's state of every
// target is made and every target is up (rise 2).
// It needs -benchtime Nx with N above 1 (the testing package's first run,
// at N 1, is skipped).
//
// The back ends are benchTargets loopback ports from benchBasePort: the
// in-process responder, or, with LBDNS_RESPONDER=external, a responder
// already running there (bench/health/responder -ports 25000-29999), so
// that its work is not counted. For instruction counts, which other load
// on the machine does not disturb, run it at two N under callgrind and
// divide the difference of the counts by the difference of N:
//
//	go test -c -o health.test ./bench/health
//	GOGC=off GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 LBDNS_RESPONDER=external \
//	  valgrind --tool=callgrind ./health.test -test.run '^$' -test.bench '^BenchmarkCheck$' -test.benchtime 2000x
func BenchmarkCheck(b *testing.B) {
	if b.N == 1 {
		// The testing package's first run, before the -benchtime
		// one: its setup and the collection that follows it would
		// be counted at every N, unevenly.
		return
	}
	if os.Getenv("LBDNS_RESPONDER") != "external" {
		startResponder(b)
	}
	p := probes.NewDNSProber()
	defer func() {
		if err := p.Close(); err != nil {
			b.Error(err)
		}
	}()
	var count, failed atomic.Int64
	var want atomic.Int64
	want.Store(-1)
	done := make(chan struct{}, 1)
	m := monitor.New(monitor.Options{
		Coalesce: checkCoalesce,
		OnEvent:  func(monitor.Event) {},
		OnResult: func(_ monitor.Key, r probes.Result) {
			if !r.OK {
				failed.Add(1)
			}
			if count.Add(1) == want.Load() {
				signal(done)
			}
		},
	})
	chk := benchCheck()
	chk.Interval.Duration = checkInterval
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
	want.Store(checkWarm)
	go func() { ran <- m.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(2*checkWarm*checkInterval/benchTargets + time.Minute):
		b.Fatalf("warm-up: only %d of %d checks in time", count.Load(), checkWarm)
	}
	b.ReportAllocs()
	b.ResetTimer()
	want.Store(count.Load() + int64(b.N))
	if count.Load() >= want.Load() {
		signal(done)
	}
	select {
	case <-done:
	case <-time.After(time.Duration(b.N)*time.Second + time.Minute):
		b.Errorf("only %d of %d checks in time", count.Load(), b.N)
	}
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		b.Errorf("%d checks failed", n)
	}
}

// signal sends on c unless a send already waits there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
