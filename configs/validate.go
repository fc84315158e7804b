package configs

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Vendors returns the known resolver vendors, in display order.
func Vendors() []string {
	return []string{"bind", "unbound", "powerdns", "knot", "dnsmasq", "other"}
}

// Schedulers returns the IPVS schedulers a VIP may use.
func Schedulers() []string {
	return []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}
}

// ForwardingMethods returns the IPVS forwarding methods a VIP may use.
func ForwardingMethods() []string { return []string{"dr", "nat", "tunnel"} }

// LogLevels returns the accepted daemon.log_level values.
func LogLevels() []string { return []string{"debug", "info", "warn", "error"} }

// Limits of validated values.
const (
	MinInterval = 100 * time.Millisecond
	// MinFastInterval is the smallest check.fast_interval.
	MinFastInterval   = 20 * time.Millisecond
	MaxInterval       = time.Hour
	MinResyncInterval = time.Second
	MaxResyncInterval = 24 * time.Hour
	MaxRiseFall       = 100
	MaxWeight         = 65535
	MaxNameLen        = 64
	MaxInterfaceLen   = 15

	MaxPrefetchQPS        = 100000
	MaxPrefetchJitter     = 10 * time.Second
	MaxPrefetchTimeout    = 10 * time.Second
	MinRefreshWindow      = time.Second
	MaxRefreshWindow      = time.Hour
	MaxRefreshWindowPct   = 50
	MaxPrefetchPartitions = 64
	// MaxCollapseWindow is the largest pool.collapse_window.
	MaxCollapseWindow = time.Hour
)

func oneOf(v string, list []string) bool {
	for _, s := range list {
		if v == s {
			return true
		}
	}
	return false
}

func listText(list []string) string { return strings.Join(list, ", ") }

// validName reports whether s is a usable name of a vip, pool, resolver or
// check: 1..64 of letters, digits, '-', '_', '.', starting with a letter or
// digit.
func validName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_' && c != '.') {
			return false
		}
	}
	return true
}

// validate checks every rule and records a problem for each violation.
func (d *decoder) validate() {
	c := d.cfg
	for _, k := range []string{"vip", "pool", "resolver"} {
		if !d.present[k] && len(c.GSLB.Pools) == 0 {
			d.p.add(k, "", "missing: at least one [["+k+"]] is required")
		}
	}
	if d.daemonOK {
		d.validateDaemon()
	}
	if d.ipvsOK {
		d.validateIPVS()
	}
	for _, name := range sortedKeys(c.Checks) {
		if d.checks[name] {
			d.validateCheck(joinKey("check", name), c.Checks[name])
		}
	}
	d.checkNames("resolver", len(c.Resolvers), func(i int) string { return c.Resolvers[i].Name }, d.resOK)
	d.checkNames("pool", len(c.Pools), func(i int) string { return c.Pools[i].Name }, d.poolOK)
	d.checkNames("vip", len(c.VIPs), func(i int) string { return c.VIPs[i].Name }, d.vipOK)
	seenAddr := map[netip.AddrPort]int{}
	for i := range c.Resolvers {
		if d.resOK[i] {
			d.validateResolver(i, seenAddr)
		}
	}
	for i := range c.Pools {
		if d.poolOK[i] {
			d.validatePool(i)
		}
	}
	for i := range c.VIPs {
		if d.vipOK[i] {
			d.validateVIP(i)
		}
	}
	d.checkVIPOverlap()
	if d.prefetchOK {
		d.validatePrefetch()
	}
	if d.gslbOK {
		d.validateGSLB()
	}
	d.validateFleet()
	if d.bgpOK {
		d.validateBGP()
	}
	if d.floodOK {
		d.validateFlood()
	}
	if d.actionsOK {
		d.validateActions()
	}
	d.validateDnstap()
}

