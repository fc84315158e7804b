package responder

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/gslb"
)

// startTCP starts a Server on 127.0.0.1:0 with the TCP limits lim and
// metrics, answering from the fake snapshot, stopped when the test ends.
func startTCP(t *testing.T, lim TCPLimits, read func()) (*Server, string, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, UDPReaders: 1, TCP: lim, Metrics: m, tcpRead: read}
	s.Swap(&fake{})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s, s.Addrs()[0].String(), reg
}

// tcpMetric is the value of the series name (with the label value
// label, or "" for none) in reg.
func tcpMetric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// dialFrom opens a TCP connection to addr from the loopback address src
// (127.0.0.0/8 is all the host's own), closed when the test ends.
func dialFrom(t *testing.T, src, addr string) *net.TCPConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// framed is the query www A with id, length-prefixed for TCP.
func framed(t *testing.T, id uint16) []byte {
	t.Helper()
	m := query("www."+zone, dns.TypeA, 0)
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)
}

// readReply reads one length-prefixed reply from c (within a bound that
// only a broken server reaches).
func readReply(c net.Conn) (*dns.Msg, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err
	}
	r := new(dns.Msg)
	return r, r.Unpack(b)
}

// ask sends the query www A with id on c and checks its answer.
func ask(t *testing.T, c net.Conn, id uint16) {
	t.Helper()
	if _, err := c.Write(framed(t, id)); err != nil {
		t.Fatalf("query %d: %v", id, err)
	}
	r, err := readReply(c)
	if err != nil {
		t.Fatalf("reply %d: %v", id, err)
	}
	if r.Id != id || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("reply %d: %v", id, r)
	}
}

// closedByServer reports whether the server closed c: a read ends with
// EOF or a reset before any reply.
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// askUDP checks that a UDP query to addr is answered.
func askUDP(t *testing.T, addr string) {
	t.Helper()
	if r := exchange(t, addr, "udp", query("www."+zone, dns.TypeA, 0)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("udp reply %v", r)
	}
}

// TestTCPTotalCap: beyond tcp_max_connections, each new connection
// closes the longest idle one (counted) and is answered; a UDP query and
// a TCP query from another client are answered; the connections open
// stay at the cap.
func TestTCPTotalCap(t *testing.T) {
	const capN, beyond = 20, 10
	_, addr, m := startTCP(t, TCPLimits{MaxConnections: capN, MaxPerSource: 1000, IdleTimeout: time.Hour}, nil)
	var conns []*net.TCPConn
	for i := range capN + beyond {
		c := dialFrom(t, "127.0.0.1", addr)
		ask(t, c, uint16(i+1)) // answered in turn: the first ones idle longest
		conns = append(conns, c)
	}
	for i, c := range conns[:beyond] {
		if !closedByServer(c) {
			t.Fatalf("connection %d (of the longest idle) still open beyond the cap", i)
		}
	}
	for i, c := range conns[beyond:] {
		ask(t, c, uint16(100+i))
	}
	askUDP(t, addr)
	ask(t, dialFrom(t, "127.0.0.2", addr), 200)
	if got := tcpMetric(t, m, "lbdns_gslb_tcp_closed_total", closedEvicted); got != beyond+1 {
		t.Errorf("evicted %v, want %d", got, beyond+1)
	}
	if got := tcpMetric(t, m, "lbdns_gslb_tcp_connections", ""); got != capN {
		t.Errorf("open connections %v, want the cap %d", got, capN)
	}
}

// TestTCPPerSourceCap: beyond tcp_max_per_source from one client, new
// connections are refused (closed unanswered, counted) while that
// client's open ones and another client are still answered.
func TestTCPPerSourceCap(t *testing.T) {
	const perSource, beyond = 5, 3
	_, addr, m := startTCP(t, TCPLimits{MaxConnections: 100, MaxPerSource: perSource, IdleTimeout: time.Hour}, nil)
	var open []*net.TCPConn
	for i := range perSource {
		c := dialFrom(t, "127.0.0.1", addr)
		ask(t, c, uint16(i+1))
		open = append(open, c)
	}
	for i := range beyond {
		c := dialFrom(t, "127.0.0.1", addr)
		c.Write(framed(t, uint16(50+i)))
		if !closedByServer(c) {
			t.Fatalf("connection %d beyond the per-source cap answered", perSource+i)
		}
	}
	for i, c := range open {
		ask(t, c, uint16(10+i))
	}
	ask(t, dialFrom(t, "127.0.0.2", addr), 99)
	askUDP(t, addr)
	if got := tcpMetric(t, m, "lbdns_gslb_tcp_refused_total", refusedPerSource); got != beyond {
		t.Errorf("refused per source %v, want %d", got, beyond)
	}
}

