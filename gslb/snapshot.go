package gslb

import (
	"cmp"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/intent"
)

// Last resorts as Trace.LastResort and NameStatus.LastResort say them.
const (
	TraceFailOpen = "fail-open"
	TraceStatic   = "static"
	TraceServfail = "servfail"
)

// Snapshot is the responder's data at one moment: the zones, their static
// records, the dynamic names with their policies and the pools' members
// as they were when it was built. It implements Answerer. It is immutable
// (but for the rotation counters of the pools) and safe for concurrent
// use; build a new one when the configuration or a member's state
// changes.
type Snapshot struct {
	serial uint32
	loc    Locator
	labels labeler // loc, when it can tell labels alone
	// rotations is the number of pool rotation counters (Rotations).
	rotations int
	max       int
	zones     map[string]*zone
	zoneAt    []*zone // the zones by zone.idx
	nodes     map[string]*node
	status    []NameStatus
	off       []NameEmergency
}

// zone is one served zone.
type zone struct {
	apex string
	idx  int      // its index in Snapshot.zoneAt
	soa  []dns.RR // the SOA, as answered
	neg  []dns.RR // the SOA for negative answers (TTL min(minimum, TTL))
}

// node is one owner name of a zone: its static records, its dynamic
// name, or the whoami name; an empty non-terminal has none.
type node struct {
	// name is the node's name, lower-cased and fully qualified (its key
	// in Snapshot.nodes: Entry.Name gives it without building one).
	name   string
	rrsets map[uint16][]dns.RR
	dyn    *name
	whoami bool
	// zone is the index in Snapshot.zoneAt, plus one, of the most
	// specific zone holding the node's name (zoneOf; 0: none): a
	// question for a known name takes one map lookup.
	zone int
}

// name is one dynamic name, precomputed for answering: what is its own
// (its owner, TTL, intent, the turn of its last resort) and the compiled
// answer set it shares with every name of the same policies.
type name struct {
	fqdn string
	ttl  uint32
	*answerSet
	// counter turns the name's last resort and emergency set, per
	// family (0: A, 1: AAAA).
	counter [2]atomic.Uint64
	// off is set when an emergency switch is in force for the name: it
	// answers fam's emergency set, with no policy or topology work.
	off bool
	// raised is set when a TTL raise applies to the name.
	raised bool
}

// answerSet is how names answer whatever their owner and TTL: the
// policies with their pools and fallback chains, the ECS setting, the
// last resort, the static and fail-open sets, compiled once per
// [[gslb.service]] and once per distinct set of a name's own keys, and
// shared by every name that has them. Its records carry no owner and no
// TTL (Records.fill gives them the name's).
type answerSet struct {
	ecs        bool
	located    bool // some policy matches on the location
	lastResort string
	policies   []*policy // most specific first
	// unlocated is the index in policies of the first policy without a
	// match (len(policies) when none): where an answer for a client
	// without location labels starts, since no policy with a match can
	// match it; locatedBefore says whether a policy with a match comes
	// before it (the answer then depends on the location).
	unlocated     int
	locatedBefore bool
	fam           [2]nameFam
}

// nameFam is what an answer set answers for one address family (0: A,
// 1: AAAA).
type nameFam struct {
	any      bool // a member or static address of the family exists
	warming  bool // a member of the family is still without a verdict
	up       bool // a pool of some policy has a member of the family up (anyUp)
	failOpen ring // every member of the set's pools
	static   ring // the set's static set
	// emergency is what the name answers with intelligent resolution
	// off: its static set of the family, or, without one, every member
	// of its pools of the family, whatever their health.
	emergency ring
}

// policy is one policy of a name with its pool and fallback chain.
type policy struct {
	match map[string]string
	pairs [][2]string // match as (level, value), by level
	// label names the policy in Response.Policy: its pairs as
	// "level=value+level=value", "global" for an empty match.
	label string
	chain [2][]*famPool
}

