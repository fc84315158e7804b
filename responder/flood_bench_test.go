package responder

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"lbdns/flood"
)

// BenchmarkFloodCounting is a UDP reader's path of one query with the
// flood counting off and on, paired in one run: the reply and, when
// on, the record of its client, name, type and reply code into the reader's
// flood.Producer, as readUDP does. A drainer keeps up on its own
// goroutine (drained: the daemon's pace): its cost per query is flood's
// BenchmarkTrackerAdd.
func BenchmarkFloodCounting(b *testing.B) {
	src := netip.MustParseAddr("127.0.0.1")
	wire, err := query("dyn.bench.test.", dns.TypeA, 1232).Pack()
	if err != nil {
		b.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			s := snapshotServer(b, pathDoc)
			sc := &scratch{reader: true, counters: counterCache{local: true}}
			var fp *flood.Producer
			if on {
				p := drained(b)
				fp = p.Producer(flood.SourceResponder)
				defer fp.Close()
			}
			buf := make([]byte, dns.MaxMsgSize)
			in := make([]byte, len(wire))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				copy(in, wire)
				out := s.reply(sc, buf, in, src, false)
				if out == nil {
					b.Fatal("no reply")
				}
				if fp != nil {
					fp.AddMessage(src, in, out)
				}
			}
			// The process's CPU (every thread: the drainer's and
			// the collector's too) per query: less sensitive than
			// the time to a host shared with other work.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// drained returns a pipeline drained as the daemon drains it, on a
// goroutine of its own until the benchmark ends: at once when a batch is
// full, and every 100 ms with the epochs rotated.
func drained(b *testing.B) *flood.Pipeline {
	p := flood.NewPipeline(flood.Config{}, time.Now())
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-p.Wake():
				p.Drain()
			case now := <-t.C:
				p.Step(now, nil)
			}
		}
	}()
	b.Cleanup(func() { close(stop); <-done })
	return p
}

// processCPU is the CPU time the process used so far, user and system,
// in nanoseconds.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestFloodCountingAllocs: counting keeps a reader's path free of
// allocations.
func TestFloodCountingAllocs(t *testing.T) {
	s := snapshotServer(t, pathDoc)
	sc := &scratch{reader: true, counters: counterCache{local: true}}
	p := flood.NewPipeline(flood.Config{}, time.Now())
	fp := p.Producer(flood.SourceResponder)
	defer fp.Close()
	src := netip.MustParseAddr("127.0.0.1")
	wire, _ := query("dyn.bench.test.", dns.TypeA, 1232).Pack()
	buf := make([]byte, dns.MaxMsgSize)
	in := make([]byte, len(wire))
	run := func() {
		copy(in, wire)
		fp.AddMessage(src, in, s.reply(sc, buf, in, src, false))
	}
	run()
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Errorf("reply and count: %v allocs, want 0", n)
	}
	p.Drain()
	p.Step(time.Now().Add(2*time.Second), nil)
	if v := p.Top(flood.SourceResponder, flood.KindNameType, 10*time.Second, 1); len(v.Entries) != 1 || v.Entries[0].Key != "dyn.bench.test. A" || v.Rcodes[dns.RcodeSuccess] != v.Queries {
		t.Errorf("counted: %+v", v)
	}
}

// startFlood starts a Server of the configuration pathDoc on
// 127.0.0.1:0 with one UDP reader, counting into p (nil: off).
func startFlood(tb testing.TB, p *flood.Pipeline) *Server {
	tb.Helper()
	s := snapshotServer(tb, pathDoc)
	s.Listen = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}
	s.UDPReaders = 1
	s.Flood = p
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// TestFloodCountedOnWire: queries over real UDP and TCP sockets are
// counted with their client, name, type and reply code; a UDP query
// costs no allocation with counting on.
func TestFloodCountedOnWire(t *testing.T) {
	t0 := time.Now()
	p := flood.NewPipeline(flood.Config{}, t0)
	s := startFlood(t, p)
	addr := s.Addrs()[0].String()
	for range 3 {
		if r := exchange(t, addr, "udp", query("dyn.bench.test.", dns.TypeA, 1232)); r.Rcode != dns.RcodeSuccess {
			t.Fatalf("udp: %v", r)
		}
	}
	for range 2 {
		if r := exchange(t, addr, "tcp", query("NX.bench.test.", dns.TypeAAAA, 1232)); r.Rcode != dns.RcodeNameError {
			t.Fatalf("tcp: %v", r)
		}
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	wire, _ := query("dyn.bench.test.", dns.TypeA, 1232).Pack()
	buf := make([]byte, 1232)
	ex := func() {
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		ex()
	}
	const n = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		ex()
	}
	runtime.ReadMemStats(&after)
	if per := float64(after.Mallocs-before.Mallocs) / n; per >= 0.5 {
		t.Errorf("%.2f allocations per query over UDP with counting on, want 0", per)
	}
	p.Step(t0.Add(2*time.Second), nil)
	v := p.Top(flood.SourceResponder, flood.KindNameType, 10*time.Second, 10)
	if v.Queries != 3+2+20+n || v.Rcodes[dns.RcodeNameError] != 2 {
		t.Fatalf("counted %d queries (rcodes %v), want %d", v.Queries, v.Rcodes, 3+2+20+n)
	}
	want := map[string]uint64{"dyn.bench.test. A": 3 + 20 + n, "nx.bench.test. AAAA": 2}
	for _, e := range v.Entries {
		if want[e.Key] != e.Count || e.Error != 0 {
			t.Errorf("%s: %d (error %d), want %d", e.Key, e.Count, e.Error, want[e.Key])
		}
		delete(want, e.Key)
	}
	if len(want) != 0 {
		t.Errorf("not counted: %v", want)
	}
	if c := p.Top(flood.SourceResponder, flood.KindClient, 10*time.Second, 10); len(c.Entries) != 1 || c.Entries[0].Key != "127.0.0.1" {
		t.Errorf("clients: %+v", c.Entries)
	}
}

// BenchmarkFloodResponder is the responder over a real UDP socket on
// loopback with counting off and on (one reader; a client in the same
// process keeps 32 queries in flight): ns/op is the time per query,
// cpu-ns/op the process's CPU per query (the client's too, the same in
// both). Run with -count to pair them.
func BenchmarkFloodResponder(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var p *flood.Pipeline
			if on {
				p = drained(b)
			}
			s := startFlood(b, p)
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addrs()[0]))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			wire, _ := query("dyn.bench.test.", dns.TypeA, 1232).Pack()
			buf := make([]byte, 1232)
			const window = 32
			b.ReportAllocs()
			cpu0 := processCPU()
			sent, got := 0, 0
			c.SetDeadline(time.Now().Add(time.Minute))
			for b.Loop() {
				for sent-got < window {
					if _, err := c.Write(wire); err != nil {
						b.Fatal(err)
					}
					sent++
				}
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
				got++
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			for ; got < sent; got++ {
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