// TestTCPReservedFDs: a connection that would take a descriptor within
// tcp_reserved_fds of RLIMIT_NOFILE is refused (counted), and UDP is
// still answered. It lowers the process's limit: not parallel.
func TestTCPReservedFDs(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	next := int(f.Fd()) // the lowest free descriptor, about
	f.Close()
	// A soft limit 250 above the descriptors open now, 100 of them
	// reserved: about 50 connections (a client and a server end each)
	// fit below the reserve. Restored when the test ends, after the
	// server stopped.
	low := rl
	low.Cur = uint64(next + 250)
	if low.Cur > rl.Max {
		t.Skipf("descriptor limit %d with %d open", rl.Max, next)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Error(err)
		}
	})
	_, addr, m := startTCP(t, TCPLimits{ReservedFDs: 100, MaxPerSource: 1000}, nil)
	answered, refused := 0, 0
	for i := range 80 {
		c := dialFrom(t, "127.0.0.1", addr)
		c.Write(framed(t, uint16(i+1)))
		if r, err := readReply(c); err == nil && r.Id == uint16(i+1) {
			answered++
		} else {
			refused++
		}
	}
	t.Logf("%d answered, %d refused", answered, refused)
	if answered == 0 || refused == 0 {
		t.Fatalf("%d answered, %d refused: want the first answered, the ones in the reserve refused", answered, refused)
	}
	if got := tcpMetric(t, m, "lbdns_gslb_tcp_refused_total", refusedDescriptors); got != float64(refused) {
		t.Errorf("refused for descriptors %v, want %d", got, refused)
	}
	askUDP(t, addr)
}

// TestTCPSlowLengthPrefix: connections that sent a length prefix of
// 65,535 and 10 bytes behind it cost the server what came, not 64 KiB
// each.
func TestTCPSlowLengthPrefix(t *testing.T) {
	const n = 200
	var reads atomic.Int64
	_, addr, _ := startTCP(t, TCPLimits{MaxConnections: 2 * n, MaxPerSource: 2 * n}, func() { reads.Add(1) })
	askUDP(t, addr) // the UDP reader has allocated its buffers
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	slow := append([]byte{0xff, 0xff}, make([]byte, 10)...)
	for range n {
		c := dialFrom(t, "127.0.0.1", addr)
		if _, err := c.Write(slow); err != nil {
			t.Fatal(err)
		}
	}
	// Every connection's bytes read by the server (bounded wait).
	for i := 0; reads.Load() < n; i++ {
		if i == 1000 {
			t.Fatalf("server read %d of %d connections", reads.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.ReadMemStats(&after)
	const bound = 8 << 10 // per connection, the client's side included (64 KiB before)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per slow connection", per)
	if per > bound {
		t.Errorf("%d bytes allocated per slow connection, want at most %d", per, bound)
	}
}

// TestTCPPipelined: 300 queries sent at once on one connection are all
// answered, in order, and the connection closes gracefully (FIN, no
// reset) after the client's.
func TestTCPPipelined(t *testing.T) {
	const n = 300
	_, addr, _ := startTCP(t, TCPLimits{}, nil)
	c := dialFrom(t, "127.0.0.1", addr)
	var all []byte
	for i := range n {
		all = append(all, framed(t, uint16(i+1))...)
	}
	if _, err := c.Write(all); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r, err := readReply(c)
		if err != nil {
			t.Fatalf("reply %d of %d: %v", i+1, n, err)
		}
		if r.Id != uint16(i+1) || len(r.Answer) != 1 {
			t.Fatalf("reply %d: %v, want id %d answered", i+1, r, i+1)
		}
	}
	var b [1]byte
	if _, err := c.Read(b[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last reply: %v, want EOF (a graceful close)", err)
	}
}

// TestTCPQueryLimitGracefulClose: at tcp_max_queries, a connection with
// more queries pipelined gets the answers up to the limit, in order, then
// a FIN: never a reset that would drop answers sent.
func TestTCPQueryLimitGracefulClose(t *testing.T) {
	const limit, n = 100, 300
	_, addr, m := startTCP(t, TCPLimits{MaxQueries: limit}, nil)
	c := dialFrom(t, "127.0.0.1", addr)
	var all []byte
	for i := range n {
		all = append(all, framed(t, uint16(i+1))...)
	}
	if _, err := c.Write(all); err != nil {
		t.Fatal(err)
	}
	for i := range limit {
		r, err := readReply(c)
		if err != nil {
			t.Fatalf("reply %d of %d: %v", i+1, limit, err)
		}
		if r.Id != uint16(i+1) {
			t.Fatalf("reply %d has id %d", i+1, r.Id)
		}
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("after %d replies: %v, want EOF (a graceful close at the limit)", limit, err)
	}
	c.Close()
	if got := tcpMetric(t, m, "lbdns_gslb_tcp_closed_total", closedQueryLimit); got != 1 {
		t.Errorf("closed at the query limit %v, want 1", got)
	}
}

// TestTCPMetricsRegistered: the TCP series are exported.
func TestTCPMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"lbdns_gslb_tcp_connections", "lbdns_gslb_tcp_refused_total", "lbdns_gslb_tcp_closed_total", "lbdns_gslb_tcp_accept_errors_total"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s not exported (have %s)", want, got)
		}
	}
}

