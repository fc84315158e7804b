package probes

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// tcpCheck returns a tcp check profile with a 300ms timeout.
func tcpCheck(s configs.TCPCheck) *configs.Check {
	if s.MaxRead == 0 {
		s.MaxRead = configs.DefaultTCPMaxRead
	}
	return &configs.Check{Name: "t", Kind: "tcp", Timeout: configs.Duration{Duration: 300 * time.Millisecond}, TCP: &s}
}

// tcpServer serves each connection with h on a loopback listener until
// the test ends.
func tcpServer(t testing.TB, h func(net.Conn)) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(5 * time.Millisecond) // out of descriptors: wait, do not stop serving
				continue
			}
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				h(c)
			}()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	return netip.MustParseAddrPort(l.Addr().String())
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T, network string) netip.AddrPort {
	t.Helper()
	var addr string
	if network == "tcp" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = l.Addr().String()
		l.Close()
	} else {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = c.LocalAddr().String()
		c.Close()
	}
	return netip.MustParseAddrPort(addr)
}

func TestTCP(t *testing.T) {
	banner := tcpServer(t, func(c net.Conn) { _, _ = io.WriteString(c, "SSH-2.0-test\r\n") })
	echo := tcpServer(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	mute := tcpServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	flood := tcpServer(t, func(c net.Conn) { _, _ = c.Write([]byte(strings.Repeat("a", 10000))) })
	for _, tc := range []struct {
		name   string
		target netip.AddrPort
		s      configs.TCPCheck
		ok     bool
		detail string // prefix of the detail
	}{
		{"connect", banner, configs.TCPCheck{}, true, "connected"},
		{"refused", closedPort(t, "tcp"), configs.TCPCheck{}, false, "connection refused"},
		{"banner", banner, configs.TCPCheck{Expect: `^SSH-2\.0-`}, true, "connected, expect matched"},
		{"send expect", echo, configs.TCPCheck{Send: "PING\r\n", Expect: "PING\r\n"}, true, "connected, expect matched in 6 bytes"},
		{"closed before match", banner, configs.TCPCheck{Expect: "^220 "}, false, `expect /^220 / did not match first 14 bytes "SSH-2.0-test\r\n" (connection closed)`},
		{"silent", mute, configs.TCPCheck{Send: "hello", Expect: "x"}, false, "timeout after 300ms: nothing read, expect /x/"},
		{"max read", flood, configs.TCPCheck{Expect: "b", MaxRead: 100}, false, "expect /b/ did not match first 100 bytes"},
		{"port override", netip.AddrPortFrom(banner.Addr(), 1), configs.TCPCheck{Port: int(banner.Port())}, true, "connected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewBuilder(Deps{}).Build(tcpCheck(tc.s), tc.target)
			if err != nil {
				t.Fatal(err)
			}
			r := c.Check(context.Background())
			if r.OK != tc.ok || !strings.HasPrefix(r.Detail, tc.detail) {
				t.Errorf("Check = ok %v %q, want ok %v %q...", r.OK, r.Detail, tc.ok, tc.detail)
			}
			if r.RTT <= 0 || r.RTT > time.Second {
				t.Errorf("RTT = %v", r.RTT)
			}
		})
	}
}

func TestTCPBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chk    *configs.Check
		target netip.AddrPort
		want   string
	}{
		{"no port", tcpCheck(configs.TCPCheck{}), netip.MustParseAddrPort("127.0.0.1:0"), "no port: set port in [check.t.tcp]"},
		{"bad expect", tcpCheck(configs.TCPCheck{Expect: "("}), netip.MustParseAddrPort("127.0.0.1:1"), "expect:"},
		{"no settings", &configs.Check{Name: "t", Kind: "tcp"}, netip.MustParseAddrPort("127.0.0.1:1"), "no tcp settings"},
		{"missing ca", tcpCheck(configs.TCPCheck{TLS: true, CAFile: "/nonexistent/ca.pem"}), netip.MustParseAddrPort("127.0.0.1:1"), "ca_file:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewBuilder(Deps{}).Build(tc.chk, tc.target)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestTCPCanceled(t *testing.T) {
	mute := tcpServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	c, err := NewBuilder(Deps{}).Build(tcpCheck(configs.TCPCheck{Expect: "x"}), mute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	r := c.Check(ctx)
	if r.OK || !strings.HasPrefix(r.Detail, "canceled") || time.Since(start) > 2*time.Second {
		t.Errorf("Check after cancel = ok %v %q after %v, want canceled at once", r.OK, r.Detail, time.Since(start))
	}
}

func TestTCPTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test
	srv.StartTLS()
	t.Cleanup(srv.Close)
	target := netip.MustParseAddrPort(srv.Listener.Addr().String())
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		s      configs.TCPCheck
		ok     bool
		detail string
	}{
		{"trusted ca", configs.TCPCheck{TLS: true, CAFile: ca}, true, "tls TLS 1.3"},
		{"sni in certificate", configs.TCPCheck{TLS: true, CAFile: ca, ServerName: "example.com"}, true, "tls "},
		{"send expect over tls", configs.TCPCheck{TLS: true, CAFile: ca, Send: "GET / HTTP/1.0\r\n\r\n", Expect: `^HTTP/1\.0 200`}, true, "tls TLS 1.3, expect matched"},
		{"unknown authority", configs.TCPCheck{TLS: true}, false, "tls: x509: unknown authority"},
		{"wrong name", configs.TCPCheck{TLS: true, CAFile: ca, ServerName: "wrong.example"}, false, "tls: x509: certificate is not valid for wrong.example"},
		{"insecure", configs.TCPCheck{TLS: true, InsecureSkipVerify: true}, true, "tls "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewBuilder(Deps{}).Build(tcpCheck(tc.s), target)
			if err != nil {
				t.Fatal(err)
			}
			r := c.Check(context.Background())
			if r.OK != tc.ok || !strings.HasPrefix(r.Detail, tc.detail) {
				t.Errorf("Check = ok %v %q, want ok %v %q...", r.OK, r.Detail, tc.ok, tc.detail)
			}
		})
	}
}

