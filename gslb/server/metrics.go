package server

import (
	"fmt"
	"strconv"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/gslb"
)

// Metrics are the responder's Prometheus series. Labels are bounded: query
// types outside a fixed list count as "OTHER", zones are the configured
// ones.
type Metrics struct {
	queries   *prometheus.CounterVec
	ecs       prometheus.Counter
	truncated prometheus.Counter
	serial    *prometheus.GaugeVec
	rebuilds  *prometheus.CounterVec
	answers   *prometheus.CounterVec
	resorts   *prometheus.CounterVec
	emergency *prometheus.GaugeVec
	ttlRaised *prometheus.GaugeVec
	emAnswers *prometheus.CounterVec
}

// NewMetrics creates the responder's series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_queries_total",
			Help: "DNS queries answered by the GSLB responder, by query type and response code.",
		}, []string{"qtype", "rcode"}),
		ecs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_ecs_queries_total",
			Help: "Queries to the GSLB responder that carried a valid EDNS Client Subnet option.",
		}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_truncated_replies_total",
			Help: "UDP replies of the GSLB responder sent truncated (TC set: the client retries over TCP).",
		}),
		serial: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "gslb_soa_serial",
			Help: "SOA serial served for the zone: the version of the served configuration.",
		}, []string{"zone"}),
		rebuilds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_snapshot_builds_total",
			Help: "Answer snapshots built by the GSLB responder (on start, reload and member state changes), by result.",
		}, []string{"result"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_answers_total",
			Help: "Answers of GSLB names given by a policy's pool, by policy (its match, or global) and pool.",
		}, []string{"policy", "pool"}),
		resorts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_last_resort_answers_total",
			Help: "Answers of GSLB names given by their last resort (no policy's pool had a healthy member, or members still without a verdict), by name and last resort.",
		}, []string{"name", "last_resort"}),
		emergency: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "gslb_emergency",
			Help: "1 for each GSLB name whose intelligent resolution an operator switched off (lbctl gslb off): it answers its static set, whatever the health and the client's location.",
		}, []string{"name"}),
		ttlRaised: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "gslb_ttl_raised_seconds",
			Help: "The TTL of the answers of each GSLB name under an operator TTL raise (lbctl gslb ttl).",
		}, []string{"name"}),
		emAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_emergency_answers_total",
			Help: "Answers of GSLB names given with intelligent resolution off (lbctl gslb off), by name.",
		}, []string{"name"}),
	}
	for _, c := range []prometheus.Collector{m.queries, m.ecs, m.truncated, m.serial, m.rebuilds, m.answers, m.resorts, m.emergency, m.ttlRaised, m.emAnswers} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gslb server metrics: %w", err)
		}
	}
	return m, nil
}

// qtypeLabel is the qtype label of t: its name for the types a GSLB
// responder is asked about, else "OTHER".
func qtypeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSOA, dns.TypeNS, dns.TypeCNAME, dns.TypeTXT, dns.TypeMX,
		dns.TypeANY, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeCAA, dns.TypePTR, dns.TypeSRV, dns.TypeDS, dns.TypeDNSKEY:
		return dns.TypeToString[t]
	}
	return "OTHER"
}

// rcodeLabel is the rcode label of rc.
func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return strconv.Itoa(rc)
}

// observe counts one reply resp to req, answered by r when asked (the
// snapshot was asked), through the counters of c.
func (m *Metrics) observe(c *counterCache, req, resp *dns.Msg, r *gslb.Response, asked, ecs bool) {
	qt := "NONE"
	if len(req.Question) == 1 {
		qt = qtypeLabel(req.Question[0].Qtype)
	}
	c.counter(m, vecQueries, qt, rcodeLabel(resp.Rcode)).Inc()
	if ecs {
		m.ecs.Inc()
	}
	if resp.Truncated {
		m.truncated.Inc()
	}
	if !asked {
		return
	}
	if r.Pool != "" {
		c.counter(m, vecAnswers, r.Policy, r.Pool).Inc()
	}
	if r.LastResort != "" {
		c.counter(m, vecResorts, r.Name, r.LastResort).Inc()
	}
	if r.Policy == gslb.PolicyEmergency {
		c.counter(m, vecEmergency, r.Name, "").Inc()
	}
}

// setEmergencies sets the emergency and TTL raise gauges from the names
// under operator intent, forgetting the others.
func (m *Metrics) setEmergencies(names []gslb.NameEmergency) {
	m.emergency.Reset()
	m.ttlRaised.Reset()
	for _, n := range names {
		if n.Off {
			m.emergency.WithLabelValues(n.Name).Set(1)
		}
		if n.Raised {
			m.ttlRaised.WithLabelValues(n.Name).Set(float64(n.TTL))
		}
	}
}

// setSerial sets the serial of zones, forgetting other zones.
func (m *Metrics) setSerial(zones []string, serial uint32) {
	m.serial.Reset()
	for _, z := range zones {
		m.serial.WithLabelValues(z).Set(float64(serial))
	}
}

// built counts one snapshot build.
func (m *Metrics) built(err error) {
	if err != nil {
		m.rebuilds.WithLabelValues("error").Inc()
		return
	}
	m.rebuilds.WithLabelValues("ok").Inc()
}
