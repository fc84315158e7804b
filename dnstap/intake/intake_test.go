package intake

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lbdns/dnstap"
	"lbdns/dnstap/fstrm"
	"lbdns/testkit/leakcheck"
	"lbdns/testkit/promgolden"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// sink collects what the server hands on.
type sink struct {
	mu   sync.Mutex
	msgs []dnstap.Message
	more chan struct{}
}

func newSink() *sink { return &sink{more: make(chan struct{}, 1)} }

func (k *sink) handle(m *dnstap.Message) {
	k.mu.Lock()
	k.msgs = append(k.msgs, *m)
	k.mu.Unlock()
	select {
	case k.more <- struct{}{}:
	default:
	}
}

// snapshot returns the messages received so far.
func (k *sink) snapshot() []dnstap.Message {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]dnstap.Message(nil), k.msgs...)
}

// wait returns once the sink holds n messages, failing t after 10 s.
func (k *sink) wait(t *testing.T, n int) []dnstap.Message {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		k.mu.Lock()
		got := append([]dnstap.Message(nil), k.msgs...)
		k.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-k.more:
		case <-deadline:
			t.Fatalf("%d messages after 10 s, want %d", len(got), n)
		}
	}
}

type fixture struct {
	srv  *Server
	reg  *prometheus.Registry
	sink *sink
	unix string
	tcp  string
}

func start(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry(), sink: newSink()}
	if cfg.Unix == "" {
		cfg.Unix = filepath.Join(t.TempDir(), "dnstap.sock")
	}
	if cfg.TCP == "" {
		cfg.TCP = "127.0.0.1:0"
	}
	srv, err := New(cfg, f.sink.handle, f.reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	f.srv = srv
	as := srv.Addrs()
	f.unix, f.tcp = as[0].String(), as[1].String()
	return f
}

func (f *fixture) dial(t *testing.T, network string) net.Conn {
	t.Helper()
	addr := f.tcp
	if network == "unix" {
		addr = f.unix
	}
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// handshake sends READY, expects ACCEPT naming dnstap, sends START.
func handshake(t *testing.T, c net.Conn) {
	t.Helper()
	if err := fstrm.NewWriter(c, dnstap.ContentType).Handshake(); err != nil {
		t.Fatal(err)
	}
}

// stop sends STOP and expects FINISH.
func stop(t *testing.T, c net.Conn) {
	t.Helper()
	if err := fstrm.NewWriter(c, dnstap.ContentType).Stop(); err != nil {
		t.Fatal(err)
	}
}

// waitClosed returns once the peer closed c (a read gives EOF or reset).
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [64]byte
	for {
		_, err := c.Read(b[:])
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the server did not close the connection")
		}
		return
	}
}

func queryFrame(t testing.TB, identity string, typ dnstap.Type, client string, name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	if typ == dnstap.ClientResponse {
		m.Response, m.Rcode = true, dns.RcodeNameError
	}
	w, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	p := dnstap.AppendPayload(nil, dnstap.Payload{Identity: identity, Version: "test 1", Type: typ, Protocol: dnstap.UDP,
		Client: netip.MustParseAddrPort(client), Time: time.Unix(1796140800, 0), DNS: w})
	return fstrm.AppendData(nil, p)
}

func closed(f *fixture, reason string) float64 {
	return testutil.ToFloat64(f.srv.m.closed[reason])
}