// NameStatus says how a name answers an address family in this snapshot
// when no policy can answer from its own members: what the daemon logs
// and counts loudly.
type NameStatus struct {
	// Name is the name's FQDN; Type dns.TypeA or dns.TypeAAAA.
	Name string
	Type uint16
	// LastResort is the last resort every answer takes ("fail-open",
	// "static" or "servfail"); Warming is set when members are still
	// without a verdict.
	LastResort string
	Warming    bool
}

// Option is an option of NewSnapshot.
type Option func(*options)

type options struct{ intent intent.State }

// WithIntent makes the snapshot answer under the operator intent st: a
// name under an emergency switch (st.EmergencyFor) answers its emergency
// set with ECS scope 0 and no policy or topology work, and a name under a
// TTL raise (st.TTLFor) answers with at least the raise's TTL (a raise
// never lowers a TTL). The switch flips with the snapshot: every answer
// comes whole from one snapshot.
func WithIntent(st intent.State) Option { return func(o *options) { o.intent = st } }

// NameEmergency is one name of a snapshot under operator intent.
type NameEmergency struct {
	// Name is the name's FQDN.
	Name string
	// Off is set when intelligent resolution is off for it; Raised when
	// a TTL raise applies to it; TTL is its answers' TTL (raised or not).
	Off, Raised bool
	TTL         uint32
}

// NewSnapshot builds the snapshot of cfg's zones and names (cfg validated
// by configs.Load) with the members' states pools (from Evaluate; a
// member missing from it is unknown), locating clients with loc (nil: no
// location, only global policies match) and answering serial in every
// zone's SOA. The names of a big configuration are built by as many
// goroutines as GOMAXPROCS, each a share of them.
func NewSnapshot(cfg *configs.Config, pools []PoolState, loc Locator, serial uint32, opts ...Option) *Snapshot {
	parts := 1
	if len(cfg.GSLB.Names) >= parallelNames {
		parts = runtime.GOMAXPROCS(0)
	}
	return newSnapshot(cfg, pools, loc, serial, parts, opts...)
}

// parallelNames is the number of names from which NewSnapshot builds them
// in parallel.
const parallelNames = 1000

