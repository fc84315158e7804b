package clientfw

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// InForce sums up the client actions in force for the metrics: how many
// blocks and limits, and when the oldest of each was set (zero when
// there is none, or when none in force has a set time).
type InForce struct {
	Block, Limit             int
	OldestBlock, OldestLimit time.Time
}

// Metrics exports the client actions and their enforcement; register it
// on the daemon's registry.
type Metrics struct {
	enf     *Enforcer
	inForce func() InForce

	actions, oldest, enforced, errors, writes, elements, capacity, unremoved *prometheus.Desc
}

// NewMetrics returns the metrics of enf, with the actions in force in
// the intent summed up by inForce.
func NewMetrics(enf *Enforcer, inForce func() InForce) *Metrics {
	return &Metrics{enf: enf, inForce: inForce,
		actions: prometheus.NewDesc("lbdns_client_actions",
			"Client actions in force (lbctl block, limit), by action.", []string{"action"}, nil),
		oldest: prometheus.NewDesc("lbdns_client_action_oldest_set_timestamp_seconds",
			"Unix time the oldest client action in force of the action was set; absent while none is in force.", []string{"action"}, nil),
		enforced: prometheus.NewDesc("lbdns_client_actions_enforced",
			"1 while the kernel's nftables table holds the client actions in force, else 0.", nil, nil),
		errors: prometheus.NewDesc("lbdns_client_enforce_errors_total",
			"Reconciles of the client actions' nftables table that failed.", nil, nil),
		writes: prometheus.NewDesc("lbdns_client_table_writes_total",
			"Times the client actions' nftables table was created, replaced or removed.", nil, nil),
		elements: prometheus.NewDesc("lbdns_client_set_elements",
			"Elements in each set of the client actions' nftables table when last counted (a meter: the source addresses it tracks).", []string{"set"}, nil),
		capacity: prometheus.NewDesc("lbdns_client_set_capacity",
			"Most elements a set of the client actions' nftables table takes (the meters; a full meter drops every new source of its limited clients).", []string{"set"}, nil),
		unremoved: prometheus.NewDesc("lbdns_client_actions_unremoved",
			"Client actions ended (lbctl unblock) whose kernel elements could not be removed: the kernel may still drop or limit their clients until the elements time out.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.actions, m.oldest, m.enforced, m.errors, m.writes, m.elements, m.capacity, m.unremoved} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	in := m.inForce()
	st := m.enf.Status()
	ch <- prometheus.MustNewConstMetric(m.actions, prometheus.GaugeValue, float64(in.Block), "block")
	ch <- prometheus.MustNewConstMetric(m.actions, prometheus.GaugeValue, float64(in.Limit), "limit")
	for action, at := range map[string]time.Time{"block": in.OldestBlock, "limit": in.OldestLimit} {
		if !at.IsZero() {
			ch <- prometheus.MustNewConstMetric(m.oldest, prometheus.GaugeValue, float64(at.UnixNano())/1e9, action)
		}
	}
	v := 0.0
	if st.Enforced {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(m.enforced, prometheus.GaugeValue, v)
	ch <- prometheus.MustNewConstMetric(m.errors, prometheus.CounterValue, float64(st.Errors))
	ch <- prometheus.MustNewConstMetric(m.writes, prometheus.CounterValue, float64(st.Replaced))
	ch <- prometheus.MustNewConstMetric(m.unremoved, prometheus.GaugeValue, float64(len(st.Unremoved)))
	for _, f := range st.Fill {
		ch <- prometheus.MustNewConstMetric(m.elements, prometheus.GaugeValue, float64(f.Elements), f.Set)
		if f.Capacity > 0 {
			ch <- prometheus.MustNewConstMetric(m.capacity, prometheus.GaugeValue, float64(f.Capacity), f.Set)
		}
	}
}