func (d *decoder) validateDaemon() {
	dm := d.cfg.Daemon
	switch {
	case dm.StateDir == "":
		d.p.add("daemon.state_dir", "", "must not be empty")
	case !filepath.IsAbs(dm.StateDir):
		d.p.add("daemon.state_dir", dm.StateDir, "must be an absolute path")
	}
	if !oneOf(dm.LogLevel, LogLevels()) {
		d.p.add("daemon.log_level", dm.LogLevel, "unknown log level (want one of "+listText(LogLevels())+")")
	}
	switch {
	case dm.ControlSocket == "":
		d.p.add("daemon.control_socket", "", "must not be empty")
	case !filepath.IsAbs(dm.ControlSocket):
		d.p.add("daemon.control_socket", dm.ControlSocket, "must be an absolute path")
	case len(dm.ControlSocket) > MaxSocketPath:
		d.p.add("daemon.control_socket", dm.ControlSocket, fmt.Sprintf("too long for a Unix socket (at most %d bytes)", MaxSocketPath))
	}
	if dm.StatusListen != "" {
		if _, err := netip.ParseAddrPort(dm.StatusListen); err != nil {
			d.p.add("daemon.status_listen", dm.StatusListen, `want ADDRESS:PORT such as "127.0.0.1:9353" (port 0 picks a free one), or "" to turn the status endpoint off`)
		}
	}
	if dm.StatusMaxRequests < 1 || dm.StatusMaxRequests > MaxStatusRequests {
		d.p.add("daemon.status_max_requests", strconv.Itoa(dm.StatusMaxRequests), fmt.Sprintf("must be between 1 and %d", MaxStatusRequests))
	}
	if n := dm.StatusMaxConnections; n < 1 || n > MaxListenerConnections {
		d.p.add("daemon.status_max_connections", strconv.Itoa(n), fmt.Sprintf("must be between 1 and %d", MaxListenerConnections))
	}
	if n := dm.ControlMaxConnections; n < 1 || n > MaxListenerConnections {
		d.p.add("daemon.control_max_connections", strconv.Itoa(n), fmt.Sprintf("must be between 1 and %d", MaxListenerConnections))
	}
	if n := dm.ReservedFDs; n < MinReservedFDs || n > MaxReservedFDs {
		d.p.add("daemon.reserved_fds", strconv.Itoa(n), fmt.Sprintf("must be between %d and %d", MinReservedFDs, MaxReservedFDs))
	}
}

// Bounds of daemon.status_max_connections, daemon.control_max_connections
// and daemon.reserved_fds.
const (
	MaxListenerConnections = 1 << 16
	MinReservedFDs         = 16
	MaxReservedFDs         = 1 << 20
)

// MaxStatusRequests is the highest daemon.status_max_requests.
const MaxStatusRequests = 10000

// MaxSocketPath is the longest Unix socket path Linux accepts
// (sun_path is 108 bytes with the terminating NUL).
const MaxSocketPath = 107

func (d *decoder) validateIPVS() {
	v := d.cfg.IPVS
	if r := v.ResyncInterval.Duration; r < MinResyncInterval || r > MaxResyncInterval {
		d.p.add("ipvs.resync_interval", fmtDur(r), "must be between "+fmtDur(MinResyncInterval)+" and "+fmtDur(MaxResyncInterval))
	}
	if t := v.UDPTimeout.Duration; t < 0 || t%time.Second != 0 {
		d.p.add("ipvs.udp_timeout", fmtDur(t), "must be zero (keep the kernel's value) or a whole number of seconds")
	}
}

// checkNames reports missing, malformed and duplicate names of one kind.
func (d *decoder) checkNames(kind string, n int, name func(int) string, ok []bool) {
	first := map[string]int{}
	for i := 0; i < n; i++ {
		path := joinKey(indexKey(kind, i), "name")
		s := name(i)
		if _, present := d.rawOf(kind, i)["name"]; !present {
			d.p.add(path, "", "missing required key")
			continue
		}
		if !ok[i] && s == "" {
			continue
		}
		if !validName(s) {
			d.p.add(path, s, "bad name (1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit)")
			continue
		}
		if j, dup := first[s]; dup {
			d.p.add(path, s, fmt.Sprintf("duplicate name (also %s, line %d)", indexKey(kind, j), d.p.lineOf(indexKey(kind, j))))
			continue
		}
		first[s] = i
	}
}

func (d *decoder) rawOf(kind string, i int) map[string]any {
	switch kind {
	case "vip":
		return d.vipRaw[i]
	case "pool":
		return d.poolRaw[i]
	}
	return d.resRaw[i]
}

