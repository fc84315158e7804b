package configs

import (
	"net/netip"
	"time"
)

// Config is the whole lbdnsd configuration, as decoded from one TOML file
// with defaults applied. Load returns it validated.
type Config struct {
	Daemon    Daemon            `toml:"daemon"`
	IPVS      IPVS              `toml:"ipvs"`
	VIPs      []VIP             `toml:"vip"`
	Pools     []Pool            `toml:"pool"`
	Resolvers []Resolver        `toml:"resolver"`
	Checks    map[string]*Check `toml:"check"`
	Prefetch  Prefetch          `toml:"prefetch"`
	GSLB      GSLB              `toml:"gslb"`
	// Fleet is this host's place in a fleet sharing intent through
	// etcd; nil without [fleet] (the host is alone).
	Fleet *Fleet `toml:"fleet"`
	BGP   BGP    `toml:"bgp"` // the route announcer ([bgp], bgp.go)
	// Flood is the flood alarms ([flood], flood.go).
	Flood Flood `toml:"flood"`
	// Actions are the client actions' settings ([actions], actions.go).
	Actions Actions `toml:"actions"`
	// Dnstap is the dnstap intake from the back-end resolvers; nil
	// without [dnstap] (nothing listens).
	Dnstap *Dnstap `toml:"dnstap"`

	// Path is the file the config was loaded from (not a TOML key).
	Path string `toml:"-"`
	// Warnings are what Parse accepted but the operator should hear of,
	// sorted by line: keys still accepted, so that older files load,
	// that have no effect. Each names its file, line and key (Msg says
	// why); lbdnsd logs them when it loads the file, and -check-config
	// prints them.
	Warnings []Problem `toml:"-" json:"-"`

	// index maps names to positions for the accessors; built by Parse.
	index *index
}

// index makes name lookups O(1) on large configs (thousands of
// resolvers). The accessors check every hit and fall back to a scan, so a
// Config built or changed by hand still answers correctly.
type index struct {
	resolvers map[string]int
	pools     map[string]int
	vips      map[string]int
	gslbPools map[string]int
	services  map[string]int
}

// Daemon holds process-wide settings.
type Daemon struct {
	// StateDir holds persisted operator state. Default "/var/lib/lbdns".
	StateDir string `toml:"state_dir"`
	// LogLevel is one of debug, info, warn, error. Default "info".
	LogLevel string `toml:"log_level"`
	// ControlSocket is the Unix socket lbctl talks to (mode 0600, its
	// directory 0750 when the daemon creates it). Default
	// "/run/lbdns/lbdns.sock".
	ControlSocket string `toml:"control_socket"`
	// StatusListen is the TCP address of the read-only status endpoint
	// (/status, /metrics and the status page); "" turns it off. Default
	// "127.0.0.1:9353" (loopback only).
	StatusListen string `toml:"status_listen"`
	// StatusMaxRequests is how many requests the status endpoint serves
	// at once; one more is answered 503 with Retry-After. Default 40.
	StatusMaxRequests int `toml:"status_max_requests"`
	// StatusMaxConnections is how many connections the status endpoint
	// keeps open at once; one more is closed as soon as accepted.
	// Default 256.
	StatusMaxConnections int `toml:"status_max_connections"`
	// ControlMaxConnections is how many connections the control socket
	// keeps open at once; one more is closed as soon as accepted.
	// Default 64.
	ControlMaxConnections int `toml:"control_max_connections"`
	// ReservedFDs is how many descriptors below RLIMIT_NOFILE the
	// control socket, the status endpoint and the dnstap intake leave to
	// the health probes: a new connection that would take one is closed
	// as soon as accepted (at most half the limit is reserved). Default
	// 1024.
	ReservedFDs int `toml:"reserved_fds"`
}

// IPVS holds settings of the kernel's IPVS table that are global to the host.
type IPVS struct {
	// ResyncInterval is how often the whole owned table is compared with the
	// kernel's and drift is repaired. Default 30s.
	ResyncInterval Duration `toml:"resync_interval"`
	// UDPTimeout is the kernel's UDP connection timeout (global in IPVS,
	// ipvsadm --set). Zero leaves the kernel's value alone. Default 0.
	UDPTimeout Duration `toml:"udp_timeout"`
	// ExpireNodestConn sets net.ipv4.vs.expire_nodest_conn so that flows to a
	// removed destination expire at once instead of being dropped until
	// their timeout. Default true.
	ExpireNodestConn *bool `toml:"expire_nodest_conn"`
}

