package probes

import (
	"net/netip"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// TestProbeAddr: every kind says the address it probes, with the port its
// settings give to a target without one.
func TestProbeAddr(t *testing.T) {
	member := netip.MustParseAddrPort("192.0.2.7:0")
	at := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(member.Addr(), port) }
	b := NewBuilder(Deps{})
	for _, tt := range []struct {
		name   string
		chk    *configs.Check
		target netip.AddrPort
		want   netip.AddrPort
	}{
		{"tcp connect", tcpCheck(configs.TCPCheck{Port: 8080}), member, at(8080)},
		{"tcp expect", tcpCheck(configs.TCPCheck{Port: 25, Expect: "^220"}), member, at(25)},
		{"udp", udpCheck(configs.UDPCheck{Port: 123, PayloadHex: "00"}), member, at(123)},
		{"http", httpCheck("http", nil), member, at(80)},
		{"https", httpCheck("https", nil), member, at(443)},
		{"http follow", httpCheck("http", func(h *configs.HTTPCheck) { h.FollowRedirects = true }), member, at(80)},
		{"dns", fixedCheck(), at(53), at(53)},
	} {
		c, err := b.Build(tt.chk, tt.target)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		a, ok := c.(check.Addressed)
		if !ok {
			t.Errorf("%s: %T does not say its address", tt.name, c)
			continue
		}
		if got := a.ProbeAddr(); got != tt.want {
			t.Errorf("%s: ProbeAddr %v, want %v", tt.name, got, tt.want)
		}
	}
	if c, err := b.Build(icmpCheck(1, time.Second, time.Second, 0, "auto"), member); err == nil {
		if got := c.(check.Addressed).ProbeAddr(); got != at(0) {
			t.Errorf("icmp: ProbeAddr %v, want %v", got, at(0))
		}
	}
}
