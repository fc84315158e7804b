package vip

import (
	"net/netip"
	"strings"
	"testing"

	"lbdns/configs"
)

// TestVerdicts: a VIP serves when every one of its services has a
// destination of weight above 0 (members held by a pool failing open
// count, and make it degraded); one service without is enough to say no
// (partial while another still takes traffic); in a dry run none serves.
func TestVerdicts(t *testing.T) {
	v4 := netip.MustParseAddr("192.0.2.53")
	cfg := &configs.Config{VIPs: []configs.VIP{{Name: "v4", Addr: v4, Ports: []int{53}, Protocols: []string{"udp", "tcp"}, Pool: "main"}}}
	d1, d2 := netip.MustParseAddrPort("198.51.100.1:53"), netip.MustParseAddrPort("198.51.100.2:53")
	udp, tcp := ServiceKey{Addr: v4, Port: 53, Proto: UDP}, ServiceKey{Addr: v4, Port: 53, Proto: TCP}
	table := func(udpW, tcpW uint32) Table {
		return Table{
			udp: {Key: udp, Dests: map[netip.AddrPort]Destination{d1: {Addr: d1, Weight: udpW}, d2: {Addr: d2, Weight: 0}}},
			tcp: {Key: tcp, Dests: map[netip.AddrPort]Destination{d1: {Addr: d1, Weight: tcpW}}},
		}
	}
	plan := func(failOpen bool, healthy int) map[string]PoolHealth {
		return map[string]PoolHealth{"main": {FailOpen: failOpen, Below: healthy < 1}}
	}
	for _, tc := range []struct {
		name              string
		table             Table
		plan              map[string]PoolHealth
		dryRun            bool
		serving, degraded bool
		partial           bool
		reason            string
	}{
		{"both services take traffic", table(100, 100), plan(false, 2), false, true, false, false, "serving: udp/53 1 of 2 destinations taking traffic, tcp/53 1 of 1"},
		{"tcp without a destination", table(100, 0), plan(false, 2), false, false, false, true, "not serving: no destination taking traffic on tcp/53 (pool main)"},
		{"no destination taking traffic", table(0, 0), plan(false, 0), false, false, false, false, "not serving: no destination taking traffic on udp/53, tcp/53"},
		{"no service at all", Table{}, plan(false, 0), false, false, false, false, "not serving: no destination taking traffic on udp/53, tcp/53"},
		{"failing open", table(100, 100), plan(true, 0), false, true, true, false, "(degraded: pool main failing open)"},
		{"below min_healthy", table(100, 100), plan(false, 0), false, true, true, false, "(degraded: pool main below its min_healthy)"},
		{"dry run", table(100, 100), plan(false, 2), true, false, false, false, "dry run: the IPVS table is computed, not applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Verdicts(cfg, tc.table, tc.plan, tc.dryRun)
			if len(got) != 1 || got[0].Name != "v4" || got[0].Addr != v4 {
				t.Fatalf("verdicts %+v, want one of v4", got)
			}
			v := got[0]
			if v.Serving != tc.serving || v.Degraded != tc.degraded || v.Partial != tc.partial || !strings.Contains(v.Reason, tc.reason) {
				t.Errorf("serving %v degraded %v partial %v %q; want %v %v %v containing %q", v.Serving, v.Degraded, v.Partial, v.Reason, tc.serving, tc.degraded, tc.partial, tc.reason)
			}
		})
	}
}