// parseAddr parses an IP address usable for IPVS, or says why not.
func parseAddr(s string) (netip.Addr, string) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return a, "not an IP address"
	case a.Zone() != "":
		return a, "an address with a zone cannot be used"
	case a.Is4In6():
		return a, "an IPv4-mapped IPv6 address cannot be used; write it as IPv4"
	case a.IsUnspecified():
		return a, "the unspecified address cannot be used"
	case a.IsMulticast():
		return a, "a multicast address cannot be used"
	}
	return a, ""
}

// partitionAddr parses a prefetch partition's address, the client
// address a partition's queries carry as ECS (/32 or /128): an IPv4 or
// IPv6 unicast address (an IPv4-mapped one is taken as IPv4). The
// unspecified, multicast, limited broadcast (255.255.255.255) and
// link-local addresses locate no client and are refused; loopback and
// private addresses are accepted (topology maps may place them).
func partitionAddr(s string) (netip.Addr, string) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return a, "not an IP address (sent as ECS /32 or /128)"
	case a.Zone() != "":
		return a, "an address with a zone cannot be used"
	}
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return a, "the unspecified address locates no client"
	case a.IsMulticast():
		return a, "a multicast address locates no client"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return a, "the broadcast address locates no client"
	case a.IsLinkLocalUnicast():
		return a, "a link-local address locates no client"
	}
	return a, ""
}

func (d *decoder) validateResolver(i int, seen map[netip.AddrPort]int) {
	r := &d.cfg.Resolvers[i]
	base := indexKey("resolver", i)
	key := joinKey(base, "address")
	if _, present := d.resRaw[i]["address"]; !present {
		d.p.add(key, "", "missing required key")
	} else {
		host, portText := r.Address, ""
		if h, p, err := net.SplitHostPort(r.Address); err == nil {
			host, portText = h, p
		} else if strings.HasPrefix(r.Address, "[") {
			host = strings.TrimSuffix(strings.TrimPrefix(r.Address, "["), "]")
		}
		a, why := parseAddr(host)
		port := DefaultPort
		if why == "" && portText != "" {
			p, err := strconv.Atoi(portText)
			if err != nil || p < 1 || p > 65535 {
				why = "port must be 1..65535"
			}
			port = p
		}
		if why != "" {
			if why == "not an IP address" {
				why = "not an IP address, IP:PORT or [IPv6]:PORT"
			}
			d.p.add(key, r.Address, why)
		} else {
			r.AddrPort = netip.AddrPortFrom(a, uint16(port))
			if j, dup := seen[r.AddrPort]; dup {
				d.p.add(key, r.Address, fmt.Sprintf("same address and port as %s (%q)", indexKey("resolver", j), d.cfg.Resolvers[j].Name))
			} else {
				seen[r.AddrPort] = i
			}
		}
	}
	vkey := joinKey(base, "vendor")
	switch {
	case r.Vendor == "":
		if _, present := d.resRaw[i]["vendor"]; !present {
			d.p.add(vkey, "", "missing required key (one of "+listText(Vendors())+")")
		} else {
			d.p.add(vkey, "", "must not be empty (one of "+listText(Vendors())+")")
		}
	case !oneOf(r.Vendor, Vendors()):
		d.p.add(vkey, r.Vendor, "unknown vendor (want one of "+listText(Vendors())+")")
	}
	if r.Weight < 1 || r.Weight > MaxWeight {
		d.p.add(joinKey(base, "weight"), strconv.Itoa(r.Weight), "must be between 1 and 65535")
	}
	d.validateRefresh(i)
}