// newSnapshot is NewSnapshot with the names built by parts goroutines.
func newSnapshot(cfg *configs.Config, pools []PoolState, loc Locator, serial uint32, parts int, opts ...Option) *Snapshot {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	g := &cfg.GSLB
	owners := len(g.Names) + 1
	for i := range g.Zones {
		owners += 1 + len(g.Zones[i].Records)
	}
	s := &Snapshot{serial: serial, loc: loc, max: g.MaxRecords, zones: map[string]*zone{}, nodes: make(map[string]*node, owners)}
	if s.max < 1 {
		s.max = configs.DefaultMaxRecords
	}
	if s.loc == nil {
		s.loc = noLocator{}
	}
	s.labels, _ = s.loc.(labeler)
	for i := range g.Zones {
		s.addZone(&g.Zones[i])
	}
	states := map[string]*PoolState{}
	for i := range pools {
		states[pools[i].Name] = &pools[i]
	}
	s.rotations = len(g.Pools)
	// Every pool once, for every set that answers from it: its members'
	// records carry no owner, so one famPool serves every name.
	famPools := make([][2]*famPool, len(g.Pools))
	poolIdx := make(map[string]int, len(g.Pools))
	for i := range g.Pools {
		if _, dup := poolIdx[g.Pools[i].Name]; !dup {
			poolIdx[g.Pools[i].Name] = i
		}
	}
	inParts(len(g.Pools), parts, func(lo, hi int) {
		var rrs rrArena
		for i := lo; i < hi; i++ {
			famPools[i] = newPoolFams(&g.Pools[i], states[g.Pools[i].Name], rotor{new(atomic.Uint64), i}, &rrs)
		}
	})
	ranks := g.PolicyRanks()
	// The answer sets: one per service, one per distinct set of a name's
	// own keys; each built once (in shares by goroutines), then the
	// names, in configuration order, point at theirs.
	setOf := make([]int, len(g.Names))
	var firsts []int // the first name of each set
	keys := map[string]int{}
	var kb []byte
	for i := range g.Names {
		kb = setKey(kb[:0], cfg, &g.Names[i])
		k, ok := keys[string(kb)]
		if !ok {
			k = len(firsts)
			keys[string(kb)] = k
			firsts = append(firsts, i)
		}
		setOf[i] = k
	}
	sets := make([]*answerSet, len(firsts))
	inParts(len(sets), parts, func(lo, hi int) {
		var rrs rrArena
		for k := lo; k < hi; k++ {
			sets[k] = newAnswerSet(cfg, &g.Names[firsts[k]], famPools, poolIdx, ranks, &rrs)
		}
	})
	names := make([]name, len(g.Names)) // one array: a name is a few words
	degraded := 0                       // s.status made at its size: every name is there while its members warm up
	for i := range g.Names {
		for f := range sets[setOf[i]].fam {
			if nf := &sets[setOf[i]].fam[f]; nf.any && !nf.up {
				degraded++
			}
		}
	}
	if degraded > 0 {
		s.status = make([]NameStatus, 0, degraded)
	}
	for i := range g.Names {
		n := &names[i]
		initName(n, &g.Names[i], sets[setOf[i]], s.zoneOf, o.intent)
		if n.off || n.raised {
			s.off = append(s.off, NameEmergency{Name: n.fqdn, Off: n.off, Raised: n.raised, TTL: n.ttl})
		}
		s.node(n.fqdn).dyn = n
		for f, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
			nf := &n.fam[f]
			if nf.any && !nf.up {
				s.status = append(s.status, NameStatus{Name: n.fqdn, Type: t, LastResort: traceLastResort(n.lastResort), Warming: nf.warming})
			}
		}
	}
	if w := g.WhoamiFQDN(); w != "" {
		s.node(w).whoami = true
	}
	// Empty non-terminals: every ancestor of a node up to its zone.
	for owner := range s.nodes {
		for off, end := dns.NextLabel(owner, 0); !end; off, end = dns.NextLabel(owner, off) {
			if s.zones[owner[off:]] != nil {
				break
			}
			if s.nodes[owner[off:]] == nil {
				s.nodes[owner[off:]] = &node{name: owner[off:]}
			}
		}
	}
	for owner, n := range s.nodes {
		if z := s.zoneOf(owner); z != nil {
			n.zone = z.idx + 1
		}
	}
	return s
}

// Rotations is the number of rotation counters a Query.Rotation must
// have to be used: one per pool.
func (s *Snapshot) Rotations() int { return s.rotations }

// Locate is the location of addr in the snapshot's topology: what
// its answers are chosen for (the JSON API says it beside them).
func (s *Snapshot) Locate(addr netip.Addr) Location { return s.loc.Locate(addr) }

// labeler is a Locator that also tells an address's labels alone
// (Locate's Labels), without the work of their scope: an answer without
// ECS carries no scope.
type labeler interface {
	Labels(addr netip.Addr) map[string]string
}

// noLocator locates nothing.
type noLocator struct{}

func (noLocator) Locate(netip.Addr) Location { return Location{} }

// Serial is the SOA serial of every zone of the snapshot.
func (s *Snapshot) Serial() uint32 { return s.serial }

