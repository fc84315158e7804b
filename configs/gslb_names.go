package configs

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// GSLBSelection holds what the GSLB responder answers ([gslb] keys and
// the [[gslb.zone]] and [[gslb.name]] tables): its zones with their static
// records, its dynamic names with their policies, and the caps.
type GSLBSelection struct {
	// MaxRecords caps the address records of one answer. Default 8.
	MaxRecords int `toml:"max_records"`
	// PolicyOrder ranks the policies of a name, most specific first: each
	// entry is levels joined by '+' ("carrier+province") or "global".
	// Default DefaultPolicyOrder.
	PolicyOrder []string `toml:"policy_order"`
	// Whoami, when set, is a name answering TXT, A and AAAA with the
	// address of the resolver that asked and the ECS address it sent.
	Whoami string `toml:"whoami"`
	// Zones are the zones served ([[gslb.zone]]).
	Zones []GSLBZone `toml:"zone"`
	// Services are the named policy sets that names share
	// ([[gslb.service]]).
	Services []GSLBService `toml:"service" json:",omitempty"`
	// Names are the dynamic names ([[gslb.name]]).
	Names []GSLBName `toml:"name"`
}

// GSLBPoolSelection holds how the responder picks a pool's members.
type GSLBPoolSelection struct {
	// Algorithm picks among the healthy members: one of
	// GSLBAlgorithms(). Default "rr".
	Algorithm string `toml:"algorithm"`
	// Fallback names the GSLB pool tried when this one has no healthy
	// member (chains; a loop is an error). Default none.
	Fallback string `toml:"fallback"`
	// MaxRecords caps the records of an answer from this pool. Default
	// [gslb] max_records.
	MaxRecords int `toml:"max_records"`
}

// GSLBZone is one zone the responder serves ([[gslb.zone]]).
type GSLBZone struct {
	// Name is the zone's apex. Required, unique.
	Name string `toml:"name"`
	// NS are the zone's name servers (fully qualified, ending in '.').
	// At least one.
	NS []string `toml:"ns"`
	// Mbox is the SOA RNAME (fully qualified). Default
	// "hostmaster.ZONE.".
	Mbox string `toml:"mbox"`
	// Refresh, Retry, Expire and Minimum are the SOA's timers in seconds;
	// Minimum is the negative-answer TTL. Defaults 3600, 600, 604800,
	// 60.
	Refresh int `toml:"refresh"`
	Retry   int `toml:"retry"`
	Expire  int `toml:"expire"`
	Minimum int `toml:"minimum"`
	// TTL is the TTL of the SOA, the NS and static records without their
	// own. Default 3600.
	TTL int `toml:"ttl"`
	// Records are the zone's static records ([[gslb.zone.record]]).
	Records []GSLBRecord `toml:"record"`

	// Apex is Name canonical (lower case, ending in '.'), set by Load.
	Apex string `toml:"-"`
}

// GSLBRecord is one static record of a zone ([[gslb.zone.record]]).
type GSLBRecord struct {
	// Name is the owner relative to the zone ("@" for the apex, "www",
	// or a fully qualified name inside the zone). Required.
	Name string `toml:"name"`
	// Type is one of A, AAAA, CNAME, TXT, MX. Required.
	Type string `toml:"type"`
	// Value is the record's data: an address (A, AAAA), a fully qualified
	// target (CNAME), text (TXT), "PREFERENCE HOST" (MX). Required.
	Value string `toml:"value"`
	// TTL in seconds. Default the zone's ttl.
	TTL int `toml:"ttl"`

	// Owner is the owner's canonical fully qualified name, set by Load.
	Owner string `toml:"-"`
}

// GSLBService is one set of policies, with its TTL, ECS setting, last
// resort and static set, that names share ([[gslb.service]]): gdnsd's
// resource, a cloud GSLB's instance. A name with a service answers as
// the same name with the service's keys written under it would.
type GSLBService struct {
	// Name identifies the service. Required, unique among services.
	Name string `toml:"name"`
	// TTL is the TTL of its names' answers in seconds (a name's own ttl
	// wins). Default 30.
	TTL int `toml:"ttl"`
	// ECS, when set, locates its names' clients by their EDNS Client
	// Subnet. Default false.
	ECS bool `toml:"ecs"`
	// LastResort is what answers when no policy has a healthy member:
	// "fail_open", "static" or "servfail". Default "fail_open".
	LastResort string `toml:"last_resort"`
	// Static is the static answer set (addresses). Required with
	// last_resort = "static".
	Static []string `toml:"static"`
	// Policies are the service's policies ([[gslb.service.policy]]). At
	// least one.
	Policies []GSLBPolicy `toml:"policy"`
	// Names lists dynamic names that answer with the service and its
	// ttl, one string each (gdnsd's one-line DYNA records): each is as a
	// [[gslb.name]] with only name and service, and Load appends it to
	// GSLB.Names so. Default none.
	Names []string `toml:"names" json:",omitempty"`

	// StaticAddrs is Static parsed, set by Load.
	StaticAddrs []netip.Addr `toml:"-"`
}

