package probes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/testkit/netns"
	"lbdns/testkit/poll"
)

// These tests run the tcp and udp checkers against servers in network
// namespaces (testkit/netns) and break them for real. They need root;
// they skip elsewhere unless LBDNS_REQUIRE_NETNS=1.

// serveTCP accepts on l and answers each connection with a banner until l
// is closed; the returned func closes l and waits.
func serveTCP(t *testing.T, l net.Listener) func() {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				_, _ = io.WriteString(c, "OK lbdns\r\n")
			}()
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { _ = l.Close(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// serveUDP echoes datagrams on pc until it is closed; the returned func
// closes pc and waits.
func serveUDP(t *testing.T, pc net.PacketConn) func() {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { _ = pc.Close(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// listenPort returns the port of a listener's or a socket's address.
func listenPort(t *testing.T, a net.Addr) uint16 {
	t.Helper()
	return netip.MustParseAddrPort(a.String()).Port()
}

// build builds the checker of chk for target.
func build(t *testing.T, chk *configs.Check, target netip.AddrPort) check.Checker {
	t.Helper()
	c, err := NewBuilder(Deps{}).Build(chk, target)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// expect runs c once and fails t unless its verdict is ok and its detail
// starts with detail.
func expect(t *testing.T, step string, c check.Checker, ok bool, detail string) Result {
	t.Helper()
	r := c.Check(context.Background())
	if r.OK != ok || !strings.HasPrefix(r.Detail, detail) {
		t.Errorf("%s: Check = ok %v %q (rtt %v), want ok %v %q...", step, r.OK, r.Detail, r.RTT, ok, detail)
	}
	return r
}

// recovers checks, after a failure is repaired, that c passes again within
// a few probes: recovery is eventual (a link that comes back resolves its
// IPv6 neighbour again; a SYN dropped just before is retransmitted), which
// is what rise is for. Each probe keeps c's own timeout.
func recovers(t *testing.T, step string, c check.Checker, detail string) {
	t.Helper()
	poll.Until(t, 5*time.Second, step, func() (bool, string) {
		r := c.Check(context.Background())
		return r.OK && strings.HasPrefix(r.Detail, detail), fmt.Sprintf("ok %v %q (rtt %v), want ok %q...", r.OK, r.Detail, r.RTT, detail)
	})
}

func TestNetnsTCP(t *testing.T) {
	h := netns.New(t, "probes-tcp")
	for _, fam := range []struct {
		name    string
		network string
		addr    netip.Addr
	}{
		{"v4", "tcp4", h.AddrV4()},
		{"v6", "tcp6", h.AddrV6()},
	} {
		t.Run(fam.name, func(t *testing.T) {
			l, err := h.Listen(fam.network, ":0")
			if err != nil {
				t.Fatal(err)
			}
			port := listenPort(t, l.Addr())
			stop := serveTCP(t, l)
			target := netip.AddrPortFrom(fam.addr, port)
			timeout := 400 * time.Millisecond
			chk := tcpCheck(configs.TCPCheck{Expect: `^OK `})
			chk.Timeout.Duration = timeout
			c := build(t, chk, target)

			expect(t, "up", c, true, "connected, expect matched")

			// The listener is closed: the host answers with a reset.
			stop()
			if r := expect(t, "listener closed", c, false, "connection refused"); r.RTT > timeout/2 {
				t.Errorf("refusal took %v, want well under the %v timeout", r.RTT, timeout)
			}

			// Back on the same port.
			l, err = h.Listen(fam.network, target.String())
			if err != nil {
				t.Fatal(err)
			}
			serveTCP(t, l)
			recovers(t, "recovered", c, "connected")

			// Packets to the port are dropped: silence until the timeout.
			h.Drop("tcp", port)
			if r := expect(t, "dropped", c, false, "timeout after 400ms"); r.RTT < timeout*9/10 {
				t.Errorf("dropped: failed after %v, before the timeout", r.RTT)
			}
			h.Undrop("tcp", port)
			recovers(t, "undropped", c, "connected")

			// The host's link is down.
			h.LinkDown()
			expect(t, "link down", c, false, "timeout after 400ms")
			h.LinkUp()
			recovers(t, "link up", c, "connected")

			// The same through the connect engine (StartCheck) of a check
			// that only connects.
			chk = tcpCheck(configs.TCPCheck{})
			chk.Timeout.Duration = timeout
			c = build(t, chk, target)
			async := func(step string, ok bool, detail string) Result {
				t.Helper()
				r := startCheck(t, c, timeout)
				if r.OK != ok || r.Detail != detail {
					t.Errorf("%s (StartCheck): ok %v %q (rtt %v), want ok %v %q", step, r.OK, r.Detail, r.RTT, ok, detail)
				}
				return r
			}
			async("up", true, "connected")
			h.Drop("tcp", port)
			if r := async("dropped", false, "timeout after 400ms"); r.RTT < timeout*9/10 || r.RTT > timeout+200*time.Millisecond {
				t.Errorf("dropped (StartCheck): failed after %v, want the %v timeout", r.RTT, timeout)
			}
			h.Undrop("tcp", port)
			poll.Until(t, 5*time.Second, "undropped (StartCheck)", func() (bool, string) {
				r := startCheck(t, c, timeout)
				return r.OK && r.Detail == "connected", fmt.Sprintf("ok %v %q (rtt %v)", r.OK, r.Detail, r.RTT)
			})
		})
	}
}

func TestNetnsUDP(t *testing.T) {
	h := netns.New(t, "probes-udp")
	pc, err := h.ListenPacket("udp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port := listenPort(t, pc.LocalAddr())
	stop := serveUDP(t, pc)
	for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
		c := build(t, udpCheck(configs.UDPCheck{Payload: "ping", Expect: "^ping$"}), netip.AddrPortFrom(a, port))
		expect(t, a.String()+" echo up", c, true, "reply of 4 bytes")
	}
	c4 := build(t, udpCheck(configs.UDPCheck{Payload: "ping"}), netip.AddrPortFrom(h.AddrV4(), port))

	// Dropped: silence, which a UDP check cannot tell from a service that
	// never answers; it counts as down.
	h.Drop("udp", port)
	expect(t, "dropped", c4, false, "timeout after 300ms: no reply")
	h.Undrop("udp", port)
	recovers(t, "undropped", c4, "reply")

	// Stopped: the host answers with ICMP port unreachable.
	stop()
	for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
		c := build(t, udpCheck(configs.UDPCheck{Payload: "ping"}), netip.AddrPortFrom(a, port))
		expect(t, a.String()+" echo stopped", c, false, "connection refused")
	}
}

// TestNetnsProbeAddress: a member answered at one address and probed at
// another is judged by the probe address: its checker is built with the
// probe address, so a dead answer address does not matter.
func TestNetnsProbeAddress(t *testing.T) {
	answer := netns.New(t, "probes-answer")
	probe := netns.New(t, "probes-probe")
	l, err := probe.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port := listenPort(t, l.Addr())
	serveTCP(t, l)
	answer.LinkDown() // the answer address is dead

	chk := tcpCheck(configs.TCPCheck{Port: int(port)})
	member := struct{ answer, probe netip.AddrPort }{
		answer: netip.AddrPortFrom(answer.AddrV4(), 80),
		probe:  netip.AddrPortFrom(probe.AddrV4(), 80),
	}
	expect(t, "by probe address", build(t, chk, member.probe), true, "connected")
	expect(t, "by answer address", build(t, chk, member.answer), false, "timeout after 300ms")
}
