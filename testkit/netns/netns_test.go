package netns_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/leakcheck"
	"lbdns/testkit/netns"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// echoTCP serves a line echo on l until it is closed.
func echoTCP(t *testing.T, l net.Listener) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { _ = l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// echoUDP echoes datagrams on c until it is closed.
func echoUDP(t *testing.T, c net.PacketConn) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { _ = c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo(buf[:n], from)
		}
	}()
}

// roundTrip dials addr, sends a line and reads it back.
func roundTrip(addr netip.AddrPort, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr.String(), timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo returned " + line)
	}
	return nil
}

func port(t *testing.T, a net.Addr) uint16 {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return ap.Port()
}

func TestAddresses(t *testing.T) {
	a := netns.New(t, "addr-a")
	b := netns.New(t, "addr-b")
	v4 := netip.MustParsePrefix("198.18.0.0/15")
	v6 := netip.MustParsePrefix("fd00:18::/48")
	for _, h := range []*netns.Host{a, b} {
		if !v4.Contains(h.AddrV4()) || !v4.Contains(h.RootAddrV4()) {
			t.Errorf("%s: v4 %v / %v outside %v", h.Name(), h.AddrV4(), h.RootAddrV4(), v4)
		}
		if !v6.Contains(h.AddrV6()) || !v6.Contains(h.RootAddrV6()) {
			t.Errorf("%s: v6 %v / %v outside %v", h.Name(), h.AddrV6(), h.RootAddrV6(), v6)
		}
		if _, err := os.Stat("/run/netns/" + h.Name()); err != nil {
			t.Errorf("namespace file: %v", err)
		}
	}
	if a.AddrV4() == b.AddrV4() || a.AddrV6() == b.AddrV6() || a.Name() == b.Name() {
		t.Errorf("hosts share addresses or names: %v %v %v / %v %v %v", a.Name(), a.AddrV4(), a.AddrV6(), b.Name(), b.AddrV4(), b.AddrV6())
	}
}

func TestCleanupRemovesNamespace(t *testing.T) {
	var name, link string
	t.Run("inner", func(t *testing.T) {
		h := netns.New(t, "cleanup")
		name, link = h.Name(), h.RootIf()
	})
	if name == "" {
		t.Skip("inner test skipped")
	}
	if _, err := os.Stat("/run/netns/" + name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace %s still there after the test: %v", name, err)
	}
	if _, err := net.InterfaceByName(link); err == nil {
		t.Errorf("link %s still there after the test", link)
	}
}

func TestTCPEcho(t *testing.T) {
	h := netns.New(t, "tcp-echo")
	for _, tc := range []struct {
		name, network, listen string
		addr                  netip.Addr
	}{
		{"v4", "tcp4", "0.0.0.0:0", h.AddrV4()},
		{"v6", "tcp6", "[::]:0", h.AddrV6()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := h.Listen(tc.network, tc.listen)
			if err != nil {
				t.Fatal(err)
			}
			echoTCP(t, l)
			ap := netip.AddrPortFrom(tc.addr, port(t, l.Addr()))
			if err := roundTrip(ap, 3*time.Second); err != nil {
				t.Fatalf("echo at %v from the root namespace: %v", ap, err)
			}
			// The listener lives in the Host, not in the root namespace.
			if err := roundTrip(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()), time.Second); err == nil {
				t.Errorf("listener reachable on the root namespace's loopback")
			}
		})
	}
}

func TestLinkDown(t *testing.T) {
	h := netns.New(t, "linkdown")
	l, err := h.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	echoTCP(t, l)
	p := port(t, l.Addr())
	for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
		if err := roundTrip(netip.AddrPortFrom(a, p), 3*time.Second); err != nil {
			t.Fatalf("before link down: %v", err)
		}
	}
	h.LinkDown()
	for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
		// Silence, as on a pulled cable: no reply, no error, no leak by
		// the default route.
		err := roundTrip(netip.AddrPortFrom(a, p), 500*time.Millisecond)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%v with the link down: got %v, want a timeout", a, err)
		}
	}
	h.LinkUp()
	for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
		if err := roundTrip(netip.AddrPortFrom(a, p), 3*time.Second); err != nil {
			t.Errorf("%v after link up: %v", a, err)
		}
	}
}

func TestDrop(t *testing.T) {
	h := netns.New(t, "drop")
	l, err := h.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	echoTCP(t, l)
	ap := netip.AddrPortFrom(h.AddrV4(), port(t, l.Addr()))
	h.Drop("tcp", ap.Port())
	start := time.Now()
	err = roundTrip(ap, 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("dropped port: got %v, want a timeout", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("dropped port failed after %v, before its timeout", d)
	}
	h.Undrop("tcp", ap.Port())
	if err := roundTrip(ap, 3*time.Second); err != nil {
		t.Errorf("after undrop: %v", err)
	}
}

// udpEchoHost starts a UDP echo in a new Host and returns a burst
// function that sends n datagrams and counts the echoes back within a
// second, with the time to the first.
func udpEchoHost(t *testing.T, name string) (*netns.Host, func(n int) (int, time.Duration)) {
	h := netns.New(t, name)
	pc, err := h.ListenPacket("udp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	echoUDP(t, pc)
	ap := netip.AddrPortFrom(h.AddrV4(), port(t, pc.LocalAddr()))
	return h, func(n int) (got int, first time.Duration) {
		c, err := net.Dial("udp", ap.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		for range n {
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 16)
		for got < n {
			if _, err := c.Read(buf); err != nil {
				break
			}
			if got == 0 {
				first = time.Since(start)
			}
			got++
		}
		return got, first
	}
}

func TestNetemLoss(t *testing.T) {
	h, burst := udpEchoHost(t, "loss")
	if got, _ := burst(200); got < 190 {
		t.Fatalf("without netem %d/200 echoes", got)
	}
	h.Netem(50, 0)
	if got, _ := burst(200); got < 20 || got > 180 {
		t.Errorf("with 50%% loss %d/200 echoes, want about 100", got)
	}
	h.Netem(100, 0)
	if got, _ := burst(50); got != 0 {
		t.Errorf("with 100%% loss %d/50 echoes", got)
	}
	h.ClearNetem()
	if got, _ := burst(200); got < 190 {
		t.Errorf("after ClearNetem %d/200 echoes", got)
	}
}

func TestNetemDelay(t *testing.T) {
	h, burst := udpEchoHost(t, "delay")
	h.Netem(0, 150*time.Millisecond) // skips on a kernel without netem
	if got, first := burst(10); got != 10 || first < 150*time.Millisecond {
		t.Errorf("with 150ms delay: %d/10 echoes, first after %v", got, first)
	}
	h.ClearNetem()
	if got, first := burst(10); got != 10 || first > 100*time.Millisecond {
		t.Errorf("after ClearNetem: %d/10 echoes, first after %v", got, first)
	}
}

func TestCommand(t *testing.T) {
	h := netns.New(t, "cmd")
	out, err := h.Command("ip", "-o", "addr", "show", "dev", netns.HostIf).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
		if !strings.Contains(string(out), a.String()+"/") {
			t.Errorf("address %v not on %s inside the host:\n%s", a, netns.HostIf, out)
		}
	}
}
