package announce

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/hub"
	"lbdns/intent"
)

// testConfig has VIPs v4 (192.0.2.53) and v6 (2001:db8::53), and GSLB
// listen addresses on 192.0.2.80 (two ports), 0.0.0.0 and 127.0.0.1.
func testConfig() *configs.Config {
	cfg := &configs.Config{
		VIPs: []configs.VIP{
			{Name: "v4", Addr: netip.MustParseAddr("192.0.2.53")},
			{Name: "v6", Addr: netip.MustParseAddr("2001:db8::53")},
		},
	}
	cfg.GSLB.Server.Listen = []string{"192.0.2.80:53", "192.0.2.80:5353", "0.0.0.0:53", "127.0.0.1:53"}
	for _, l := range cfg.GSLB.Server.Listen {
		cfg.GSLB.Server.ListenAddrs = append(cfg.GSLB.Server.ListenAddrs, netip.MustParseAddrPort(l))
	}
	cfg.BGP = configs.BGP{Enabled: true, MEDUp: 100, MEDDegraded: 1000, Up: []configs.Community{65001<<16 | 100},
		Degraded: []configs.Community{65001<<16 | 200}, DrainDelay: configs.Duration{Duration: 30 * time.Second},
		Peers: []configs.BGPPeer{{Addr: netip.MustParseAddr("198.51.100.254"), AS: 65000}}}
	return cfg
}