// validateRefresh checks a resolver's refresh mode and window.
func (d *decoder) validateRefresh(i int) {
	r := &d.cfg.Resolvers[i]
	base := indexKey("resolver", i)
	raw := d.resRaw[i]
	_, hasWin := raw["refresh_window"]
	_, hasPct := raw["refresh_window_percent"]
	switch r.Refresh {
	case RefreshExpiry:
		if hasWin || hasPct {
			k := "refresh_window"
			if !hasWin {
				k = "refresh_window_percent"
			}
			d.p.add(joinKey(base, k), "", `only allowed with refresh = "window"`)
		}
		return
	case RefreshWindow:
	default:
		d.p.add(joinKey(base, "refresh"), r.Refresh, `unknown refresh mode (want "window" or "expiry")`)
		return
	}
	if r.Vendor == "dnsmasq" {
		k, v := "refresh", r.Refresh
		if _, set := raw["refresh"]; !set {
			v = ""
			k = "refresh_window"
			if !hasWin {
				k = "refresh_window_percent"
			}
		}
		d.p.add(joinKey(base, k), v, `dnsmasq has no refresh window (use refresh = "expiry")`)
	}
	if hasWin && hasPct {
		d.p.add(joinKey(base, "refresh_window_percent"), strconv.Itoa(r.RefreshWindowPercent), "set either refresh_window or refresh_window_percent, not both")
		return
	}
	if hasWin {
		if w := r.RefreshWindow.Duration; w < MinRefreshWindow || w > MaxRefreshWindow {
			d.p.add(joinKey(base, "refresh_window"), fmtDur(w), "must be between "+fmtDur(MinRefreshWindow)+" and "+fmtDur(MaxRefreshWindow))
		}
	}
	if hasPct {
		if p := r.RefreshWindowPercent; p < 1 || p > MaxRefreshWindowPct {
			d.p.add(joinKey(base, "refresh_window_percent"), strconv.Itoa(p), "must be between 1 and 50")
		}
	}
}

// validatePrefetch checks the [prefetch] table, its domains and partitions,
// and normalizes domain names (fully qualified, lower case) and types
// (upper case).
func (d *decoder) validatePrefetch() {
	c := d.cfg
	pf := &c.Prefetch
	if q := pf.MaxQPS; q < 1 || q > MaxPrefetchQPS {
		d.p.add("prefetch.max_qps", strconv.Itoa(q), "must be between 1 and "+strconv.Itoa(MaxPrefetchQPS))
	}
	if j := pf.Jitter.Duration; j < 0 || j > MaxPrefetchJitter {
		d.p.add("prefetch.jitter", fmtDur(j), "must be between 0s and "+fmtDur(MaxPrefetchJitter))
	}
	if t := pf.Timeout.Duration; t <= 0 || t > MaxPrefetchTimeout {
		d.p.add("prefetch.timeout", fmtDur(t), "must be more than zero and at most "+fmtDur(MaxPrefetchTimeout))
	}
	parts := map[string]int{}
	addrs := map[netip.Addr]int{}
	praw, _ := tables(d.prefetchRaw["partition"])
	if len(pf.Partitions) > MaxPrefetchPartitions {
		d.p.add("prefetch.partition", "", fmt.Sprintf("at most %d partitions", MaxPrefetchPartitions))
	}
	for i := range pf.Partitions {
		pt := &pf.Partitions[i]
		base := indexKey("prefetch.partition", i)
		nkey := joinKey(base, "name")
		switch {
		case i < len(praw) && praw[i]["name"] == nil:
			d.p.add(nkey, "", "missing required key")
		case !validName(pt.Name):
			d.p.add(nkey, pt.Name, "bad name (1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit)")
		default:
			if j, dup := parts[pt.Name]; dup {
				d.p.add(nkey, pt.Name, fmt.Sprintf("duplicate name (also %s, line %d)", indexKey("prefetch.partition", j), d.p.lineOf(indexKey("prefetch.partition", j))))
			} else {
				parts[pt.Name] = i
			}
		}
		akey := joinKey(base, "address")
		if i < len(praw) && praw[i]["address"] == nil {
			d.p.add(akey, "", "missing required key")
		} else if a, why := partitionAddr(pt.Address); why != "" {
			d.p.add(akey, pt.Address, why)
		} else if j, dup := addrs[a]; dup {
			other := indexKey("prefetch.partition", j)
			d.p.add(akey, pt.Address, fmt.Sprintf("duplicate address (also %s, line %d): one cache entry, not two", other, d.p.lineOf(joinKey(other, "address"))))
		} else {
			pt.Addr, addrs[a] = a, i
		}
	}
	draw, _ := tables(d.prefetchRaw["domain"])
	seen := map[string]int{}
	for i := range pf.Domains {
		dm := &pf.Domains[i]
		base := indexKey("prefetch.domain", i)
		nkey := joinKey(base, "name")
		switch {
		case i < len(draw) && draw[i]["name"] == nil:
			d.p.add(nkey, "", "missing required key")
		case !validDNSName(dm.Name):
			d.p.add(nkey, dm.Name, "not a valid domain name")
		default:
			dm.Name = strings.ToLower(dns.Fqdn(dm.Name))
			if j, dup := seen[dm.Name]; dup {
				d.p.add(nkey, dm.Name, fmt.Sprintf("listed twice (also %s, line %d)", indexKey("prefetch.domain", j), d.p.lineOf(indexKey("prefetch.domain", j))))
			} else {
				seen[dm.Name] = i
			}
		}
		tkey := joinKey(base, "types")
		if len(dm.Types) == 0 {
			d.p.add(tkey, "", "must list at least one type")
		}
		seenT := map[string]bool{}
		for j, ty := range dm.Types {
			up := strings.ToUpper(ty)
			if t, ok := dns.StringToType[up]; !ok || t == dns.TypeNone || t == dns.TypeANY || t == dns.TypeAXFR || t == dns.TypeIXFR || t == dns.TypeOPT {
				d.p.add(indexKey(tkey, j), ty, "unknown or meta query type")
				continue
			}
			if seenT[up] {
				d.p.add(indexKey(tkey, j), ty, "listed twice")
				continue
			}
			seenT[up] = true
			dm.Types[j] = up
		}
		pkey := joinKey(base, "pools")
		if i < len(draw) && draw[i]["pools"] != nil && len(dm.Pools) == 0 {
			d.p.add(pkey, "", "must name at least one pool (leave it out for every pool)")
		}
		seenP := map[string]bool{}
		for j, p := range dm.Pools {
			switch {
			case seenP[p]:
				d.p.add(indexKey(pkey, j), p, "listed twice")
			case c.Pool(p) == nil:
				d.p.add(indexKey(pkey, j), p, fmt.Sprintf("no [[pool]] named %q", p)+Suggest(p, poolNames(c)))
			}
			seenP[p] = true
		}
		ekey := joinKey(base, "ecs")
		seenE := map[string]bool{}
		for j, e := range dm.ECS {
			switch {
			case seenE[e]:
				d.p.add(indexKey(ekey, j), e, "listed twice")
			default:
				if _, ok := parts[e]; !ok {
					d.p.add(indexKey(ekey, j), e, fmt.Sprintf("no [[prefetch.partition]] named %q", e))
				}
			}
			seenE[e] = true
		}
	}
}

