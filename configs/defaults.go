package configs

import "time"

// Default values of keys that are not set (see CONFIGURATION.md).
const (
	DefaultStateDir       = "/var/lib/lbdns"
	DefaultLogLevel       = "info"
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
)

func boolPtr(b bool) *bool { return &b }

// defaults fills every key that the document leaves out. A key that is
// present keeps its value, even a zero one, so that validation can reject
// it.
func (d *decoder) defaults() {
	c := d.cfg
	has := func(m map[string]any, k string) bool { _, ok := m[k]; return ok }

	if !has(d.daemonRaw, "state_dir") {
		c.Daemon.StateDir = DefaultStateDir
	}
	if !has(d.daemonRaw, "log_level") {
		c.Daemon.LogLevel = DefaultLogLevel
	}
	if !has(d.ipvsRaw, "resync_interval") {
		c.IPVS.ResyncInterval.Duration = DefaultResyncInterval
	}
	if c.IPVS.ExpireNodestConn == nil {
		c.IPVS.ExpireNodestConn = boolPtr(true)
	}
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
	for i := range c.Resolvers {
		if !has(d.resRaw[i], "weight") {
			c.Resolvers[i].Weight = DefaultWeight
		}
	}
	for name, k := range c.Checks {
		m := d.checkRaw[name]
		if !has(m, "kind") {
			k.Kind = DefaultCheckKind
		}
		if !has(m, "qtype") {
			k.QType = DefaultQType
		}
		if !has(m, "qclass") {
			k.QClass = DefaultQClass
		}
		if k.RD == nil {
			k.RD = boolPtr(true)
		}
		if !has(m, "transport") {
			k.Transport = DefaultTransport
		}
		if !has(m, "rcodes") {
			if k.Zone != "" {
				k.Rcodes = []string{"NXDOMAIN"}
			} else {
				k.Rcodes = []string{"NOERROR"}
			}
		}
		if !has(m, "interval") {
			k.Interval.Duration = DefaultInterval
		}
		if !has(m, "timeout") {
			k.Timeout.Duration = DefaultTimeout
		}
		if !has(m, "rise") {
			k.Rise = DefaultRise
		}
		if !has(m, "fall") {
			k.Fall = DefaultFall
		}
		if k.Identify == nil {
			k.Identify = boolPtr(true)
		}
	}
}