// GSLBName is one dynamic name ([[gslb.name]]).
type GSLBName struct {
	// Name is the fully qualified name, inside a zone. Required, unique.
	Name string `toml:"name"`
	// Service, when set, names the [[gslb.service]] whose policies, ECS
	// setting, last resort and static set the name answers with; the
	// name then sets none of those keys itself (Load copies the
	// service's ECS, LastResort, Static and StaticAddrs into the name,
	// and leaves Policies nil: see GSLB.NamePolicies). Default none.
	Service string `toml:"service" json:",omitempty"`
	// TTL of its answers in seconds. Default 30, or its service's ttl.
	TTL int `toml:"ttl"`
	// ECS, when set, locates clients by their EDNS Client Subnet (RFC
	// 7871, opt-in per name). Default false.
	ECS bool `toml:"ecs"`
	// LastResort is what answers when no policy has a healthy member:
	// "fail_open", "static" or "servfail". Default "fail_open".
	LastResort string `toml:"last_resort"`
	// Static is the name's static answer set (addresses). Required with
	// last_resort = "static".
	Static []string `toml:"static"`
	// Policies are the name's policies ([[gslb.name.policy]]). At least
	// one, unless the name has a service (then none).
	Policies []GSLBPolicy `toml:"policy"`

	// FQDN is Name canonical and StaticAddrs is Static parsed, set by
	// Load.
	FQDN        string       `toml:"-"`
	StaticAddrs []netip.Addr `toml:"-"`
}

// GSLBPolicy is one policy of a name ([[gslb.name.policy]]).
type GSLBPolicy struct {
	// Match are the location labels a client must have, level → value
	// (empty: every client, the global policy).
	Match map[string]string `toml:"match"`
	// Pool names the GSLB pool that answers. Required.
	Pool string `toml:"pool"`
}

// GSLB pool algorithms (GSLBPoolSelection.Algorithm).
const (
	AlgorithmRR         = "rr"
	AlgorithmWRR        = "wrr"
	AlgorithmHash       = "hash"
	AlgorithmRandom     = "random"
	AlgorithmPriority   = "priority"
	AlgorithmRendezvous = "rendezvous"
	AlgorithmAll        = "all"
)

// GSLB last resorts (GSLBName.LastResort).
const (
	LastResortFailOpen = "fail_open"
	LastResortStatic   = "static"
	LastResortServfail = "servfail"
)

// PolicyGlobal is the policy_order entry of policies without a match.
const PolicyGlobal = "global"

// Defaults and limits of the GSLB selection keys.
const (
	DefaultMaxRecords = 8
	MaxMaxRecords     = 64
	DefaultNameTTL    = 30
	DefaultZoneTTL    = 3600
	DefaultSOARefresh = 3600
	DefaultSOARetry   = 600
	DefaultSOAExpire  = 604800
	DefaultSOAMinimum = 60
	MaxTTL            = 2147483647
)

// GSLBAlgorithms lists the pool algorithms.
func GSLBAlgorithms() []string {
	return []string{AlgorithmRR, AlgorithmWRR, AlgorithmHash, AlgorithmRandom, AlgorithmPriority, AlgorithmRendezvous, AlgorithmAll}
}

// DefaultPolicyOrder is the default policy_order.
func DefaultPolicyOrder() []string {
	return []string{"carrier+province", "country+province", "carrier+region", "country+region", "carrier", "country", PolicyGlobal}
}

// PolicyKey is the policy_order entry of a match: its levels sorted and
// joined by '+', or "global" when it is empty.
func PolicyKey(match map[string]string) string {
	if len(match) == 0 {
		return PolicyGlobal
	}
	levels := make([]string, 0, len(match))
	for l := range match {
		levels = append(levels, l)
	}
	slices.Sort(levels)
	return strings.Join(levels, "+")
}