// WithSerial returns a snapshot that answers as s does but with serial
// in every zone's SOA: s itself when that is its serial already, else a
// copy that shares s's names, pools and records but the zones' SOAs (a
// few allocations per zone, against a whole build). The responder builds
// a reload's snapshot before the reload is applied, when its serial is
// not known yet.
func (s *Snapshot) WithSerial(serial uint32) *Snapshot {
	if serial == s.serial {
		return s
	}
	c := *s
	c.serial = serial
	c.zones = make(map[string]*zone, len(s.zones))
	c.zoneAt = make([]*zone, len(s.zoneAt))
	c.nodes = maps.Clone(s.nodes)
	for apex, z := range s.zones {
		soa := *z.soa[0].(*dns.SOA)
		soa.Serial = serial
		neg := *z.neg[0].(*dns.SOA)
		neg.Serial = serial
		c.zones[apex] = &zone{apex: z.apex, idx: z.idx, soa: []dns.RR{&soa}, neg: []dns.RR{&neg}}
		c.zoneAt[z.idx] = c.zones[apex]
		n := *s.nodes[apex] // every zone has its apex node (its SOA)
		n.rrsets = maps.Clone(n.rrsets)
		n.rrsets[dns.TypeSOA] = []dns.RR{&soa}
		c.nodes[apex] = &n
	}
	return &c
}

// Zones returns the apexes of the zones served, sorted.
func (s *Snapshot) Zones() []string {
	out := make([]string, 0, len(s.zones))
	for apex := range s.zones {
		out = append(out, apex)
	}
	slices.Sort(out)
	return out
}

// Emergencies lists the names under an emergency switch or a TTL raise
// in this snapshot, in configuration order.
func (s *Snapshot) Emergencies() []NameEmergency { return slices.Clone(s.off) }

// Degraded lists the names and families that answer only by their last
// resort in this snapshot: no pool of any of their policies has a member
// up.
func (s *Snapshot) Degraded() []NameStatus { return slices.Clone(s.status) }

// node returns the node of owner, made when missing.
func (s *Snapshot) node(owner string) *node {
	n := s.nodes[owner]
	if n == nil {
		n = &node{name: owner}
		s.nodes[owner] = n
	}
	return n
}

// addRR adds rr to its owner's node.
func (s *Snapshot) addRR(rr dns.RR) {
	n := s.node(rr.Header().Name)
	if n.rrsets == nil {
		n.rrsets = map[uint16][]dns.RR{}
	}
	t := rr.Header().Rrtype
	n.rrsets[t] = append(n.rrsets[t], rr)
}

// addZone adds zone z with its SOA, NS and static records.
func (s *Snapshot) addZone(z *configs.GSLBZone) {
	apex := z.Apex
	if apex == "" {
		apex = dns.CanonicalName(z.Name)
	}
	ttl := uint32(z.TTL)
	soa := &dns.SOA{Hdr: hdr(apex, dns.TypeSOA, ttl), Ns: firstNS(z.NS, apex), Mbox: dns.CanonicalName(z.Mbox),
		Serial: s.serial, Refresh: uint32(z.Refresh), Retry: uint32(z.Retry), Expire: uint32(z.Expire), Minttl: uint32(z.Minimum)}
	neg := *soa
	neg.Hdr.Ttl = min(uint32(z.Minimum), ttl)
	zn := &zone{apex: apex, idx: len(s.zoneAt), soa: []dns.RR{soa}, neg: []dns.RR{&neg}}
	s.zones[apex] = zn
	s.zoneAt = append(s.zoneAt, zn)
	s.addRR(soa)
	for _, ns := range z.NS {
		s.addRR(&dns.NS{Hdr: hdr(apex, dns.TypeNS, ttl), Ns: dns.CanonicalName(ns)})
	}
	for i := range z.Records {
		if rr := staticRR(&z.Records[i], apex); rr != nil {
			s.addRR(rr)
		}
	}
}

// firstNS is the SOA MNAME: the zone's first name server.
func firstNS(ns []string, apex string) string {
	if len(ns) == 0 {
		return apex
	}
	return dns.CanonicalName(ns[0])
}

// hdr is a record header of class IN.
func hdr(owner string, t uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: owner, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}

