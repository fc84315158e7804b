package resolvers

import (
	"iter"
	"slices"
	"time"

	"lbdns/configs"
	"lbdns/health"
)

// Planner runs the pool policy over time: it feeds Compute the memory the
// plans before left (fail-open hysteresis, the last good set), holds the
// table back until the warm-up is over, reports verdict changes once warm,
// and tells when the plan in force is still current so that a tick with
// nothing changed computes nothing.
//
// It is pure: it reads no clock (the time is passed in) and no monitor
// (the facts are passed in). It is not safe for concurrent use: one
// owner (the daemon's loop) calls it.
//
// A round is: Plan with a snapshot of the facts; apply the plan when the
// Step says so; Settle with whether the apply left nothing to retry.
// Between rounds, Current tells whether a new round would change anything.
type Planner struct {
	cfg       *configs.Config
	warmUntil time.Time
	// graceUntil is the warm-up's second deadline (warmUntil plus one
	// more warm-up), for targets whose down verdict is under way.
	graceUntil time.Time
	warm       bool
	// memory is what the last plan left for the next; used is the memory
	// that plan was computed from.
	memory, used map[string]Memory
	// facts and rules are what the last plan was computed from.
	facts map[TargetKey]Fact
	rules []Rule
	// reported are the pool verdicts last reported as events.
	reported []PoolStatus
	settled  bool
}

// Step is the outcome of one Planner.Plan.
type Step struct {
	// Plan is the new plan.
	Plan Plan
	// Apply is true when the table is to be applied: the daemon is warm.
	// During the warm-up the plan is computed (for status) but the
	// kernel's table is left as it is.
	Apply bool
	// JustWarmed is true for the plan that ended the warm-up: the first
	// table to apply, best with a full resync.
	JustWarmed bool
	// Decided is true when every target of the configuration had a
	// health verdict.
	Decided bool
	// Events are the pool verdicts that changed since the last reported
	// plan; only once warm (verdicts on partial facts would raise false
	// alarms: a pool whose first facts are of overridden members looks
	// below its minimum).
	Events []Event
}

// NewPlanner returns a planner with no configuration: call Configure
// before Plan.
func NewPlanner() *Planner { return &Planner{} }

// WarmUp is how long after start (or reload) the planner waits for every
// target to reach a verdict before the table is applied: the longest time
// a check needs to decide, plus one interval of start jitter.
func WarmUp(cfg *configs.Config) time.Duration {
	var w time.Duration
	for _, c := range cfg.Checks {
		n := max(c.Rise, c.Fall)
		if x := time.Duration(n+1)*c.Interval.Duration + c.Timeout.Duration; x > w {
			w = x
		}
	}
	return w
}

// Configure makes cfg the configuration at now. At start (reload false)
// the planner is cold: it waits for the warm-up and remembers nothing. On
// a reload, a warm planner stays warm (targets that kept their state are
// not held back) and keeps each pool's memory, except the last good set
// of a pool whose members (names or addresses) or check (the question it
// asks, see configs.Check.ProbeIdentity) changed, and the members that
// left it: they no longer say who was in traffic. The plan in force is no
// longer current.
func (p *Planner) Configure(cfg *configs.Config, now time.Time, reload bool) {
	if reload && p.cfg != nil {
		p.memory = carry(p.cfg, cfg, p.memory)
	} else {
		p.warm, p.memory, p.used, p.reported, p.facts, p.rules = false, nil, nil, nil, nil, nil
	}
	p.cfg = cfg
	p.warmUntil = now.Add(WarmUp(cfg))
	p.graceUntil = p.warmUntil.Add(WarmUp(cfg))
	p.settled = false
}

// carry keeps the memory of the pools of next, forgetting the last good
// set (and the members that left it) of the pools that changed from prev.
func carry(prev, next *configs.Config, mem map[string]Memory) map[string]Memory {
	out := make(map[string]Memory, len(mem))
	for i := range next.Pools {
		np := &next.Pools[i]
		m, ok := mem[np.Name]
		if !ok {
			continue
		}
		if op := prev.Pool(np.Name); op == nil || poolChanged(prev, next, op, np) {
			m.LastGood, m.Left = nil, nil
		}
		out[np.Name] = m
	}
	return out
}

