package report

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/check"
	"lbdns/control"
	"lbdns/health"
	"lbdns/probes"
	"lbdns/vip"
)

// scrapeTimeout bounds the gathering of one snapshot at scrape time.
const scrapeTimeout = 5 * time.Second

// Metrics are lbdns's Prometheus series. The event counters and the probe
// histogram are updated through its methods as things happen; everything
// else is built at scrape time from the same Input as the status snapshot.
type Metrics struct {
	probeDuration *prometheus.HistogramVec
	localFails    *prometheus.CounterVec
	transitions   *prometheus.CounterVec
	gslbTrans     *prometheus.CounterVec
	ipvsOps       *prometheus.CounterVec
	reloads       *prometheus.CounterVec
	lastReloadOK  prometheus.Gauge
	lastReloadAt  prometheus.Gauge
}

// NewMetrics registers lbdns's series on reg. src gathers the input of a
// snapshot at each scrape (it must be safe to call from any goroutine).
func NewMetrics(reg prometheus.Registerer, src func(context.Context) Input) (*Metrics, error) {
	return newMetrics(reg, src, Status)
}

// newMetrics is NewMetrics with the function that builds the status
// snapshot from the input (tests give one that adds to it).
func newMetrics(reg prometheus.Registerer, src func(context.Context) Input, status func(Input) *control.Status) (*Metrics, error) {
	m := &Metrics{
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "lbdns", Name: "probe_duration_seconds",
			Help:    "Duration of health probes by check profile and result (ok or fail; a timeout counts its full timeout).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"check", "result"}),
		localFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "probe_local_failures_total",
			Help: "Health probes that failed for a reason local to this prober, not evidence about the target (the target's verdict is held), by check profile and cause (descriptors, memory, no_route, address, forbidden).",
		}, []string{"check", "cause"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "backend_transitions_total",
			Help: "Health state changes of back ends, by resolver, check and new state.",
		}, []string{"resolver", "check", "to"}),
		gslbTrans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "gslb_transitions_total",
			Help: "Health state changes of GSLB member monitors, by pool, member, check and new state.",
		}, []string{"pool", "member", "check", "to"}),
		ipvsOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "ipvs_operations_total",
			Help: "IPVS operations applied (in dry-run: computed, not applied), by kind.",
		}, []string{"op"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "lbdns", Name: "config_reloads_total",
			Help: "Configuration reloads by result (applied or rejected).",
		}, []string{"result"}),
		lastReloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "config_last_reload_successful",
			Help: "1 when the last configuration (re)load was applied, 0 when it was rejected.",
		}),
		lastReloadAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "lbdns", Name: "config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last configuration load that was applied (start or reload).",
		}),
	}
	for _, c := range []prometheus.Collector{m.probeDuration, m.localFails, m.transitions, m.gslbTrans, m.ipvsOps, m.reloads, m.lastReloadOK, m.lastReloadAt,
		newStatusCollector(src, status)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveProbe records the duration of one probe under the check profile
// check.
func (m *Metrics) ObserveProbe(check string, r probes.Result) {
	result := "ok"
	if !r.OK {
		result = "fail"
	}
	m.probeDuration.WithLabelValues(check, result).Observe(r.RTT.Seconds())
	if r.Local() {
		m.localFails.WithLabelValues(check, r.Cause.String()).Inc()
	}
}

// Transition counts a health state change of resolver's target under
// check.
func (m *Metrics) Transition(resolver, check string, to health.State) {
	m.transitions.WithLabelValues(resolver, check, to.String()).Inc()
}

// GSLBTransition counts a health state change of the monitor check of
// member in GSLB pool.
func (m *Metrics) GSLBTransition(pool, member, check string, to health.State) {
	m.gslbTrans.WithLabelValues(pool, member, check, to.String()).Inc()
}

// IPVSOp counts one IPVS operation applied (in dry-run: computed).
func (m *Metrics) IPVSOp(op vip.Op) { m.ipvsOps.WithLabelValues(op.Kind.String()).Inc() }

// Reloaded records the outcome of a configuration load at at (ok: it was
// applied).
func (m *Metrics) Reloaded(ok bool, at time.Time) {
	if ok {
		m.reloads.WithLabelValues("applied").Inc()
		m.lastReloadOK.Set(1)
		m.lastReloadAt.Set(float64(at.UnixNano()) / 1e9)
		return
	}
	m.reloads.WithLabelValues("rejected").Inc()
	m.lastReloadOK.Set(0)
}

// statusCollector turns a status snapshot into gauges and counters at
// scrape time.
type statusCollector struct {
	src    func(context.Context) Input
	status func(Input) *control.Status
	descs  map[string]*prometheus.Desc
	// facts are the metrics of the check kinds' facts, by fact name.
	facts map[string]check.FactMetric
}

func newStatusCollector(src func(context.Context) Input, status func(Input) *control.Status) *statusCollector {
	c := &statusCollector{src: src, status: status, descs: map[string]*prometheus.Desc{}, facts: map[string]check.FactMetric{}}
	for _, fm := range probes.FactMetrics() {
		c.facts[fm.Fact] = fm
	}
	add := func(name, help string, labels ...string) {
		c.descs[name] = prometheus.NewDesc("lbdns_"+name, help, labels, nil)
	}
	add("dry_run", "1 when the daemon computes the IPVS table without applying it.")
	add("warm", "1 once every target has a verdict (or the warm-up is over) and the IPVS table is managed.")
	add("start_time_seconds", "Unix time the daemon started.")
	add("backend_up", "1 when the back end is up with fresh facts under the pool's check, else 0.", "pool", "resolver", "vendor")
	add("backend_in_traffic", "1 when the back end has a destination in the pool's IPVS services.", "pool", "resolver")
	add("backend_weight", "IPVS weight of the back end in the pool's services (0 when drained or out of traffic).", "pool", "resolver")
	add("backend_flaps_total", "Up/down changes of the back end under the pool's check since the target was created.", "pool", "resolver")
	add("backend_override", "1 for each operator override in force on a pool member (action drain or disable).", "pool", "resolver", "action")
	add("pool_members", "Members of the pool.", "pool")
	add("pool_enabled_members", "Members of the pool not disabled by an operator.", "pool")
	add("pool_healthy_members", "Members of the pool that are up, fresh and not overridden.", "pool")
	add("pool_min_healthy", "The pool's configured min_healthy.", "pool")
	add("pool_fail_open", "1 when the pool is failing open: below min_healthy (or failing at once), it keeps its last good set in traffic (every enabled member when it has none).", "pool")
	add("pool_diagnosis", "1 for the pool's current diagnosis.", "pool", "diagnosis")
	add("pool_vendor_members", "Members of the pool per vendor.", "pool", "vendor")
	add("pool_vendor_healthy_members", "Healthy members of the pool per vendor.", "pool", "vendor")
	add("overrides", "Operator overrides in force, by action and whether they are orphaned (their name left the configuration).", "action", "orphaned")
	add("override_set_timestamp_seconds", "Unix time an operator override in force was set, per override (pool or vip empty: not limited to one); absent for an override without a set time.", "resolver", "pool", "vip", "action")
	add("ipvs_errors_total", "Failed IPVS operation attempts (each retry counts).")
	add("ipvs_failed_operations_total", "IPVS operations that still failed after every retry.")
	add("ipvs_dumps_total", "Reads of the kernel's whole IPVS table (resyncs).")
	dl := []string{"vip", "service", "destination", "resolver"}
	add("ipvs_destination_connections_total", "Connections the kernel scheduled to the destination.", dl...)
	add("ipvs_destination_active_connections", "Active connections of the destination.", dl...)
	add("ipvs_destination_inactive_connections", "Inactive connections of the destination (UDP flows count here).", dl...)
	add("ipvs_destination_packets_total", "Packets through the destination by direction (in: client to back end).", append(dl, "direction")...)
	add("ipvs_destination_bytes_total", "Bytes through the destination by direction.", append(dl, "direction")...)
	add("prefetch_entries", "Prefetch entries (name x type x resolver x partition) by state.", "state")
	add("prefetch_queries_total", "Prefetch queries sent to back ends.")
	add("prefetch_failures_total", "Prefetch queries that failed (SERVFAIL, REFUSED, timeout, network).")
	add("prefetch_fetches_total", "Prefetch answers that carried a full TTL (the resolver had just fetched upstream).")
	add("gslb_pool_members", "Members of the GSLB pool.", "pool")
	add("gslb_pool_up_members", "Members of the GSLB pool that are up.", "pool")
	add("gslb_member_up", "1 when the GSLB member is up (its monitors combined by the pool's rule), else 0 (down or no verdict yet).", "pool", "member")
	add("gslb_member_state", "1 for the GSLB member's current state (up, down or unknown: no verdict yet).", "pool", "member", "state")
	add("gslb_monitor_up", "1 when the GSLB member's monitor (check profile) is up, else 0.", "pool", "member", "check")
	add("gslb_monitor_rtt_seconds", "Round-trip time of the GSLB monitor's last probe.", "pool", "member", "check")
	for _, fm := range c.facts {
		add(fm.Metric, fm.Help, "pool", "member", "check")
	}
	add("vip_serving", "1 when the VIP serves: each of its services has a destination taking traffic in the table the kernel was given (never in a dry run).", "vip")
	add("gslb_listener_serving", "1 when the GSLB responder's listen address serves: bound, with an answer snapshot in force.", "listen")
	add("prefetch_expired_total", "Window-mode entries found already expired: client-visible misses the prefetcher could not prevent.")
	return c
}

// Describe sends every series' description.
func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect gathers one snapshot and sends its series.
func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	in := c.src(ctx)
	st := c.status(in)
	g := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
	}
	cn := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, v, labels...)
	}
	g("dry_run", b2f(st.Daemon.DryRun))
	g("warm", b2f(st.Daemon.Warm))
	g("start_time_seconds", float64(st.Daemon.Started.UnixNano())/1e9)
	for _, p := range st.Pools {
		g("pool_members", float64(p.Total), p.Name)
		g("pool_enabled_members", float64(p.Enabled), p.Name)
		g("pool_healthy_members", float64(p.Healthy), p.Name)
		g("pool_min_healthy", float64(p.MinHealthy), p.Name)
		g("pool_fail_open", b2f(p.FailOpen), p.Name)
		g("pool_diagnosis", 1, p.Name, p.Diagnosis)
		for _, v := range p.Vendors {
			g("pool_vendor_members", float64(v.Total), p.Name, v.Vendor)
			g("pool_vendor_healthy_members", float64(v.Healthy), p.Name, v.Vendor)
		}
		for _, m := range p.Members {
			g("backend_up", b2f(m.State == "up" && m.Fresh), p.Name, m.Resolver, m.Vendor)
			g("backend_in_traffic", b2f(m.InTraffic), p.Name, m.Resolver)
			g("backend_weight", float64(m.Weight), p.Name, m.Resolver)
			cn("backend_flaps_total", float64(m.Flaps), p.Name, m.Resolver)
			if m.Override != "none" {
				g("backend_override", 1, p.Name, m.Resolver, m.Override)
			}
		}
	}
	counts := map[[2]string]int{}
	for _, o := range st.Overrides {
		counts[[2]string{o.Action, boolText(o.Orphaned)}]++
		if !o.Set.IsZero() {
			g("override_set_timestamp_seconds", float64(o.Set.UnixNano())/1e9, o.Resolver, o.Pool, o.VIP, o.Action)
		}
	}
	for _, a := range []string{control.ActionDrain, control.ActionDisable} {
		for _, orph := range []string{"false", "true"} {
			g("overrides", float64(counts[[2]string{a, orph}]), a, orph)
		}
	}
	for _, v := range st.VIPs {
		if v.Serving != nil { // no series until the warm-up is over
			g("vip_serving", b2f(*v.Serving), v.Name)
		}
	}
	if r := st.GSLBResponder; r != nil {
		for _, l := range r.Listeners {
			g("gslb_listener_serving", b2f(l.Serving), l.Listen)
		}
	}
	cn("ipvs_errors_total", float64(in.IPVS.OpErrors))
	cn("ipvs_failed_operations_total", float64(in.IPVS.OpsFailed))
	cn("ipvs_dumps_total", float64(in.IPVS.Dumps))
	for _, v := range st.VIPs {
		for _, s := range v.Services {
			svc := s.Proto + "/" + s.Address
			for _, d := range s.Destinations {
				if d.Stats == nil {
					continue
				}
				l := []string{v.Name, svc, d.Address, d.Resolver}
				cn("ipvs_destination_connections_total", float64(d.Stats.Conns), l...)
				g("ipvs_destination_active_connections", float64(d.Stats.ActiveConns), l...)
				g("ipvs_destination_inactive_connections", float64(d.Stats.InactiveConns), l...)
				cn("ipvs_destination_packets_total", float64(d.Stats.PacketsIn), append(l, "in")...)
				cn("ipvs_destination_packets_total", float64(d.Stats.PacketsOut), append(l, "out")...)
				cn("ipvs_destination_bytes_total", float64(d.Stats.BytesIn), append(l, "in")...)
				cn("ipvs_destination_bytes_total", float64(d.Stats.BytesOut), append(l, "out")...)
			}
		}
	}
	collectGSLB(st.GSLB, c.facts, g)
	if t := in.PrefetchTotals; t != nil {
		states := map[string]int{prefetchOK: 0, prefetchExpired: 0, prefetchFailing: 0, prefetchParked: 0, prefetchPending: 0}
		for _, e := range st.Prefetch {
			states[e.State]++
		}
		for s, n := range states {
			g("prefetch_entries", float64(n), s)
		}
		cn("prefetch_queries_total", float64(t.Queries))
		cn("prefetch_failures_total", float64(t.Failures))
		cn("prefetch_fetches_total", float64(t.Fetches))
		cn("prefetch_expired_total", float64(t.FoundExpired))
	}
}

