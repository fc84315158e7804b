package clientfw

import "github.com/prometheus/client_golang/prometheus"

// Metrics exports the client actions and their enforcement; register it
// on the daemon's registry.
type Metrics struct {
	enf     *Enforcer
	inForce func() (block, limit int)

	actions, enforced, errors, writes *prometheus.Desc
}

// NewMetrics returns the metrics of enf, with the actions in force in
// the intent counted by inForce.
func NewMetrics(enf *Enforcer, inForce func() (block, limit int)) *Metrics {
	return &Metrics{enf: enf, inForce: inForce,
		actions: prometheus.NewDesc("lbdns_client_actions",
			"Client actions in force (lbctl block, limit), by action.", []string{"action"}, nil),
		enforced: prometheus.NewDesc("lbdns_client_actions_enforced",
			"1 while the kernel's nftables table holds the client actions in force, else 0.", nil, nil),
		errors: prometheus.NewDesc("lbdns_client_enforce_errors_total",
			"Reconciles of the client actions' nftables table that failed.", nil, nil),
		writes: prometheus.NewDesc("lbdns_client_table_writes_total",
			"Times the client actions' nftables table was created, replaced or removed.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.actions, m.enforced, m.errors, m.writes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	block, limit := m.inForce()
	st := m.enf.Status()
	ch <- prometheus.MustNewConstMetric(m.actions, prometheus.GaugeValue, float64(block), "block")
	ch <- prometheus.MustNewConstMetric(m.actions, prometheus.GaugeValue, float64(limit), "limit")
	v := 0.0
	if st.Enforced {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(m.enforced, prometheus.GaugeValue, v)
	ch <- prometheus.MustNewConstMetric(m.errors, prometheus.CounterValue, float64(st.Errors))
	ch <- prometheus.MustNewConstMetric(m.writes, prometheus.CounterValue, float64(st.Replaced))
}
