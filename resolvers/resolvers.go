// Package resolvers turns health facts about back-end recursive resolvers and
// operator intent into the desired IPVS table, per pool and per VIP.
//
// It is pure. Compute is a function of the configuration, the facts, the
// overrides and the memory it is given, and of the time passed in; a
// Planner runs it over time: it keeps the memory between plans, holds the
// table back during the warm-up, reports verdict changes, and tells when
// a new round would change nothing. The rules, in order:
//
//   - A member disabled by an operator never gets traffic.
//   - A member is healthy when its check's state is up and the fact is
//     fresh. Healthy members get their configured weight; a drained one
//     keeps its destination at weight 0 so that existing flows finish.
//   - When fewer than min_healthy members are healthy and the pool fails
//     open (the default), the pool keeps its last good set in traffic: the
//     members that were healthy in the last plan before it began failing
//     open, that is, in traffic just before the collapse, and with them the
//     members that failed within the pool's collapse window (configs:
//     pool.collapse_window) before it fell below its minimum: members
//     killed together are detected a probe or two apart, and the first
//     ones out must not leave the whole load to the last survivor. When a
//     whole pool fails, the check or the upstream is the likelier culprit,
//     and removing every resolver would turn a partial outage into a total
//     one; but a member that was already down before the collapse (before
//     its window) is broken for reasons of its own and stays out. Only
//     with no last good set (a cold start, a reload that changed the
//     pool's members or check, or a set whose members are all disabled)
//     does the pool keep every enabled member. A pool failing open keeps
//     failing open until recover_healthy members are healthy again
//     (hysteresis), so that the first resolver to recover does not take
//     all the traffic alone; members that recover meanwhile get traffic at
//     once. When the pool does not fail open, only
//     the healthy members remain, possibly none.
//   - Every member's verdict says why it is in or out (Member.Why), and
//     Plan.Dest finds the member behind any destination of a service.
//   - The diagnosis tells a single broken box, a vendor-wide failure (all
//     members of one vendor down while another vendor is up) and a broken
//     upstream (members of at least two vendors all down, having gone down
//     within one detection window of each other) apart.
package resolvers

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/vip"
)

// Override is an operator's intent for one resolver.
type Override uint8

// Overrides an operator can set.
const (
	// None leaves the resolver under health-driven control.
	None Override = iota
	// Drain keeps the destination with weight 0: existing flows finish,
	// no new ones are scheduled.
	Drain
	// Disable removes the destination.
	Disable
)

// String returns "none", "drain" or "disable".
func (o Override) String() string {
	switch o {
	case None:
		return "none"
	case Drain:
		return "drain"
	case Disable:
		return "disable"
	}
	return fmt.Sprintf("override(%d)", uint8(o))
}

// Rule is one operator override: Override applies to Resolver in every
// pool and VIP it serves, or only in Pool, or only in the services of VIP.
// Where several rules match, the strongest wins (disable over drain): an
// override can only take traffic away, never add a failing resolver.
type Rule struct {
	Resolver string
	// Pool, when set, limits the rule to that pool.
	Pool string
	// VIP, when set, limits the rule to that VIP's services; the pool's
	// health counts are not affected.
	VIP      string
	Override Override
}

// Applies reports whether r covers resolver in pool (and, when vip is not
// empty, in that VIP's services).
func (r Rule) Applies(resolver, pool, vip string) bool {
	return r.Resolver == resolver && (r.Pool == "" || r.Pool == pool) && (r.VIP == "" || r.VIP == vip)
}

// strongest returns the strongest override among the rules that cover
// resolver in pool: with vip empty, among the pool-wide rules (no VIP);
// otherwise among the rules scoped to vip only (the pool-wide ones are
// already in the member's verdict).
func strongest(rules []Rule, resolver, pool, vip string) Override {
	o := None
	for _, r := range rules {
		if r.VIP == vip && r.Applies(resolver, pool, vip) && r.Override > o {
			o = r.Override
		}
	}
	return o
}

