package probes

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/configs"
)

// udpCheck returns a udp check profile with a 300ms timeout.
func udpCheck(s configs.UDPCheck) *configs.Check {
	return &configs.Check{Name: "u", Kind: "udp", Timeout: configs.Duration{Duration: 300 * time.Millisecond}, UDP: &s}
}

// udpServer answers each datagram with reply(datagram) (nothing when nil)
// on a loopback socket until the test ends.
func udpServer(t *testing.T, reply func([]byte) []byte) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
			if out := reply(buf[:n]); out != nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); wg.Wait() })
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

func TestUDP(t *testing.T) {
	echo := udpServer(t, func(b []byte) []byte { return append([]byte("echo:"), b...) })
	mute := udpServer(t, func([]byte) []byte { return nil })
	for _, tc := range []struct {
		name   string
		target netip.AddrPort
		s      configs.UDPCheck
		ok     bool
		detail string
	}{
		{"any reply", echo, configs.UDPCheck{Payload: "hi"}, true, "reply of 7 bytes"},
		{"empty datagram", echo, configs.UDPCheck{}, true, "reply of 5 bytes"},
		{"expect", echo, configs.UDPCheck{Payload: "ping\n", Expect: `^echo:ping\n$`}, true, "reply of 10 bytes"},
		{"hex payload", echo, configs.UDPCheck{PayloadHex: "41 0a", Expect: `^echo:A\n$`}, true, "reply of 7 bytes"},
		{"mismatch", echo, configs.UDPCheck{Payload: "x", Expect: "^pong"}, false, `reply does not match /^pong/: 6 bytes "echo:x"`},
		{"refused", closedPort(t, "udp"), configs.UDPCheck{Payload: "x"}, false, "connection refused"},
		{"silence", mute, configs.UDPCheck{Payload: "x"}, false, "timeout after 300ms: no reply"},
		{"port override", netip.AddrPortFrom(echo.Addr(), 1), configs.UDPCheck{Port: int(echo.Port())}, true, "reply of 5 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewBuilder(Deps{}).Build(udpCheck(tc.s), tc.target)
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

func TestUDPBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		chk  *configs.Check
		want string
	}{
		{"no port", udpCheck(configs.UDPCheck{}), "no port: set port in [check.u.udp]"},
		{"bad hex", udpCheck(configs.UDPCheck{Port: 7, PayloadHex: "zz"}), "payload_hex:"},
		{"bad expect", udpCheck(configs.UDPCheck{Port: 7, Expect: "("}), "expect:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewBuilder(Deps{}).Build(tc.chk, netip.MustParseAddrPort("127.0.0.1:0"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