func serving(name, addr string) hub.Verdict {
	return hub.Verdict{Name: name, Addr: netip.MustParseAddr(addr), Serving: true, Reason: "serving: udp/53 2 of 2"}
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	up := []configs.Community{65001<<16 | 100}
	deg := []configs.Community{65001<<16 | 200}
	gs := configs.GracefulShutdown
	allListeners := []hub.Verdict{serving("192.0.2.80:53", "192.0.2.80"), serving("192.0.2.80:5353", "192.0.2.80"),
		serving("0.0.0.0:53", "0.0.0.0"), serving("127.0.0.1:53", "127.0.0.1")}
	degraded := serving("v4", "192.0.2.53")
	degraded.Degraded = true
	dead := hub.Verdict{Name: "v4", Addr: netip.MustParseAddr("192.0.2.53"), Reason: "not serving: no destination"}
	type want struct {
		prefix   string
		announce bool
		med      uint32
		comms    []configs.Community
		reason   string
	}
	for _, tc := range []struct {
		name      string
		vips      []hub.Verdict
		listeners []hub.Verdict
		drain     *intent.HostDrain
		now       time.Time
		want      []want
		next      time.Time
	}{
		{name: "no verdicts yet: nothing announced", want: []want{
			{"192.0.2.53/32", false, 0, nil, "no serving verdict yet"},
			{"192.0.2.80/32", false, 0, nil, "no serving verdict yet"},
			{"2001:db8::53/128", false, 0, nil, "no serving verdict yet"},
		}},
		{name: "all serving", vips: []hub.Verdict{serving("v4", "192.0.2.53"), serving("v6", "2001:db8::53")}, listeners: allListeners, want: []want{
			{"192.0.2.53/32", true, 100, up, "announced: vip v4"},
			{"192.0.2.80/32", true, 100, up, "announced: listener 192.0.2.80:53"},
			{"2001:db8::53/128", true, 100, up, "(no IPv6 peer is configured: no router learns it)"},
		}},
		{name: "degraded: worse MED", vips: []hub.Verdict{degraded}, want: []want{
			{"192.0.2.53/32", true, 1000, deg, "announced"},
			{"192.0.2.80/32", false, 0, nil, "withdrawn"},
			{"2001:db8::53/128", false, 0, nil, "withdrawn: vip v6: no serving verdict yet"},
		}},
		{name: "dead: withdrawn", vips: []hub.Verdict{dead}, want: []want{
			{"192.0.2.53/32", false, 0, nil, "withdrawn: vip v4: not serving: no destination"},
			{"192.0.2.80/32", false, 0, nil, "withdrawn"},
			{"2001:db8::53/128", false, 0, nil, "withdrawn"},
		}},
		{name: "one port of a listen address down: withdrawn", listeners: []hub.Verdict{serving("192.0.2.80:53", "192.0.2.80"),
			{Name: "192.0.2.80:5353", Addr: netip.MustParseAddr("192.0.2.80"), Reason: "not listening"}}, want: []want{
			{"192.0.2.53/32", false, 0, nil, "withdrawn"},
			{"192.0.2.80/32", false, 0, nil, "listener 192.0.2.80:5353: not listening"},
			{"2001:db8::53/128", false, 0, nil, "withdrawn"},
		}},
		{name: "foreign verdicts are never announced", vips: []hub.Verdict{serving("other", "203.0.113.1"), serving("v4", "203.0.113.2")},
			listeners: []hub.Verdict{serving("203.0.113.3:53", "203.0.113.3")}, want: []want{
				{"192.0.2.53/32", false, 0, nil, "no serving verdict yet"},
				{"192.0.2.80/32", false, 0, nil, "withdrawn"},
				{"2001:db8::53/128", false, 0, nil, "withdrawn"},
			}},
		{name: "draining: graceful shutdown until the delay", vips: []hub.Verdict{serving("v4", "192.0.2.53")},
			drain: &intent.HostDrain{Set: t0, Reason: "kernel upgrade", By: "uid 0"}, now: t0.Add(29 * time.Second), next: t0.Add(30 * time.Second), want: []want{
				{"192.0.2.53/32", true, 100, []configs.Community{65001<<16 | 100, gs}, "draining: GRACEFUL_SHUTDOWN until 2026-01-02T03:00:30Z (by uid 0: kernel upgrade)"},
				{"192.0.2.80/32", false, 0, nil, "withdrawn"},
				{"2001:db8::53/128", false, 0, nil, "withdrawn"},
			}},
		{name: "drained: withdrawn after the delay", vips: []hub.Verdict{serving("v4", "192.0.2.53"), serving("v6", "2001:db8::53")},
			drain: &intent.HostDrain{Set: t0, By: "uid 0"}, now: t0.Add(30 * time.Second), want: []want{
				{"192.0.2.53/32", false, 0, nil, "withdrawn: host drained since 2026-01-02T03:00:00Z (by uid 0), drain delay 30s over"},
				{"192.0.2.80/32", false, 0, nil, "withdrawn"},
				{"2001:db8::53/128", false, 0, nil, "host drained"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes, next := Decide(Input{Config: testConfig(), VIPs: tc.vips, Listeners: tc.listeners, Drain: tc.drain, Now: tc.now})
			if !next.Equal(tc.next) {
				t.Errorf("next = %v, want %v", next, tc.next)
			}
			if len(routes) != len(tc.want) {
				t.Fatalf("routes = %+v, want %d", routes, len(tc.want))
			}
			for i, w := range tc.want {
				r := routes[i]
				if r.Prefix.String() != w.prefix || r.Announce != w.announce || r.MED != w.med || !slices.Equal(r.Communities, w.comms) || !strings.Contains(r.Reason, w.reason) {
					t.Errorf("route %d = %+v (communities %v)\nwant %+v", i, r, r.Communities, w)
				}
			}
			for _, p := range Paths(routes) {
				if !slices.Contains(allowed(testConfig()), p.Prefix) {
					t.Errorf("announced %v, not a prefix of the configuration", p.Prefix)
				}
			}
		})
	}
}

// TestDecideStaleVerdict: after a reload that moved VIP v4 to another
// address, the old address's verdict does not announce the new one.
func TestDecideStaleVerdict(t *testing.T) {
	cfg := testConfig()
	cfg.VIPs[0].Addr = netip.MustParseAddr("192.0.2.99")
	routes, _ := Decide(Input{Config: cfg, VIPs: []hub.Verdict{serving("v4", "192.0.2.53")}})
	if len(Paths(routes)) != 0 {
		t.Errorf("announced %v from a stale verdict", Paths(routes))
	}
	if got := allowed(cfg); !slices.Contains(got, netip.MustParsePrefix("192.0.2.99/32")) || slices.Contains(got, netip.MustParsePrefix("192.0.2.53/32")) {
		t.Errorf("allowed = %v", got)
	}
}

// TestDecideNoConfig: nothing without a configuration.
func TestDecideNoConfig(t *testing.T) {
	if routes, next := Decide(Input{VIPs: []hub.Verdict{serving("v4", "192.0.2.53")}}); routes != nil || !next.IsZero() {
		t.Errorf("got %v %v", routes, next)
	}
}

// allowed returns every prefix cfg may announce, in prefix order.
func allowed(cfg *configs.Config) []netip.Prefix {
	routes, _ := Decide(Input{Config: cfg})
	out := make([]netip.Prefix, 0, len(routes))
	for _, r := range routes {
		out = append(out, r.Prefix)
	}
	return out
}

// frontsConfig is testConfig with encrypted fronts: DoH on 192.0.2.10
// (the responder's own address 192.0.2.80 too) and on 0.0.0.0 (never
// announced), DoT on 192.0.2.11.
func frontsConfig() *configs.Config {
	cfg := testConfig()
	t := &cfg.GSLB.TLS
	t.DoHListen = []string{"192.0.2.10:443", "192.0.2.80:443", "0.0.0.0:8443"}
	t.DoTListen = []string{"192.0.2.11:853"}
	for _, l := range t.DoHListen {
		t.DoHAddrs = append(t.DoHAddrs, netip.MustParseAddrPort(l))
	}
	for _, l := range t.DoTListen {
		t.DoTAddrs = append(t.DoTAddrs, netip.MustParseAddrPort(l))
	}
	return cfg
}

// TestDecideFronts: a DoH or DoT listen address is announced while its
// front serves, withdrawn otherwise with its reason, named by front and
// address; one that shares its address with a GSLB listen address is
// announced only while both serve.
func TestDecideFronts(t *testing.T) {
	listeners := []hub.Verdict{serving("192.0.2.80:53", "192.0.2.80"), serving("192.0.2.80:5353", "192.0.2.80")}
	notServing := func(name, addr, why string) hub.Verdict {
		return hub.Verdict{Name: name, Addr: netip.MustParseAddr(addr), Reason: why}
	}
	allFronts := []hub.Verdict{serving("doh 192.0.2.10:443", "192.0.2.10"), serving("doh 192.0.2.80:443", "192.0.2.80"),
		serving("dot 192.0.2.11:853", "192.0.2.11")}
	type want struct {
		prefix   string
		announce bool
		name     string
		reason   string
	}
	for _, tc := range []struct {
		name   string
		bgp    bool
		fronts []hub.Verdict
		want   []want
	}{
		{name: "no verdicts yet", bgp: true, want: []want{
			{"192.0.2.10/32", false, "doh 192.0.2.10:443", "withdrawn: listener doh 192.0.2.10:443: no serving verdict yet"},
			{"192.0.2.11/32", false, "dot 192.0.2.11:853", "withdrawn: listener dot 192.0.2.11:853: no serving verdict yet"},
			{"192.0.2.80/32", false, "192.0.2.80:53, 192.0.2.80:5353, doh 192.0.2.80:443", "listener doh 192.0.2.80:443: no serving verdict yet"},
		}},
		{name: "every front serving", bgp: true, fronts: allFronts, want: []want{
			{"192.0.2.10/32", true, "doh 192.0.2.10:443", "announced: listener doh 192.0.2.10:443: serving"},
			{"192.0.2.11/32", true, "dot 192.0.2.11:853", "announced: listener dot 192.0.2.11:853: serving"},
			{"192.0.2.80/32", true, "192.0.2.80:53, 192.0.2.80:5353, doh 192.0.2.80:443", "announced"},
		}},
		{name: "a certificate that cannot be loaded", bgp: true, fronts: []hub.Verdict{
			notServing("doh 192.0.2.10:443", "192.0.2.10", "not listening: tls certificate: open /etc/lbdns/gslb.crt: no such file or directory"),
			notServing("doh 192.0.2.80:443", "192.0.2.80", "not listening: tls certificate: open /etc/lbdns/gslb.crt: no such file or directory"),
			notServing("dot 192.0.2.11:853", "192.0.2.11", "not listening: tls certificate: open /etc/lbdns/gslb.crt: no such file or directory")}, want: []want{
			{"192.0.2.10/32", false, "doh 192.0.2.10:443", "withdrawn: listener doh 192.0.2.10:443: not listening: tls certificate: open"},
			{"192.0.2.11/32", false, "dot 192.0.2.11:853", "withdrawn: listener dot 192.0.2.11:853: not listening: tls certificate"},
			{"192.0.2.80/32", false, "192.0.2.80:53, 192.0.2.80:5353, doh 192.0.2.80:443", "withdrawn: listener 192.0.2.80:53: serving"},
		}},
		{name: "dot not bound, doh serving", bgp: true, fronts: []hub.Verdict{allFronts[0], allFronts[1],
			notServing("dot 192.0.2.11:853", "192.0.2.11", "not bound (the dot front is not serving)")}, want: []want{
			{"192.0.2.10/32", true, "doh 192.0.2.10:443", "announced"},
			{"192.0.2.11/32", false, "dot 192.0.2.11:853", "withdrawn: listener dot 192.0.2.11:853: not bound"},
			{"192.0.2.80/32", true, "192.0.2.80:53, 192.0.2.80:5353, doh 192.0.2.80:443", "announced"},
		}},
		{name: "a verdict of another address", bgp: true, fronts: []hub.Verdict{serving("doh 192.0.2.10:443", "192.0.2.99"), allFronts[1], allFronts[2]}, want: []want{
			{"192.0.2.10/32", false, "doh 192.0.2.10:443", "no serving verdict yet"},
			{"192.0.2.11/32", true, "dot 192.0.2.11:853", "announced"},
			{"192.0.2.80/32", true, "192.0.2.80:53, 192.0.2.80:5353, doh 192.0.2.80:443", "announced"},
		}},
		{name: "without [bgp]", fronts: allFronts, want: []want{
			{"192.0.2.10/32", false, "doh 192.0.2.10:443", "no [bgp] in the configuration"},
			{"192.0.2.11/32", false, "dot 192.0.2.11:853", "no [bgp] in the configuration"},
			{"192.0.2.80/32", false, "192.0.2.80:53, 192.0.2.80:5353, doh 192.0.2.80:443", "no [bgp] in the configuration"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := frontsConfig()
			cfg.BGP.Enabled = tc.bgp
			cfg.VIPs = nil
			routes, _ := Decide(Input{Config: cfg, Listeners: listeners, Fronts: tc.fronts})
			if len(routes) != len(tc.want) {
				t.Fatalf("routes = %+v, want %d", routes, len(tc.want))
			}
			for i, w := range tc.want {
				r := routes[i]
				if r.Prefix.String() != w.prefix || r.Announce != w.announce || r.Kind != KindListener || r.Name != w.name || !strings.Contains(r.Reason, w.reason) {
					t.Errorf("route %d = %+v\nwant %+v", i, r, w)
				}
			}
		})
	}
}