// Fact is what the health checks know about one resolver under one check.
type Fact struct {
	State health.State
	// Since is when State was entered.
	Since time.Time
	// Fresh is false when the last probe result is too old to trust.
	Fresh bool
	// Reason is the detail of the last probe result that changed State.
	Reason string
	// Failing is true when the latest probe failed, even if the failures
	// have not yet reached the fall threshold, or when the probe in flight
	// has waited for more than half its timeout.
	Failing bool
}

// TargetKey names the health target of one resolver checked by one check
// profile: the facts are keyed by it.
type TargetKey struct {
	Resolver string
	Check    string
}

// String returns "resolver/check".
func (k TargetKey) String() string { return k.Resolver + "/" + k.Check }

// Input is everything Compute needs.
type Input struct {
	Config *configs.Config
	// Facts by target. A missing fact is treated as unknown.
	Facts map[TargetKey]Fact
	// Overrides are the operator's rules; a resolver no rule covers is
	// under health-driven control.
	Overrides []Rule
	// Now is the time of the plan.
	Now time.Time
	// Memory is what the plans before this one left about each pool, by
	// pool name (nil at a cold start): see Memory. A Planner keeps it.
	Memory map[string]Memory
}

// Memory is what one plan leaves for the next about one pool.
type Memory struct {
	// FailOpen is true when the pool was failing open: it keeps failing
	// open until recover_healthy members are healthy (hysteresis).
	FailOpen bool
	// LastGood names the members that were healthy in the last plan
	// before the pool began failing open, in the pool's member order: the
	// members in traffic just before the collapse (unless an operator
	// kept them out). While the pool fails open, it is the set held: with
	// the members that failed within the collapse window before it began
	// failing open (see Left). Nil when no such plan is known: at a cold
	// start, or after a reload that changed the pool's members or check. A
	// pool failing open holds these members in traffic and keeps the
	// others out; with no last good set (or none of it enabled) it keeps
	// every enabled member.
	LastGood []string
	// Left are the members that were in a last good set and left it
	// (failing their check) while the pool did not fail open, with when
	// they failed: when the pool then begins failing open, those that
	// failed within the pool's collapse window before it are held with
	// the last good set. A member leaves Left when it is healthy again.
	Left []Departure
}

// Departure is a member that left its pool's last good set, and when:
// the time its check went down (the time of the plan that saw it fail
// when that is not known).
type Departure struct {
	Name string
	At   time.Time
}

// Diagnosis is the verdict on one pool.
type Diagnosis uint8

// Diagnoses, from best to worst.
const (
	// Healthy: every enabled member is healthy.
	Healthy Diagnosis = iota
	// Degraded: some members are down, at least min_healthy are up.
	Degraded
	// VendorWide: every member of at least one vendor (with two or more
	// members in the pool) is down while another vendor is up.
	VendorWide
	// BelowMinimum: fewer than min_healthy members are healthy and the
	// cause is not known to be upstream.
	BelowMinimum
	// Upstream: members of at least two vendors all went down within one
	// detection window: the upstream (or the check) is the likely cause.
	Upstream
	// NoFacts: no member has a health verdict yet (start-up).
	NoFacts
)

// String returns the diagnosis in lower case with dashes.
func (d Diagnosis) String() string {
	switch d {
	case Healthy:
		return "healthy"
	case Degraded:
		return "degraded"
	case VendorWide:
		return "vendor-wide-failure"
	case BelowMinimum:
		return "below-minimum"
	case Upstream:
		return "upstream-failure"
	case NoFacts:
		return "no-facts"
	}
	return fmt.Sprintf("diagnosis(%d)", uint8(d))
}

// VendorCount counts members of one vendor in a pool.
type VendorCount struct {
	Total   int
	Healthy int
}

// Member is the verdict on one pool member.
type Member struct {
	Name     string
	Vendor   string
	Addr     netip.AddrPort
	State    health.State
	Fresh    bool
	Failing  bool
	Since    time.Time
	Reason   string
	Override Override
	// InTraffic is true when the member has a destination in the table.
	InTraffic bool
	// Weight is its IPVS weight when InTraffic.
	Weight uint32
	// Why says why the member is in or out of traffic, at the pool's
	// level: a rule scoped to one VIP may still drain or remove its
	// destinations in that VIP's services (the Table has the result).
	Why Why
}

