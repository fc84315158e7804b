package configs

import "time"

// Default values of keys that are not set (see CONFIGURATION.md).
const (
	DefaultStateDir       = "/var/lib/lbdns"
	DefaultLogLevel       = "info"
	DefaultControlSocket  = "/run/lbdns/lbdns.sock"
	DefaultStatusListen   = "127.0.0.1:9353"
	DefaultResyncInterval = 30 * time.Second
	DefaultPort           = 53
	DefaultScheduler      = "wrr"
	DefaultForwarding     = "dr"
	DefaultMinHealthy     = 1
	DefaultWeight         = 100
	DefaultCheckKind      = "dns"
	DefaultQType          = "A"
	DefaultQClass         = "IN"
	DefaultTransport      = "udp"
	DefaultInterval       = 2 * time.Second
	DefaultTimeout        = 1 * time.Second
	DefaultRise           = 2
	DefaultFall           = 3

	DefaultPrefetchMaxQPS  = 100
	DefaultPrefetchJitter  = 100 * time.Millisecond
	DefaultPrefetchTimeout = time.Second
	DefaultPrefetchType    = "A"
	// DefaultBINDRefreshWindow is BIND's default prefetch trigger
	// ("prefetch 2 9").
	DefaultBINDRefreshWindow = 2 * time.Second
	// DefaultRefreshWindowPercent is the window of the other vendors in
	// window mode (unbound's prefetch: the last 10% of the TTL).
	DefaultRefreshWindowPercent = 10
)

// DefaultStatusMaxRequests is the default daemon.status_max_requests:
// node_exporter's default limit of concurrent scrapes.
const DefaultStatusMaxRequests = 40

// Defaults of the daemon's listeners' bounds: daemon.status_max_connections,
// daemon.control_max_connections and daemon.reserved_fds.
const (
	DefaultStatusMaxConnections  = 256
	DefaultControlMaxConnections = 64
	DefaultReservedFDs           = 1024
)

// Refresh modes of a resolver (Resolver.Refresh).
const (
	RefreshWindow = "window"
	RefreshExpiry = "expiry"
)

// DefaultRefresh returns the refresh mode of a vendor's default
// configuration: "window" for bind, "expiry" for every other vendor.
func DefaultRefresh(vendor string) string {
	if vendor == "bind" {
		return RefreshWindow
	}
	return RefreshExpiry
}

func boolPtr(b bool) *bool { return &b }

// defaults fills every key that the document leaves out, section by
// section. A key that is present keeps its value, even a zero one, so
// that validation can reject it.
func (d *decoder) defaults() {
	d.daemonDefaults()
	d.vipDefaults()
	d.poolDefaults()
	d.resolverDefaults()
	d.prefetchDefaults()
	d.checkDefaults()
	d.collapseDefaults() // after the checks': derived from their pacing
}

