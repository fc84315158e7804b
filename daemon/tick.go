package daemon

import (
	"time"

	"lbdns/monitor"
	"lbdns/resolvers"
)

// factOf turns one target's status at now into the pool policy's fact.
func factOf(s monitor.TargetStatus, now time.Time) resolvers.Fact {
	return resolvers.Fact{State: s.Health.State, Since: s.Health.Since, Fresh: s.Fresh(now),
		Reason: s.Health.LastReason, Failing: s.Health.ConsecutiveFail > 0 || s.Slow(now)}
}

// sameFact reports whether a and b say the same.
func sameFact(a, b resolvers.Fact) bool {
	return a.State == b.State && a.Since.Equal(b.Since) && a.Fresh == b.Fresh &&
		a.Reason == b.Reason && a.Failing == b.Failing
}

// planCurrent reports whether reconciling at now would compute the plan in
// force and apply nothing: the last plan was applied without error and is
// its own successor (settled), and every target's fact at now (freshness
// and slowness included, both time-based) is the one that plan was
// computed from. The configuration and the overrides are not compared:
// changing either clears settled. It reads every target once without
// allocating.
func (d *Daemon) planCurrent(now time.Time) bool {
	if !d.settled {
		return false
	}
	n, same := 0, true
	d.mon.Each(func(s monitor.TargetStatus) {
		n++
		if same {
			old, ok := d.planFacts[factID(s.Key)]
			same = ok && sameFact(old, factOf(s, now))
		}
	})
	return same && n == len(d.planFacts)
}

// fixpoint reports whether pools, computed with held as the previous
// verdicts, would be computed again from the same facts with pools as the
// previous verdicts: resolvers.Compute reads only each previous pool's
// FailOpen, so it is whether no pool's FailOpen changed.
func fixpoint(held, pools []resolvers.PoolStatus) bool {
	was := make(map[string]bool, len(held))
	for _, p := range held {
		was[p.Name] = p.FailOpen
	}
	for _, p := range pools {
		if was[p.Name] != p.FailOpen {
			return false
		}
	}
	return true
}
