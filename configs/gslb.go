package configs

import (
	"fmt"
	"net/netip"
	"strconv"
)

// GSLB holds the GSLB members and their monitors ([gslb]): pools of
// members, each member judged by one or more monitors (check profiles of
// any kind). The responder that answers with them is configured
// elsewhere.
type GSLB struct {
	// Pools are the GSLB pools ([[gslb.pool]]).
	Pools []GSLBPool `toml:"pool"`
	GSLBSelection
	// Topology is the responder's network map ([gslb.topology]).
	Topology GSLBTopology `toml:"topology"`
	Server   GSLBServer   `toml:"server"`       // the responder's listeners ([gslb.server], gslb_server.go)
	TLS      GSLBTLS      `toml:"tls" json:"-"` // its encrypted fronts ([gslb.tls], gslb_tls.go); where and how it is served, not what: out of the served data's hash
}

// GSLBPool is one pool of GSLB members ([[gslb.pool]]).
type GSLBPool struct {
	// Name identifies the pool. Required, unique among GSLB pools.
	Name string `toml:"name"`
	// Monitors name the check profiles every member is probed with,
	// any kind. Required unless every member has its own.
	Monitors []string `toml:"monitors"`
	// Combine says how a member's monitors make its state: "all" (every
	// monitor must be up) or "at_least" (AtLeast of them). Default "all".
	Combine string `toml:"combine"`
	// AtLeast is the number of a member's monitors that must be up with
	// Combine "at_least": 1 .. the member's monitors. Only with
	// "at_least".
	AtLeast int `toml:"at_least"`
	// Members of the pool ([[gslb.pool.member]]). At least one.
	Members []GSLBMember `toml:"member"`
	GSLBPoolSelection
}

// GSLBMember is one member of a GSLB pool ([[gslb.pool.member]]).
type GSLBMember struct {
	// Name identifies the member. Required, unique within its pool.
	Name string `toml:"name"`
	// Address is the IPv4 or IPv6 address answered for the member.
	// Required.
	Address string `toml:"address"`
	// ProbeAddress, when set, is the address the monitors probe instead
	// of Address (a service behind NAT, a health port elsewhere).
	ProbeAddress string `toml:"probe_address"`
	// Weight is the member's share for weighted algorithms, 1..65535.
	// Default 100.
	Weight int `toml:"weight"`
	// Priority orders members for priority algorithms: lower first,
	// 0..65535. Default 0.
	Priority int `toml:"priority"`
	// Monitors, when set, replace the pool's monitors for this member.
	Monitors []string `toml:"monitors"`

	// Addr is Address parsed; ProbeAddr is ProbeAddress parsed, or Addr
	// when ProbeAddress is not set (set by Load).
	Addr      netip.Addr `toml:"-"`
	ProbeAddr netip.Addr `toml:"-"`
}

// GSLB combine rules (GSLBPool.Combine).
const (
	CombineAll     = "all"
	CombineAtLeast = "at_least"
)

// Defaults and limits of GSLB keys.
const (
	DefaultCombine    = CombineAll
	DefaultGSLBWeight = 100
	MaxPriority       = 65535
)

// MemberMonitors returns the names of the check profiles that judge m, a
// member of p: m's own list when it has one, else p's.
func (p *GSLBPool) MemberMonitors(m *GSLBMember) []string {
	if m.Monitors != nil {
		return m.Monitors
	}
	return p.Monitors
}

// GSLBPool returns the GSLB pool called name, or nil. Validation and the
// snapshot call it per policy: on 10,000 names and pools a scan cost a
// quarter of a reload's CPU (bench/responder), so it goes through the
// index like the other accessors.
func (c *Config) GSLBPool(name string) *GSLBPool {
	var idx map[string]int
	if c.index != nil {
		idx = c.index.gslbPools
	}
	return lookup(c.GSLB.Pools, idx, name, func(p *GSLBPool) string { return p.Name })
}