func (d *decoder) validatePool(i int) {
	c := d.cfg
	p := &c.Pools[i]
	base := indexKey("pool", i)
	mkey := joinKey(base, "members")
	if _, present := d.poolRaw[i]["members"]; !present {
		d.p.add(mkey, "", "missing required key")
	} else if len(p.Members) == 0 {
		d.p.add(mkey, "", "must name at least one resolver")
	}
	seen := map[string]bool{}
	for j, m := range p.Members {
		k := indexKey(mkey, j)
		switch {
		case seen[m]:
			d.p.add(k, m, "listed twice")
		case c.Resolver(m) == nil:
			d.p.add(k, m, fmt.Sprintf("no [[resolver]] named %q", m)+Suggest(m, resolverNames(c)))
		}
		seen[m] = true
	}
	ckey := joinKey(base, "check")
	switch _, present := d.poolRaw[i]["check"]; {
	case !present:
		d.p.add(ckey, "", "missing required key")
	case c.Checks[p.Check] == nil:
		d.p.add(ckey, p.Check, fmt.Sprintf("no [check.%s] profile", quoteKey(p.Check))+Suggest(p.Check, sortedKeys(c.Checks)))
	case !poolCheckKindOK(c.Checks[p.Check]):
		d.p.add(ckey, p.Check, poolCheckKindMsg(c.Checks[p.Check]))
	}
	if len(p.Members) > 0 && (p.MinHealthy < 1 || p.MinHealthy > len(p.Members)) {
		d.p.add(joinKey(base, "min_healthy"), strconv.Itoa(p.MinHealthy),
			fmt.Sprintf("must be between 1 and the number of members (%d)", len(p.Members)))
	}
	minOK := p.MinHealthy >= 1 && p.MinHealthy <= len(p.Members)
	if len(p.Members) > 0 && minOK && (p.RecoverHealthy < p.MinHealthy || p.RecoverHealthy > len(p.Members)) {
		d.p.add(joinKey(base, "recover_healthy"), strconv.Itoa(p.RecoverHealthy),
			fmt.Sprintf("must be between min_healthy (%d) and the number of members (%d)", p.MinHealthy, len(p.Members)))
	}
	if w := p.CollapseWindow.Duration; w < 0 || w > MaxCollapseWindow {
		d.p.add(joinKey(base, "collapse_window"), fmtDur(w), "must be between 0s and "+fmtDur(MaxCollapseWindow))
	}
}

