package probes

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/testkit/poll"
)

// batchProbes returns the probes through p's batch engine (StartCheck),
// twice, for tests that judge every probe path alike.
func batchProbes(p *DNSProber) []Func {
	f := func(ctx context.Context, target netip.AddrPort, chk *configs.Check) Result {
		c, err := buildDNSChecker(chk, target)
		if err != nil {
			return Result{RTT: time.Nanosecond, Detail: "bad check: " + err.Error()}
		}
		c.p = p
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(c.timeout)
		}
		ch := make(chan check.Result, 1)
		c.StartCheck(deadline, func(r check.Result) { ch <- r })
		return <-ch
	}
	return []Func{f, f}
}

func TestBatchConnectionRefused(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	p := NewDNSProber()
	defer p.Close()
	for i, probe := range batchProbes(p) {
		start := time.Now()
		res := probe(context.Background(), addr, fixedCheck())
		if res.OK || res.Detail != "connection refused" {
			t.Errorf("probe %d: got %+v, want failure %q", i, res, "connection refused")
		}
		if el := time.Since(start); el > 100*time.Millisecond {
			t.Errorf("probe %d: refusal took %v, want it at once", i, el)
		}
	}
}

// TestBatchStrayReplyDropped: a correct answer from another address than
// the target's is dropped and counted, never credited: the probe times out.
func TestBatchStrayReplyDropped(t *testing.T) {
	target, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	other, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 512)
		n, from, err := target.ReadFrom(buf)
		if err != nil {
			return
		}
		req := new(dns.Msg)
		if req.Unpack(buf[:n]) != nil {
			return
		}
		out, _ := good(req).Pack()
		_, _ = other.WriteTo(out, from)
	})
	defer wg.Wait()
	p := NewDNSProber()
	defer p.Close()
	res := batchProbes(p)[0](context.Background(), target.LocalAddr().(*net.UDPAddr).AddrPort(), fixedCheck())
	if res.OK || !strings.HasPrefix(res.Detail, "timeout after") {
		t.Errorf("got %+v, want a timeout", res)
	}
	if n := p.DroppedReplies(); n != 1 {
		t.Errorf("dropped replies = %d, want 1", n)
	}
}

// TestBatchLateDuplicateSkipped: a late duplicate of the previous answer
// is skipped, and the answer to the current query judged.
func TestBatchLateDuplicateSkipped(t *testing.T) {
	var prev *dns.Msg
	srv := startRaw(t, func(n int, req *dns.Msg) []*dns.Msg {
		r := good(req)
		out := []*dns.Msg{r}
		if prev != nil {
			out = []*dns.Msg{prev, r}
		}
		prev = r
		return out
	})
	p := NewDNSProber()
	defer p.Close()
	for i := range 3 {
		res := batchProbes(p)[0](context.Background(), srv.Addr, fixedCheck())
		if !res.OK {
			t.Errorf("probe %d: %+v, want OK", i, res)
		}
	}
}

// TestBatchConcurrentSameTarget: probes of two checkers in flight to one
// address at once each get their own answer.
func TestBatchConcurrentSameTarget(t *testing.T) {
	srv := startServer(t, good, nil)
	p := NewDNSProber()
	defer p.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if res := batchProbes(p)[0](context.Background(), srv.Addr, fixedCheck()); !res.OK {
				t.Errorf("got %+v, want OK", res)
			}
		})
	}
	wg.Wait()
}

// TestBatchClose: Close ends a probe in flight at once.
func TestBatchClose(t *testing.T) {
	srv := startServer(t, silent, nil)
	p := NewDNSProber()
	chk := withCheck(fixedCheck(), func(c *configs.Check) { c.Timeout = configs.Duration{Duration: time.Minute} })
	done := make(chan Result, 1)
	go func() { done <- batchProbes(p)[0](context.Background(), srv.Addr, chk) }()
	poll.Until(t, 5*time.Second, "probe in flight", poll.True(func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		e := p.engines[0]
		if e == nil {
			return false
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.pending == 1
	}))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.OK || res.Detail != "canceled" {
		t.Errorf("got %+v, want canceled", res)
	}
}

// TestBatchConnectionRefusedUnderLoad: one refused target among many
// healthy ones, all probed at once, so that the refused query shares a
// sendmmsg with others. On loopback the ICMP error is raised while that
// sendmmsg still runs, and the socket error it sets is taken by the next
// datagram's send, not by a read: each refused probe must still fail with
// "connection refused" (not a timeout) and no healthy probe may be blamed.
func TestBatchConnectionRefusedUnderLoad(t *testing.T) {
	const healthy, rounds = 60, 10
	refused, targets := refusedAmong(t, healthy)
	p := NewDNSProber()
	defer p.Close()
	chk := withCheck(fixedCheck(), func(c *configs.Check) { c.Timeout = configs.Duration{Duration: 2 * time.Second} })
	checkers := make([]*dnsChecker, len(targets))
	for i, a := range targets {
		c, err := buildDNSChecker(chk, a)
		if err != nil {
			t.Fatal(err)
		}
		c.p = p
		checkers[i] = c
	}
	type outcome struct {
		target netip.AddrPort
		res    check.Result
		took   time.Duration
	}
	for round := range rounds {
		ch := make(chan outcome, len(targets))
		start := time.Now()
		for i, c := range checkers {
			c.StartCheck(start.Add(2*time.Second), func(r check.Result) {
				ch <- outcome{targets[i], r, time.Since(start)}
			})
		}
		for range targets {
			o := <-ch
			switch {
			case o.target == refused && (o.res.OK || o.res.Detail != "connection refused"):
				t.Errorf("round %d: refused target: got %+v after %v, want %q", round, o.res, o.took, "connection refused")
			case o.target == refused && o.took > time.Second:
				t.Errorf("round %d: refusal took %v, want it well before the timeout", round, o.took)
			case o.target != refused && !o.res.OK:
				t.Errorf("round %d: healthy target %v: got %+v, want OK", round, o.target, o.res)
			}
		}
	}
}

