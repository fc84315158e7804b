package doh

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the fronts' series. The responder registers them beside
// its own (its queries, whatever the transport, are counted there too).
type Metrics struct {
	requests   *prometheus.CounterVec
	conns      prometheus.Gauge
	refused    *prometheus.CounterVec
	handshakes *prometheus.CounterVec
	proxy      *prometheus.CounterVec
	reloads    *prometheus.CounterVec
	expiry     prometheus.Gauge
}

// The reason label values of lbdns_gslb_doh_refused_total.
const (
	refusedLimit       = "limit"
	refusedPerSource   = "per_source"
	refusedDescriptors = "descriptors"
)

// NewMetrics creates the fronts' series (Collectors lists them, to
// register).
func NewMetrics() *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_doh_requests_total",
			Help: "HTTP requests to the GSLB responder's HTTPS listeners, by front (doh: DNS over HTTPS, json: the JSON API, other: another path) and HTTP status code.",
		}, []string{"front", "code"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "gslb_doh_connections",
			Help: "Connections open to the GSLB responder's HTTPS listeners (DNS over HTTPS and the JSON API).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_doh_refused_total",
			Help: "Connections to the GSLB responder's HTTPS listeners closed as soon as accepted, by reason: limit (gslb.tls max_connections open), per_source (max_per_source open from that client), descriptors (the process within tcp_reserved_fds of its descriptor limit).",
		}, []string{"reason"}),
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_tls_handshake_errors_total",
			Help: "TLS handshakes of the GSLB responder's encrypted listeners that failed (bad client hello, no common version or cipher, handshake_timeout), by front (doh, dot).",
		}, []string{"front"}),
		proxy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_tls_proxy_header_errors_total",
			Help: "Connections of trusted proxies to the GSLB responder's encrypted listeners closed for a bad or late PROXY protocol v2 header, by front (doh, dot).",
		}, []string{"front"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_tls_certificate_reloads_total",
			Help: "Reads of a changed gslb.tls certificate and key, by result (ok: the new pair serves; error: it does not load, the last pair keeps serving).",
		}, []string{"result"}),
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "gslb_tls_certificate_expiry_timestamp_seconds",
			Help: "When the certificate the GSLB responder's encrypted listeners serve expires (Unix time; 0 while none is loaded).",
		}),
	}
	for _, f := range []string{frontDoH, frontDoT} {
		m.handshakes.WithLabelValues(f)
		m.proxy.WithLabelValues(f)
	}
	for _, r := range []string{refusedLimit, refusedPerSource, refusedDescriptors} {
		m.refused.WithLabelValues(r)
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	return m
}

// Collectors are m's series, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.conns, m.refused, m.handshakes, m.proxy, m.reloads, m.expiry}
}

// request counts one request of front answered code.
func (m *Metrics) request(front string, code int) {
	m.requests.WithLabelValues(front, strconv.Itoa(code)).Inc()
}

// HandshakeFailed counts a failed TLS handshake of front ("doh", "dot").
func (m *Metrics) HandshakeFailed(front string) {
	if m != nil {
		m.handshakes.WithLabelValues(front).Inc()
	}
}

// ProxyFailed counts a bad PROXY header on front ("doh", "dot").
func (m *Metrics) ProxyFailed(front string) {
	if m != nil {
		m.proxy.WithLabelValues(front).Inc()
	}
}

// CertReloaded counts a read of a changed pair (err nil: it serves).
func (m *Metrics) CertReloaded(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
}

// SetCertExpiry sets when the certificate served expires (zero: none).
func (m *Metrics) SetCertExpiry(t time.Time) {
	if m == nil {
		return
	}
	if t.IsZero() {
		m.expiry.Set(0)
		return
	}
	m.expiry.Set(float64(t.Unix()))
}

// Requests is the counter of front's requests answered code.
func (m *Metrics) Requests(front string, code int) prometheus.Counter {
	return m.requests.WithLabelValues(front, strconv.Itoa(code))
}

// Refused is the counter of connections refused for reason.
func (m *Metrics) Refused(reason string) prometheus.Counter {
	return m.refused.WithLabelValues(reason)
}

// Reloads is the counter of certificate reads of result ("ok", "error").
func (m *Metrics) Reloads(result string) prometheus.Counter {
	return m.reloads.WithLabelValues(result)
}

// Open is the gauge of the connections open.
func (m *Metrics) Open() prometheus.Gauge { return m.conns }