// VIP is one virtual address that clients send queries to.
type VIP struct {
	// Name identifies the VIP in logs and status. Required, unique.
	Name string `toml:"name"`
	// Address is the virtual IPv4 or IPv6 address. Required.
	Address string `toml:"address"`
	// Ports served on the VIP. Default [53].
	Ports []int `toml:"ports"`
	// Protocols served: "udp", "tcp". Default ["udp", "tcp"].
	Protocols []string `toml:"protocols"`
	// Scheduler is the IPVS scheduler: rr, wrr, lc, wlc, sh, dh, mh, sed, nq,
	// lblc, lblcr, fo, ovf, twos. Default "wrr".
	Scheduler string `toml:"scheduler"`
	// Forwarding is the IPVS forwarding method: "dr", "nat" or "tunnel".
	// Default "dr".
	Forwarding string `toml:"forwarding"`
	// Interface, when set, is the interface the daemon keeps the VIP
	// address on (for example "lo" for DR, or a dummy interface).
	Interface string `toml:"interface"`
	// Pool names the resolver pool behind the VIP. Required.
	Pool string `toml:"pool"`

	// Addr is Address parsed (set by Load).
	Addr netip.Addr `toml:"-"`
}

// Pool is a set of resolvers that serve one or more VIPs.
type Pool struct {
	// Name identifies the pool. Required, unique.
	Name string `toml:"name"`
	// Members are resolver names. Required, at least one.
	Members []string `toml:"members"`
	// Check names the check profile used for the members. Required.
	Check string `toml:"check"`
	// MinHealthy is the number of healthy members below which the pool
	// fails open (if FailOpen). Default 1.
	MinHealthy int `toml:"min_healthy"`
	// RecoverHealthy is the number of healthy members a pool that fails
	// open needs before it stops failing open (hysteresis, like seesaw's
	// high watermark), so that the first member to recover from an outage
	// does not take all the traffic alone. Default: the larger of
	// MinHealthy and half the members, rounded up.
	RecoverHealthy int `toml:"recover_healthy"`
	// FailOpen, when fewer than MinHealthy are healthy or when every
	// member fails at once, keeps in traffic the members that were in
	// traffic just before (the last good set); members already failing
	// before stay out. With no last good set (cold start, or a reload
	// that changed the pool) every enabled member is kept. Default true.
	FailOpen *bool `toml:"fail_open"`
	// CollapseWindow is how long before the collapse (the plan in which
	// the pool began failing open) a member may have failed and still be
	// held in traffic with the last good set: members killed together
	// are detected a probe or two apart, and the first ones out must not
	// leave the whole load to the last survivor. A member that failed
	// earlier stays out. Zero holds the last good set alone. Default:
	// (fall + 1) × interval + timeout of the pool's check, the time a
	// check takes to detect a failure plus one interval for the phases of
	// the members' probes; at most 1h.
	CollapseWindow Duration `toml:"collapse_window"`
}

// Resolver is one back-end recursive resolver.
type Resolver struct {
	// Name identifies the resolver. Required, unique.
	Name string `toml:"name"`
	// Address is "ip" or "ip:port" / "[ipv6]:port"; port defaults to 53.
	Address string `toml:"address"`
	// Vendor is one of bind, unbound, powerdns, knot, dnsmasq, other.
	// Required.
	Vendor string `toml:"vendor"`
	// Weight is the IPVS weight when healthy, 1..65535. Default 100.
	Weight int `toml:"weight"`
	// Refresh says how the product refreshes a cached answer: "window"
	// (it re-fetches early when queried inside its refresh window) or
	// "expiry" (only after the entry expired). Default by vendor: "window"
	// for bind (prefetch 2 9 is on by default), "expiry" for the others.
	// Setting RefreshWindow or RefreshWindowPercent implies "window".
	Refresh string `toml:"refresh"`
	// RefreshWindow is the product's refresh window in time before expiry
	// (BIND's prefetch trigger). Default 2s for bind in window mode.
	RefreshWindow Duration `toml:"refresh_window"`
	// RefreshWindowPercent is the refresh window as a percentage of the
	// answer's original TTL (unbound 10, PowerDNS refresh-on-ttl-perc).
	// Default 10 for the other vendors in window mode.
	RefreshWindowPercent int `toml:"refresh_window_percent"`

	// AddrPort is Address parsed, with the default port (set by Load).
	AddrPort netip.AddrPort `toml:"-"`
}