// policyOrderKey is the PolicyKey of a policy_order entry.
func policyOrderKey(entry string) string {
	if entry == PolicyGlobal {
		return PolicyGlobal
	}
	levels := strings.Split(entry, "+")
	slices.Sort(levels)
	return strings.Join(levels, "+")
}

// PolicyRanks maps the PolicyKey of every policy_order entry to its rank
// (0 is the most specific).
func (g *GSLB) PolicyRanks() map[string]int {
	r := make(map[string]int, len(g.PolicyOrder))
	for i, e := range g.PolicyOrder {
		if _, dup := r[policyOrderKey(e)]; !dup {
			r[policyOrderKey(e)] = i
		}
	}
	return r
}

// Service returns the GSLB service called name, or nil.
func (c *Config) Service(name string) *GSLBService {
	var idx map[string]int
	if c.index != nil {
		idx = c.index.services
	}
	return lookup(c.GSLB.Services, idx, name, func(s *GSLBService) string { return s.Name })
}

// NamePolicies returns the policies name n answers with: its service's
// when it has one (nil when that service does not exist), else its own.
func (c *Config) NamePolicies(n *GSLBName) []GSLBPolicy {
	if n.Service == "" {
		return n.Policies
	}
	if s := c.Service(n.Service); s != nil {
		return s.Policies
	}
	return nil
}

// WhoamiFQDN returns the whoami name canonical, or "" when none is set.
func (g *GSLB) WhoamiFQDN() string {
	if g.Whoami == "" {
		return ""
	}
	return dns.CanonicalName(g.Whoami)
}

// decodeGSLBSelection applies the defaults of the selection keys.
func (d *decoder) decodeGSLBSelection() {
	g := &d.cfg.GSLB
	if !hasKey(d.gslbRaw, "max_records") {
		g.MaxRecords = DefaultMaxRecords
	}
	if !hasKey(d.gslbRaw, "policy_order") {
		g.PolicyOrder = DefaultPolicyOrder()
	}
	for i := range g.Pools {
		p := &g.Pools[i]
		pm, _ := d.gslbRawPool(i)
		if !hasKey(pm, "algorithm") {
			p.Algorithm = AlgorithmRR
		}
		if !hasKey(pm, "max_records") {
			p.MaxRecords = g.MaxRecords
		}
	}
	zraw, _ := tables(d.gslbRaw["zone"])
	for i := range g.Zones {
		z := &g.Zones[i]
		zm := elem(zraw, i)
		for _, k := range []struct {
			key string
			v   *int
			def int
		}{{"refresh", &z.Refresh, DefaultSOARefresh}, {"retry", &z.Retry, DefaultSOARetry}, {"expire", &z.Expire, DefaultSOAExpire},
			{"minimum", &z.Minimum, DefaultSOAMinimum}, {"ttl", &z.TTL, DefaultZoneTTL}} {
			if !hasKey(zm, k.key) {
				*k.v = k.def
			}
		}
		if !hasKey(zm, "mbox") && z.Name != "" {
			z.Mbox = "hostmaster." + dns.Fqdn(z.Name)
		}
		rraw, _ := tables(zm["record"])
		for j := range z.Records {
			if !hasKey(elem(rraw, j), "ttl") {
				z.Records[j].TTL = z.TTL
			}
		}
	}
	sraw, _ := tables(d.gslbRaw["service"])
	for i := range g.Services {
		sv := &g.Services[i]
		sm := elem(sraw, i)
		if !hasKey(sm, "ttl") {
			sv.TTL = DefaultNameTTL
		}
		if !hasKey(sm, "last_resort") {
			sv.LastResort = LastResortFailOpen
		}
	}
	for i := range g.Names {
		n := &g.Names[i]
		nm := nameTableAt(d.names, i)
		if !nm.has("ttl") {
			n.TTL = DefaultNameTTL
		}
		if !nm.has("last_resort") {
			n.LastResort = LastResortFailOpen
		}
	}
}

// elem returns tables[i], or an empty table when there are fewer.
func elem(tables []map[string]any, i int) map[string]any {
	if i < len(tables) {
		return tables[i]
	}
	return map[string]any{}
}

// selectionLevels are the location levels policies may match on.
func (d *decoder) selectionLevels() []string {
	if l := d.cfg.GSLB.Topology.Levels; len(l) > 0 {
		return l
	}
	return DefaultTopologyLevels()
}

