package configs

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fleet is this LB host's place in a fleet of LB hosts sharing operator
// intent and heartbeats through etcd ([fleet]). Without the table the
// host is alone: its intent lives in daemon.state_dir and nothing else
// is contacted. Every key takes effect at the next restart (a reload
// keeps the running ones).
type Fleet struct {
	// Endpoints are the etcd members' client addresses, "HOST:PORT" or
	// "https://HOST:PORT". Required, at least one. TLS is always on.
	Endpoints []string `toml:"endpoints"`
	// Name is this node's name in the fleet, unique in it. Required.
	Name string `toml:"name"`
	// Location is where this node probes from (a data center, a
	// region), a name. Required.
	Location string `toml:"location"`
	// Cluster names the LB hosts that share back ends (the resolver
	// overrides are the cluster's); "" (the default): this host alone.
	Cluster string `toml:"cluster"`
	// Prefix is the etcd key prefix of the fleet's keys: an absolute
	// path ending in "/". Default "/lbdns/".
	Prefix string `toml:"prefix"`
	// LeaseTTL is the lease of the node's heartbeat: a node that stops
	// is gone from the fleet view about this long after. Whole seconds,
	// 2s..5m. Default 10s.
	LeaseTTL Duration `toml:"lease_ttl"`
	// DialTimeout bounds the connection to etcd. Default 5s.
	DialTimeout Duration `toml:"dial_timeout"`
	// ResyncInterval is how often the intent is read whole from etcd
	// beside the watch. Default 5m.
	ResyncInterval Duration `toml:"resync_interval"`
	// CAFile is the PEM file of the CAs that verify the etcd members'
	// certificates. Required: verification is always on.
	CAFile string `toml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key this
	// node authenticates with (etcd's client-certificate auth: the
	// certificate's common name is the etcd user). Required.
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// ProbersPerMember is k: how many live probers probe each GSLB
	// member (rendezvous hashing, spread over locations). 1..16,
	// default 3.
	ProbersPerMember int `toml:"probers_per_member"`
	// Canaries are known-good "HOST:PORT" addresses every prober
	// connects to (TCP) beside the other nodes' GSLB listen addresses: a
	// prober withdraws its votes while most of its canaries fail.
	// Default none.
	Canaries []string `toml:"canaries"`
	// CanaryAddress is this node's own unicast "ADDR:PORT" the other
	// nodes connect to (TCP) as one of their canaries; something must
	// accept connections on it. Default: chosen at start (the first
	// GSLB listen address on a specific address of this host alone;
	// else, with a listen address on every address, an own interface
	// address with its port; else the status endpoint the same way;
	// else none). An anycast address shared by several hosts is no
	// canary: each host reaches itself on it.
	CanaryAddress string `toml:"canary_address"`
	// CanaryAddr is CanaryAddress parsed (set by Load; invalid when
	// unset).
	CanaryAddr netip.AddrPort `toml:"-"`
	// CanaryInterval paces the canaries' connects (each one's timeout
	// too; two failures in a row make a canary down, one success up).
	// 50ms..10s, default 250ms.
	CanaryInterval Duration `toml:"canary_interval"`
	// VoteHold is how long a member's last fleet verdict is held while
	// its votes decide nothing (a tie, too few votes). 0..1h, default
	// 30s.
	VoteHold Duration `toml:"vote_hold"`
	// UpVotePercent is the share of a member's fresh votes above which
	// it is up: more than this percent of them say up. 0..99, default
	// 18 (one prober of three, or of five, that reaches the member keeps
	// it: a failure may be the prober's own; 50 is a strict majority).
	UpVotePercent int `toml:"up_vote_percent"`
}

// Defaults and limits of [fleet].
const (
	DefaultFleetPrefix         = "/lbdns/"
	DefaultFleetLeaseTTL       = 10 * time.Second
	MinFleetLeaseTTL           = 2 * time.Second
	MaxFleetLeaseTTL           = 5 * time.Minute
	DefaultFleetDialTimeout    = 5 * time.Second
	DefaultFleetResyncInterval = 5 * time.Minute
	MaxFleetEndpoints          = 16
	DefaultProbersPerMember    = 3
	MaxProbersPerMember        = 16
	DefaultFleetVoteHold       = 30 * time.Second
	DefaultFleetUpVotePercent  = 18
	DefaultFleetCanaryInterval = 250 * time.Millisecond
	MaxFleetCanaries           = 64
)

// decodeFleet decodes the optional [fleet] table into cfg.Fleet (nil when
// the table is absent) and applies its defaults.
func (d *decoder) decodeFleet(raw map[string]any) {
	if !hasKey(raw, "fleet") {
		return
	}
	var f Fleet
	d.fleetRaw, d.fleetOK = d.table("fleet", raw, &f)
	if !hasKey(d.fleetRaw, "prefix") {
		f.Prefix = DefaultFleetPrefix
	}
	if !hasKey(d.fleetRaw, "lease_ttl") {
		f.LeaseTTL.Duration = DefaultFleetLeaseTTL
	}
	if !hasKey(d.fleetRaw, "dial_timeout") {
		f.DialTimeout.Duration = DefaultFleetDialTimeout
	}
	if !hasKey(d.fleetRaw, "resync_interval") {
		f.ResyncInterval.Duration = DefaultFleetResyncInterval
	}
	if !hasKey(d.fleetRaw, "probers_per_member") {
		f.ProbersPerMember = DefaultProbersPerMember
	}
	if !hasKey(d.fleetRaw, "canary_interval") {
		f.CanaryInterval.Duration = DefaultFleetCanaryInterval
	}
	if !hasKey(d.fleetRaw, "up_vote_percent") {
		f.UpVotePercent = DefaultFleetUpVotePercent
	}
	if !hasKey(d.fleetRaw, "vote_hold") {
		f.VoteHold.Duration = DefaultFleetVoteHold
	}
	d.cfg.Fleet = &f
}

// validateFleet checks [fleet].
func (d *decoder) validateFleet() {
	f := d.cfg.Fleet
	if f == nil || !d.fleetOK {
		return
	}
	const base = "fleet"
	if len(f.Endpoints) == 0 {
		d.p.add(joinKey(base, "endpoints"), "", `missing: at least one etcd endpoint ("HOST:PORT" or "https://HOST:PORT") is required`)
	}
	if len(f.Endpoints) > MaxFleetEndpoints {
		d.p.add(joinKey(base, "endpoints"), strconv.Itoa(len(f.Endpoints))+" endpoints", fmt.Sprintf("at most %d", MaxFleetEndpoints))
	}
	seen := map[string]int{}
	for i, e := range f.Endpoints {
		key := indexKey(joinKey(base, "endpoints"), i)
		hp, msg := fleetEndpoint(e)
		if msg != "" {
			d.p.add(key, e, msg)
			continue
		}
		if j, dup := seen[hp]; dup {
			d.p.add(key, e, fmt.Sprintf("listed twice (also %s)", indexKey(joinKey(base, "endpoints"), j)))
			continue
		}
		seen[hp] = i
	}
	names := []struct {
		key, val string
		required bool
	}{{"name", f.Name, true}, {"location", f.Location, true}, {"cluster", f.Cluster, false}}
	for _, n := range names {
		switch {
		case n.val == "" && n.required:
			d.p.add(joinKey(base, n.key), "", "missing required key")
		case n.val == "" && hasKey(d.fleetRaw, n.key):
			d.p.add(joinKey(base, n.key), "", "must not be empty (leave the key out for this host alone)")
		case n.val != "" && !validName(n.val):
			d.p.add(joinKey(base, n.key), n.val, "bad name (1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit)")
		}
	}
	switch p := f.Prefix; {
	case !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") || len(p) < 2:
		d.p.add(joinKey(base, "prefix"), p, `must start and end with "/" and hold a name, such as "/lbdns/"`)
	case strings.Contains(p, "//") || strings.ContainsAny(p, " \t\r\n\x00"):
		d.p.add(joinKey(base, "prefix"), p, `must not hold "//" or white space`)
	}
	switch ttl := f.LeaseTTL.Duration; {
	case ttl < MinFleetLeaseTTL || ttl > MaxFleetLeaseTTL:
		d.p.add(joinKey(base, "lease_ttl"), fmtDur(ttl), fmt.Sprintf("must be between %s and %s", fmtDur(MinFleetLeaseTTL), fmtDur(MaxFleetLeaseTTL)))
	case ttl%time.Second != 0:
		d.p.add(joinKey(base, "lease_ttl"), fmtDur(ttl), "must be whole seconds (etcd leases count seconds)")
	}
	if t := f.DialTimeout.Duration; t < 100*time.Millisecond || t > time.Minute {
		d.p.add(joinKey(base, "dial_timeout"), fmtDur(t), "must be between 100ms and "+fmtDur(time.Minute))
	}
	if t := f.ResyncInterval.Duration; t < time.Second || t > 24*time.Hour {
		d.p.add(joinKey(base, "resync_interval"), fmtDur(t), "must be between 1s and "+fmtDur(24*time.Hour))
	}
	if k := f.ProbersPerMember; k < 1 || k > MaxProbersPerMember {
		d.p.add(joinKey(base, "probers_per_member"), strconv.Itoa(k), fmt.Sprintf("must be between 1 and %d", MaxProbersPerMember))
	}
	if p := f.UpVotePercent; p < 0 || p > 99 {
		d.p.add(joinKey(base, "up_vote_percent"), strconv.Itoa(p), "must be between 0 and 99")
	}
	if h := f.VoteHold.Duration; h < 0 || h > time.Hour {
		d.p.add(joinKey(base, "vote_hold"), fmtDur(h), "must be between 0s and "+fmtDur(time.Hour))
	}
	if c := f.CanaryInterval.Duration; c < 50*time.Millisecond || c > 10*time.Second {
		d.p.add(joinKey(base, "canary_interval"), fmtDur(c), "must be between 50ms and 10s")
	}
	if len(f.Canaries) > MaxFleetCanaries {
		d.p.add(joinKey(base, "canaries"), strconv.Itoa(len(f.Canaries))+" canaries", fmt.Sprintf("at most %d", MaxFleetCanaries))
	}
	d.validateFleetCanaries(f)
	for _, k := range []struct{ key, val string }{{"ca_file", f.CAFile}, {"cert_file", f.CertFile}, {"key_file", f.KeyFile}} {
		switch {
		case k.val == "" && hasKey(d.fleetRaw, k.key):
			d.p.add(joinKey(base, k.key), "", "must not be empty")
		case k.val == "":
			d.p.add(joinKey(base, k.key), "", "missing required key (etcd is reached over TLS with a client certificate, always verified)")
		case !filepath.IsAbs(k.val):
			d.p.add(joinKey(base, k.key), k.val, "must be an absolute path")
		}
	}
}

// fleetEndpoint checks one etcd endpoint and returns it as HOST:PORT, or
// what is wrong with it.
func fleetEndpoint(e string) (string, string) {
	const want = `want "HOST:PORT" or "https://HOST:PORT"`
	hp := e
	if i := strings.Index(e, "://"); i >= 0 {
		if scheme := e[:i]; scheme != "https" {
			if scheme == "http" {
				return "", "TLS is always on: write https:// or HOST:PORT"
			}
			return "", "unknown scheme " + strconv.Quote(scheme) + ": " + want
		}
		hp = e[i+3:]
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil || host == "" || strings.ContainsAny(host, "/ ") {
		return "", want
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "port must be 1..65535: " + want
	}
	return hp, ""
}

// Equal reports whether f and g are the same [fleet] (both nil: no
// fleet).
func (f *Fleet) Equal(g *Fleet) bool {
	if f == nil || g == nil {
		return f == g
	}
	return slices.Equal(f.Endpoints, g.Endpoints) && f.Name == g.Name && f.Location == g.Location &&
		f.Cluster == g.Cluster && f.Prefix == g.Prefix && f.LeaseTTL == g.LeaseTTL && f.DialTimeout == g.DialTimeout &&
		f.ResyncInterval == g.ResyncInterval && f.CAFile == g.CAFile && f.CertFile == g.CertFile && f.KeyFile == g.KeyFile &&
		f.ProbersPerMember == g.ProbersPerMember && slices.Equal(f.Canaries, g.Canaries) && f.VoteHold == g.VoteHold && f.UpVotePercent == g.UpVotePercent &&
		f.CanaryInterval == g.CanaryInterval && f.CanaryAddress == g.CanaryAddress
}

// FleetEndpointHostPort returns an endpoint of [fleet] (validated by
// Load) as HOST:PORT, the form the etcd client dials.
func FleetEndpointHostPort(e string) string {
	hp, _ := fleetEndpoint(e)
	return hp
}

// validateFleetCanaries checks [fleet] canaries and canary_address, and
// warns of a canary that is this node itself (one of its GSLB listen
// addresses or its status endpoint: it is left out, a node never
// probes itself) and of a canary_address other hosts share.
func (d *decoder) validateFleetCanaries(f *Fleet) {
	const base = "fleet"
	const want = `want "ADDRESS:PORT" (an IP address and a TCP port, "[v6]:PORT" for IPv6)`
	own := map[netip.AddrPort]string{}
	for i, l := range d.cfg.GSLB.Server.Listen {
		if ap, err := netip.ParseAddrPort(l); err == nil {
			own[unmapPort(ap)] = "this node's own GSLB listen address (" + indexKey("gslb.server.listen", i) + ")"
		}
	}
	if ap, err := netip.ParseAddrPort(d.cfg.Daemon.StatusListen); err == nil {
		own[unmapPort(ap)] = "this node's own status endpoint (daemon.status_listen)"
	}
	if f.CanaryAddress != "" {
		key := joinKey(base, "canary_address")
		ap, err := netip.ParseAddrPort(f.CanaryAddress)
		switch a := ap.Addr(); {
		case err != nil:
			d.p.add(key, f.CanaryAddress, want)
		case ap.Port() == 0:
			d.p.add(key, f.CanaryAddress, "port must be 1..65535")
		case a.IsUnspecified() || a.IsMulticast():
			d.p.add(key, f.CanaryAddress, "must be a unicast address of this host that the other nodes reach (not unspecified or multicast)")
		case a.Zone() != "":
			d.p.add(key, f.CanaryAddress, "must not carry a zone: the other nodes reach it from their own hosts")
		default:
			f.CanaryAddr = unmapPort(ap)
			if shared := d.sharedAddr(a.Unmap()); shared != "" {
				d.p.warn(key, f.CanaryAddress, "is "+shared+": every host that holds it reaches itself there, so it is no canary; give this host's own unicast address")
			} else if a.IsLoopback() {
				d.p.warn(key, f.CanaryAddress, "is a loopback address: only nodes on this very host reach it")
			}
		}
	}
	if f.CanaryAddr.IsValid() {
		own[f.CanaryAddr] = "this node's own canary_address"
	}
	for i, c := range f.Canaries {
		key := indexKey(joinKey(base, "canaries"), i)
		ap, err := netip.ParseAddrPort(c)
		if err != nil {
			d.p.add(key, c, want)
			continue
		}
		if what, ok := own[unmapPort(ap)]; ok {
			d.p.warn(key, c, "is "+what+": it is left out of this node's canaries (a node never probes itself as a canary)")
		}
	}
}

// sharedAddr says how address a is shared with other hosts: a VIP, or
// a GSLB listen address announced over [bgp] ("" when neither).
func (d *decoder) sharedAddr(a netip.Addr) string {
	for _, v := range d.cfg.VIPs {
		if x, err := netip.ParseAddr(v.Address); err == nil && x.Unmap() == a {
			return "the address of VIP " + v.Name
		}
	}
	if d.cfg.BGP.Enabled {
		for _, l := range d.cfg.GSLB.Server.Listen {
			if ap, err := netip.ParseAddrPort(l); err == nil && ap.Addr().Unmap() == a {
				return "a GSLB listen address announced over [bgp] (anycast)"
			}
		}
	}
	return ""
}

// unmapPort is ap with its address unmapped (IPv4-mapped IPv6 as IPv4).
func unmapPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