// fakeListener hands out the connections sent on conns, failing errs
// accepts with EMFILE first (after the first connection when waitOne is
// set).
type fakeListener struct {
	conns   chan net.Conn
	errs    atomic.Int64
	waitOne bool
	accepts atomic.Int64
	failed  atomic.Int64
	closed  chan struct{}
	once    bool

	closeOnce sync.Once
}

func newFakeListener(errs int64, waitOne bool) *fakeListener {
	l := &fakeListener{conns: make(chan net.Conn), closed: make(chan struct{}), waitOne: waitOne}
	l.errs.Store(errs)
	return l
}

// Accept returns the next connection sent, or EMFILE while errors are
// left (after the first connection when waitOne is set).
func (l *fakeListener) Accept() (net.Conn, error) {
	l.accepts.Add(1)
	if (!l.waitOne || l.once) && l.failed.Load() < l.errs.Load() {
		l.failed.Add(1)
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept", syscall.EMFILE)}
	}
	select {
	case c := <-l.conns:
		l.once = true
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *fakeListener) Close() error   { l.closeOnce.Do(func() { close(l.closed) }); return nil }
func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }

// serveFake serves l with s's accept loop and limits lim, in the
// calling bubble; the returned stop ends it and waits.
func serveFake(s *Server, l *fakeListener, lim TCPLimits, m *Metrics) (stop func()) {
	conns, done := newTCPConns(lim, m.tcpSeries()), make(chan struct{})
	s.wg.Go(func() { s.serveTCP(l, conns, done) })
	return func() {
		close(done)
		l.Close()
		conns.shutdown()
		s.wg.Wait()
	}
}

// TestTCPAcceptBackoff: failed accepts (EMFILE) close the longest idle
// connection and back off, 5 ms doubling to 1 s, instead of spinning;
// the loop keeps trying and serves again once accepts work.
func TestTCPAcceptBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Logger: slog.New(slog.DiscardHandler)}
		s.Swap(&fake{})
		l := newFakeListener(1000, true)
		stop := serveFake(s, l, TCPLimits{}, m)
		defer stop()
		idle, srv := net.Pipe()
		defer idle.Close()
		l.conns <- srv // then accepts fail
		time.Sleep(time.Second)
		if n := l.failed.Load(); n > 10 {
			t.Fatalf("%d failed accepts in the first second: want a back-off (5 ms doubling: 8)", n)
		}
		if !closedByServer(idle) {
			t.Errorf("the idle connection is still open after accepts failed for want of descriptors")
		}
		at := l.failed.Load()
		time.Sleep(10 * time.Second)
		if n := l.failed.Load() - at; n < 5 || n > 11 {
			t.Errorf("%d failed accepts in 10 s after the first: want about one a second (the back-off's cap)", n)
		}
		if got := tcpMetric(t, reg, "lbdns_gslb_tcp_accept_errors_total", ""); got != float64(l.failed.Load()) {
			t.Errorf("accept errors counted %v, want %d", got, l.failed.Load())
		}
		l.errs.Store(0) // accepts work again: a new connection is served
		c, srv := net.Pipe()
		defer c.Close()
		time.Sleep(2 * time.Second) // the loop's back-off ends
		l.conns <- srv
		ask(t, c, 7)
	})
}