// waitCount returns once counter reason reaches n.
func waitReason(t *testing.T, f *fixture, reason string, n float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for closed(f, reason) < n {
		if time.Now().After(deadline) {
			t.Fatalf("closed{reason=%q} = %v after 10 s, want %v", reason, closed(f, reason), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStreamBothListeners(t *testing.T) {
	f := start(t, Config{})
	for i, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			c := f.dial(t, network)
			handshake(t, c)
			id := "resolver-" + network
			var b []byte
			b = append(b, queryFrame(t, id, dnstap.ClientQuery, "192.0.2.1:1000", "One.example.")...)
			b = append(b, queryFrame(t, id, dnstap.ClientResponse, "[2001:db8::2]:2000", "two.example.")...)
			b = append(b, fstrm.AppendData(nil, []byte("not dnstap"))...)
			b = append(b, fstrm.AppendData(nil, dnstap.AppendPayload(nil, dnstap.Payload{Identity: id, Type: dnstap.ResolverQuery}))...)
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			stop(t, c)
			got := f.sink.wait(t, 2*(i+1))[2*i:]
			if got[0].Identity != id || got[0].Type != dnstap.ClientQuery || got[0].Client != netip.MustParseAddr("192.0.2.1") || got[0].Name != "one.example." || got[0].Rcode != -1 {
				t.Errorf("first message %+v", got[0])
			}
			if got[1].Type != dnstap.ClientResponse || got[1].Client != netip.MustParseAddr("2001:db8::2") || got[1].Name != "two.example." || got[1].Rcode != dns.RcodeNameError {
				t.Errorf("second message %+v", got[1])
			}
			waitReason(t, f, ReasonFinished, float64(i+1))
		})
	}
	ss := f.srv.Senders()
	if len(ss) != 2 || ss[0].Identity != "resolver-tcp" || ss[1].Identity != "resolver-unix" {
		t.Fatalf("senders %+v", ss)
	}
	for _, s := range ss {
		if s.Messages != 2 || s.Version != "test 1" || len(s.Recent) != 2 || s.Recent[0].Name != "two.example." || s.Recent[1].Name != "one.example." || s.Last.IsZero() {
			t.Errorf("sender %+v", s)
		}
		if v := testutil.ToFloat64(f.srv.m.senders.WithLabelValues(s.Identity)); v != 2 {
			t.Errorf("sender %s: metric %v, want 2", s.Identity, v)
		}
	}
	if v := testutil.ToFloat64(f.srv.m.malformed); v != 2 {
		t.Errorf("malformed %v, want 2", v)
	}
	if v := testutil.ToFloat64(f.srv.m.other); v != 2 {
		t.Errorf("other %v, want 2", v)
	}
	if v := testutil.ToFloat64(f.srv.m.queries) + testutil.ToFloat64(f.srv.m.responses); v != 4 {
		t.Errorf("client messages %v, want 4", v)
	}
}

// TestBadPeers: each kind of bad peer is closed and counted by its
// reason, while a good connection opened before keeps delivering.
func TestBadPeers(t *testing.T) {
	f := start(t, Config{MaxFrame: 1024, HandshakeTimeout: 300 * time.Millisecond})
	good := f.dial(t, "tcp")
	handshake(t, good)
	sent := 0
	send := func() {
		t.Helper()
		sent++
		if _, err := good.Write(queryFrame(t, "good", dnstap.ClientQuery, "192.0.2.9:53", fmt.Sprintf("n%d.example.", sent))); err != nil {
			t.Fatal(err)
		}
		f.sink.wait(t, sent)
	}
	send()
	tests := []struct {
		name   string
		reason string
		do     func(c net.Conn)
	}{
		{"garbage", ReasonProtocol, func(c net.Conn) { c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) }},
		{"garbage after start", ReasonProtocol, func(c net.Conn) {
			handshake(t, c)
			c.Write([]byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
		}},
		{"wrong content type", ReasonContentType, func(c net.Conn) {
			c.Write(fstrm.AppendControl(nil, fstrm.ControlReady, "protobuf:other.Thing"))
		}},
		{"oversized frame", ReasonFrameTooLarge, func(c net.Conn) {
			handshake(t, c)
			c.Write(fstrm.AppendData(nil, make([]byte, 1025)))
		}},
		{"huge length", ReasonFrameTooLarge, func(c net.Conn) {
			handshake(t, c)
			c.Write([]byte{0xff, 0xff, 0xff, 0xf0})
		}},
		{"never finishes the handshake", ReasonHandshakeTimeout, func(c net.Conn) {
			c.Write(fstrm.AppendControl(nil, fstrm.ControlReady, dnstap.ContentType))
		}},
		{"silent", ReasonHandshakeTimeout, func(net.Conn) {}},
		{"closed midway", ReasonEOF, func(c net.Conn) {
			handshake(t, c)
			c.Write(queryFrame(t, "x", dnstap.ClientQuery, "192.0.2.1:1", "a.")[:10])
			c.(*net.TCPConn).CloseWrite()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := closed(f, tt.reason)
			c := f.dial(t, "tcp")
			tt.do(c)
			waitClosed(t, c)
			waitReason(t, f, tt.reason, before+1)
			send()
		})
	}
	stop(t, good)
	waitReason(t, f, ReasonFinished, 1)
}

// TestConnectionCap: beyond MaxConnections each new connection is closed
// at once and counted; the open ones carry on, and a slot freed is
// usable again. A thousand connections in a row change nothing else.
func TestConnectionCap(t *testing.T) {
	const limit = 4
	f := start(t, Config{MaxConnections: limit, HandshakeTimeout: time.Minute})
	var held []net.Conn
	for i := range limit {
		c := f.dial(t, []string{"unix", "tcp"}[i%2])
		handshake(t, c)
		held = append(held, c)
	}
	const extra = 1000
	for i := range extra {
		c := f.dial(t, []string{"unix", "tcp"}[i%2])
		waitClosed(t, c)
		c.Close()
	}
	waitReason(t, f, ReasonLimit, extra)
	if got := f.srv.Open(); got != limit {
		t.Fatalf("open %d, want %d", got, limit)
	}
	for i, c := range held {
		if _, err := c.Write(queryFrame(t, "held", dnstap.ClientQuery, "192.0.2.1:1", fmt.Sprintf("h%d.", i))); err != nil {
			t.Fatal(err)
		}
	}
	f.sink.wait(t, limit)
	stop(t, held[0])
	waitReason(t, f, ReasonFinished, 1)
	c := f.dial(t, "tcp")
	handshake(t, c)
	stop(t, c)
	waitReason(t, f, ReasonFinished, 2)
	if v := closed(f, ReasonLimit); v != extra {
		t.Errorf("limit %v, want %d", v, extra)
	}
}

func TestUnidirectional(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t, "unix")
	var b []byte
	b = fstrm.AppendControl(b, fstrm.ControlStart, dnstap.ContentType)
	b = append(b, queryFrame(t, "uni", dnstap.ClientQuery, "127.0.0.5:1", "u.example.")...)
	b = fstrm.AppendControl(b, fstrm.ControlStop)
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c)
	got := f.sink.wait(t, 1)
	if got[0].Name != "u.example." || got[0].Client != netip.MustParseAddr("127.0.0.5") {
		t.Errorf("message %+v", got[0])
	}
	waitReason(t, f, ReasonFinished, 1)
}

func TestShutdownClosesConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, err := New(Config{Unix: filepath.Join(t.TempDir(), "s"), TCP: "127.0.0.1:0"}, nil, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", srv.Addrs()[1].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	handshake(t, c)
	for srv.Open() != 1 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c)
	if v := testutil.ToFloat64(srv.m.closed[ReasonShutdown]); v != 1 {
		t.Errorf("shutdown %v, want 1", v)
	}
	if err := srv.Start(); err == nil {
		t.Error("Start after Shutdown succeeded")
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dnstap.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	f := start(t, Config{Unix: path})
	c := f.dial(t, "unix")
	handshake(t, c)
	stop(t, c)
}

func TestListenErrors(t *testing.T) {
	for _, cfg := range []Config{{Unix: "/nonexistent-dir/x/dnstap.sock"}, {TCP: "192.0.2.1:1"}} {
		srv, err := New(cfg, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err == nil {
			srv.Shutdown(context.Background())
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
}

func TestMetricsGolden(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t, "unix")
	handshake(t, c)
	if _, err := c.Write(queryFrame(t, "r1", dnstap.ClientQuery, "192.0.2.1:1", "a.")); err != nil {
		t.Fatal(err)
	}
	stop(t, c)
	f.sink.wait(t, 1)
	promgolden.Check(t, "the dnstap intake", promgolden.Lines(t, f.reg))
}

// TestSendersBounded: beyond MaxSenders identities the rest count
// together, and each keeps only its RecentPerSender latest messages.
func TestSendersBounded(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t, "tcp")
	handshake(t, c)
	const extra = 10
	var b []byte
	for i := range MaxSenders + extra {
		b = append(b, queryFrame(t, fmt.Sprintf("r%03d", i), dnstap.ClientQuery, "192.0.2.1:1", "a.")...)
	}
	for i := range 3 * RecentPerSender {
		b = append(b, queryFrame(t, "r000", dnstap.ClientQuery, "192.0.2.1:1", fmt.Sprintf("n%d.", i))...)
	}
	b = append(b, queryFrame(t, "", dnstap.ClientQuery, "192.0.2.1:1", "anon.")...)
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	stop(t, c)
	f.sink.wait(t, MaxSenders+extra+3*RecentPerSender+1)
	ss := f.srv.Senders()
	if len(ss) != MaxSenders+1 {
		t.Fatalf("%d senders, want %d", len(ss), MaxSenders+1)
	}
	byID := map[string]Sender{}
	for _, s := range ss {
		byID[s.Identity] = s
	}
	if o := byID[OtherSenders]; o.Messages != extra+1 {
		t.Errorf("others: %d messages, want %d (the senders beyond the cap and the one without identity)", o.Messages, extra+1)
	}
	r0 := byID["r000"]
	if r0.Messages != 1+3*RecentPerSender || len(r0.Recent) != RecentPerSender || r0.Recent[0].Name != fmt.Sprintf("n%d.", 3*RecentPerSender-1) {
		t.Errorf("r000: %d messages, recent %+v", r0.Messages, r0.Recent)
	}
}

// TestSilentPeersCannotLockOut: silent peers from one address take at
// most MaxPerSource slots (one more is closed at once, counted as
// source_limit), so another resolver still connects; a peer silent
// after its handshake for IdleTimeout is closed (idle), while one that
// keeps sending stays.
func TestSilentPeersCannotLockOut(t *testing.T) {
	const perSource = 2
	f := start(t, Config{MaxConnections: 8, MaxPerSource: perSource, IdleTimeout: 400 * time.Millisecond, HandshakeTimeout: time.Minute})
	var silent []net.Conn
	for range perSource {
		c := f.dial(t, "tcp")
		handshake(t, c)
		silent = append(silent, c)
	}
	for range 5 {
		c := f.dial(t, "tcp")
		waitClosed(t, c)
	}
	waitReason(t, f, ReasonSourceLimit, 5)
	other := f.dial(t, "unix") // another resolver, on the Unix socket: not this source's
	handshake(t, other)
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		for i := range 12 {
			if _, err := other.Write(queryFrame(t, "busy", dnstap.ClientQuery, "192.0.2.1:1", fmt.Sprintf("b%d.", i))); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for _, c := range silent {
		waitClosed(t, c)
	}
	waitReason(t, f, ReasonIdle, perSource)
	<-busy
	f.sink.wait(t, 12) // the sender that kept sending for 1.2 s, three idle timeouts, was not closed
	if v := closed(f, ReasonIdle); v != perSource {
		t.Errorf("idle closes %v, want %d (the busy sender kept)", v, perSource)
	}
	c := f.dial(t, "tcp") // the source's slots are back
	handshake(t, c)
	stop(t, c)
	waitReason(t, f, ReasonFinished, 1)
}