// poolChanged reports whether a pool's members (names, addresses) or its
// check differ between two configurations: another check profile, or one
// that asks another question or judges the answer another way (its
// pacing aside: the facts gathered under the old one still hold, so the
// last good set does too).
func poolChanged(prev, next *configs.Config, op, np *configs.Pool) bool {
	if op.Check != np.Check || !slices.Equal(op.Members, np.Members) ||
		prev.Checks[op.Check].ProbeIdentity() != next.Checks[np.Check].ProbeIdentity() {
		return true
	}
	for _, name := range np.Members {
		a, b := prev.Resolver(name), next.Resolver(name)
		if (a == nil) != (b == nil) || a != nil && a.AddrPort != b.AddrPort {
			return true
		}
	}
	return false
}

// Plan computes the plan for facts (a snapshot the planner keeps: the
// caller must not change it afterwards) and rules at now. The warm-up
// holds the table back until every target has a verdict or its deadline
// has passed; until then the plan rests on partial facts, so it neither
// reads nor feeds the memory the first applied plan starts from.
func (p *Planner) Plan(facts map[TargetKey]Fact, rules []Rule, now time.Time) Step {
	decided := p.decided(facts)
	mem := p.memory
	if !p.warm {
		mem = nil
	}
	plan := Compute(Input{Config: p.cfg, Facts: facts, Overrides: rules, Now: now, Memory: mem})
	p.facts, p.rules, p.used, p.memory, p.settled = facts, slices.Clone(rules), mem, remember(mem, plan.Pools, now), false
	st := Step{Plan: plan, Decided: decided}
	if !p.warm {
		if !decided && (now.Before(p.warmUntil) || now.Before(p.graceUntil) && p.failing(facts)) {
			return st
		}
		p.warm, st.JustWarmed = true, true
	}
	st.Plan.Warm = true
	st.Apply = true
	st.Events = Events(p.reported, plan.Pools, now)
	p.reported = plan.Pools
	return st
}

// WhatIf computes the plan facts and rules would give at now, with the
// memory the next Plan would use, without changing the planner: for
// refusing an override by its effect on the table.
func (p *Planner) WhatIf(facts map[TargetKey]Fact, rules []Rule, now time.Time) Plan {
	mem := p.memory
	if !p.warm {
		mem = nil
	}
	return Compute(Input{Config: p.cfg, Facts: facts, Overrides: rules, Now: now, Memory: mem})
}

// remember is the memory a plan of pools at now leaves, computed from
// mem: a pool not failing open records its healthy members as its last
// good set, and the members that left that set since (Memory.Left); a
// pool failing open keeps the set it holds (its last good set, with the
// members that failed within the collapse window when it began failing
// open; nil when it had none).
func remember(mem map[string]Memory, pools []PoolStatus, now time.Time) map[string]Memory {
	out := make(map[string]Memory, len(pools))
	for i := range pools {
		ps := &pools[i]
		prev := mem[ps.Name]
		if ps.FailOpen {
			var held []string
			if prev.LastGood != nil {
				held = ps.held
				if held == nil {
					held = []string{}
				}
			}
			out[ps.Name] = Memory{FailOpen: true, LastGood: held}
			continue
		}
		good := make([]string, 0, len(ps.Members))
		for j := range ps.Members {
			if m := &ps.Members[j]; m.Healthy() {
				good = append(good, m.Name)
			}
		}
		var left []Departure
		if len(prev.Left) > 0 || !prev.FailOpen && len(prev.LastGood) > 0 {
			left = departures(ps, prev, now)
		}
		out[ps.Name] = Memory{LastGood: good, Left: left}
	}
	return out
}

