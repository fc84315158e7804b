package intake

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the intake's series.
type metrics struct {
	accepted                  *prometheus.CounterVec
	open                      prometheus.Gauge
	closed                    map[string]prometheus.Counter
	queries, responses, other prometheus.Counter
	malformed                 prometheus.Counter
	senders                   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	accepted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "lbdns", Name: "dnstap_connections_total",
		Help: "dnstap connections accepted, by listener (unix, tcp); those beyond the cap included.",
	}, []string{"listener"})
	closed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "lbdns", Name: "dnstap_connections_closed_total",
		Help: "dnstap connections ended, by reason: finished (STOP), eof (closed without STOP), protocol (not Frame Streams), content_type (not dnstap), frame_too_large, handshake_timeout, limit (beyond max_connections), descriptors (the process within its reserve of RLIMIT_NOFILE, kept for the probes), error, shutdown.",
	}, []string{"reason"})
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "lbdns", Name: "dnstap_messages_total",
		Help: "dnstap messages decoded, by type: client_query and client_response (handed on), other (ignored).",
	}, []string{"type"})
	m := &metrics{
		accepted: accepted,
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "dnstap_connections_open",
			Help: "dnstap connections open now.",
		}),
		closed:    map[string]prometheus.Counter{},
		queries:   messages.WithLabelValues("client_query"),
		responses: messages.WithLabelValues("client_response"),
		other:     messages.WithLabelValues("other"),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "dnstap_malformed_frames_total",
			Help: "dnstap data frames that were not a dnstap message (skipped; the connection goes on).",
		}),
	}
	m.senders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "lbdns", Name: "dnstap_sender_messages_total",
		Help: "dnstap client messages by the sender's identity: at most 64 identities, those beyond under \"(others)\", senders without one under \"(none)\".",
	}, []string{"identity"})
	for _, r := range Reasons() {
		m.closed[r] = closed.WithLabelValues(r)
	}
	for _, l := range []string{"unix", "tcp"} {
		accepted.WithLabelValues(l)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{accepted, m.open, closed, messages, m.malformed, m.senders} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("dnstap metrics: %w", err)
		}
	}
	return m, nil
}