// has reports whether table m sets key k.
func has(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// daemonDefaults fills [daemon] and [ipvs].
func (d *decoder) daemonDefaults() {
	c := d.cfg
	if !has(d.daemonRaw, "state_dir") {
		c.Daemon.StateDir = DefaultStateDir
	}
	if !has(d.daemonRaw, "log_level") {
		c.Daemon.LogLevel = DefaultLogLevel
	}
	if !has(d.daemonRaw, "control_socket") {
		c.Daemon.ControlSocket = DefaultControlSocket
	}
	if !has(d.daemonRaw, "status_listen") {
		c.Daemon.StatusListen = DefaultStatusListen
	}
	if !has(d.daemonRaw, "status_max_requests") {
		c.Daemon.StatusMaxRequests = DefaultStatusMaxRequests
	}
	if !has(d.daemonRaw, "status_max_connections") {
		c.Daemon.StatusMaxConnections = DefaultStatusMaxConnections
	}
	if !has(d.daemonRaw, "control_max_connections") {
		c.Daemon.ControlMaxConnections = DefaultControlMaxConnections
	}
	if !has(d.daemonRaw, "reserved_fds") {
		c.Daemon.ReservedFDs = DefaultReservedFDs
	}
	if !has(d.ipvsRaw, "resync_interval") {
		c.IPVS.ResyncInterval.Duration = DefaultResyncInterval
	}
	if c.IPVS.ExpireNodestConn == nil {
		c.IPVS.ExpireNodestConn = boolPtr(true)
	}
}

// vipDefaults fills each [[vip]].
func (d *decoder) vipDefaults() {
	c := d.cfg
	for i := range c.VIPs {
		v, m := &c.VIPs[i], d.vipRaw[i]
		if !has(m, "ports") {
			v.Ports = []int{DefaultPort}
		}
		if !has(m, "protocols") {
			v.Protocols = []string{"udp", "tcp"}
		}
		if !has(m, "scheduler") {
			v.Scheduler = DefaultScheduler
		}
		if !has(m, "forwarding") {
			v.Forwarding = DefaultForwarding
		}
	}
}

// poolDefaults fills each [[pool]] (collapse_window apart).
func (d *decoder) poolDefaults() {
	c := d.cfg
	for i := range c.Pools {
		p, m := &c.Pools[i], d.poolRaw[i]
		if !has(m, "min_healthy") {
			p.MinHealthy = DefaultMinHealthy
		}
		if !has(m, "recover_healthy") {
			p.RecoverHealthy = max(p.MinHealthy, (len(p.Members)+1)/2)
		}
		if p.FailOpen == nil {
			p.FailOpen = boolPtr(true)
		}
	}
}

// resolverDefaults fills each [[resolver]].
func (d *decoder) resolverDefaults() {
	c := d.cfg
	for i := range c.Resolvers {
		r, m := &c.Resolvers[i], d.resRaw[i]
		if !has(m, "weight") {
			r.Weight = DefaultWeight
		}
		hasWin, hasPct := has(m, "refresh_window"), has(m, "refresh_window_percent")
		if !has(m, "refresh") {
			r.Refresh = DefaultRefresh(r.Vendor)
			if hasWin || hasPct {
				r.Refresh = RefreshWindow
			}
		}
		if r.Refresh == RefreshWindow && !hasWin && !hasPct {
			if r.Vendor == "bind" {
				r.RefreshWindow.Duration = DefaultBINDRefreshWindow
			} else {
				r.RefreshWindowPercent = DefaultRefreshWindowPercent
			}
		}
	}
}

// prefetchDefaults fills [prefetch] and its domains.
func (d *decoder) prefetchDefaults() {
	c := d.cfg
	pf := &c.Prefetch
	if !has(d.prefetchRaw, "max_qps") {
		pf.MaxQPS = DefaultPrefetchMaxQPS
	}
	if !has(d.prefetchRaw, "jitter") {
		pf.Jitter.Duration = DefaultPrefetchJitter
	}
	if !has(d.prefetchRaw, "timeout") {
		pf.Timeout.Duration = DefaultPrefetchTimeout
	}
	doms, _ := tables(d.prefetchRaw["domain"])
	for i := range pf.Domains {
		if i < len(doms) && !has(doms[i], "types") {
			pf.Domains[i].Types = []string{DefaultPrefetchType}
		}
	}
}

// checkDefaults fills each [check.NAME] and its kind's table.
func (d *decoder) checkDefaults() {
	c := d.cfg
	for name, k := range c.Checks {
		m := d.checkRaw[name]
		if !has(m, "kind") {
			k.Kind = DefaultCheckKind
		}
		if !has(m, "interval") {
			k.Interval.Duration = DefaultInterval
		}
		if !has(m, "timeout") {
			k.Timeout.Duration = DefaultTimeout
		}
		if !has(m, "fast_interval") {
			k.FastInterval.Duration = k.Interval.Duration
		}
		if !has(m, "rise") {
			k.Rise = DefaultRise
		}
		if !has(m, "fall") {
			k.Fall = DefaultFall
		}
		if k.Kind == "dns" && k.DNS != nil {
			sub, _ := m["dns"].(map[string]any)
			dnsDefaults(k.DNS, func(key string) bool { return has(sub, key) })
		}
		icmpDefaults(k, m)
		tcpDefaults(k, m)
		udpDefaults(k, m)
		httpDefaults(k, m)
	}
}

// collapseDefaults fills each pool's collapse_window from the pacing of
// its check.
func (d *decoder) collapseDefaults() {
	c := d.cfg
	for i := range c.Pools {
		p := &c.Pools[i]
		if k := c.Checks[p.Check]; k != nil && !has(d.poolRaw[i], "collapse_window") {
			p.CollapseWindow.Duration = DefaultCollapseWindow(k)
		}
	}
}

// DefaultCollapseWindow is the collapse_window of a pool checked by k
// when the pool does not set one: (fall + 1) × interval + timeout, at
// most MaxCollapseWindow (and 0 for pacing that validation rejects).
func DefaultCollapseWindow(k *Check) time.Duration {
	w := time.Duration(k.Fall+1)*k.Interval.Duration + k.Timeout.Duration
	return min(max(w, 0), MaxCollapseWindow)
}

// dnsDefaults fills the keys of a [check.NAME.dns] table that it leaves
// out; has reports whether the table sets a key.
func dnsDefaults(k *DNSCheck, has func(string) bool) {
	if !has("qtype") {
		k.QType = DefaultQType
	}
	if !has("qclass") {
		k.QClass = DefaultQClass
	}
	if k.RD == nil {
		k.RD = boolPtr(true)
	}
	if !has("transport") {
		k.Transport = DefaultTransport
	}
	if !has("rcodes") {
		if k.Zone != "" {
			k.Rcodes = []string{"NXDOMAIN"}
		} else {
			k.Rcodes = []string{"NOERROR"}
		}
	}
	if k.Identify == nil {
		k.Identify = boolPtr(true)
	}
}