// decodeGSLB decodes the [gslb] table and applies its defaults.
func (d *decoder) decodeGSLB(raw map[string]any) {
	d.gslbRaw, d.gslbOK = d.table("gslb", raw, &d.cfg.GSLB)
	if s := d.split; s != nil {
		// The names were decoded apart (decodeSplit): one unsound name
		// leaves [gslb] unsound, as in the walk of the whole table.
		d.split, d.names = nil, s.raw
		switch {
		case !s.sound:
			d.cfg.GSLB, d.gslbOK, d.broken = GSLB{}, false, true
		case d.gslbOK:
			d.cfg.GSLB.Names = s.names
		}
	} else {
		nraw, _ := tables(d.gslbRaw["name"])
		d.names = nameTablesOf(nraw)
		delete(d.gslbRaw, "name") // walked: validation asks only d.names
		for i := range d.cfg.GSLB.Names {
			d.intern.name(&d.cfg.GSLB.Names[i])
		}
	}
	if !d.gslbOK {
		return
	}
	d.intern.pools(d.cfg.GSLB.Pools)
	praw, _ := tables(d.gslbRaw["pool"])
	for i := range d.cfg.GSLB.Pools {
		p := &d.cfg.GSLB.Pools[i]
		var pm map[string]any
		if i < len(praw) {
			pm = praw[i]
		}
		if !hasKey(pm, "combine") {
			p.Combine = DefaultCombine
		}
		mraw, _ := tables(pm["member"])
		for j := range p.Members {
			var mm map[string]any
			if j < len(mraw) {
				mm = mraw[j]
			}
			if !hasKey(mm, "weight") {
				p.Members[j].Weight = DefaultGSLBWeight
			}
		}
	}
	d.decodeGSLBSelection()
	d.decodeGSLBTopology()
}

// gslbRawPool returns the generic table of [[gslb.pool]] i and of its
// members.
func (d *decoder) gslbRawPool(i int) (map[string]any, []map[string]any) {
	praw, _ := tables(d.gslbRaw["pool"])
	if i >= len(praw) {
		return map[string]any{}, nil
	}
	mraw, _ := tables(praw[i]["member"])
	return praw[i], mraw
}

// validateGSLB checks the [gslb] table.
func (d *decoder) validateGSLB() {
	pools := d.cfg.GSLB.Pools
	d.checkListNames("gslb.pool", len(pools), func(i int) string { return pools[i].Name },
		func(i int) bool { pm, _ := d.gslbRawPool(i); return hasKey(pm, "name") })
	for i := range pools {
		d.validateGSLBPool(i)
	}
	d.validateGSLBSelection()
	d.validateGSLBTopology()
	d.validateGSLBServer()
}

// hasKey reports whether the generic table m has key k.
func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// checkListNames reports missing, malformed and duplicate names of the
// array of tables at path.
func (d *decoder) checkListNames(path string, n int, name func(int) string, present func(int) bool) {
	first := map[string]int{}
	for i := range n {
		key := joinKey(indexKey(path, i), "name")
		s := name(i)
		switch {
		case !present(i):
			d.p.add(key, "", "missing required key")
		case !validName(s):
			d.p.add(key, s, "bad name (1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit)")
		default:
			if j, dup := first[s]; dup {
				d.p.add(key, s, fmt.Sprintf("duplicate name (also %s, line %d)", indexKey(path, j), d.p.lineOf(indexKey(path, j))))
			} else {
				first[s] = i
			}
		}
	}
}