// WhyCode is the fixed reason a member is in or out of traffic.
type WhyCode uint8

// Reasons a member is in or out of traffic.
const (
	// WhyHealthy: in, with its weight; its check is up and fresh.
	WhyHealthy WhyCode = iota
	// WhyNoVerdict: out; its check has no verdict yet.
	WhyNoVerdict
	// WhyDown: out; its check is down.
	WhyDown
	// WhyStale: out; its facts are too old to trust.
	WhyStale
	// WhyDrained: in at weight 0, drained by an operator (healthy, or
	// held by fail-open); a drained member its health keeps out has the
	// health reason instead.
	WhyDrained
	// WhyDisabled: out, disabled by an operator.
	WhyDisabled
	// WhyHeldFailOpen: in although it fails its check: the pool fails
	// open and the member was in traffic just before the collapse.
	WhyHeldFailOpen
	// WhyOutFailOpen: out although the pool fails open: the member was
	// already failing before the collapse.
	WhyOutFailOpen
	// WhyFailOpenAll: in although it fails its check: the pool fails open
	// with no last good set (cold start, or a reload changed the pool),
	// so every enabled member is kept.
	WhyFailOpenAll
)

// String returns the code in lower case with dashes ("held-fail-open").
func (c WhyCode) String() string {
	switch c {
	case WhyHealthy:
		return "healthy"
	case WhyNoVerdict:
		return "no-verdict"
	case WhyDown:
		return "down"
	case WhyStale:
		return "stale"
	case WhyDrained:
		return "drained"
	case WhyDisabled:
		return "disabled"
	case WhyHeldFailOpen:
		return "held-fail-open"
	case WhyOutFailOpen:
		return "out-fail-open"
	case WhyFailOpenAll:
		return "fail-open-all"
	}
	return fmt.Sprintf("why(%d)", uint8(c))
}

// Why is the reason a member is in or out of traffic: a fixed code and
// one line of text for people.
type Why struct {
	Code WhyCode
	Text string
}

// PoolStatus is the verdict on one pool.
type PoolStatus struct {
	Name       string
	MinHealthy int
	Total      int
	Enabled    int
	Healthy    int
	Vendors    map[string]VendorCount
	// FailOpen is true when the pool is below its minimum (or fails at
	// once) and keeps members in traffic that fail their checks: the last
	// good set (Memory.LastGood), or every enabled member when there is
	// none. Each member's Why says which.
	FailOpen  bool
	Diagnosis Diagnosis
	// Detail explains the diagnosis in one line.
	Detail string
	// DownVendors lists the vendors all of whose members are down, for
	// VendorWide.
	DownVendors []string
	Members     []Member

	// held is the set a pool failing open holds (names, member order):
	// the memory the plan leaves for the next one.
	held []string
}

// Plan is the outcome of the pool policy: the desired table and the
// verdict on every pool and member. A Plan is read-only once computed.
type Plan struct {
	Table vip.Table
	Pools []PoolStatus
	// Warm is true when the plan was computed after the warm-up (every
	// target had a verdict, or the deadline passed): the table is managed.
	// It travels with the pools so that a reader of one plan never sees
	// the warm-up over beside members still undecided.
	Warm bool
	// dests indexes, per service, every pool member's destination address
	// (in traffic or not) to its pool and member.
	dests map[vip.ServiceKey]map[netip.AddrPort]memberRef
}

// PoolHealth is what the VIPs' serving verdicts need of the plan's
// pools (vip.Verdicts), by pool name.
func (p Plan) PoolHealth() map[string]vip.PoolHealth {
	out := make(map[string]vip.PoolHealth, len(p.Pools))
	for _, ps := range p.Pools {
		out[ps.Name] = vip.PoolHealth{FailOpen: ps.FailOpen, Below: ps.Healthy < ps.MinHealthy}
	}
	return out
}

// memberRef locates a member in Plan.Pools.
type memberRef struct{ pool, member int }