// validInterface reports whether s is a valid Linux interface name.
func validInterface(s string) bool {
	if s == "" || len(s) > MaxInterfaceLen || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/: \t\n\r\v\f")
}

func (d *decoder) validateVIP(i int) {
	c := d.cfg
	v := &c.VIPs[i]
	base := indexKey("vip", i)
	akey := joinKey(base, "address")
	if _, present := d.vipRaw[i]["address"]; !present {
		d.p.add(akey, "", "missing required key")
	} else if a, why := parseAddr(v.Address); why != "" {
		d.p.add(akey, v.Address, why)
	} else {
		v.Addr = a
	}
	pkey := joinKey(base, "ports")
	if len(v.Ports) == 0 {
		d.p.add(pkey, "", "must list at least one port")
	}
	seenPort := map[int]bool{}
	for j, port := range v.Ports {
		k := indexKey(pkey, j)
		switch {
		case port < 1 || port > 65535:
			d.p.add(k, strconv.Itoa(port), "port must be 1..65535")
		case seenPort[port]:
			d.p.add(k, strconv.Itoa(port), "listed twice")
		}
		seenPort[port] = true
	}
	prkey := joinKey(base, "protocols")
	if len(v.Protocols) == 0 {
		d.p.add(prkey, "", "must list at least one protocol")
	}
	seenProto := map[string]bool{}
	for j, pr := range v.Protocols {
		k := indexKey(prkey, j)
		switch {
		case pr != "udp" && pr != "tcp":
			d.p.add(k, pr, "unknown protocol (want udp or tcp)")
		case seenProto[pr]:
			d.p.add(k, pr, "listed twice")
		}
		seenProto[pr] = true
	}
	if !oneOf(v.Scheduler, Schedulers()) {
		d.p.add(joinKey(base, "scheduler"), v.Scheduler, "unknown scheduler (want one of "+listText(Schedulers())+")")
	}
	fwdOK := oneOf(v.Forwarding, ForwardingMethods())
	if !fwdOK {
		d.p.add(joinKey(base, "forwarding"), v.Forwarding, "unknown forwarding (want one of "+listText(ForwardingMethods())+")")
	}
	if _, present := d.vipRaw[i]["interface"]; present && !validInterface(v.Interface) {
		d.p.add(joinKey(base, "interface"), v.Interface, "bad interface name (1 to 15 characters, no '/', ':' or white space)")
	}
	poolKey := joinKey(base, "pool")
	if _, present := d.vipRaw[i]["pool"]; !present {
		d.p.add(poolKey, "", "missing required key")
		return
	}
	pool := c.Pool(v.Pool)
	if pool == nil {
		d.p.add(poolKey, v.Pool, fmt.Sprintf("no [[pool]] named %q", v.Pool)+Suggest(v.Pool, poolNames(c)))
		return
	}
	for _, m := range pool.Members {
		r := c.Resolver(m)
		if r == nil || !r.AddrPort.IsValid() {
			continue
		}
		ra := r.AddrPort.Addr()
		if v.Addr.IsValid() && ra.Is4() != v.Addr.Is4() {
			d.p.add(poolKey, v.Pool, fmt.Sprintf("member %q is %s but the VIP is %s (IPVS cannot mix address families)", m, family(ra), family(v.Addr)))
		}
		if fwdOK && v.Forwarding != "nat" {
			for j, port := range v.Ports {
				if port >= 1 && port <= 65535 && int(r.AddrPort.Port()) != port {
					d.p.add(indexKey(pkey, j), strconv.Itoa(port), fmt.Sprintf(
						"forwarding %q cannot change the port, but member %q listens on port %d (use forwarding \"nat\" or the same port)",
						v.Forwarding, m, r.AddrPort.Port()))
					break
				}
			}
		}
	}
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// checkVIPOverlap reports VIPs that serve an address, port and protocol that
// an earlier VIP serves already.
func (d *decoder) checkVIPOverlap() {
	type svc struct {
		addr  netip.Addr
		port  int
		proto string
	}
	owner := map[svc]int{}
	for i, v := range d.cfg.VIPs {
		if !d.vipOK[i] || !v.Addr.IsValid() {
			continue
		}
		var clash []string
		other := -1
		for _, port := range v.Ports {
			for _, pr := range v.Protocols {
				s := svc{v.Addr, port, pr}
				if j, taken := owner[s]; taken && j != i {
					clash = append(clash, fmt.Sprintf("%s/%d", pr, port))
					other = j
					continue
				}
				owner[s] = i
			}
		}
		if len(clash) > 0 {
			d.p.add(joinKey(indexKey("vip", i), "address"), v.Address, fmt.Sprintf("%s already served by %s (%q)",
				strings.Join(clash, ", "), indexKey("vip", other), d.cfg.VIPs[other].Name))
		}
	}
}

// validDNSName reports whether s is a domain name a probe can ask.
func validDNSName(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n\\") {
		return false
	}
	_, ok := dns.IsDomainName(s)
	return ok
}

