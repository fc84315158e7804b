package monitor

import (
	"sync"
	"time"

	"lbdns/check"
)

// abstention is the prober's abstention across its targets: how many
// abstain now, since when the first did, and what its log lines said
// last (so that they come once per transition of the whole prober, at
// most one start per abstainLogGap, never one per check).
type abstention struct {
	mu sync.Mutex
	// n counts the current targets whose trackers abstain.
	n int
	// since is when n last went from 0 to 1; local counts the local
	// failures that started an abstention since then.
	since time.Time
	local int
	// logged is whether the start of the current abstention was logged;
	// lastStart when a start was last logged; suppressed counts the
	// starts not logged since (within abstainLogGap of lastStart).
	logged     bool
	lastStart  time.Time
	suppressed int
}

// Abstaining returns how many targets the prober abstains from judging
// now (their last check failed for a reason local to the prober), and
// since when it has abstained from at least one (zero when none).
func (m *Monitor) Abstaining() (targets int, since time.Time) {
	m.abstain.mu.Lock()
	defer m.abstain.mu.Unlock()
	if m.abstain.n == 0 {
		return 0, time.Time{}
	}
	return m.abstain.n, m.abstain.since
}

// abstained records that t started (started) or stopped abstaining at
// now (its abstention began at since), with r the result that did it, and
// logs the prober's transitions.
func (m *Monitor) abstained(t *target, r check.Result, started bool, since, now time.Time) {
	a := &m.abstain
	a.mu.Lock()
	defer a.mu.Unlock()
	if started {
		a.local++
		a.n++
		if a.n > 1 {
			return
		}
		a.since = now
		if !a.lastStart.IsZero() && now.Sub(a.lastStart) < abstainLogGap {
			a.logged = false
			a.suppressed++
			return
		}
		a.logged, a.lastStart = true, now
		m.log.Warn("prober abstaining: checks fail for a reason local to this host, not the targets'; their verdicts are held",
			"target", t.key.String(), "addr", t.addr.String(), "cause", r.Cause.String(), "detail", r.Detail,
			"hold", t.hold.String(), "starts_not_logged", a.suppressed)
		a.suppressed = 0
		return
	}
	if a.n == 0 {
		return
	}
	a.n--
	if a.n > 0 || !a.logged {
		return
	}
	m.log.Warn("prober stopped abstaining: every target's check is evidence again",
		"for", now.Sub(a.since).String(), "abstentions", a.local, "last_target", t.key.String(), "since", since)
	a.local = 0
}

// forgetAbstention takes t, a target removed (not carried over to its
// successor), out of the abstention's count.
func (m *Monitor) forgetAbstention(t *target) {
	t.mu.Lock()
	abstaining := t.tracker.Abstaining()
	t.mu.Unlock()
	if abstaining {
		m.abstained(t, check.Result{}, false, time.Time{}, m.opts.Now())
	}
}