// TestBatchIPv6: the engine of IPv6 matches replies by their source and
// fails a refused probe at once, as the one of IPv4 does.
func TestBatchIPv6(t *testing.T) {
	pc, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	s := &testServer{conns: map[net.Conn]struct{}{}, udp: pc, Addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	s.wg.Add(1)
	go s.serveUDP(good)
	t.Cleanup(s.stop)
	closed, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.LocalAddr().(*net.UDPAddr).AddrPort()
	closed.Close()
	p := NewDNSProber()
	defer p.Close()
	probe := batchProbes(p)[0]
	for range 3 {
		if res := probe(context.Background(), s.Addr, fixedCheck()); !res.OK {
			t.Errorf("got %+v, want OK", res)
		}
		if res := probe(context.Background(), refused, fixedCheck()); res.OK || res.Detail != "connection refused" {
			t.Errorf("refused: got %+v, want %q", res, "connection refused")
		}
	}
}

// TestBatchHeld: checks started with StartHeld wait for the engine's Flush
// (monitor.BatchChecker), then go out together and are judged as
// StartCheck's are, a refused target among them included.
func TestBatchHeld(t *testing.T) {
	const healthy = 40
	refused, targets := refusedAmong(t, healthy)
	p := NewDNSProber()
	defer p.Close()
	chk := withCheck(fixedCheck(), func(c *configs.Check) { c.Timeout = configs.Duration{Duration: 2 * time.Second} })
	type outcome struct {
		target netip.AddrPort
		res    check.Result
	}
	for round := range 3 {
		ch := make(chan outcome, len(targets))
		var flusher interface{ Flush() }
		deadline := time.Now().Add(2 * time.Second)
		for i, a := range targets {
			c, err := buildDNSChecker(chk, a)
			if err != nil {
				t.Fatal(err)
			}
			c.p = p
			f := c.StartHeld(deadline, func(r check.Result) { ch <- outcome{targets[i], r} })
			if f == nil || (flusher != nil && f != flusher) {
				t.Fatalf("round %d: StartHeld returned %v, want the engine (%v)", round, f, flusher)
			}
			flusher = f
		}
		e := flusher.(*engine)
		e.mu.Lock()
		queued := len(e.sendq)
		e.mu.Unlock()
		if queued != len(targets) {
			t.Fatalf("round %d: %d queries queued before Flush, want %d", round, queued, len(targets))
		}
		flusher.Flush()
		for range targets {
			o := <-ch
			switch {
			case o.target == refused && (o.res.OK || o.res.Detail != "connection refused"):
				t.Errorf("round %d: refused target: got %+v, want %q", round, o.res, "connection refused")
			case o.target != refused && !o.res.OK:
				t.Errorf("round %d: healthy target %v: got %+v, want OK", round, o.target, o.res)
			}
		}
	}
}

// TestBatchSweepEarlierDeadline: the sweeper, asleep until a far deadline,
// is woken by a probe with a nearer one, which times out on time.
func TestBatchSweepEarlierDeadline(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0") // reads, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	addr := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	p := NewDNSProber()
	defer p.Close()
	c, err := buildDNSChecker(fixedCheck(), addr)
	if err != nil {
		t.Fatal(err)
	}
	c.p = p
	far := make(chan check.Result, 1)
	c.StartCheck(time.Now().Add(10*time.Second), func(r check.Result) { far <- r })
	// The sweeper, woken by the first probe, now sleeps sweepIdle.
	time.Sleep(5 * time.Millisecond)
	start := time.Now()
	near := make(chan check.Result, 1)
	c.StartCheck(start.Add(20*time.Millisecond), func(r check.Result) { near <- r })
	select {
	case r := <-near:
		if r.OK || !strings.HasPrefix(r.Detail, "timeout after") {
			t.Errorf("near probe: got %+v, want a timeout", r)
		}
		if el := time.Since(start); el > sweepIdle*3/4 {
			t.Errorf("near probe timed out after %v, want about 20ms", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("near probe never ended")
	}
}

// refusedAmong starts healthy good servers and returns their addresses
// with, in the middle, refused: a loopback UDP port nothing listens on.
func refusedAmong(t *testing.T, healthy int) (refused netip.AddrPort, targets []netip.AddrPort) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	for i := range healthy {
		if i == healthy/2 {
			targets = append(targets, refused)
		}
		targets = append(targets, startServer(t, good, nil).Addr)
	}
	return refused, targets
}
