package configs

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestBGPExample loads bgp.toml and checks the parsed values and the
// defaults it leaves out.
func TestBGPExample(t *testing.T) {
	cfg, err := Load("bgp.toml")
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.BGP
	if !b.Enabled || b.RouterAddr != netip.MustParseAddr("198.51.100.1") || b.LocalAS != 65001 || b.ListenPort != DefaultBGPListenPort {
		t.Errorf("bgp = %+v", b)
	}
	if !slices.Equal(b.Up, []Community{65001<<16 | 100}) || !slices.Equal(b.Degraded, []Community{65001<<16 | 200}) {
		t.Errorf("communities up %v degraded %v", b.Up, b.Degraded)
	}
	if !b.DrainOnStop || b.DrainOnStopDelay.Duration != 5*time.Second || b.MinAnnouncing != 0 {
		t.Errorf("drain on stop %v %v, min announcing %d", b.DrainOnStop, b.DrainOnStopDelay, b.MinAnnouncing)
	}
	if len(b.Peers) != 2 {
		t.Fatalf("peers = %+v", b.Peers)
	}
	p0, p1 := b.Peers[0], b.Peers[1]
	if p0.HoldTime.Duration != 9*time.Second || p0.Keepalive.Duration != 3*time.Second || !p0.BFD || p0.Port != 179 {
		t.Errorf("peer 0 = %+v", p0)
	}
	if p1.Addr != netip.MustParseAddr("2001:db8::fe") || p1.HoldTime.Duration != DefaultBGPHoldTime || p1.Keepalive.Duration != 30*time.Second || p1.Password != "secret" {
		t.Errorf("peer 1 = %+v", p1)
	}
}

// TestBGPAbsent: without [bgp] the speaker is off.
func TestBGPAbsent(t *testing.T) {
	cfg, err := Load("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BGP.Enabled || len(cfg.BGP.Peers) != 0 {
		t.Errorf("bgp = %+v, want off", cfg.BGP)
	}
}

// TestCommunityString round-trips communities.
func TestCommunityString(t *testing.T) {
	for _, s := range []string{"0:0", "65535:0", "65001:100", "1:65535"} {
		c, err := ParseCommunity(s)
		if err != nil || c.String() != s {
			t.Errorf("%s: %v %v", s, c, err)
		}
	}
	if GracefulShutdown.String() != "65535:0" {
		t.Errorf("graceful shutdown = %v", GracefulShutdown)
	}
	for _, s := range []string{"", "1", "1:", "65536:1", "-1:2", "a:b"} {
		if _, err := ParseCommunity(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}