// validateGSLBSelection checks the selection keys: zones, records, names,
// policies, pool algorithms and fallbacks, policy_order, whoami.
func (d *decoder) validateGSLBSelection() {
	g := &d.cfg.GSLB
	if g.MaxRecords < 1 || g.MaxRecords > MaxMaxRecords {
		d.p.add("gslb.max_records", strconv.Itoa(g.MaxRecords), fmt.Sprintf("must be between 1 and %d", MaxMaxRecords))
	}
	ranks := d.validatePolicyOrder()
	d.validateGSLBFallbacks()
	zones := d.validateGSLBZones()
	d.validateGSLBServices(ranks)
	listed := 0
	for i := range g.Services {
		listed += len(g.Services[i].Names)
	}
	names := make(nameKeys, len(g.Names)+listed)
	for i := range g.Names {
		d.validateGSLBName(i, nameTableAt(d.names, i), zones, names, ranks)
	}
	d.expandServiceNames(zones, names, listed)
	d.validateGSLBRecords(names)
	if g.Whoami != "" {
		w, why := absName(g.Whoami, false)
		switch {
		case why != "":
			d.p.add("gslb.whoami", g.Whoami, why)
		case zoneOf(w, zones) == "":
			d.p.add("gslb.whoami", g.Whoami, "not inside any [[gslb.zone]]")
		case names.has(w):
			d.p.add("gslb.whoami", g.Whoami, fmt.Sprintf("also a [[gslb.name]] (%s)", names.key(w)))
		}
	}
}

