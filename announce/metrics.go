package announce

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exports the announcer's sessions and prefixes; register it on
// the daemon's registry. Without [bgp] it exports nothing.
type Metrics struct {
	status func() Status
	now    func() time.Time

	peerUp, peerUptime, announced, med, drained *prometheus.Desc
}

// NewMetrics returns the metrics of the announcer whose Status is status,
// at the times now gives.
func NewMetrics(status func() Status, now func() time.Time) *Metrics {
	return &Metrics{
		status: status, now: now,
		peerUp: prometheus.NewDesc("lbdns_bgp_peer_up",
			"1 while the BGP session with the peer is established, else 0.", []string{"peer"}, nil),
		peerUptime: prometheus.NewDesc("lbdns_bgp_peer_uptime_seconds",
			"How long the BGP session with the peer has been established (0 while it is not).", []string{"peer"}, nil),
		announced: prometheus.NewDesc("lbdns_bgp_prefix_announced",
			"1 while the prefix (a VIP's or a GSLB listen address's) is announced over BGP, else 0.", []string{"prefix", "kind", "name"}, nil),
		med: prometheus.NewDesc("lbdns_bgp_prefix_med",
			"The MED an announced prefix is announced with.", []string{"prefix", "kind", "name"}, nil),
		drained: prometheus.NewDesc("lbdns_bgp_host_drained",
			"1 while the host is drained (lbctl host drain): routes marked GRACEFUL_SHUTDOWN, then withdrawn.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.peerUp, m.peerUptime, m.announced, m.med, m.drained} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.status()
	if !st.Enabled {
		return
	}
	now := m.now()
	for _, p := range st.Peers {
		up, uptime := 0.0, 0.0
		if p.State == StateEstablished {
			up = 1
			if !p.Since.IsZero() {
				uptime = now.Sub(p.Since).Seconds()
			}
		}
		ch <- prometheus.MustNewConstMetric(m.peerUp, prometheus.GaugeValue, up, p.Address.String())
		ch <- prometheus.MustNewConstMetric(m.peerUptime, prometheus.GaugeValue, uptime, p.Address.String())
	}
	for _, r := range st.Routes {
		v := 0.0
		if r.Announce {
			v = 1
			ch <- prometheus.MustNewConstMetric(m.med, prometheus.GaugeValue, float64(r.MED), r.Prefix.String(), r.Kind, r.Name)
		}
		ch <- prometheus.MustNewConstMetric(m.announced, prometheus.GaugeValue, v, r.Prefix.String(), r.Kind, r.Name)
	}
	d := 0.0
	if st.Drain != nil {
		d = 1
	}
	ch <- prometheus.MustNewConstMetric(m.drained, prometheus.GaugeValue, d)
}
