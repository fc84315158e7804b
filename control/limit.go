package control

import (
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/internal/fdbudget"
)

// Default connection caps of the listeners when their options leave them
// unset. The status endpoint's allows dashboards and scrapers keeping
// connections alive beyond its MaxRequests in flight; the control
// socket's, lbctl's requests and followed event streams.
const (
	DefaultStatusMaxConnections  = 256
	DefaultControlMaxConnections = 64
)

// Limits bound the connections of one listener (the control socket's or
// the status endpoint's), so that it cannot take the descriptors the
// health probes need. A zero field takes its default.
type Limits struct {
	// MaxConnections is the most connections open at once; a new one
	// beyond is closed at once (counted, reason "limit").
	MaxConnections int
	// ReservedFDs is how many descriptors below RLIMIT_NOFILE a new
	// connection may not take: it is closed at once (reason
	// "descriptors"). At most half the limit is reserved. Default
	// fdbudget.DefaultReserve.
	ReservedFDs int
}

// bound returns ln bounded by lim (max the default cap), the connections
// it closes at once counted in lbdns_listener_connections_refused_total
// with listener=name, registered on reg when set.
func bound(ln net.Listener, lim Limits, defMax int, name string, reg prometheus.Registerer, log *slog.Logger) *fdbudget.Listener {
	if lim.MaxConnections <= 0 {
		lim.MaxConnections = defMax
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "lbdns", Name: "listener_connections_refused_total",
		Help:        "Connections to the control socket or the status endpoint closed as soon as accepted, by listener and reason: limit (its max connections open), descriptors (the process within its reserve of RLIMIT_NOFILE, kept for the probes).",
		ConstLabels: prometheus.Labels{"listener": name},
	}, []string{"reason"})
	for _, r := range []string{fdbudget.ReasonLimit, fdbudget.ReasonDescriptors} {
		refused.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(refused); err != nil {
			log.Warn("listener refusals not exported", "listener", name, "err", err)
		}
	}
	return fdbudget.NewListener(ln, lim.MaxConnections, fdbudget.New(lim.ReservedFDs), func(reason string) {
		refused.WithLabelValues(reason).Inc()
	})
}