func (d *decoder) validateCheck(base string, k *Check) {
	raw := d.checkRaw[k.Name]
	kinds := CheckKinds()
	if !oneOf(k.Kind, kinds) {
		d.p.add(joinKey(base, "kind"), k.Kind, "unknown kind (known: "+strings.Join(kinds, ", ")+")")
	}
	for _, other := range kinds {
		if _, present := raw[other]; present && other != k.Kind {
			d.p.add(joinKey(base, other), "", fmt.Sprintf("a [check.%s.%s] sub-table, but the check's kind is %q (a check has the settings of its own kind only)",
				quoteKey(k.Name), other, k.Kind))
		}
	}
	switch {
	case d.moved[k.Name]:
		// Its settings were written under [check.NAME]; already reported.
	case k.Kind == "dns" && k.DNS == nil:
		d.p.add(base, "", fmt.Sprintf("missing required [check.%s.dns] sub-table: set either qname (a fixed name) or zone (random labels under it) there", quoteKey(k.Name)))
	case k.Kind == "dns":
		sub, _ := raw["dns"].(map[string]any)
		d.validateDNS(joinKey(base, "dns"), k.DNS, sub)
	case k.Kind == "icmp":
		d.validateICMP(base, k)
	case k.Kind == "tcp":
		d.validateTCP(base, k, raw)
	case k.Kind == "udp":
		d.validateUDP(base, k, raw)
	case k.Kind == "http" || k.Kind == "https":
		d.validateHTTP(base, k, raw)
	}
	d.validatePacing(base, k)
}

