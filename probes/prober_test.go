package probes

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
)

// rawServer is a loopback UDP DNS server whose script sees the n-th query
// (from 0) and sends any datagrams it likes back, in order.
type rawServer struct {
	pc   net.PacketConn
	wg   sync.WaitGroup
	Addr netip.AddrPort
}

// script returns the datagrams to send for the n-th query req.
type script func(n int, req *dns.Msg) []*dns.Msg

func startRaw(t *testing.T, sc script) *rawServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{pc: pc, Addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	s.wg.Go(func() {
		buf := make([]byte, 65535)
		for n := 0; ; n++ {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req := new(dns.Msg)
			if err := req.Unpack(buf[:k]); err != nil {
				continue
			}
			for _, m := range sc(n, req) {
				out, err := m.Pack()
				if err != nil {
					panic(err)
				}
				_, _ = pc.WriteTo(out, from)
			}
		}
	})
	t.Cleanup(s.stop)
	return s
}

func (s *rawServer) stop() {
	_ = s.pc.Close()
	s.wg.Wait()
}

// idleSock returns target's idle socket in p, or nil.
func idleSock(p *DNSProber, target netip.AddrPort) *udpSock {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle[target]
}

func idleLen(p *DNSProber) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// isClosed reports whether conn was closed by its owner.
func isClosed(conn *net.UDPConn) bool {
	_, err := conn.Write([]byte{0})
	return errors.Is(err, net.ErrClosed)
}

type step struct {
	wantOK     bool
	wantDetail string // substring
	wantDials  int64  // after the step
}

