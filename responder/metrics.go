package responder

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/gslb"
	"lbdns/responder/doh"
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
	resortNow *prometheus.GaugeVec
	tcp       tcpMetrics
	dot       tcpMetrics
	// fronts are the series of the encrypted fronts (DoH, the JSON
	// API, the certificate; package doh).
	fronts *doh.Metrics

	// mu guards banks: the local counters of the UDP readers, folded
	// into the exported counters on every collection.
	mu    sync.Mutex
	banks map[*bank]struct{}
}

// bank is the local counters of one UDP reader (see counterCache).
type bank struct{ all []*cachedCounter }

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
			Help: "SOA serial served for the zone: the configuration version plus the operator intent's revision.",
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
		resortNow: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "gslb_last_resort_names",
			Help: "GSLB names and types answering by their last resort now (no pool of any of their policies has a member up), by last resort (fail-open, static, servfail); names whose members are still warming are not counted.",
		}, []string{"last_resort"}),
	}
	m.banks = make(map[*bank]struct{})
	m.tcp, m.dot, m.fronts = newTCPMetrics(), newDoTMetrics(), doh.NewMetrics()
	more := append(append(m.tcp.collectors(), m.dot.collectors()...), m.fronts.Collectors()...)
	for _, c := range append([]prometheus.Collector{folding{m, m.queries}, folding{m, m.ecs}, folding{m, m.truncated}, m.serial, m.rebuilds,
		folding{m, m.answers}, folding{m, m.resorts}, m.emergency, m.ttlRaised, folding{m, m.emAnswers}, m.resortNow}, more...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gslb server metrics: %w", err)
		}
	}
	return m, nil
}

// folding is a collector of counters that the readers count locally: it
// folds their counts in before it collects.
type folding struct {
	m *Metrics
	prometheus.Collector
}

// Collect folds the readers' counts, then collects.
func (f folding) Collect(ch chan<- prometheus.Metric) {
	f.m.fold()
	f.Collector.Collect(ch)
}

// fold adds what every reader counted since the last fold to the
// exported counters.
func (m *Metrics) fold() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for b := range m.banks {
		foldBank(b)
	}
}

// foldBank is fold for one bank; m.mu held.
func foldBank(b *bank) {
	for _, e := range b.all {
		n := e.n.Load()
		if d := n - e.folded; d > 0 {
			e.ctr.Add(float64(d))
			e.folded = n
		}
	}
}

// addBank makes a bank of local counters, folded from now on.
func (m *Metrics) addBank() *bank {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &bank{}
	m.banks[b] = struct{}{}
	return b
}

// addCounter adds e to b.
func (m *Metrics) addCounter(b *bank, e *cachedCounter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b.all = append(b.all, e)
}

// dropBank folds b a last time and forgets it.
func (m *Metrics) dropBank(b *bank) {
	m.mu.Lock()
	defer m.mu.Unlock()
	foldBank(b)
	delete(m.banks, b)
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
	qt := noQtype
	if len(req.Question) == 1 {
		qt = int(req.Question[0].Qtype)
	}
	c.incQuery(m, qt, resp.Rcode)
	if ecs {
		c.inc(m, vecECS, "", "")
	}
	if resp.Truncated {
		c.inc(m, vecTruncated, "", "")
	}
	if !asked {
		return
	}
	if r.Pool != "" {
		c.inc(m, vecAnswers, r.Policy, r.Pool)
	}
	if r.LastResort != "" {
		c.inc(m, vecResorts, r.Name, r.LastResort)
	}
	if r.Policy == gslb.PolicyEmergency {
		c.inc(m, vecEmergency, r.Name, "")
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

// setLastResorts sets the count of names and types on each last resort
// (warming ones left out), every kind present, 0 when none.
func (m *Metrics) setLastResorts(names []gslb.NameStatus) {
	counts := map[string]int{gslb.TraceFailOpen: 0, gslb.TraceStatic: 0, gslb.TraceServfail: 0}
	for _, n := range names {
		if !n.Warming {
			counts[n.LastResort]++
		}
	}
	for kind, n := range counts {
		m.resortNow.WithLabelValues(kind).Set(float64(n))
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

// tcpSeries are the TCP connections' series (nil without metrics).
func (m *Metrics) tcpSeries() *tcpMetrics {
	if m == nil {
		return nil
	}
	return &m.tcp
}

// dotSeries are the DoT connections' series (nil without metrics).
func (m *Metrics) dotSeries() *tcpMetrics {
	if m == nil {
		return nil
	}
	return &m.dot
}

// frontSeries are the encrypted fronts' series (nil without metrics).
func (m *Metrics) frontSeries() *doh.Metrics {
	if m == nil {
		return nil
	}
	return m.fronts
}
