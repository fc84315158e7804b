package flood

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exports a pipeline's counts and its heavy hitters, read at
// each scrape. Its labels are bounded: source (the query sources and
// the VIPs of the configuration), reason, and for the heavy hitters
// source, kind (clients, prefixes, names), rank (1..top) and key: at
// most top series per source and kind.
type Metrics struct {
	p *Pipeline

	queries, raised, dropped *prometheus.Desc
	rate, baseline, active   *prometheus.Desc
	stride, topRate, topErr  *prometheus.Desc
	topShare                 *prometheus.Desc
}

// NewMetrics returns the metrics of p; register them on a registerer.
func NewMetrics(p *Pipeline) *Metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Metrics{p: p,
		queries:  d("lbdns_flood_queries_total", "Queries counted by the flood alarms, by source (responder: the GSLB responder's own; dnstap: the resolvers').", "source"),
		raised:   d("lbdns_flood_alarms_raised_total", "Flood alarms raised, by reason (rise: a rate over its baseline and the floor; share: one key's share of the short window).", "reason"),
		dropped:  d("lbdns_flood_dropped_total", "Queries not recorded in the heavy hitters (counted in the totals) because the drainer was behind."),
		rate:     d("lbdns_flood_rate", "Last rate per second of each source the alarms watch (responder, dnstap: queries; vip NAME: IPVS incoming packets).", "source"),
		baseline: d("lbdns_flood_baseline", "Baseline (moving average) of each source's rate, per second.", "source"),
		active:   d("lbdns_flood_alarm_active", "1 while a flood alarm of the source is raised (rate alarms); share alarms under source \"share\".", "source", "reason"),
		stride:   d("lbdns_flood_sample_stride", "1 when every query is counted in the heavy hitters; k when each is counted with probability 1/k and weight k."),
		topRate:  d("lbdns_flood_top_rate", "Estimated queries per second of the heaviest keys of the short window, by source of the queries (responder, dnstap: counted apart), kind and rank (the key is the address, prefix or name); the true rate is at most this.", "source", "kind", "rank", "key"),
		topErr:   d("lbdns_flood_top_rate_error", "Error of lbdns_flood_top_rate: the true rate is at least top_rate minus this.", "source", "kind", "rank", "key"),
		topShare: d("lbdns_flood_top_share", "Share of the source's short window's queries of the heaviest keys, by source, kind and rank.", "source", "kind", "rank", "key"),
	}
}

// Describe sends the metrics' descriptions.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.queries, m.raised, m.dropped, m.rate, m.baseline, m.active, m.stride, m.topRate, m.topErr, m.topShare} {
		ch <- d
	}
}

// Collect reads the pipeline.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	c := m.p.Counters()
	for _, s := range []Source{SourceResponder, SourceDnstap} {
		ch <- prometheus.MustNewConstMetric(m.queries, prometheus.CounterValue, float64(c.Queries[s.String()]), s.String())
	}
	for _, r := range []Reason{ReasonRise, ReasonShare} {
		ch <- prometheus.MustNewConstMetric(m.raised, prometheus.CounterValue, float64(c.Raised[r]), string(r))
	}
	ch <- prometheus.MustNewConstMetric(m.dropped, prometheus.CounterValue, float64(c.Dropped))
	ch <- prometheus.MustNewConstMetric(m.stride, prometheus.GaugeValue, float64(c.Stride))
	for _, r := range c.Rates {
		ch <- prometheus.MustNewConstMetric(m.rate, prometheus.GaugeValue, r.Rate, r.Source)
		ch <- prometheus.MustNewConstMetric(m.baseline, prometheus.GaugeValue, r.Baseline, r.Source)
		v := 0.0
		if r.Raised {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.active, prometheus.GaugeValue, v, r.Source, string(ReasonRise))
	}
	shares := 0
	for _, a := range c.Active {
		if a.Reason == ReasonShare {
			shares++
		}
	}
	ch <- prometheus.MustNewConstMetric(m.active, prometheus.GaugeValue, float64(shares), "share", string(ReasonShare))
	cfg := m.p.Config()
	for _, s := range m.p.Sources() {
		for _, k := range []Kind{KindClient, KindPrefix, KindName} {
			v := m.p.Top(s, k, cfg.Tracker.Short, cfg.Top)
			for i, e := range v.Entries {
				rank := strconv.Itoa(i + 1)
				ch <- prometheus.MustNewConstMetric(m.topRate, prometheus.GaugeValue, e.Rate, s.String(), k.String(), rank, e.Key)
				ch <- prometheus.MustNewConstMetric(m.topErr, prometheus.GaugeValue, e.RateError, s.String(), k.String(), rank, e.Key)
				ch <- prometheus.MustNewConstMetric(m.topShare, prometheus.GaugeValue, e.Share, s.String(), k.String(), rank, e.Key)
			}
		}
	}
}