func TestDNSProberReuse(t *testing.T) {
	var (
		mu    sync.Mutex
		prevs []*dns.Msg // replies sent so far, by query
	)
	remember := func(r *dns.Msg) *dns.Msg {
		mu.Lock()
		prevs = append(prevs, r)
		mu.Unlock()
		return r
	}
	prev := func(n int) *dns.Msg {
		mu.Lock()
		defer mu.Unlock()
		return prevs[n-1]
	}
	tests := []struct {
		name   string
		script script
		steps  []step
	}{
		{
			name:   "clean exchanges reuse one socket",
			script: func(_ int, req *dns.Msg) []*dns.Msg { return []*dns.Msg{good(req)} },
			steps:  []step{{true, "NOERROR", 1}, {true, "NOERROR", 1}, {true, "NOERROR", 1}, {true, "NOERROR", 1}},
		},
		{
			name:   "a failed check on a clean exchange keeps the socket",
			script: func(_ int, req *dns.Msg) []*dns.Msg { return []*dns.Msg{answer(req, dns.RcodeServerFailure)} },
			steps:  []step{{false, "rcode SERVFAIL", 1}, {false, "rcode SERVFAIL", 1}},
		},
		{
			name: "a timeout closes the socket",
			script: func(n int, req *dns.Msg) []*dns.Msg {
				if n == 1 {
					return nil
				}
				return []*dns.Msg{good(req)}
			},
			steps: []step{{true, "NOERROR", 1}, {false, "timeout after 200ms", 1}, {true, "NOERROR", 2}, {true, "NOERROR", 2}},
		},
		{
			name: "a late duplicate of the previous answer is skipped",
			script: func(n int, req *dns.Msg) []*dns.Msg {
				r := remember(good(req))
				if n == 0 {
					return []*dns.Msg{r}
				}
				return []*dns.Msg{prev(n), r} // the old answer first
			},
			steps: []step{{true, "NOERROR", 1}, {true, "NOERROR", 1}, {true, "NOERROR", 1}},
		},
		{
			name: "a stale reply with an unrelated id fails and closes the socket",
			script: func(n int, req *dns.Msg) []*dns.Msg {
				r := remember(good(req))
				if n != 1 {
					return []*dns.Msg{r}
				}
				stale := good(req)
				stale.Id = req.Id + 7
				if stale.Id == prev(n).Id {
					stale.Id++ // unrelated to the previous query too
				}
				return []*dns.Msg{stale, r}
			},
			steps: []step{{true, "NOERROR", 1}, {false, "id mismatch", 1}, {true, "NOERROR", 2}},
		},
		{
			name: "a duplicate of an older answer is an id mismatch",
			script: func(n int, req *dns.Msg) []*dns.Msg {
				r := remember(good(req))
				if n == 2 {
					return []*dns.Msg{prev(n - 1), r} // two queries back
				}
				return []*dns.Msg{r}
			},
			steps: []step{{true, "NOERROR", 1}, {true, "NOERROR", 1}, {false, "id mismatch", 1}, {true, "NOERROR", 2}},
		},
		{
			name: "a truncated reply closes the socket",
			script: func(n int, req *dns.Msg) []*dns.Msg {
				if n == 1 {
					return []*dns.Msg{truncated(req)}
				}
				return []*dns.Msg{good(req)}
			},
			// No TCP listener: the retry is refused.
			steps: []step{{true, "NOERROR", 1}, {false, "truncated over udp; tcp: connection refused", 1}, {true, "NOERROR", 2}},
		},
		{
			name: "a wrong header with the right id keeps the socket",
			script: func(n int, req *dns.Msg) []*dns.Msg {
				r := good(req)
				if n == 0 {
					r.Response = false
				}
				return []*dns.Msg{r}
			},
			steps: []step{{false, "not a response", 1}, {true, "NOERROR", 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			prevs = nil
			mu.Unlock()
			srv := startRaw(t, tt.script)
			p := NewDNSProber()
			defer p.Close()
			var last *udpSock
			for i, st := range tt.steps {
				before := p.dials.Load()
				res := p.Probe(context.Background(), srv.Addr, fixedCheck())
				if res.OK != st.wantOK || !strings.Contains(res.Detail, st.wantDetail) {
					t.Errorf("probe %d: got %+v, want OK %v and %q", i, res, st.wantOK, st.wantDetail)
				}
				if got := p.dials.Load(); got != st.wantDials {
					t.Errorf("probe %d: %d dials so far, want %d", i, got, st.wantDials)
				}
				cur := idleSock(p, srv.Addr)
				switch {
				case res.OK && cur == nil:
					t.Errorf("probe %d: clean exchange, but no idle socket", i)
				case !res.OK && strings.Contains(res.Detail, "rcode") && cur == nil:
					t.Errorf("probe %d: clean exchange, but no idle socket", i)
				case cur == nil && last != nil && !isClosed(last.conn):
					t.Errorf("probe %d: socket dropped but not closed", i)
				}
				if cur != nil && last != nil && p.dials.Load() == before &&
					cur.conn.LocalAddr().String() != last.conn.LocalAddr().String() {
					t.Errorf("probe %d: local address changed from %s to %s without a dial", i,
						last.conn.LocalAddr(), cur.conn.LocalAddr())
				}
				if cur != nil {
					last = cur
				}
			}
		})
	}
}

func TestDNSProberAvoidsPreviousID(t *testing.T) {
	srv := startRaw(t, func(_ int, req *dns.Msg) []*dns.Msg { return []*dns.Msg{good(req)} })
	p := NewDNSProber()
	defer p.Close()
	if res := p.Probe(context.Background(), srv.Addr, fixedCheck()); !res.OK {
		t.Fatalf("first probe: %+v", res)
	}
	last := idleSock(p, srv.Addr).lastID
	c, err := buildDNSChecker(fixedCheck(), srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	q := c.query()
	q.Id = last // as if the random ID repeated the previous one
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	reply, err := p.exchangeUDP(ctx, srv.Addr, q, wire)
	if err != nil {
		t.Fatal(err)
	}
	if q.Id == last {
		t.Fatalf("query kept the previous id %d", last)
	}
	if v, d := checkReplyOf(q, reply, fixedCheck().DNS); v != verdictOK {
		t.Fatalf("reply: %s", d)
	}
	if p.dials.Load() != 1 {
		t.Errorf("%d dials, want 1", p.dials.Load())
	}
}

func TestDNSProberConnectionRefusedOnReusedSocket(t *testing.T) {
	srv := startRaw(t, func(_ int, req *dns.Msg) []*dns.Msg { return []*dns.Msg{good(req)} })
	p := NewDNSProber()
	defer p.Close()
	if res := p.Probe(context.Background(), srv.Addr, fixedCheck()); !res.OK {
		t.Fatalf("first probe: %+v", res)
	}
	s := idleSock(p, srv.Addr)
	if s == nil {
		t.Fatal("no idle socket after a clean exchange")
	}
	srv.stop()
	res := p.Probe(context.Background(), srv.Addr, fixedCheck())
	if res.OK || res.Detail != "connection refused" {
		t.Errorf("got %+v, want failure %q", res, "connection refused")
	}
	if p.dials.Load() != 1 {
		t.Errorf("%d dials, want 1 (the second probe on the reused socket)", p.dials.Load())
	}
	if idleSock(p, srv.Addr) != nil || !isClosed(s.conn) {
		t.Error("socket kept after connection refused")
	}
}

func TestDNSProberConcurrent(t *testing.T) {
	srv := startServer(t, good, nil)
	p := NewDNSProber()
	defer p.Close()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan string, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				if res := p.Probe(context.Background(), srv.Addr, fixedCheck()); !res.OK {
					errs <- res.Detail
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for d := range errs {
		t.Errorf("probe failed: %s", d)
	}
	// With one idle socket kept per target, concurrent probes dial their
	// own and some of those are closed on return: more dials than workers
	// are fine, more than probes are not.
	if n := p.dials.Load(); n < 1 || n > workers*each {
		t.Errorf("%d dials for %d probes", n, workers*each)
	}
	t.Logf("%d dials for %d probes by %d workers", p.dials.Load(), workers*each, workers)
	if n := idleLen(p); n != 1 {
		t.Errorf("%d idle sockets, want 1 (at most one per target)", n)
	}
}

func TestDNSProberClose(t *testing.T) {
	p := NewDNSProber()
	var socks []*udpSock
	for range 3 {
		srv := startServer(t, good, nil)
		if res := p.Probe(context.Background(), srv.Addr, fixedCheck()); !res.OK {
			t.Fatalf("probe: %+v", res)
		}
		socks = append(socks, idleSock(p, srv.Addr))
	}
	if n := idleLen(p); n != 3 {
		t.Fatalf("%d idle sockets, want 3", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range socks {
		if !isClosed(s.conn) {
			t.Errorf("socket %d open after Close", i)
		}
	}
	srv := startServer(t, good, nil)
	if res := p.Probe(context.Background(), srv.Addr, fixedCheck()); !res.OK {
		t.Errorf("probe after Close: %+v", res)
	}
	if n := idleLen(p); n != 0 {
		t.Errorf("%d idle sockets after Close and a probe, want 0", n)
	}
}

func TestDNSProberIdleSweep(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &DNSProber{idleTimeout: time.Minute, now: func() time.Time { return now }}
	defer p.Close()
	a, b := startServer(t, good, nil), startServer(t, good, nil)
	probe := func(srv *testServer) {
		t.Helper()
		if res := p.Probe(context.Background(), srv.Addr, fixedCheck()); !res.OK {
			t.Fatalf("probe: %+v", res)
		}
	}
	probe(a)
	sa := idleSock(p, a.Addr)
	now = now.Add(50 * time.Second)
	probe(b) // a is 50s idle: kept
	if idleSock(p, a.Addr) != sa {
		t.Fatal("socket of a swept before its idle timeout")
	}
	now = now.Add(20 * time.Second)
	probe(b) // a is 70s idle: swept
	if idleSock(p, a.Addr) != nil || !isClosed(sa.conn) {
		t.Error("socket of a not closed after its idle timeout")
	}
	if idleSock(p, b.Addr) == nil {
		t.Error("socket of b swept")
	}
	// A socket found stale at take time is replaced, not used.
	sb := idleSock(p, b.Addr)
	now = now.Add(2 * time.Minute)
	dials := p.dials.Load()
	probe(b)
	if p.dials.Load() != dials+1 || !isClosed(sb.conn) {
		t.Error("stale idle socket of b reused")
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

func TestDNSProberNoFDLeak(t *testing.T) {
	// Warm up the runtime's poller so that its descriptors count in both.
	warm := startServer(t, good, nil)
	DNS(context.Background(), warm.Addr, fixedCheck())
	warm.stop()
	before := openFDs(t)

	p := NewDNSProber()
	var servers []*rawServer
	for i := range 4 {
		servers = append(servers, startRaw(t, func(n int, req *dns.Msg) []*dns.Msg {
			if (n+i)%3 == 2 {
				return nil // a timeout now and then
			}
			return []*dns.Msg{good(req)}
		}))
	}
	chk := withCheck(fixedCheck(), func(c *configs.Check) { c.Timeout.Duration = 50 * time.Millisecond })
	var wg sync.WaitGroup
	for _, srv := range servers {
		for range 3 {
			wg.Go(func() {
				for range 6 {
					p.Probe(context.Background(), srv.Addr, chk)
				}
			})
		}
	}
	wg.Wait()
	if idleLen(p) == 0 {
		t.Error("no idle sockets after the probes")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, srv := range servers {
		srv.stop()
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d open descriptors after, %d before", after, before)
	}
}