// TestTCPIdleTimeout: a connection is closed tcp_idle_timeout after its
// last answer (not before), also when the client trickles bytes of a
// query that never completes.
func TestTCPIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Logger: slog.New(slog.DiscardHandler)}
		s.Swap(&fake{})
		l := newFakeListener(0, false)
		stop := serveFake(s, l, TCPLimits{IdleTimeout: 20 * time.Second}, m)
		defer stop()
		c, srv := net.Pipe()
		defer c.Close()
		l.conns <- srv
		ask(t, c, 1)
		time.Sleep(15 * time.Second)
		ask(t, c, 2) // still open 15 s after the last answer
		q := framed(t, 3)
		for i := range 3 { // a byte every 6 s: at 6, 12, 18 s
			time.Sleep(6 * time.Second)
			if _, err := c.Write(q[i : i+1]); err != nil {
				t.Fatalf("byte %d at %d s: %v, want the connection open before the idle timeout", i, 6*(i+1), err)
			}
		}
		time.Sleep(6 * time.Second) // 24 s after the last answer
		if !closedByServer(c) {
			t.Fatal("connection open 24 s after its last answer with an idle timeout of 20 s")
		}
		if got := tcpMetric(t, reg, "lbdns_gslb_tcp_closed_total", closedIdle); got != 1 {
			t.Errorf("closed idle %v, want 1", got)
		}
	})
}

// TestResponderTCPLimits: the tcp_ keys of [gslb.server] reach the
// server, and a reload that changes one reopens the listeners with it.
func TestResponderTCPLimits(t *testing.T) {
	dir := t.TempDir()
	var builds int
	var mu sync.Mutex
	clock := time.Unix(1_800_000_000, 0)
	r := NewResponder(ResponderOptions{Registerer: prometheus.NewRegistry(), Now: func() time.Time { return clock }, Build: tagBuilders(&builds, &mu)})
	defer r.Stop(context.Background())
	for _, perSource := range []int{1, 2} {
		cfg, err := configs.Parse([]byte(fmt.Sprintf(`[daemon]
state_dir = %q

[check.c.dns]
qname = "example.com"

[[gslb.pool]]
name = "p"
monitors = ["c"]

[[gslb.pool.member]]
name = "m1"
address = "192.0.2.1"

[gslb.server]
listen = ["127.0.0.1:0"]
tcp_max_per_source = %d
`, dir, perSource)), "t.toml")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Update(cfg, gslb.Evaluate(cfg, nil, clock)); err != nil {
			t.Fatal(err)
		}
		addr := r.Addrs()[0].String()
		for i := range perSource {
			ask(t, dialFrom(t, "127.0.0.1", addr), uint16(i+1))
		}
		c := dialFrom(t, "127.0.0.1", addr)
		c.Write(framed(t, 9))
		if !closedByServer(c) {
			t.Errorf("tcp_max_per_source = %d: connection %d answered", perSource, perSource+1)
		}
	}
}