func (d *decoder) validateGSLBPool(i int) {
	p := &d.cfg.GSLB.Pools[i]
	base := indexKey("gslb.pool", i)
	pm, mraw := d.gslbRawPool(i)
	d.checkMonitors(joinKey(base, "monitors"), p.Monitors, hasKey(pm, "monitors"))

	combineOK := true
	switch p.Combine {
	case CombineAll:
		if hasKey(pm, "at_least") {
			d.p.add(joinKey(base, "at_least"), strconv.Itoa(p.AtLeast), `only with combine = "at_least"`)
		}
	case CombineAtLeast:
		if !hasKey(pm, "at_least") {
			d.p.add(joinKey(base, "at_least"), "", `missing required key with combine = "at_least"`)
			combineOK = false
		}
	default:
		d.p.add(joinKey(base, "combine"), p.Combine, `unknown combine rule (want "all" or "at_least")`)
		combineOK = false
	}
	if p.Combine == CombineAtLeast && hasKey(pm, "at_least") && (p.AtLeast < 1 || (p.Monitors != nil && p.AtLeast > len(p.Monitors))) {
		d.p.add(joinKey(base, "at_least"), strconv.Itoa(p.AtLeast), fmt.Sprintf("must be between 1 and the number of monitors (%d)", len(p.Monitors)))
		combineOK = false
	}

	mkey := joinKey(base, "member")
	if len(p.Members) == 0 {
		d.p.add(mkey, "", "missing: at least one [[gslb.pool.member]] is required")
	}
	d.checkListNames(mkey, len(p.Members), func(j int) string { return p.Members[j].Name },
		func(j int) bool { return j < len(mraw) && hasKey(mraw[j], "name") })
	for j := range p.Members {
		m := &p.Members[j]
		var mm map[string]any
		if j < len(mraw) {
			mm = mraw[j]
		}
		mb := indexKey(mkey, j)
		akey := joinKey(mb, "address")
		if !hasKey(mm, "address") {
			d.p.add(akey, "", "missing required key")
		} else if a, why := parseAddr(m.Address); why != "" {
			d.p.add(akey, m.Address, why+" (write the address alone, without a port)")
		} else {
			m.Addr, m.ProbeAddr = a, a
		}
		if hasKey(mm, "probe_address") {
			if a, why := parseAddr(m.ProbeAddress); why != "" {
				d.p.add(joinKey(mb, "probe_address"), m.ProbeAddress, why+" (write the address alone: the port comes from the monitor)")
			} else {
				m.ProbeAddr = a
			}
		}
		if m.Weight < 1 || m.Weight > MaxWeight {
			d.p.add(joinKey(mb, "weight"), strconv.Itoa(m.Weight), "must be between 1 and 65535")
		}
		if m.Priority < 0 || m.Priority > MaxPriority {
			d.p.add(joinKey(mb, "priority"), strconv.Itoa(m.Priority), "must be between 0 and 65535")
		}
		own := hasKey(mm, "monitors")
		if own {
			d.checkMonitors(joinKey(mb, "monitors"), m.Monitors, true)
		} else if !hasKey(pm, "monitors") {
			d.p.add(joinKey(mb, "monitors"), "", "missing: the member has no monitors of its own and its pool sets none")
		}
		if combineOK && p.Combine == CombineAtLeast && own && len(m.Monitors) > 0 && p.AtLeast > len(m.Monitors) {
			d.p.add(joinKey(mb, "monitors"), "", fmt.Sprintf("the pool's at_least = %d, but the member has only %s", p.AtLeast, plural(len(m.Monitors), "monitor")))
		}
	}
}

// checkMonitors checks a list of monitor names at key: at least one when
// present, each a check profile, no repeats.
func (d *decoder) checkMonitors(key string, names []string, present bool) {
	if present && len(names) == 0 {
		d.p.add(key, "", "must name at least one [check.NAME] profile")
	}
	seen := map[string]bool{}
	for j, n := range names {
		k := indexKey(key, j)
		switch {
		case seen[n]:
			d.p.add(k, n, "listed twice")
		case d.cfg.Checks[n] == nil:
			d.p.add(k, n, fmt.Sprintf("no [check.%s] profile", quoteKey(n))+Suggest(n, sortedKeys(d.cfg.Checks)))
		}
		seen[n] = true
	}
}