// Check is a named health-check profile ([check.NAME]): its kind, the
// pacing keys every kind shares, and the settings of its kind in a typed
// sub-table ([check.NAME.dns]), in the shape of blackbox_exporter's
// modules. Adding a kind is one more sub-table field here (a pointer to
// its settings struct, tagged with the kind's name), its defaults and
// validation, and its checker constructor in probes.
type Check struct {
	// Name is the key of the profile (set by Load).
	Name string `toml:"-"`
	// Kind is the probe kind, the name of the sub-table holding its
	// settings (CheckKinds); resolver pools take "dns" only. Default "dns".
	Kind string `toml:"kind"`
	// Interval between probes of one target. Default 2s.
	Interval Duration `toml:"interval"`
	// FastInterval is the interval while a target's state is changing
	// (unknown, or some failures while up, or some successes while down),
	// so that detection takes about interval + (fall-1) × fast_interval
	// rather than fall × interval (HAProxy's fastinter). Default: Interval
	// (one pace). A shorter one detects faster but weakens the evidence
	// the pool policy uses to tell an upstream failure (all members failing
	// together) from a broken box: the first member may be down before the
	// others have been probed since the failure began.
	FastInterval Duration `toml:"fast_interval"`
	// Timeout of one probe; must be less than Interval. Default 1s.
	Timeout Duration `toml:"timeout"`
	// Rise is the number of consecutive successes to turn up. Default 2.
	Rise int `toml:"rise"`
	// Fall is the number of consecutive failures to turn down. Default 3.
	Fall int `toml:"fall"`

	// DNS holds the settings of kind "dns" ([check.NAME.dns]); set (with
	// defaults) by Load when Kind is "dns", nil otherwise.
	DNS *DNSCheck `toml:"dns"`
	// ICMP holds the settings of kind "icmp" ([check.NAME.icmp]; see kind_icmp.go).
	ICMP *ICMPCheck `toml:"icmp"`
	// TCP holds the settings of kind "tcp" ([check.NAME.tcp]).
	TCP *TCPCheck `toml:"tcp"`
	// UDP holds the settings of kind "udp" ([check.NAME.udp]).
	UDP *UDPCheck `toml:"udp"`
	// HTTP holds the settings of kind "http" ([check.NAME.http]).
	HTTP *HTTPCheck `toml:"http"`
	// HTTPS holds the settings of kind "https" ([check.NAME.https]).
	HTTPS *HTTPCheck `toml:"https"`
}

// DNSCheck is the settings of a check of kind "dns" ([check.NAME.dns]):
// the question a probe asks and how the reply is judged.
//
// Every field takes part in ProbeIdentity, so a new field changes whether
// a reload keeps a target's health with no other edit; a field that does
// not change the question or the judgement is tagged `json:"-"`.
type DNSCheck struct {
	// QName is a fixed name to query. Exactly one of QName and Zone.
	QName string `toml:"qname"`
	// Zone, when set, makes each probe ask a fresh random label under the
	// zone, so the probe proves the recursion path, not the cache.
	Zone string `toml:"zone"`
	// QType of the query. Default "A".
	QType string `toml:"qtype"`
	// QClass of the query. Default "IN".
	QClass string `toml:"qclass"`
	// RD sets the recursion-desired bit. Default true.
	RD *bool `toml:"rd"`
	// CD sets the checking-disabled bit. Default false.
	CD bool `toml:"cd"`
	// Transport is "udp" or "tcp". Default "udp".
	Transport string `toml:"transport"`
	// Rcodes the reply must have. Default ["NOERROR"] with QName,
	// ["NXDOMAIN"] with Zone.
	Rcodes []string `toml:"rcodes"`
	// Expect, when set, is an address that must appear in an A/AAAA answer.
	Expect string `toml:"expect"`
	// ExpectRegexp, when set, must match the text of an answer RR.
	ExpectRegexp string `toml:"expect_regexp"`
	// Identify asks CHAOS TXT version.bind to learn the vendor. Default
	// true. It does not change the health probe (json:"-": not part of
	// ProbeIdentity).
	Identify *bool `toml:"identify" json:"-"`
}

// Prefetch configures the cache-refresh prefetcher ([prefetch]): names
// kept warm in every healthy back-end resolver of their pools.
type Prefetch struct {
	// MaxQPS caps prefetch queries per second over all resolvers (token
	// bucket). Default 100.
	MaxQPS int `toml:"max_qps"`
	// Jitter is the largest random delay added to a scheduled query.
	// Default 100ms.
	Jitter Duration `toml:"jitter"`
	// Timeout of one prefetch query. Default 1s.
	Timeout Duration `toml:"timeout"`
	// Domains are the names kept warm ([[prefetch.domain]]).
	Domains []PrefetchDomain `toml:"domain"`
	// Partitions are ECS partitions ([[prefetch.partition]]).
	Partitions []PrefetchPartition `toml:"partition"`
}

// PrefetchDomain is one name kept warm.
type PrefetchDomain struct {
	// Name is the domain name (stored fully qualified, lower case).
	// Required, unique.
	Name string `toml:"name"`
	// Types are the query types kept warm. Default ["A"].
	Types []string `toml:"types"`
	// Pools whose resolvers keep the name warm. Default: every pool.
	Pools []string `toml:"pools"`
	// ECS names partitions: one cache entry per partition is kept warm by
	// sending its address as EDNS Client Subnet. Default none (no ECS).
	ECS []string `toml:"ecs"`
}

// PrefetchPartition is one ECS partition: a region of clients represented
// by one mapped address.
type PrefetchPartition struct {
	// Name identifies the partition. Required, unique.
	Name string `toml:"name"`
	// Address is sent as ECS with a full-length prefix (/32 or /128).
	// Required.
	Address string `toml:"address"`

	// Addr is Address parsed (set by Load).
	Addr netip.Addr `toml:"-"`
}

// Duration is a time.Duration that decodes from a TOML string like "2s".
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText formats the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }
