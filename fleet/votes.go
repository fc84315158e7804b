package fleet

import "time"

// Verdict is the fleet's judgement of one GSLB member.
type Verdict int

// Verdicts. VerdictNone means the fleet has none: too few fresh votes or
// a tie, and no earlier verdict still held; the pool's own rule decides.
const (
	VerdictNone Verdict = iota
	VerdictUp
	VerdictDown
)

// String returns "none", "up" or "down".
func (v Verdict) String() string {
	switch v {
	case VerdictUp:
		return "up"
	case VerdictDown:
		return "down"
	}
	return "none"
}

// Vote is one prober's judgement of one member, as it published it.
type Vote struct {
	// Prober and Location name the prober and where it probes from.
	Prober   string `json:"prober"`
	Location string `json:"location"`
	// Up is the prober's own rise/fall state of the member.
	Up bool `json:"up"`
	// At is when the prober last confirmed the vote (a vote stored
	// under its prober's lease, written only on change, is fresh while
	// it exists: its At is when it changed).
	At time.Time `json:"at"`
}

// Rules say how votes make a verdict.
type Rules struct {
	// MinVotes is how many fresh votes a verdict needs (at least 1).
	MinVotes int
	// MaxAge is how old a vote may be and still count; 0: no limit (a
	// vote kept under its prober's lease is fresh while it exists).
	MaxAge time.Duration
	// Hold is how long the last verdict is kept when the votes decide
	// nothing (too few fresh votes).
	Hold time.Duration
	// UpPercent is the share of the fresh votes above which the member
	// is up: more than UpPercent percent of them say up (0..99). A
	// success is evidence that the member answers; a failure may be the
	// prober's own (its network cut off, no descriptor), so a low share
	// keeps a member that some probers reach: with 18 (Route 53's
	// figure), one of three probers or one of five is enough, and the
	// member is down only when nearly all its probers fail it. 50 is a
	// strict majority.
	UpPercent int
}

// Decision is a member's fleet verdict and how it was reached.
type Decision struct {
	// Verdict is the fleet's.
	Verdict Verdict
	// Decided is when the votes last decided it (zero for VerdictNone).
	Decided time.Time
	// Since is when the verdict took its value: the first of the
	// decisions in a row that gave it (zero for VerdictNone).
	Since time.Time
	// Held is set when the votes decide nothing now and Verdict is the
	// last one, kept until Decided + Rules.Hold.
	Held bool
	// Up, Down and Stale count the votes: fresh up, fresh down, and too
	// old to count.
	Up, Down, Stale int
}

// Count returns the fleet verdict of one member at now from its probers'
// votes and the decision before (the zero Decision at first): with at
// least MinVotes fresh votes, up when more than UpPercent percent of them
// are up, else down; fewer fresh votes than MinVotes keep the last
// verdict for Hold after it was last decided, then give VerdictNone.
func Count(votes []Vote, prev Decision, r Rules, now time.Time) Decision {
	var d Decision
	for _, v := range votes {
		switch {
		case r.MaxAge > 0 && now.Sub(v.At) > r.MaxAge:
			d.Stale++
		case v.Up:
			d.Up++
		default:
			d.Down++
		}
	}
	if d.Up+d.Down >= max(r.MinVotes, 1) {
		d.Verdict, d.Decided = VerdictDown, now
		if d.Up*100 > r.UpPercent*(d.Up+d.Down) {
			d.Verdict = VerdictUp
		}
		d.Since = now
		if prev.Verdict == d.Verdict && !prev.Since.IsZero() {
			d.Since = prev.Since
		}
		return d
	}
	if prev.Verdict != VerdictNone && now.Sub(prev.Decided) <= r.Hold {
		d.Verdict, d.Decided, d.Since, d.Held = prev.Verdict, prev.Decided, prev.Since, true
	}
	return d
}

// CutOff reports whether a prober must withdraw its votes: most of its
// canaries (known-good targets: the other nodes, configured addresses)
// fail, so that the failures it sees are likelier its own than the
// members'. A prober cut off that way is no down vote. Without canaries
// it is never cut off; half of them failing is not most.
func CutOff(canariesUp, canaries int) bool {
	return canaries > 0 && 2*(canaries-canariesUp) > canaries
}