// validatePolicyOrder checks policy_order and returns the rank of each
// entry's key.
func (d *decoder) validatePolicyOrder() map[string]int {
	g := &d.cfg.GSLB
	levels := d.selectionLevels()
	if !hasKey(d.gslbRaw, "policy_order") {
		// The default order, over the levels the topology has: entries
		// naming another level are left out.
		g.PolicyOrder = slices.DeleteFunc(DefaultPolicyOrder(), func(e string) bool {
			return e != PolicyGlobal && slices.ContainsFunc(strings.Split(e, "+"), func(l string) bool { return !slices.Contains(levels, l) })
		})
	}
	seen := map[string]int{}
	for i, e := range g.PolicyOrder {
		k := indexKey("gslb.policy_order", i)
		if e == PolicyGlobal {
			if _, dup := seen[e]; dup {
				d.p.add(k, e, "listed twice")
			}
			seen[e] = i
			continue
		}
		parts := strings.Split(e, "+")
		ok := true
		for j, l := range parts {
			if !slices.Contains(levels, l) {
				d.p.add(k, e, fmt.Sprintf("unknown level %q (want levels among %s joined by '+', or %q)", l, listText(levels), PolicyGlobal))
				ok = false
				break
			}
			if slices.Contains(parts[:j], l) {
				d.p.add(k, e, fmt.Sprintf("level %q twice", l))
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		pk := policyOrderKey(e)
		if j, dup := seen[pk]; dup {
			d.p.add(k, e, fmt.Sprintf("the same levels as gslb.policy_order[%d]", j))
			continue
		}
		seen[pk] = i
	}
	return seen
}

// validateGSLBFallbacks checks every pool's algorithm, max_records and
// fallback, and rejects fallback loops naming the chain.
func (d *decoder) validateGSLBFallbacks() {
	pools := d.cfg.GSLB.Pools
	index := map[string]int{}
	for i := range pools {
		if _, dup := index[pools[i].Name]; !dup {
			index[pools[i].Name] = i
		}
	}
	for i := range pools {
		p := &pools[i]
		base := indexKey("gslb.pool", i)
		if !oneOf(p.Algorithm, GSLBAlgorithms()) {
			d.p.add(joinKey(base, "algorithm"), p.Algorithm, "unknown algorithm (want one of "+listText(GSLBAlgorithms())+")")
		}
		if pm, _ := d.gslbRawPool(i); hasKey(pm, "max_records") && (p.MaxRecords < 1 || p.MaxRecords > MaxMaxRecords) {
			d.p.add(joinKey(base, "max_records"), strconv.Itoa(p.MaxRecords), fmt.Sprintf("must be between 1 and %d", MaxMaxRecords))
		}
		if p.Fallback == "" {
			continue
		}
		if _, ok := index[p.Fallback]; !ok {
			d.p.add(joinKey(base, "fallback"), p.Fallback, "no [[gslb.pool]] of that name")
			continue
		}
		// Follow the chain; a loop is reported at its first pool in
		// configuration order.
		chain := []string{p.Name}
		at := map[string]bool{p.Name: true}
		for cur := p.Fallback; cur != ""; {
			j, ok := index[cur]
			if !ok {
				break
			}
			chain = append(chain, cur)
			if at[cur] {
				if cur == p.Name && lowestIndex(chain, index) == i {
					d.p.add(joinKey(base, "fallback"), p.Fallback, "fallback loop: "+strings.Join(chain, " → "))
				}
				break
			}
			at[cur] = true
			cur = pools[j].Fallback
		}
	}
}

// lowestIndex is the lowest configuration index of the pools of chain.
func lowestIndex(chain []string, index map[string]int) int {
	low := -1
	for _, n := range chain {
		if i := index[n]; low < 0 || i < low {
			low = i
		}
	}
	return low
}

// absName canonicalises a fully qualified domain name; with dot the
// trailing '.' is required. It returns why s is not one.
func absName(s string, dot bool) (string, string) {
	if _, ok := dns.IsDomainName(s); !ok || s == "" || strings.Contains(s, "..") {
		return "", "not a domain name"
	}
	if dot && !dns.IsFqdn(s) {
		return "", "not fully qualified (end it with '.')"
	}
	return dns.CanonicalName(s), ""
}

// zoneOf returns the apex of the most specific zone holding name, or "".
func zoneOf(name string, zones map[string]bool) string {
	for off, end := 0, false; !end; off, end = dns.NextLabel(name, off) {
		if zones[name[off:]] {
			return name[off:]
		}
	}
	if zones["."] {
		return "."
	}
	return ""
}

// validateGSLBZones checks the zones (not their records) and returns
// their apexes.
func (d *decoder) validateGSLBZones() map[string]bool {
	g := &d.cfg.GSLB
	zones := map[string]bool{}
	first := map[string]int{}
	zraw, _ := tables(d.gslbRaw["zone"])
	for i := range g.Zones {
		z := &g.Zones[i]
		base := indexKey("gslb.zone", i)
		zm := elem(zraw, i)
		if !hasKey(zm, "name") {
			d.p.add(joinKey(base, "name"), "", "missing required key")
		} else if apex, why := absName(z.Name, false); why != "" {
			d.p.add(joinKey(base, "name"), z.Name, why)
		} else if j, dup := first[apex]; dup {
			d.p.add(joinKey(base, "name"), z.Name, fmt.Sprintf("duplicate zone (also gslb.zone[%d])", j))
		} else {
			z.Apex, first[apex], zones[apex] = apex, i, true
		}
		if len(z.NS) == 0 {
			d.p.add(joinKey(base, "ns"), "", "missing: at least one name server")
		}
		for j, ns := range z.NS {
			if _, why := absName(ns, true); why != "" {
				d.p.add(indexKey(joinKey(base, "ns"), j), ns, why)
			}
		}
		if _, why := absName(z.Mbox, true); why != "" && z.Mbox != "" {
			d.p.add(joinKey(base, "mbox"), z.Mbox, why)
		}
		for _, k := range []struct {
			key string
			v   int
		}{{"refresh", z.Refresh}, {"retry", z.Retry}, {"expire", z.Expire}, {"minimum", z.Minimum}, {"ttl", z.TTL}} {
			if k.v < 0 || k.v > MaxTTL {
				d.p.add(joinKey(base, k.key), strconv.Itoa(k.v), fmt.Sprintf("must be between 0 and %d seconds", MaxTTL))
			}
		}
	}
	return zones
}

// validateGSLBServices checks the [[gslb.service]]s: their names, and
// their keys as those of a name.
func (d *decoder) validateGSLBServices(ranks map[string]int) {
	svcs := d.cfg.GSLB.Services
	sraw, _ := tables(d.gslbRaw["service"])
	d.checkListNames("gslb.service", len(svcs), func(i int) string { return svcs[i].Name },
		func(i int) bool { return hasKey(elem(sraw, i), "name") })
	for i := range svcs {
		sv := &svcs[i]
		base := indexKey("gslb.service", i)
		praw, _ := tables(elem(sraw, i)["policy"])
		hasPool := func(j int) bool { return hasKey(elem(praw, j), "pool") }
		sv.StaticAddrs = d.validateAnswerKeys(base, hasPool, "[[gslb.service.policy]]", answerKeys{
			ttl: sv.TTL, lastResort: sv.LastResort, static: sv.Static, policies: sv.Policies}, ranks)
	}
}

// answerKeys are the keys a name and a service share: how the name
// answers.
type answerKeys struct {
	ttl        int
	lastResort string
	static     []string
	policies   []GSLBPolicy
}

// validateAnswerKeys checks the answer keys k of the name or service at
// base (hasPool says whether its policy j sets pool; table is the header
// of its policies) and returns its static addresses parsed.
func (d *decoder) validateAnswerKeys(base string, hasPool func(j int) bool, table string, k answerKeys, ranks map[string]int) []netip.Addr {
	g := &d.cfg.GSLB
	if k.ttl < 0 || k.ttl > MaxTTL {
		d.p.add(joinKey(base, "ttl"), strconv.Itoa(k.ttl), fmt.Sprintf("must be between 0 and %d seconds", MaxTTL))
	}
	lrs := []string{LastResortFailOpen, LastResortStatic, LastResortServfail}
	if !oneOf(k.lastResort, lrs) {
		d.p.add(joinKey(base, "last_resort"), k.lastResort, "unknown last resort (want one of "+listText(lrs)+")")
	}
	if k.lastResort == LastResortStatic && len(k.static) == 0 {
		d.p.add(joinKey(base, "static"), "", `missing: last_resort = "static" needs at least one address`)
	}
	var addrs []netip.Addr
	for j, s := range k.static {
		a, why := parseAddr(s)
		if why != "" {
			d.p.add(indexKey(joinKey(base, "static"), j), s, why)
			continue
		}
		if slices.Contains(addrs, a) {
			d.p.add(indexKey(joinKey(base, "static"), j), s, "listed twice")
			continue
		}
		addrs = append(addrs, a)
	}
	pkey := joinKey(base, "policy")
	if len(k.policies) == 0 {
		why := "missing: at least one " + table + " is required"
		if table == "[[gslb.name.policy]]" {
			why += " (or a service)"
		}
		d.p.add(pkey, "", why)
	}
	levels := d.selectionLevels()
	seen := map[string]int{}
	for j := range k.policies {
		p := &k.policies[j]
		pb := indexKey(pkey, j)
		if !hasPool(j) {
			d.p.add(joinKey(pb, "pool"), "", "missing required key")
		} else if d.cfg.GSLBPool(p.Pool) == nil {
			d.p.add(joinKey(pb, "pool"), p.Pool, "no [[gslb.pool]] of that name")
		}
		ok := true
		for _, l := range sortedKeys(p.Match) {
			switch {
			case !slices.Contains(levels, l):
				d.p.add(joinKey(joinKey(pb, "match"), l), p.Match[l], "unknown level (want one of "+listText(levels)+")")
				ok = false
			case p.Match[l] == "":
				d.p.add(joinKey(joinKey(pb, "match"), l), "", "must not be empty")
				ok = false
			}
		}
		if !ok {
			continue
		}
		pk := PolicyKey(p.Match)
		if _, ranked := ranks[pk]; !ranked {
			d.p.add(joinKey(pb, "match"), "", fmt.Sprintf("levels %q are not in gslb.policy_order (%s)", pk, listText(g.PolicyOrder)))
		}
		mk := matchText(p.Match)
		if o, dup := seen[mk]; dup {
			d.p.add(joinKey(pb, "match"), mk, fmt.Sprintf("the same match as %s: it would never answer", indexKey(pkey, o)))
		} else {
			seen[mk] = j
		}
	}
	return addrs
}

// serviceKeys are the keys of [[gslb.name]] that a name with a service
// takes from it, with what they set.
var serviceKeys = [...]struct{ key, what string }{
	{"ecs", "its ecs setting"}, {"last_resort", "its last resort"}, {"static", "its static set"}, {"policy", "its policies"},
}

// nameKeys maps every dynamic name to where it is defined: a
// [[gslb.name]] (svc -1, idx its index) or an entry of a service's names
// list (svc the service's index), for the messages that name it.
type nameKeys map[string]struct{ svc, idx int32 }

// has reports whether fq is a dynamic name.
func (nk nameKeys) has(fq string) bool { _, ok := nk[fq]; return ok }

// key is the key of dynamic name fq ("gslb.name[3]",
// "gslb.service[0].names[7]").
func (nk nameKeys) key(fq string) string {
	at := nk[fq]
	if at.svc < 0 {
		return indexKey("gslb.name", int(at.idx))
	}
	return indexKey(joinKey(indexKey("gslb.service", int(at.svc)), "names"), int(at.idx))
}

// validateGSLBName checks [[gslb.name]] i and records its name in names.
// A name with a service takes the service's answer
// keys (its ttl unless it sets its own).
func (d *decoder) validateGSLBName(i int, nm nameTable, zones map[string]bool, names nameKeys, ranks map[string]int) {
	g := &d.cfg.GSLB
	n := &g.Names[i]
	base := indexKey("gslb.name", i)
	if !nm.has("name") {
		d.p.add(joinKey(base, "name"), "", "missing required key")
	} else if fq, why := absName(n.Name, false); why != "" {
		d.p.add(joinKey(base, "name"), n.Name, why)
	} else if zoneOf(fq, zones) == "" {
		d.p.add(joinKey(base, "name"), n.Name, "not inside any [[gslb.zone]]")
	} else if names.has(fq) {
		d.p.add(joinKey(base, "name"), n.Name, fmt.Sprintf("duplicate name (also %s)", names.key(fq)))
	} else {
		n.FQDN = fq
		names[fq] = struct{ svc, idx int32 }{-1, int32(i)}
	}
	if !nm.has("service") {
		addrs := d.validateAnswerKeys(base, nm.hasPool, "[[gslb.name.policy]]", answerKeys{
			ttl: n.TTL, lastResort: n.LastResort, static: n.Static, policies: n.Policies}, ranks)
		n.StaticAddrs = d.intern.staticAddrs(n.Static, addrs)
		return
	}
	sv := d.cfg.Service(n.Service)
	if sv == nil {
		d.p.add(joinKey(base, "service"), n.Service, "no [[gslb.service]] of that name")
	}
	for _, k := range serviceKeys {
		if nm.has(k.key) {
			d.p.add(joinKey(base, k.key), "", fmt.Sprintf("not with service = %q: the name takes %s from the service (set it there, or leave service out)", n.Service, k.what))
		}
	}
	if n.TTL < 0 || n.TTL > MaxTTL {
		d.p.add(joinKey(base, "ttl"), strconv.Itoa(n.TTL), fmt.Sprintf("must be between 0 and %d seconds", MaxTTL))
	}
	if sv == nil {
		return
	}
	if !nm.has("ttl") {
		n.TTL = sv.TTL
	}
	n.ECS, n.LastResort, n.Static, n.StaticAddrs, n.Policies = sv.ECS, sv.LastResort, sv.Static, sv.StaticAddrs, nil
}

// expandServiceNames checks the listed names every service lists (names:
// the [[gslb.name]]s and the lists before) and appends each to
// GSLB.Names as a name with the service, its ttl and its keys.
func (d *decoder) expandServiceNames(zones map[string]bool, names nameKeys, listed int) {
	g := &d.cfg.GSLB
	g.Names = slices.Grow(g.Names, listed)
	for i := range g.Services {
		sv := &g.Services[i]
		base := joinKey(indexKey("gslb.service", i), "names")
		for j, nm := range sv.Names {
			fq, why := absName(nm, false)
			switch {
			case why != "":
				d.p.add(indexKey(base, j), nm, why)
				continue
			case zoneOf(fq, zones) == "":
				d.p.add(indexKey(base, j), nm, "not inside any [[gslb.zone]]")
				continue
			case names.has(fq):
				d.p.add(indexKey(base, j), nm, fmt.Sprintf("duplicate name (also %s)", names.key(fq)))
				continue
			}
			names[fq] = struct{ svc, idx int32 }{int32(i), int32(j)}
			g.Names = append(g.Names, GSLBName{Name: nm, Service: sv.Name, TTL: sv.TTL, ECS: sv.ECS, LastResort: sv.LastResort,
				Static: sv.Static, StaticAddrs: sv.StaticAddrs, FQDN: fq})
		}
	}
}

// matchText is a match as "level=value,..." in level order.
func matchText(m map[string]string) string {
	var parts []string
	for _, l := range sortedKeys(m) {
		parts = append(parts, l+"="+m[l])
	}
	return strings.Join(parts, ",")
}

// validateGSLBRecords checks the zones' static records against each other
// and the dynamic names.
func (d *decoder) validateGSLBRecords(names nameKeys) {
	g := &d.cfg.GSLB
	whoami := ""
	if w, why := absName(g.Whoami, false); why == "" && g.Whoami != "" {
		whoami = w
	}
	zraw, _ := tables(d.gslbRaw["zone"])
	types := map[string]map[string]string{} // owner → type → first key
	for i := range g.Zones {
		z := &g.Zones[i]
		if z.Apex == "" {
			continue
		}
		rraw, _ := tables(elem(zraw, i)["record"])
		for j := range z.Records {
			r := &z.Records[j]
			rb := indexKey(joinKey(indexKey("gslb.zone", i), "record"), j)
			rm := elem(rraw, j)
			for _, k := range []string{"name", "type", "value"} {
				if !hasKey(rm, k) {
					d.p.add(joinKey(rb, k), "", "missing required key")
				}
			}
			if !hasKey(rm, "name") || !hasKey(rm, "type") || !hasKey(rm, "value") {
				continue
			}
			owner, why := recordOwner(r.Name, z.Apex)
			if why != "" {
				d.p.add(joinKey(rb, "name"), r.Name, why)
				continue
			}
			r.Owner = owner
			r.Type = strings.ToUpper(r.Type)
			if !oneOf(r.Type, []string{"A", "AAAA", "CNAME", "TXT", "MX"}) {
				d.p.add(joinKey(rb, "type"), r.Type, "unknown record type (want one of A, AAAA, CNAME, TXT, MX)")
				continue
			}
			if why := recordValue(r.Type, r.Value); why != "" {
				d.p.add(joinKey(rb, "value"), r.Value, why)
				continue
			}
			if r.TTL < 0 || r.TTL > MaxTTL {
				d.p.add(joinKey(rb, "ttl"), strconv.Itoa(r.TTL), fmt.Sprintf("must be between 0 and %d seconds", MaxTTL))
			}
			switch {
			case owner == whoami:
				d.p.add(joinKey(rb, "name"), r.Name, "the whoami name has no static records")
				continue
			case r.Type == "CNAME" && owner == z.Apex:
				d.p.add(joinKey(rb, "type"), r.Type, "a CNAME cannot be at the zone's apex")
				continue
			case names.has(owner) && (r.Type == "A" || r.Type == "AAAA" || r.Type == "CNAME"):
				d.p.add(joinKey(rb, "type"), r.Type, fmt.Sprintf("the name is dynamic (%s): it answers A and AAAA itself", names.key(owner)))
				continue
			}
			have := types[owner]
			if have == nil {
				have = map[string]string{}
				types[owner] = have
			}
			if other, cname := have["CNAME"]; cname || (r.Type == "CNAME" && len(have) > 0) {
				if !cname {
					other = have[sortedKeys(have)[0]]
				}
				d.p.add(joinKey(rb, "type"), r.Type, fmt.Sprintf("a CNAME cannot share its name with other records (%s)", other))
				continue
			}
			if _, ok := have[r.Type]; !ok {
				have[r.Type] = rb
			}
		}
	}
}

// recordOwner is the owner of a record named name in zone apex.
func recordOwner(name, apex string) (string, string) {
	if name == "@" {
		return apex, ""
	}
	if dns.IsFqdn(name) {
		o, why := absName(name, true)
		if why != "" {
			return "", why
		}
		if !dns.IsSubDomain(apex, o) {
			return "", "not inside the zone " + apex
		}
		return o, ""
	}
	if _, why := absName(name, false); why != "" {
		return "", why
	}
	if apex == "." {
		return dns.CanonicalName(name), ""
	}
	return dns.CanonicalName(name + "." + apex), ""
}

// recordValue says why value is not valid data for a record of type typ.
func recordValue(typ, value string) string {
	switch typ {
	case "A", "AAAA":
		a, why := parseAddr(value)
		if why != "" {
			return why
		}
		if typ == "A" && !a.Is4() {
			return "not an IPv4 address"
		}
		if typ == "AAAA" && !a.Is6() {
			return "not an IPv6 address"
		}
	case "CNAME":
		_, why := absName(value, true)
		return why
	case "TXT":
		if value == "" {
			return "must not be empty"
		}
	case "MX":
		pref, host, ok := strings.Cut(strings.TrimSpace(value), " ")
		n, err := strconv.Atoi(pref)
		if !ok || err != nil || n < 0 || n > 65535 {
			return `not "PREFERENCE HOST" (a number 0..65535, a space, a fully qualified host)`
		}
		if _, why := absName(strings.TrimSpace(host), true); why != "" {
			return "host " + why
		}
	}
	return ""
}