// Dest returns the pool and the member whose destination addr is in the
// service key, whether the member is in traffic or not; ok is false when
// addr is no member's destination there (a destination the daemon does
// not manage). The member's Why says why it is in or out; the Table has
// the destination's weight after VIP-scoped rules. The results point into
// p.Pools and must not be modified.
func (p Plan) Dest(key vip.ServiceKey, addr netip.AddrPort) (pool *PoolStatus, member *Member, ok bool) {
	r, ok := p.dests[key][addr]
	if !ok {
		return nil, nil, false
	}
	ps := &p.Pools[r.pool]
	return ps, &ps.Members[r.member], true
}

// Compute applies the pool policy to its input.
func Compute(in Input) Plan {
	cfg := in.Config
	out := Plan{Table: vip.Table{}, dests: map[vip.ServiceKey]map[netip.AddrPort]memberRef{}}
	for i := range cfg.Pools {
		ps := evalPool(in, &cfg.Pools[i], in.Memory[cfg.Pools[i].Name])
		out.Pools = append(out.Pools, ps)
	}
	index := make(map[string]int, len(out.Pools))
	for i := range out.Pools {
		index[out.Pools[i].Name] = i
	}
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		pi, ok := index[v.Pool]
		if !ok {
			continue
		}
		out.addTable(v, pi, in.Overrides)
	}
	return out
}

// evalPool judges one pool; mem is what the plans before left about it.
func evalPool(in Input, p *configs.Pool, mem Memory) PoolStatus {
	cfg := in.Config
	chk := cfg.Checks[p.Check]
	ps := PoolStatus{Name: p.Name, MinHealthy: p.MinHealthy, Vendors: map[string]VendorCount{}}
	weights := make([]uint32, 0, len(p.Members)) // configured weight per member
	anyKnown := false
	for _, name := range p.Members {
		r := cfg.Resolver(name)
		if r == nil {
			continue
		}
		f, ok := in.Facts[TargetKey{Resolver: r.Name, Check: p.Check}]
		if !ok {
			f = Fact{State: health.Unknown}
		}
		m := Member{Name: r.Name, Vendor: r.Vendor, Addr: r.AddrPort, State: f.State, Fresh: f.Fresh,
			Failing: f.Failing, Since: f.Since, Reason: f.Reason, Override: strongest(in.Overrides, r.Name, p.Name, "")}
		if f.State != health.Unknown {
			anyKnown = true
		}
		vc := ps.Vendors[r.Vendor]
		vc.Total++
		ps.Total++
		if m.Override != Disable {
			ps.Enabled++
		}
		// A drained or disabled member counts as healthy neither in
		// the pool nor in its vendor, so that the two counts agree.
		if m.Healthy() && m.Override == None {
			vc.Healthy++
			ps.Healthy++
		}
		ps.Vendors[r.Vendor] = vc
		ps.Members = append(ps.Members, m)
		weights = append(weights, uint32(max(r.Weight, 1)))
	}

	ps.Diagnosis, ps.Detail, ps.DownVendors = diagnose(&ps, chk, anyKnown)
	belowMin := ps.Healthy < p.MinHealthy
	failOpen := p.FailOpen == nil || *p.FailOpen
	ps.FailOpen = failOpen && ps.Enabled > 0 && (belowMin || ps.Diagnosis == Upstream)
	if failOpen && !ps.FailOpen && ps.Enabled > 0 && mem.FailOpen && ps.Healthy < p.RecoverHealthy {
		ps.FailOpen = true
		ps.Detail += fmt.Sprintf("; recovering: fail-open held until %d members are healthy (recover_healthy)", p.RecoverHealthy)
	}

	// Failing open, the pool holds the members of its last good set, and,
	// in the plan it begins failing open, those that failed within the
	// collapse window before; with none (or none of them enabled) it
	// keeps every enabled member.
	var held map[string]bool
	if ps.FailOpen {
		held = make(map[string]bool, len(mem.LastGood))
		for _, name := range mem.LastGood {
			held[name] = true
		}
		if !mem.FailOpen && mem.LastGood != nil {
			from := collapseAt(&ps, held, in.Now).Add(-p.CollapseWindow.Duration)
			for _, d := range mem.Left {
				if !d.At.Before(from) {
					held[d.Name] = true
				}
			}
		}
		for i := range ps.Members {
			if held[ps.Members[i].Name] {
				ps.held = append(ps.held, ps.Members[i].Name)
			}
		}
		n := 0
		for i := range ps.Members {
			if held[ps.Members[i].Name] && ps.Members[i].Override != Disable {
				n++
			}
		}
		if n == 0 {
			clear(held)
		}
		ps.Detail += failOpenDetail(&ps, held)
	}
	for i := range ps.Members {
		m := &ps.Members[i]
		w := weights[i]
		m.Why = why(m, ps.FailOpen, held)
		switch m.Why.Code {
		case WhyHealthy, WhyHeldFailOpen, WhyFailOpenAll:
			m.InTraffic, m.Weight = true, w
		case WhyDrained:
			m.InTraffic, m.Weight = true, 0
		}
	}
	return ps
}