// collectGSLB sends the GSLB pools' series through g: per pool its counts,
// per member its state, per monitor its state and, when known, its RTT
// and the facts of its kind that have a metric (facts, by fact name).
// Labels are names only (no addresses), so the series are bounded by the
// configuration.
func collectGSLB(pools []control.GSLBPool, facts map[string]check.FactMetric, g func(name string, v float64, labels ...string)) {
	for _, p := range pools {
		g("gslb_pool_members", float64(p.Total), p.Name)
		g("gslb_pool_up_members", float64(p.Up), p.Name)
		for _, m := range p.Members {
			g("gslb_member_up", b2f(m.State == "up"), p.Name, m.Name)
			g("gslb_member_state", 1, p.Name, m.Name, m.State)
			for _, mo := range m.Monitors {
				g("gslb_monitor_up", b2f(mo.State == "up"), p.Name, m.Name, mo.Check)
				if !mo.LastProbe.IsZero() {
					g("gslb_monitor_rtt_seconds", mo.RTTMillis/1e3, p.Name, m.Name, mo.Check)
				}
				for _, f := range mo.Facts {
					if fm, ok := facts[f.Name]; ok && f.Text == "" {
						g(fm.Metric, f.Value*fm.Scale, p.Name, m.Name, mo.Check)
					}
				}
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