// staticRR is the record of r in the zone apex (nil when it is not valid:
// configs.Load rejects it).
func staticRR(r *configs.GSLBRecord, apex string) dns.RR {
	owner := r.Owner
	if owner == "" {
		owner = apex
		if r.Name != "@" {
			owner = dns.CanonicalName(r.Name + "." + apex)
		}
	}
	ttl := uint32(r.TTL)
	switch strings.ToUpper(r.Type) {
	case "A":
		a, err := netip.ParseAddr(r.Value)
		if err != nil || !a.Is4() {
			return nil
		}
		return &dns.A{Hdr: hdr(owner, dns.TypeA, ttl), A: a.AsSlice()}
	case "AAAA":
		a, err := netip.ParseAddr(r.Value)
		if err != nil || !a.Is6() {
			return nil
		}
		return &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, ttl), AAAA: a.AsSlice()}
	case "CNAME":
		return &dns.CNAME{Hdr: hdr(owner, dns.TypeCNAME, ttl), Target: dns.CanonicalName(r.Value)}
	case "TXT":
		return &dns.TXT{Hdr: hdr(owner, dns.TypeTXT, ttl), Txt: chunks(r.Value)}
	case "MX":
		pref, host, _ := strings.Cut(strings.TrimSpace(r.Value), " ")
		p, err := strconv.Atoi(pref)
		if err != nil {
			return nil
		}
		return &dns.MX{Hdr: hdr(owner, dns.TypeMX, ttl), Preference: uint16(p), Mx: dns.CanonicalName(strings.TrimSpace(host))}
	}
	return nil
}

// chunks splits a TXT value into character-strings of at most 255 bytes.
func chunks(s string) []string {
	var out []string
	for len(s) > 255 {
		out = append(out, s[:255])
		s = s[255:]
	}
	return append(out, s)
}

// addrRR is the A or AAAA record of a for owner.
func addrRR(owner string, a netip.Addr, ttl uint32) dns.RR {
	if a.Is4() {
		return &dns.A{Hdr: hdr(owner, dns.TypeA, ttl), A: a.AsSlice()}
	}
	return &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, ttl), AAAA: a.AsSlice()}
}

// rrArena hands out the members' address records of a snapshot from
// arrays of many records each, rather than two allocations per record
// (a reload of 10,000 names of 2 pools of 5 members builds 100,000).
// The records, as every record of a snapshot, are never modified.
type rrArena struct {
	a    []dns.A
	aaaa []dns.AAAA
	ip   []byte
}

// arenaChunk is the number of records or address bytes per array.
const arenaChunk = 1024

// rr returns the A or AAAA record of owner for a, as addrRR does.
func (ar *rrArena) rr(owner string, a netip.Addr, ttl uint32) dns.RR {
	if a.Is4() {
		if len(ar.a) == cap(ar.a) {
			ar.a = make([]dns.A, 0, arenaChunk) // a new array: the records given out stay
		}
		ar.a = append(ar.a, dns.A{Hdr: hdr(owner, dns.TypeA, ttl), A: ar.bytes(a)})
		return &ar.a[len(ar.a)-1]
	}
	if len(ar.aaaa) == cap(ar.aaaa) {
		ar.aaaa = make([]dns.AAAA, 0, arenaChunk)
	}
	ar.aaaa = append(ar.aaaa, dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, ttl), AAAA: ar.bytes(a)})
	return &ar.aaaa[len(ar.aaaa)-1]
}

// bytes returns a's bytes (4 or 16), capped so that an append copies.
func (ar *rrArena) bytes(a netip.Addr) []byte {
	n := a.BitLen() / 8
	if cap(ar.ip)-len(ar.ip) < n {
		ar.ip = make([]byte, 0, arenaChunk)
	}
	i := len(ar.ip)
	if a.Is4() {
		b := a.As4()
		ar.ip = append(ar.ip, b[:]...)
	} else {
		b := a.As16()
		ar.ip = append(ar.ip, b[:]...)
	}
	return ar.ip[i : i+n : i+n]
}