// collapseAt is when the pool whose last good set is lastGood fell below
// its minimum: the latest time a member of that set went down, or now
// when none of them is down (the pool fails open on the upstream
// diagnosis, or on stale facts).
func collapseAt(ps *PoolStatus, lastGood map[string]bool, now time.Time) time.Time {
	var at time.Time
	for i := range ps.Members {
		m := &ps.Members[i]
		if lastGood[m.Name] && m.State == health.Down && !m.Since.IsZero() && m.Since.After(at) {
			at = m.Since
		}
	}
	if at.IsZero() || at.After(now) {
		return now
	}
	return at
}

// why judges whether member m is in traffic in a pool that is failing
// open or not; held is the pool's last good set in force (empty when the
// pool keeps every enabled member).
func why(m *Member, failOpen bool, held map[string]bool) Why {
	var h Why
	switch {
	case m.Healthy():
		h = Why{WhyHealthy, "healthy"}
	case failOpen && len(held) == 0:
		h = Why{WhyFailOpenAll, "failing its check (" + m.health() + "), kept by fail-open: no last good set, every enabled member in traffic"}
	case failOpen && held[m.Name]:
		h = Why{WhyHeldFailOpen, "failing its check (" + m.health() + "), held by fail-open: in traffic before the pool collapsed"}
	case failOpen:
		h = Why{WhyOutFailOpen, "out although the pool fails open: already failing before the collapse (" + m.health() + ")"}
	case m.State == health.Unknown:
		h = Why{WhyNoVerdict, "no health verdict yet"}
	case m.State == health.Down:
		h = Why{WhyDown, m.health()}
	default:
		h = Why{WhyStale, m.health()}
	}
	switch m.Override {
	case Disable:
		return Why{WhyDisabled, "disabled by an operator"}
	case Drain:
		switch h.Code {
		case WhyHealthy, WhyHeldFailOpen, WhyFailOpenAll:
			return Why{WhyDrained, "drained by an operator: weight 0 (" + h.Text + ")"}
		}
		h.Text = "drained by an operator and " + h.Text
	}
	return h
}

// health describes a member's health fact in a few words.
func (m *Member) health() string {
	switch {
	case m.State == health.Unknown:
		return "no verdict yet"
	case m.State == health.Down && m.Reason != "":
		return "down: " + m.Reason
	case m.State == health.Down:
		return "down"
	case !m.Fresh:
		return "stale: no recent probe result"
	}
	return m.State.String()
}

// failOpenDetail tells which members a pool failing open holds in traffic.
func failOpenDetail(ps *PoolStatus, held map[string]bool) string {
	if len(held) == 0 {
		return "; fail-open: no last good set (cold start, or the pool changed), every enabled member kept in traffic"
	}
	var in, out []string
	for i := range ps.Members {
		m := &ps.Members[i]
		switch {
		case m.Override == Disable || m.Healthy():
		case held[m.Name]:
			in = append(in, m.Name)
		default:
			out = append(out, m.Name)
		}
	}
	s := "; fail-open: holding the members in traffic before the collapse"
	if len(in) > 0 {
		s += " (" + strings.Join(in, ", ") + ")"
	}
	if len(out) > 0 {
		s += "; kept out, failing before it: " + strings.Join(out, ", ")
	}
	return s
}

