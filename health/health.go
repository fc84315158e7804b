// Package health holds the rise/fall state machine of one probe target and
// the freshness of its facts. It is pure: no I/O, no logging, no goroutines;
// the caller passes the time of every observation.
//
// A target starts Unknown. Unknown means "no decision yet": the tracker has
// not seen rise consecutive successes nor fall consecutive failures since it
// was created. A new back end therefore needs the full rise count to turn Up
// (and the full fall count to turn Down); the first result alone never
// decides. Unknown is not Up: whoever turns health into traffic (pool policy)
// decides what to do with it, for example fail open while every member of a
// pool is still Unknown at start.
package health

import (
	"strconv"
	"time"
)

// State is the health verdict of one target.
type State uint8

// The states of a Tracker.
const (
	// Unknown is the state before the first decision.
	Unknown State = iota
	// Up means the last rise (or more) probes succeeded in a row.
	Up
	// Down means the last fall (or more) probes failed in a row.
	Down
)

// String returns "unknown", "up" or "down".
func (s State) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Up:
		return "up"
	case Down:
		return "down"
	default:
		return "state(" + strconv.Itoa(int(s)) + ")"
	}
}

// Tracker is the rise/fall state machine for one (back end, check) target.
// It is not safe for concurrent use; the caller serializes access.
type Tracker struct {
	rise, fall int

	state          State
	since          time.Time
	lastOK         time.Time
	lastFail       time.Time
	lastReason     string
	lastFailReason string
	consecOK       int
	consecFail     int
	flaps          int
	checks         uint64

	// The abstention: abstainSince is when the current run of local
	// failures began (zero: not abstaining); lastLocal and
	// lastLocalReason are the latest local failure's; localFails counts
	// them all.
	abstainSince    time.Time
	lastLocal       time.Time
	lastLocalReason string
	localFails      uint64
}

// NewTracker returns a tracker in state Unknown since now. A rise or fall
// below 1 is taken as 1.
func NewTracker(rise, fall int, now time.Time) *Tracker {
	return &Tracker{rise: max(rise, 1), fall: max(fall, 1), since: now}
}

// WithThresholds returns a copy of t with new rise and fall thresholds,
// keeping its state, history and counters: a check whose pacing changed
// (on a config reload) keeps what it knows. The new thresholds apply from
// the next observation.
func (t *Tracker) WithThresholds(rise, fall int) *Tracker {
	c := *t
	c.rise, c.fall = max(rise, 1), max(fall, 1)
	return &c
}

// Transition is one change of state.
type Transition struct {
	From, To State
	// At is the time of the observation that caused the change.
	At time.Time
	// Reason is the probe detail of the observation that caused it.
	Reason string
}

// Observe records one probe result at time now. It returns the transition
// and true only when the state changed.
//
// Rules: a success resets the failure count and a failure resets the success
// count. From Unknown, rise consecutive successes turn Up and fall
// consecutive failures turn Down. Up turns Down after fall consecutive
// failures; Down turns Up after rise consecutive successes.
func (t *Tracker) Observe(ok bool, reason string, now time.Time) (Transition, bool) {
	t.checks++
	t.lastReason = reason
	t.abstainSince = time.Time{}
	next := t.state
	if ok {
		t.lastOK = now
		t.consecOK++
		t.consecFail = 0
		if t.state != Up && t.consecOK >= t.rise {
			next = Up
		}
	} else {
		t.lastFail = now
		t.lastFailReason = reason
		t.consecFail++
		t.consecOK = 0
		if t.state != Down && t.consecFail >= t.fall {
			next = Down
		}
	}
	if next == t.state {
		return Transition{}, false
	}
	tr := Transition{From: t.state, To: next, At: now, Reason: reason}
	if t.state != Unknown {
		t.flaps++
	}
	t.state = next
	t.since = now
	return tr, true
}