// famOf is the family index of an address: 0 for IPv4, 1 for IPv6.
func famOf(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// inParts runs fn over [0, n) in shares, by parts goroutines at most.
func inParts(n, parts int, fn func(lo, hi int)) {
	parts = max(1, min(parts, n))
	if parts == 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := range parts {
		lo, hi := k*n/parts, (k+1)*n/parts
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// newPoolFams precomputes pool p per family with its members' states ps
// (nil: every member unknown); rrs makes the members' records.
func newPoolFams(p *configs.GSLBPool, ps *PoolState, rot rotor, rrs *rrArena) [2]*famPool {
	var ms [2][]member
	for j := range p.Members {
		cm := &p.Members[j]
		m := member{name: cm.Name, addr: cm.Addr, weight: cm.Weight, priority: cm.Priority, key: stringKey(cm.Name)}
		if ps != nil && j < len(ps.Members) && ps.Members[j].Name == cm.Name {
			st := ps.Members[j]
			m.addr, m.weight, m.priority, m.state = st.Addr, st.Weight, st.Priority, st.State
		}
		if !m.addr.IsValid() {
			continue
		}
		m.rr = rrs.rr("", m.addr, 0)
		f := famOf(m.addr)
		if ms[f] == nil {
			ms[f] = make([]member, 0, len(p.Members))
		}
		ms[f] = append(ms[f], m)
	}
	return [2]*famPool{newFamPool(p, rot, ms[0]), newFamPool(p, rot, ms[1])}
}

// setKey appends to b the key of name n's answer set: its service, or
// its own answer keys (names with the same keys share one set).
func setKey(b []byte, cfg *configs.Config, n *configs.GSLBName) []byte {
	if n.Service != "" {
		return append(append(b, "service\x00"...), n.Service...)
	}
	b = append(b, "name\x00"...)
	b = strconv.AppendBool(b, n.ECS)
	b = append(append(b, 0), n.LastResort...)
	for _, a := range staticAddrs(n) {
		b = a.AppendTo(append(b, 0))
	}
	for i := range n.Policies {
		p := &n.Policies[i]
		b = append(b, 1)
		for _, l := range sortedLevels(p.Match) {
			b = append(append(append(append(b, l...), '='), p.Match[l]...), ',')
		}
		b = append(append(b, 2), p.Pool...)
	}
	return b
}

// sortedLevels are the levels of a match, sorted.
func sortedLevels(m map[string]string) []string {
	ls := make([]string, 0, len(m))
	for l := range m {
		ls = append(ls, l)
	}
	slices.Sort(ls)
	return ls
}

// staticAddrs are n's static addresses (parsed by configs.Load; parsed
// here for a Config built by hand).
func staticAddrs(n *configs.GSLBName) []netip.Addr {
	if n.StaticAddrs != nil {
		return n.StaticAddrs
	}
	var addrs []netip.Addr
	for _, s := range n.Static {
		if a, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// initName sets up n, the name cn answering from set, under the
// operator intent st (zoneOf finds its zone).
func initName(n *name, cn *configs.GSLBName, set *answerSet, zoneOf func(string) *zone, st intent.State) {
	fqdn := cn.FQDN
	if fqdn == "" {
		fqdn = dns.CanonicalName(cn.Name)
	}
	n.fqdn, n.ttl, n.answerSet = fqdn, uint32(cn.TTL), set
	if z := zoneOf(fqdn); z != nil {
		n.off = st.EmergencyFor(z.apex, fqdn) != nil
		if r := st.TTLFor(z.apex, fqdn); r != nil {
			n.ttl, n.raised = max(n.ttl, uint32(r.Seconds)), true
		}
	}
}

// newAnswerSet compiles the answer set of name n (its service's, or its
// own keys) over the snapshot's pools (famPools, by poolIdx); rrs makes
// its static records.
func newAnswerSet(cfg *configs.Config, n *configs.GSLBName, famPools [][2]*famPool, poolIdx map[string]int, ranks map[string]int, rrs *rrArena) *answerSet {
	set := &answerSet{ecs: n.ECS, lastResort: n.LastResort}
	var failOpen [2][]dns.RR
	seen := map[netip.Addr]bool{}
	used := map[int]bool{}
	poolOf := func(pname string) (*[2]*famPool, *configs.GSLBPool) {
		i, ok := poolIdx[pname]
		if !ok {
			return nil, nil
		}
		fps := &famPools[i]
		if !used[i] {
			used[i] = true
			for f, fp := range fps {
				for _, m := range fp.members {
					if !seen[m.addr] {
						seen[m.addr] = true
						failOpen[f] = append(failOpen[f], m.rr)
					}
					set.fam[f].any = true
					if m.state == health.Unknown {
						set.fam[f].warming = true
					}
				}
			}
		}
		return fps, &cfg.GSLB.Pools[i]
	}
	pols := cfg.NamePolicies(n)
	for i := range pols {
		cp := &pols[i]
		pol := &policy{match: cp.Match}
		for l, v := range cp.Match {
			pol.pairs = append(pol.pairs, [2]string{l, v})
		}
		slices.SortFunc(pol.pairs, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
		pol.label = policyLabel(pol.pairs)
		if len(cp.Match) > 0 {
			set.located = true
		}
		visited := map[string]bool{}
		for pname := cp.Pool; pname != "" && !visited[pname]; {
			visited[pname] = true
			fps, cp := poolOf(pname)
			if fps == nil {
				break
			}
			pol.chain[0] = append(pol.chain[0], fps[0])
			pol.chain[1] = append(pol.chain[1], fps[1])
			pname = cp.Fallback
		}
		set.policies = append(set.policies, pol)
	}
	// Most specific first by policy_order; configuration order within a
	// rank (validation forbids equal matches).
	slices.SortStableFunc(set.policies, func(a, b *policy) int {
		return cmp.Compare(rank(ranks, a.match), rank(ranks, b.match))
	})
	set.unlocated = len(set.policies)
	for i, p := range set.policies {
		if len(p.match) == 0 {
			set.unlocated = i
			break
		}
		set.locatedBefore = true
	}
	var static [2][]dns.RR
	for _, a := range staticAddrs(n) {
		f := famOf(a)
		static[f] = append(static[f], rrs.rr("", a, 0))
	}
	for f := range set.fam {
		nf := &set.fam[f]
		nf.failOpen = newRing(failOpen[f])
		nf.static = newRing(static[f])
		nf.emergency = nf.static
		if len(static[f]) == 0 {
			nf.emergency = nf.failOpen
		}
		if set.lastResort == configs.LastResortStatic && len(static[f]) > 0 {
			nf.any = true
		}
		nf.up = set.anyUp(f)
	}
	return set
}

// rank is the policy_order rank of a match (unranked last).
func rank(ranks map[string]int, match map[string]string) int {
	if r, ok := ranks[configs.PolicyKey(match)]; ok {
		return r
	}
	return len(ranks)
}

// anyUp reports whether some pool of some policy of set has a member of
// family f up.
func (set *answerSet) anyUp(f int) bool {
	for _, p := range set.policies {
		for _, fp := range p.chain[f] {
			if len(fp.up) > 0 {
				return true
			}
		}
	}
	return false
}

// traceLastResort is the Trace spelling of a configured last resort.
func traceLastResort(lr string) string {
	switch lr {
	case configs.LastResortStatic:
		return TraceStatic
	case configs.LastResortServfail:
		return TraceServfail
	}
	return TraceFailOpen
}

// matches reports whether labels satisfy the policy's match.
func (p *policy) matches(labels map[string]string) bool {
	for _, lv := range p.pairs {
		if labels[lv[0]] != lv[1] {
			return false
		}
	}
	return true
}

// policyLabel is the Response.Policy of a policy whose match is pairs
// (sorted by level).
func policyLabel(pairs [][2]string) string {
	if len(pairs) == 0 {
		return configs.PolicyGlobal
	}
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p[0] + "=" + p[1]
	}
	return strings.Join(parts, "+")
}