// TestSourceKey: the per-source limit counts an IPv4 client by its
// address and an IPv6 one by its /64.
func TestSourceKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::"},
		{"::1", "::"},
	} {
		if got := sourceKey(netip.MustParseAddr(c.in)); got != netip.MustParseAddr(c.want) {
			t.Errorf("sourceKey(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// TestTCPFloodKeepsDescriptors: a flood of TCP connections from another
// process (so that its descriptors are not this one's) stops at the
// descriptors' reserve: the connections beyond are refused and counted,
// the process can still open sockets (as the monitors and the control
// server must), UDP is answered, and once the flood is gone a TCP query
// is answered again. It lowers the process's limit: not parallel.
func TestTCPFloodKeepsDescriptors(t *testing.T) {
	const flood, sockets = 400, 60
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	next := int(f.Fd())
	f.Close()
	// 300 descriptors above those open now, 100 of them reserved: the
	// flood (400 connections) is more than the limit.
	low := rl
	low.Cur = uint64(next + 300)
	if low.Cur > rl.Max || rl.Max < flood+100 {
		t.Skipf("descriptor limit %d with %d open", rl.Max, next)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Error(err)
		}
	})
	_, addr, reg := startTCP(t, TCPLimits{ReservedFDs: 100, MaxConnections: 2 * flood, MaxPerSource: 2 * flood, IdleTimeout: time.Hour}, nil)

	helper := exec.Command(exe, "-test.run=^TestTCPFloodHelper$")
	helper.Env = append(os.Environ(), "LBDNS_TCP_FLOOD="+addr+","+strconv.Itoa(flood))
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "dialed\n" {
		t.Fatalf("flood helper: %q %v", line, err)
	}
	// While the server takes the flood, until every connection of it
	// is admitted or refused (bounded), the process can open a socket.
	seen := func() float64 {
		return tcpMetric(t, reg, "lbdns_gslb_tcp_connections", "") + tcpMetric(t, reg, "lbdns_gslb_tcp_refused_total", refusedDescriptors)
	}
	for i := 0; seen() < flood && i < 500; i++ {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatalf("cannot open a socket during the flood: %v", err)
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	refused := tcpMetric(t, reg, "lbdns_gslb_tcp_refused_total", refusedDescriptors)
	t.Logf("flood of %d: %v open, %v refused", flood, tcpMetric(t, reg, "lbdns_gslb_tcp_connections", ""), refused)
	if refused == 0 {
		t.Errorf("no connection of the flood refused for the descriptors' reserve")
	}
	var opened []*net.UDPConn
	for range sockets {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Errorf("a socket after %d opened after the flood: %v", len(opened), err)
			break
		}
		opened = append(opened, c)
	}
	for _, c := range opened {
		c.Close()
	}
	askUDP(t, addr)
	stdin.Close() // the flood ends
	if err := helper.Wait(); err != nil {
		t.Fatalf("flood helper: %v", err)
	}
	for i := 0; tcpMetric(t, reg, "lbdns_gslb_tcp_connections", "") > 0 && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	ask(t, dialFrom(t, "127.0.0.2", addr), 1)
}

// TestTCPFloodHelper is TestTCPFloodKeepsDescriptors's flood, in a
// process of its own: it opens the connections LBDNS_TCP_FLOOD names
// ("ADDR,N"), says "dialed", and closes them when its stdin closes.
func TestTCPFloodHelper(t *testing.T) {
	spec := os.Getenv("LBDNS_TCP_FLOOD")
	if spec == "" {
		t.Skip("run by TestTCPFloodKeepsDescriptors")
	}
	addr, ns, _ := strings.Cut(spec, ",")
	n, err := strconv.Atoi(ns)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	fmt.Println("dialed")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
}

// FuzzTCPFraming feeds a byte stream, in writes of chunk bytes, to one
// TCP connection (over net.Pipe) and checks what comes back: the reply
// to each whole length-prefixed message, in order, byte for byte as
// the query path answers that message alone (none for what gets none),
// however the stream is cut.
func FuzzTCPFraming(f *testing.F) {
	frame := func(b []byte) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...) }
	var all []byte
	for _, b := range seeds() {
		f.Add(frame(b), uint8(1))
		all = append(all, frame(b)...)
	}
	resp := seeds()[0]
	resp[2] |= 0x80 // a response: no reply
	f.Add(append(append(frame(resp), frame(nil)...), frame(seeds()[1])...), uint8(3))
	f.Add(append(frame([]byte{1, 2, 3, 4, 5}), 0xff, 0xff, 1, 2), uint8(7))
	f.Add(all, uint8(0))
	f.Add(all, uint8(200))
	src := netip.MustParseAddr("192.0.2.1")
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		s := &Server{Logger: slog.New(slog.DiscardHandler)}
		s.Swap(&fake{Scope: 16, Big: 100})
		var want [][]byte
		sc := new(scratch)
		off := 0
		for off+2 <= len(stream) {
			n := int(binary.BigEndian.Uint16(stream[off:]))
			if off+2+n > len(stream) {
				break
			}
			if r := s.reply(sc, nil, slices.Clone(stream[off+2:off+2+n]), src, true); len(r) > 0 {
				want = append(want, slices.Clone(r))
			}
			off += 2 + n
		}
		if off == len(stream) {
			// A last query: its reply comes last, so none came that
			// should not have.
			last := framed(t, 0xbeef)
			stream = append(slices.Clone(stream), last...)
			want = append(want, slices.Clone(s.reply(sc, nil, slices.Clone(last[2:]), src, true)))
		}
		if len(want) >= DefaultTCPMaxQueries {
			t.Skip("more queries than a connection is answered")
		}
		conns := newTCPConns(TCPLimits{IdleTimeout: time.Minute}, nil)
		cli, srv := net.Pipe()
		tc := conns.admit(srv, src)
		if tc == nil {
			t.Fatal("connection not admitted")
		}
		served := make(chan struct{})
		go func() { s.serveConn(conns, tc); close(served) }()
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			step := max(int(chunk), 1)
			for off := 0; off < len(stream); off += step {
				if _, err := cli.Write(stream[off:min(off+step, len(stream))]); err != nil {
					return
				}
			}
		}()
		for i, w := range want {
			r, err := readFrame(cli)
			if err != nil {
				t.Fatalf("reply %d of %d: %v", i+1, len(want), err)
			}
			if !slices.Equal(r, w) {
				t.Fatalf("reply %d differs from the message's own reply:\n got %x\nwant %x", i+1, r, w)
			}
		}
		cli.Close()
		<-wrote
		<-served
	})
}

// readFrame reads one length-prefixed message from c.
func readFrame(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err := io.ReadFull(c, b)
	return b, err
}
