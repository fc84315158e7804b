package announce

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lbdns/configs"
	"lbdns/intent"
	"lbdns/testkit/promgolden"
)

func metricsStatus(now time.Time) Status {
	return Status{
		Enabled: true,
		Peers: []PeerStatus{{Address: netip.MustParseAddr("198.51.100.254"), AS: 65000, State: StateEstablished, Since: now.Add(-time.Minute)},
			{Address: netip.MustParseAddr("198.51.100.253"), AS: 65000, State: StateActive}},
		Routes: []Route{{Prefix: netip.MustParsePrefix("192.0.2.53/32"), Kind: KindVIP, Name: "v4", Announce: true, MED: 1000, Communities: []configs.Community{configs.GracefulShutdown}},
			{Prefix: netip.MustParsePrefix("192.0.2.80/32"), Kind: KindListener, Name: "192.0.2.80:53"}},
		Drain: &intent.HostDrain{Set: now},
	}
}

// TestMetrics: the values exported for a status.
func TestMetrics(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := NewMetrics(func() Status { return metricsStatus(now) }, func() time.Time { return now })
	want := `
# HELP lbdns_bgp_host_drained 1 while the host is drained (lbctl host drain): routes marked GRACEFUL_SHUTDOWN, then withdrawn.
# TYPE lbdns_bgp_host_drained gauge
lbdns_bgp_host_drained 1
# HELP lbdns_bgp_peer_up 1 while the BGP session with the peer is established, else 0.
# TYPE lbdns_bgp_peer_up gauge
lbdns_bgp_peer_up{peer="198.51.100.253"} 0
lbdns_bgp_peer_up{peer="198.51.100.254"} 1
# HELP lbdns_bgp_peer_uptime_seconds How long the BGP session with the peer has been established (0 while it is not).
# TYPE lbdns_bgp_peer_uptime_seconds gauge
lbdns_bgp_peer_uptime_seconds{peer="198.51.100.253"} 0
lbdns_bgp_peer_uptime_seconds{peer="198.51.100.254"} 60
# HELP lbdns_bgp_prefix_announced 1 while the prefix (a VIP's or a GSLB listen address's) is announced over BGP, else 0.
# TYPE lbdns_bgp_prefix_announced gauge
lbdns_bgp_prefix_announced{kind="listener",name="192.0.2.80:53",prefix="192.0.2.80/32"} 0
lbdns_bgp_prefix_announced{kind="vip",name="v4",prefix="192.0.2.53/32"} 1
# HELP lbdns_bgp_prefix_med The MED an announced prefix is announced with.
# TYPE lbdns_bgp_prefix_med gauge
lbdns_bgp_prefix_med{kind="vip",name="v4",prefix="192.0.2.53/32"} 1000
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	off := NewMetrics(func() Status { return Status{} }, time.Now)
	if n := testutil.CollectAndCount(off); n != 0 {
		t.Errorf("without [bgp]: %d series", n)
	}
}

// TestMetricFamilies: the families the announcer exports, with their
// type, labels and help, are testdata/metrics.txt (read by the dashboard
// and alert tests of package monitoring); LBDNS_UPDATE_GOLDEN=1 rewrites
// it.
func TestMetricFamilies(t *testing.T) {
	now := time.Now()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(func() Status { return metricsStatus(now) }, func() time.Time { return now }))
	promgolden.Check(t, "the announcer", promgolden.Lines(t, reg))
}