// validateDNS checks the settings of a check of kind "dns" (the table at
// key path base, raw as decoded generically) and normalizes names and
// mnemonics.
func (d *decoder) validateDNS(base string, k *DNSCheck, raw map[string]any) {
	_, hasQ := raw["qname"]
	_, hasZ := raw["zone"]
	switch {
	case hasQ && hasZ:
		d.p.add(joinKey(base, "zone"), k.Zone, "set either qname or zone, not both")
	case !hasQ && !hasZ:
		d.p.add(base, "", "missing required key: set either qname (a fixed name) or zone (random labels under it)")
	case hasQ && !validDNSName(k.QName):
		d.p.add(joinKey(base, "qname"), k.QName, "not a valid domain name")
	case hasZ && !validDNSName(k.Zone):
		d.p.add(joinKey(base, "zone"), k.Zone, "not a valid domain name")
	case hasQ:
		k.QName = dns.Fqdn(k.QName)
	default:
		k.Zone = dns.Fqdn(k.Zone)
	}
	if t, ok := dns.StringToType[strings.ToUpper(k.QType)]; !ok || t == dns.TypeNone {
		d.p.add(joinKey(base, "qtype"), k.QType, "unknown query type")
	} else {
		k.QType = strings.ToUpper(k.QType)
	}
	if _, ok := dns.StringToClass[strings.ToUpper(k.QClass)]; !ok {
		d.p.add(joinKey(base, "qclass"), k.QClass, "unknown query class")
	} else {
		k.QClass = strings.ToUpper(k.QClass)
	}
	if k.Transport != "udp" && k.Transport != "tcp" {
		d.p.add(joinKey(base, "transport"), k.Transport, "unknown transport (want udp or tcp)")
	}
	rkey := joinKey(base, "rcodes")
	if len(k.Rcodes) == 0 {
		d.p.add(rkey, "", "must list at least one rcode")
	}
	for j, rc := range k.Rcodes {
		if _, ok := dns.StringToRcode[strings.ToUpper(rc)]; !ok {
			d.p.add(indexKey(rkey, j), rc, "unknown rcode")
			continue
		}
		k.Rcodes[j] = strings.ToUpper(rc)
	}
	if _, present := raw["expect"]; present {
		ekey := joinKey(base, "expect")
		a, err := netip.ParseAddr(k.Expect)
		switch {
		case err != nil:
			d.p.add(ekey, k.Expect, "not an IP address")
		case k.QType == "A" && !a.Is4(), k.QType == "AAAA" && !a.Is6():
			d.p.add(ekey, k.Expect, fmt.Sprintf("an answer to qtype %s cannot hold an %s address", k.QType, family(a)))
		case k.QType != "A" && k.QType != "AAAA":
			d.p.add(ekey, k.Expect, "expect needs qtype A or AAAA (use expect_regexp for other types)")
		}
	}
	if _, present := raw["expect_regexp"]; present {
		if _, err := regexp.Compile(k.ExpectRegexp); err != nil {
			d.p.add(joinKey(base, "expect_regexp"), k.ExpectRegexp, fmt.Sprintf("does not compile: %v", err))
		}
	}
}

// validatePacing checks the keys every kind shares.
func (d *decoder) validatePacing(base string, k *Check) {
	iv := k.Interval.Duration
	if iv < MinInterval || iv > MaxInterval {
		d.p.add(joinKey(base, "interval"), fmtDur(iv), "must be between "+fmtDur(MinInterval)+" and "+fmtDur(MaxInterval))
	}
	if fi := k.FastInterval.Duration; iv >= MinInterval && iv <= MaxInterval && (fi < MinFastInterval || fi > iv) {
		d.p.add(joinKey(base, "fast_interval"), fmtDur(fi), "must be between "+fmtDur(MinFastInterval)+" and interval ("+fmtDur(iv)+")")
	}
	switch to := k.Timeout.Duration; {
	case to <= 0:
		d.p.add(joinKey(base, "timeout"), fmtDur(to), "must be more than zero")
	case to >= iv:
		d.p.add(joinKey(base, "timeout"), fmtDur(to), "must be less than interval ("+fmtDur(iv)+")")
	}
	if k.Rise < 1 || k.Rise > MaxRiseFall {
		d.p.add(joinKey(base, "rise"), strconv.Itoa(k.Rise), "must be between 1 and 100")
	}
	if k.Fall < 1 || k.Fall > MaxRiseFall {
		d.p.add(joinKey(base, "fall"), strconv.Itoa(k.Fall), "must be between 1 and 100")
	}
}

// fmtDur formats a duration without zero trailing units ("1h", not "1h0m0s").
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// poolNames are the names of c's pools, for a "did you mean".
func poolNames(c *Config) []string {
	out := make([]string, len(c.Pools))
	for i := range c.Pools {
		out[i] = c.Pools[i].Name
	}
	return out
}

// resolverNames are the names of c's resolvers, for a "did you mean".
func resolverNames(c *Config) []string {
	out := make([]string, len(c.Resolvers))
	for i := range c.Resolvers {
		out[i] = c.Resolvers[i].Name
	}
	return out
}