// BenchmarkTCPCheck measures one connect-only check against a loopback
// listener, with the deadline the monitor gives it.
func BenchmarkTCPCheck(b *testing.B) {
	target := tcpServer(b, func(net.Conn) {})
	c, err := NewBuilder(Deps{}).Build(tcpCheck(configs.TCPCheck{}), target)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if r := c.Check(ctx); !r.OK {
			b.Fatalf("Check = %q", r.Detail)
		}
		cancel()
	}
}

// asyncChecker is monitor.AsyncChecker, which probes does not import.
type asyncChecker interface {
	StartCheck(deadline time.Time, done func(check.Result))
}

// startCheck runs c's StartCheck once with timeout and waits for its
// result; it fails t if c has none, or if done never comes.
func startCheck(t testing.TB, c check.Checker, timeout time.Duration) Result {
	t.Helper()
	a, ok := c.(asyncChecker)
	if !ok {
		t.Fatalf("checker %T has no StartCheck", c)
	}
	ch := make(chan Result, 2)
	a.StartCheck(time.Now().Add(timeout), func(r check.Result) { ch <- r })
	select {
	case r := <-ch:
		select {
		case r2 := <-ch:
			t.Errorf("done called twice: %+v, then %+v", r, r2)
		case <-time.After(timeout / 4):
		}
		return r
	case <-time.After(timeout + 5*time.Second):
		t.Fatalf("StartCheck: no result %v after its deadline", 5*time.Second)
	}
	return Result{}
}

// TestTCPStartCheck: a tcp check that only connects starts without a
// goroutine of its own (StartCheck) and says what Check says; one with
// tls, send or expect has no StartCheck.
func TestTCPStartCheck(t *testing.T) {
	up := tcpServer(t, func(net.Conn) {})
	down := closedPort(t, "tcp")
	b := NewBuilder(Deps{})
	for _, tt := range []struct {
		name   string
		target netip.AddrPort
		ok     bool
		detail string
	}{
		{"up", up, true, "connected"},
		{"refused", down, false, "connection refused"},
		{"up v4-mapped", netip.AddrPortFrom(netip.AddrFrom16(up.Addr().As16()), up.Port()), true, "connected"},
	} {
		c, err := b.Build(tcpCheck(configs.TCPCheck{}), tt.target)
		if err != nil {
			t.Fatal(err)
		}
		r := startCheck(t, c, 2*time.Second)
		if r.OK != tt.ok || r.Detail != tt.detail || r.RTT <= 0 {
			t.Errorf("%s: StartCheck = ok %v %q rtt %v, want ok %v %q", tt.name, r.OK, r.Detail, r.RTT, tt.ok, tt.detail)
		}
		if r := c.Check(context.Background()); r.OK != tt.ok || r.Detail != tt.detail {
			t.Errorf("%s: Check = ok %v %q, want ok %v %q", tt.name, r.OK, r.Detail, tt.ok, tt.detail)
		}
	}
	for _, s := range []configs.TCPCheck{{Expect: "x"}, {Send: "x"}, {TLS: true, InsecureSkipVerify: true}} {
		c, err := b.Build(tcpCheck(s), up)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.(asyncChecker); ok {
			t.Errorf("%+v: checker has StartCheck, want only Check", s)
		}
	}
	// Many at once, through one engine.
	c, err := b.Build(tcpCheck(configs.TCPCheck{}), up)
	if err != nil {
		t.Fatal(err)
	}
	startMany(t, c, 200)
}

// TestTCPStartCheckIPv6: the engine connects to IPv6 addresses too (its
// own sockaddr for AF_INET6), and says what Check says of a refused one.
func TestTCPStartCheckIPv6(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	up := netip.MustParseAddrPort(l.Addr().String())
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	l2, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	down := netip.MustParseAddrPort(l2.Addr().String())
	l2.Close()
	t.Cleanup(func() { l.Close() })
	b := NewBuilder(Deps{})
	for _, tt := range []struct {
		target netip.AddrPort
		ok     bool
		detail string
	}{
		{up, true, "connected"},
		{down, false, "connection refused"},
	} {
		c, err := b.Build(tcpCheck(configs.TCPCheck{}), tt.target)
		if err != nil {
			t.Fatal(err)
		}
		if r := startCheck(t, c, 2*time.Second); r.OK != tt.ok || !strings.Contains(r.Detail, tt.detail) {
			t.Errorf("%v: StartCheck = ok %v %q, want ok %v %q", tt.target, r.OK, r.Detail, tt.ok, tt.detail)
		}
	}
}

// startMany starts n checks of c at once through its engine and fails the
// test for every one that does not pass.
func startMany(t *testing.T, c check.Checker, n int) {
	t.Helper()
	ch := make(chan Result, n)
	for range n {
		c.(asyncChecker).StartCheck(time.Now().Add(5*time.Second), func(r check.Result) { ch <- r })
	}
	for range n {
		if r := <-ch; !r.OK {
			t.Errorf("one of %d at once: %q", n, r.Detail)
		}
	}
}