// byName indexes pool verdicts by pool name.
func byName(pools []PoolStatus) map[string]*PoolStatus {
	m := make(map[string]*PoolStatus, len(pools))
	for i := range pools {
		m[pools[i].Name] = &pools[i]
	}
	return m
}

// Healthy reports whether the member's check is up and its facts are
// fresh.
func (m *Member) Healthy() bool { return m.State == health.Up && m.Fresh }

// window is how far apart two failures may be and still count as "at the
// same time": one interval of scheduling jitter plus the time the check
// needs to detect a failure.
func window(chk *configs.Check) time.Duration {
	if chk == nil {
		return 0
	}
	return 2*time.Duration(chk.Fall+1)*chk.Interval.Duration + chk.Timeout.Duration
}

func diagnose(ps *PoolStatus, chk *configs.Check, anyKnown bool) (Diagnosis, string, []string) {
	if !anyKnown {
		return NoFacts, fmt.Sprintf("no health facts yet for %d members", ps.Total), nil
	}
	var down []*Member
	for i := range ps.Members {
		m := &ps.Members[i]
		if m.Override != Disable && m.State == health.Down {
			down = append(down, m)
		}
	}
	// A vendor is up when a member of it is healthy, overridden or not:
	// a drained member that passes its checks proves the product works.
	var downVendors, upVendors []string
	for i := range ps.Members {
		if m := &ps.Members[i]; m.Healthy() && !slices.Contains(upVendors, m.Vendor) {
			upVendors = append(upVendors, m.Vendor)
		}
	}
	for v, c := range ps.Vendors {
		n := 0
		for _, m := range down {
			if m.Vendor == v {
				n++
			}
		}
		if c.Total > 0 && n == c.Total {
			downVendors = append(downVendors, v)
		}
	}
	sort.Strings(downVendors)
	sort.Strings(upVendors)

	if up, detail := correlated(ps, down, chk); up {
		return Upstream, detail, downVendors
	}
	if ps.Healthy < ps.MinHealthy {
		return BelowMinimum, fmt.Sprintf("%d of %d members healthy, below min_healthy %d", ps.Healthy, ps.Total, ps.MinHealthy), downVendors
	}
	var wide []string
	for _, v := range downVendors {
		if ps.Vendors[v].Total >= 2 && len(upVendors) > 0 {
			wide = append(wide, v)
		}
	}
	if len(wide) > 0 {
		return VendorWide, fmt.Sprintf("every member of vendor %s is down while %s up", strings.Join(wide, ", "), strings.Join(upVendors, ", ")), wide
	}
	if len(down) > 0 {
		names := make([]string, 0, len(down))
		for _, m := range down {
			names = append(names, m.Name)
		}
		return Degraded, fmt.Sprintf("%d of %d members down: %s", len(down), ps.Total, strings.Join(names, ", ")), nil
	}
	return Healthy, fmt.Sprintf("%d of %d members healthy", ps.Healthy, ps.Total), nil
}

// correlated reports whether the pool's failures look like one cause
// outside the resolvers: members of at least two vendors are failing and
// no enabled member passes its check; either every enabled member is down
// and they went down within one detection window, or at least one is down
// and all the others are failing their latest probe already (they will be
// down within the same detection window). The second case lets the pool
// fail open before the first failures are taken out of traffic.
func correlated(ps *PoolStatus, down []*Member, chk *configs.Check) (bool, string) {
	if len(down) == 0 || ps.Enabled == 0 {
		return false, ""
	}
	vendors := map[string]bool{}
	failing := 0
	for i := range ps.Members {
		m := &ps.Members[i]
		if m.Override == Disable {
			continue
		}
		switch {
		case m.State == health.Down:
			vendors[m.Vendor] = true
		case m.Failing:
			vendors[m.Vendor] = true
			failing++
		default:
			return false, ""
		}
	}
	if len(vendors) < 2 {
		return false, ""
	}
	if failing == 0 && !sameTime(down, window(chk)) {
		return false, ""
	}
	names := make([]string, 0, len(vendors))
	for v := range vendors {
		names = append(names, v)
	}
	sort.Strings(names)
	return true, fmt.Sprintf("every enabled member (%d, vendors %s) fails the check at once (%d down, %d failing): the upstream or the check is the likely cause, not the resolvers; last reason: %s",
		ps.Enabled, strings.Join(names, ", "), len(down), failing, down[len(down)-1].Reason)
}