// Abstain records a check at now that failed for a reason local to the
// prober (no descriptor, no buffer, no route: check.Result.Local): it is
// no evidence about the target, so the tracker abstains. Neither run of
// successes or failures moves, the state holds, and no transition is
// made; the abstention lasts until the next Observe. It reports whether
// this local failure started an abstention.
func (t *Tracker) Abstain(reason string, now time.Time) (started bool) {
	t.localFails++
	t.lastLocal, t.lastLocalReason = now, reason
	if !t.abstainSince.IsZero() {
		return false
	}
	t.abstainSince = now
	return true
}

// Abstaining reports whether the last check failed for a local reason
// (see Abstain).
func (t *Tracker) Abstaining() bool { return !t.abstainSince.IsZero() }

// State returns the current state.
func (t *Tracker) State() State { return t.state }

// Status is a copy of a tracker's facts at one moment.
type Status struct {
	// State is the current verdict; Since is when it was entered (the
	// tracker's creation for Unknown).
	State State
	Since time.Time
	// LastOK and LastFail are the times of the last success and the last
	// failure; zero when there was none.
	LastOK   time.Time
	LastFail time.Time
	// LastReason is the probe detail of the last observation;
	// LastFailReason that of the last failure.
	LastReason     string
	LastFailReason string
	// ConsecutiveOK and ConsecutiveFail count the current run of equal
	// results; at most one of them is non-zero.
	ConsecutiveOK   int
	ConsecutiveFail int
	// Flaps counts Up<->Down changes; the first decision out of Unknown is
	// not a flap.
	Flaps int
	// Checks counts all observations.
	Checks uint64
	// Rise and Fall are the tracker's thresholds.
	Rise, Fall int
	// AbstainingSince is when the current run of checks that failed for
	// a reason local to the prober began (see Tracker.Abstain); zero when
	// the last check was evidence about the target. While it is set, the
	// State is the verdict held from before.
	AbstainingSince time.Time
	// LastLocal and LastLocalReason are the time and the detail of the
	// latest local failure; LocalFailures counts them all (they are not
	// in Checks).
	LastLocal       time.Time
	LastLocalReason string
	LocalFailures   uint64
}

// Abstaining reports whether the tracker abstains: its last check failed
// for a local reason.
func (s Status) Abstaining() bool { return !s.AbstainingSince.IsZero() }

// Snapshot returns the tracker's current facts.
func (t *Tracker) Snapshot() Status {
	return Status{
		State:           t.state,
		Since:           t.since,
		LastOK:          t.lastOK,
		LastFail:        t.lastFail,
		LastReason:      t.lastReason,
		LastFailReason:  t.lastFailReason,
		ConsecutiveOK:   t.consecOK,
		ConsecutiveFail: t.consecFail,
		Flaps:           t.flaps,
		Checks:          t.checks,
		Rise:            t.rise,
		Fall:            t.fall,
		AbstainingSince: t.abstainSince,
		LastLocal:       t.lastLocal,
		LastLocalReason: t.lastLocalReason,
		LocalFailures:   t.localFails,
	}
}

// LastObserved returns the time of the latest observation, success or
// failure; zero when there was none.
func (s Status) LastObserved() time.Time {
	if s.LastOK.After(s.LastFail) {
		return s.LastOK
	}
	return s.LastFail
}

// Fresh reports whether the latest observation is at most maxAge old at
// now. Facts older than that (a stuck prober, a stopped monitor) are stale
// and must not be trusted, whatever the state says; a status with no
// observation at all is never fresh. A typical maxAge is 3 × the probe
// interval.
func (s Status) Fresh(now time.Time, maxAge time.Duration) bool {
	last := s.LastObserved()
	if last.IsZero() {
		return false
	}
	return now.Sub(last) <= maxAge
}

// Healthy reports whether the status is Up and Fresh.
func (s Status) Healthy(now time.Time, maxAge time.Duration) bool {
	return s.State == Up && s.Fresh(now, maxAge)
}