// departures is the Memory.Left a plan of ps at now leaves, from the
// memory prev it was computed from: the members of prev.Left not healthy
// again, and the members of prev.LastGood that are no longer healthy,
// with the time they went down.
func departures(ps *PoolStatus, prev Memory, now time.Time) []Departure {
	byName := make(map[string]*Member, len(ps.Members))
	for j := range ps.Members {
		byName[ps.Members[j].Name] = &ps.Members[j]
	}
	var left []Departure
	for _, d := range prev.Left {
		if m := byName[d.Name]; m != nil && !m.Healthy() {
			left = append(left, d)
		}
	}
	if !prev.FailOpen {
		for _, name := range prev.LastGood {
			m := byName[name]
			if m == nil || m.Healthy() {
				continue
			}
			at := now
			if m.State == health.Down && !m.Since.IsZero() && !m.Since.After(now) {
				at = m.Since
			}
			left = append(left, Departure{Name: name, At: at})
		}
	}
	return left
}

// decided reports whether every target of the configuration has a verdict
// in facts.
// failing reports whether a target of a pool is undecided with its
// latest probe failed: a down verdict on its way. At the warm-up's
// deadline the planner waits for it (up to graceUntil) rather than put a
// failing member in traffic, from no facts, to take it out a probe
// later: the deadline counts from the start, and the first probes may
// start late on a busy host.
func (p *Planner) failing(facts map[TargetKey]Fact) bool {
	for i := range p.cfg.Pools {
		pl := &p.cfg.Pools[i]
		for _, name := range pl.Members {
			if f, ok := facts[TargetKey{Resolver: name, Check: pl.Check}]; ok && f.State == health.Unknown && f.Failing {
				return true
			}
		}
	}
	return false
}

func (p *Planner) decided(facts map[TargetKey]Fact) bool {
	for i := range p.cfg.Pools {
		pl := &p.cfg.Pools[i]
		for _, name := range pl.Members {
			if f, ok := facts[TargetKey{Resolver: name, Check: pl.Check}]; !ok || f.State == health.Unknown {
				return false
			}
		}
	}
	return true
}

// Settle records the outcome of applying the last plan: clean is true
// when the apply left nothing to retry (no error, nothing the caller must
// redo at the next round). The plan is then settled when it is its own
// successor: computing it again from the same facts, with the memory it
// left, gives the same plan. Without a call to Settle (the apply failed),
// the plan is not settled and the next round recomputes it.
func (p *Planner) Settle(clean bool) {
	p.settled = clean && fixpoint(p.used, p.memory)
}

// fixpoint reports whether Compute gives the same plan from next as from
// used, for the same facts. Compute reads a pool's memory only in two
// places: FailOpen (the hysteresis) and, while the pool fails open,
// LastGood. A pool not failing open records a new LastGood at every plan,
// which matters only for a later plan from other facts.
func fixpoint(used, next map[string]Memory) bool {
	for name, n := range next {
		u := used[name]
		if u.FailOpen != n.FailOpen || n.FailOpen && !slices.Equal(u.LastGood, n.LastGood) {
			return false
		}
	}
	return true
}

// Current reports whether a new round with rules and the facts facts
// yields would compute the plan in force and apply nothing: the last plan
// was settled, the rules are the same, and every target's fact is the one
// that plan was computed from (freshness and slowness included: the
// caller derives facts at the time of the call). A new configuration
// (Configure) makes the plan not current. It stops reading facts at the
// first difference, and allocates nothing.
func (p *Planner) Current(rules []Rule, facts iter.Seq2[TargetKey, Fact]) bool {
	if !p.settled || !slices.Equal(rules, p.rules) {
		return false
	}
	n := 0
	for k, f := range facts {
		n++
		old, ok := p.facts[k]
		if !ok || !sameFact(old, f) {
			return false
		}
	}
	return n == len(p.facts)
}

// sameFact reports whether a and b say the same.
func sameFact(a, b Fact) bool {
	return a.State == b.State && a.Since.Equal(b.Since) && a.Fresh == b.Fresh &&
		a.Reason == b.Reason && a.Failing == b.Failing
}

// Warm reports whether the warm-up is over: the table is managed.
func (p *Planner) Warm() bool { return p.warm }

// Settled reports whether the last plan was applied cleanly and is its own
// successor (see Settle).
func (p *Planner) Settled() bool { return p.settled }

// Memory returns what the last plan left about pool (for status and
// tests); ok is false when the planner knows nothing of it.
func (p *Planner) Memory(pool string) (m Memory, ok bool) {
	m, ok = p.memory[pool]
	return m, ok
}