func sameTime(ms []*Member, w time.Duration) bool {
	if len(ms) == 0 {
		return false
	}
	lo, hi := ms[0].Since, ms[0].Since
	for _, m := range ms[1:] {
		if m.Since.Before(lo) {
			lo = m.Since
		}
		if m.Since.After(hi) {
			hi = m.Since
		}
	}
	return hi.Sub(lo) <= w
}

// addTable adds v's services with the in-traffic members of pool pi, after
// the rules scoped to v, and indexes every member's destination in them.
func (p *Plan) addTable(v *configs.VIP, pi int, rules []Rule) {
	t, ps := p.Table, &p.Pools[pi]
	fwd := forwarding(v.Forwarding)
	for _, key := range vip.ServiceKeys(v) {
		port := key.Port
		svc := vip.Service{Key: key, Scheduler: v.Scheduler, Dests: map[netip.AddrPort]vip.Destination{}}
		idx := map[netip.AddrPort]memberRef{}
		p.dests[key] = idx
		for mi, m := range ps.Members {
			a := DestAddr(fwd, port, m.Addr)
			if _, dup := idx[a]; !dup {
				idx[a] = memberRef{pool: pi, member: mi}
			}
			if !m.InTraffic {
				continue
			}
			w := m.Weight
			switch strongest(rules, m.Name, ps.Name, v.Name) {
			case Disable:
				continue
			case Drain:
				w = 0
			}
			svc.Dests[a] = vip.Destination{Addr: a, Weight: w, Forwarding: fwd}
		}
		t[key] = svc
	}
}

// DestAddr is the IPVS destination address of a resolver at addr in a
// service on port with forwarding fwd: NAT keeps the resolver's port;
// direct routing and tunnelling cannot change ports, so the service's.
func DestAddr(fwd vip.Forwarding, port uint16, addr netip.AddrPort) netip.AddrPort {
	if fwd == vip.NAT {
		return addr
	}
	return netip.AddrPortFrom(addr.Addr(), port)
}

// Forwarding maps the configuration's forwarding method ("dr", "nat",
// "tunnel") to the IPVS one.
func Forwarding(s string) vip.Forwarding { return forwarding(s) }

func forwarding(s string) vip.Forwarding {
	switch s {
	case "nat":
		return vip.NAT
	case "tunnel":
		return vip.Tunnel
	}
	return vip.DirectRoute
}

// Event is a change in a pool's verdict worth telling an operator.
type Event struct {
	Pool string
	At   time.Time
	From Diagnosis
	To   Diagnosis
	// FailOpen tells whether the pool is now failing open.
	FailOpen bool
	Detail   string
}

// String formats the event for a log line.
func (e Event) String() string {
	s := fmt.Sprintf("pool %s: %s -> %s: %s", e.Pool, e.From, e.To, e.Detail)
	if e.FailOpen {
		s += " (FAIL-OPEN: members failing their checks kept in traffic)"
	}
	return s
}

// Events compares two successive plans and returns the pool verdicts that
// changed, in pool order.
func Events(prev, cur []PoolStatus, now time.Time) []Event {
	var out []Event
	before := byName(prev)
	for _, c := range cur {
		from := NoFacts
		fo := false
		if p := before[c.Name]; p != nil {
			from, fo = p.Diagnosis, p.FailOpen
			if from == c.Diagnosis && fo == c.FailOpen && (c.Diagnosis != VendorWide || slices.Equal(p.DownVendors, c.DownVendors)) {
				continue
			}
		}
		out = append(out, Event{Pool: c.Name, At: now, From: from, To: c.Diagnosis, FailOpen: c.FailOpen, Detail: c.Detail})
	}
	return out
}
