// Package monitor schedules health checks per target, feeds each result to
// the target's health.Tracker, and emits an Event on every state change. It
// knows no check kind: a Target brings its own check.Checker, built by the
// caller, and a comparable Spec saying what that checker asks.
//
// One scheduler goroutine keeps every target in a heap ordered by the time
// of its next check, sleeps on one timer until the earliest, and starts
// every check due within a small window (Options.Coalesce, at most a 50th
// of the target's interval) at once, so that thousands of targets cost a
// few dozen wake-ups a second, not one per check. A check started early
// does not shorten the interval: the next one is due an interval after the
// time this one was due. The first check of a target comes after a random
// delay in [0, interval) so that targets loaded at the same moment spread
// out, later checks every interval ± up to 2%. A target has at most one
// check in flight: the next check is scheduled only when the previous one
// returned, so a check slower than the interval delays the next one
// instead of overlapping it.
//
// A checker that also implements AsyncChecker is started without a
// goroutine or a context: it reports its result through a callback, by the
// deadline the scheduler gives it. Any other checker runs in a goroutine
// of its own while it checks, with the schedule's timeout as its context's
// deadline: a worker, idle ones reused (a goroutine started per check
// grows its stack anew each time, a cost bench/gslb measured), one more
// started whenever none is idle, each ending after a minute idle or with
// Run. A BatchChecker's checks started in one wake-up are held and then
// flushed together, from the scheduler's goroutine.
//
// A check that fails for a reason local to the prober (check.Result.Local:
// no descriptor, no buffer, no route of its own) is no evidence about the
// target: the target's tracker abstains (health.Tracker.Abstain), its
// state and its runs of successes and failures hold, and its status says
// since when (TargetStatus.Abstaining). The verdict held counts as fresh
// for Options.AbstainHold after the abstention began; after that it is
// stale (TargetStatus.Stale, not Fresh) but still held: the monitor never
// turns a target down, or unknown, for its own trouble. The monitor logs
// once, at warning level, when its first target starts abstaining and
// when its last one stops, never per check.
//
// Timers and check deadlines use the real clock; the times recorded in
// health facts come from Options.Now.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"lbdns/check"
	"lbdns/health"
)

// DefaultCoalesce is the default Options.Coalesce. Each target's window is
// also capped at a 50th of its interval (20 ms at 1 s, the size of the
// ±2% jitter), so short intervals keep their pacing.
const DefaultCoalesce = 20 * time.Millisecond

// DefaultAbstainHold is the default Options.AbstainHold: how long the
// verdict of a target whose checks fail only for local reasons counts as
// fresh. Half a minute covers a short descriptor or buffer squeeze (the
// status endpoint flooded, a burst of connections) at the usual 1 to 5 s
// intervals; beyond it the verdict is still held, but stale.
const DefaultAbstainHold = 30 * time.Second

// abstainLogGap is the least time between two "started abstaining" log
// lines: a prober whose local trouble comes and goes logs once per gap,
// not once per flap.
const abstainLogGap = 10 * time.Second

// AsyncChecker is a check.Checker that can also start a check without a
// goroutine of its own; the scheduler uses StartCheck when a target's
// checker has it.
type AsyncChecker interface {
	check.Checker
	// StartCheck starts one check and returns without waiting for it. The
	// checker calls done exactly once with the result, from any goroutine
	// (possibly before StartCheck returns), at the latest shortly after
	// deadline (a timeout result then). done must not be called while
	// holding a lock that StartCheck takes.
	StartCheck(deadline time.Time, done func(check.Result))
}

// BatchChecker is an AsyncChecker whose check can be held back so that
// the checks the scheduler starts in one wake-up go out together (one
// system call, no other goroutine woken): the scheduler calls StartHeld
// for each of them, then Flush once on each distinct Flusher returned.
type BatchChecker interface {
	AsyncChecker
	// StartHeld starts one check as StartCheck does, except that it may
	// wait until the returned Flusher's Flush is called; nil means it did
	// not wait. The Flusher must be comparable (a pointer), as checkers
	// sharing one return the same.
	StartHeld(deadline time.Time, done func(check.Result)) Flusher
}

// Flusher sends the checks that BatchChecker.StartHeld held back: Flush
// sends every check held back so far. It is an alias of the unnamed
// interface, so that a checker implements BatchChecker without importing
// monitor.
type Flusher = interface{ Flush() }

// ErrRunning is returned by Run when the monitor is already running.
var ErrRunning = errors.New("monitor: already running")

// Key identifies a target: what owns it and which check of which member it
// runs. Resolver back ends are {Kind "resolver", Owner "", Member: the
// resolver's name, Check: the check profile's name}; GSLB members will be
// {Kind "gslb", Owner: the pool, Member: the member, Check: the monitor}.
type Key struct {
	Kind   string
	Owner  string
	Member string
	Check  string
}

// String returns the key as "kind:owner/member/check" without the empty
// owner ("resolver:bind-1/rec"), for logs.
func (k Key) String() string {
	if k.Owner == "" {
		return k.Kind + ":" + k.Member + "/" + k.Check
	}
	return k.Kind + ":" + k.Owner + "/" + k.Member + "/" + k.Check
}

// Schedule is the pacing of one target's checks and the thresholds of its
// health state machine.
type Schedule struct {
	// Interval between checks; must be positive.
	Interval time.Duration
	// FastInterval is the interval while the target's state is changing
	// (see transitioningLocked); used when positive and below Interval.
	FastInterval time.Duration
	// Timeout of one check (its context's deadline); must be positive.
	Timeout time.Duration
	// Rise and Fall are the consecutive successes to turn up and failures
	// to turn down.
	Rise, Fall int
}

// Target is one thing to check with one checker.
type Target struct {
	// Key identifies the target; it must be stable across reloads for an
	// unchanged target and unique within one Update.
	Key Key
	// Addr is the address the checker goes to, for events, status and
	// logs (the checker holds its own copy).
	Addr netip.AddrPort
	// Schedule paces the checks.
	Schedule Schedule
	// Checker makes one check. Required.
	Checker check.Checker
	// Spec identifies what Checker asks and how it judges the answer (for
	// example the kind and the values of its settings): two targets of
	// one key with equal Addr and Spec gather the same facts, so Update
	// keeps the health state.
	Spec string
}

// Event is one state change of one target.
type Event struct {
	Key        Key
	Addr       netip.AddrPort
	Transition health.Transition
	// Result is the check result that caused the change.
	Result check.Result
}

// TargetStatus is what the monitor knows about one target.
type TargetStatus struct {
	Key  Key
	Addr netip.AddrPort
	// Interval is the schedule's interval, the unit of freshness.
	Interval time.Duration
	// Timeout is the schedule's check timeout.
	Timeout time.Duration
	// InFlightSince is when the check in flight started (zero when none
	// is): a check that has waited long already hints at a failure before
	// its result arrives.
	InFlightSince time.Time
	// Health is the tracker's state and counters.
	Health health.Status
	// Last is the last check result, at LastAt (zero before the first).
	Last   check.Result
	LastAt time.Time
	// Hold is how long an abstention keeps the verdict fresh
	// (Options.AbstainHold).
	Hold time.Duration
}

// Abstaining reports whether the prober abstains from judging the
// target: its last check failed for a reason local to the prober, and
// the state is the verdict held from before (Health.AbstainingSince says
// since when). A fleet's vote of this node on the target should be
// withdrawn, or held, not cast from it.
func (s TargetStatus) Abstaining() bool { return s.Health.Abstaining() }

// Stale reports whether the target has been abstaining for longer than
// its Hold at now: its verdict is still held (never turned down), but no
// longer fresh.
func (s TargetStatus) Stale(now time.Time) bool {
	return s.Abstaining() && now.Sub(s.Health.AbstainingSince) > s.Hold
}

// Fresh reports whether the target's facts are at most 3 intervals old,
// or, while the prober abstains (Abstaining), whether the abstention has
// lasted at most Hold.
func (s TargetStatus) Fresh(now time.Time) bool {
	if s.Health.Fresh(now, 3*s.Interval) {
		return true
	}
	return s.Abstaining() && !s.Stale(now)
}

// Slow reports whether a check has been in flight for more than half the
// schedule's timeout at now.
func (s TargetStatus) Slow(now time.Time) bool {
	return !s.InFlightSince.IsZero() && now.Sub(s.InFlightSince) > s.Timeout/2
}

// Options configure a Monitor; every field has a default.
type Options struct {
	// Now is the clock of health facts. Default time.Now.
	Now func() time.Time
	// Rand draws scheduling jitter; access is serialized by the monitor.
	// Default: the math/rand/v2 top-level functions.
	Rand *rand.Rand
	// OnEvent is called on each transition, one at a time from the
	// goroutine running Run, in the order each target produced them. It
	// must not block long: while it runs, further events queue and, once
	// the queue is full, checking stalls. Events of targets that were
	// removed or restarted by Update before delivery are dropped.
	OnEvent func(Event)
	// OnResult, when set, is called with every check result (for
	// metrics), from the target's goroutine; it must be safe for
	// concurrent use.
	OnResult func(key Key, r check.Result)
	// OnChange, when set, is called after every move of Changes (a state
	// transition, an Update that changed the targets), once the change
	// can be read: a versioned view of the statuses (hub.Lazy's Touch)
	// hangs here. It must not block and must be safe for concurrent use.
	OnChange func()
	// Logger receives debug and error logs, and the warnings of the
	// prober starting and stopping to abstain. Default: discard.
	Logger *slog.Logger
	// AbstainHold is how long the held verdict of a target whose checks
	// fail only for local reasons stays fresh (see the package comment).
	// Default DefaultAbstainHold.
	AbstainHold time.Duration
	// Coalesce is how early a check may start so that checks due close
	// together start in one wake-up of the scheduler (and, for a
	// BatchChecker, go out in one batch); a target's window is at most a
	// 50th of its interval. Default DefaultCoalesce; negative for none.
	Coalesce time.Duration
}

// Monitor probes a set of targets. Create it with New, give it targets
// with Update (before or while Run runs), and call Run.
type Monitor struct {
	opts   Options
	log    *slog.Logger
	events chan queuedEvent

	randMu sync.Mutex

	// changes counts the changes of the targets' health states (see
	// Changes).
	changes atomic.Uint64

	// abstain is the prober's abstention across targets, for its log
	// lines and Abstaining.
	abstain abstention

	// wake tells the scheduler that the earliest due time changed;
	// evKick tells Run that events wait in overflow.
	wake   chan struct{}
	evKick chan struct{}

	mu      sync.Mutex
	targets map[Key]*target
	// byKind indexes targets by Key.Kind, for EachKind: a reader of one
	// kind (the daemon's resolver facts, at every reconcile) walks its
	// own targets, not every GSLB member's.
	byKind  map[string]map[*target]struct{}
	running bool
	runCtx  context.Context
	// gen counts Runs: a check started by an earlier Run is not recorded.
	gen uint64
	// queue holds the targets waiting for their next check, by due time;
	// epoch is the origin of its keys.
	queue dueHeap
	epoch time.Time
	// overflow holds events that did not fit the events channel, in order;
	// while it is not empty, new events go there too.
	overflow []queuedEvent
	// wg counts the synchronous checks in flight.
	wg sync.WaitGroup
	// jobs hands synchronous checks to idle workers; unbuffered, so a
	// check that no idle worker takes starts a new one.
	jobs chan syncJob
}

// target is the monitor's state of one Target.
type target struct {
	key     Key
	addr    netip.AddrPort
	sched   Schedule
	checker check.Checker
	async   AsyncChecker // checker, when it is one
	batch   BatchChecker // checker, when it is one
	// coalesce is how early the target's check may start.
	coalesce time.Duration
	// hold is Options.AbstainHold, for the target's status.
	hold time.Duration
	spec string
	// done is the result callback of async checks, made once.
	done func(check.Result)

	// Scheduling state, under Monitor.mu.
	due     time.Time
	at      int64     // due as nanoseconds since Monitor.epoch
	started time.Time // when the check in flight started (real clock)
	// startedDue is when the check in flight was due: the next is due an
	// interval after it (or after started, when that is later).
	startedDue time.Time
	// queued is set while t waits in Monitor.queue; qseq numbers its
	// queueings, so that an entry of an earlier one is known stale.
	queued   bool
	qseq     uint32
	inflight bool
	gen      uint64 // the Run that started it
	cancel   context.CancelFunc
	removed  bool
	// exited, when set, is closed when the check in flight ends (Update
	// waits for it); successor is the target that replaces this one and
	// is queued only once this one's check ended, so that the two never
	// check at the same time.
	exited    chan struct{}
	successor *target

	mu      sync.Mutex
	tracker *health.Tracker
	last    check.Result
	lastAt  time.Time
	// probeStart is when the probe in flight started; zero when none is.
	probeStart time.Time
}

// New returns a monitor with no targets.
func New(opts Options) *Monitor {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AbstainHold <= 0 {
		opts.AbstainHold = DefaultAbstainHold
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{
		opts:    opts,
		log:     log,
		events:  make(chan queuedEvent, eventBuffer),
		wake:    make(chan struct{}, 1),
		evKick:  make(chan struct{}, 1),
		targets: make(map[Key]*target),
		byKind:  make(map[string]map[*target]struct{}),
		jobs:    make(chan syncJob),
		epoch:   time.Now(),
	}
}

// Update replaces the set of targets. A target whose key, address, spec
// and schedule are unchanged keeps its checker, schedule and health state.
// A target whose only change is its schedule (interval, fast interval,
// timeout, rise, fall) keeps its health state and restarts its schedule
// with the new checker; one whose address or spec changed restarts from
// Unknown (its first check starts only after the old one's check in
// flight ended). A removed target is stopped: Update cancels its
// synchronous check in flight and waits until it returned; the result of
// an AsyncChecker's check in flight is discarded when it comes. When
// Update returns it starts no more checks of a removed target and no more
// events of it are delivered. Targets with a zero or duplicate key, no
// checker, or a non-positive interval or timeout are logged and skipped.
// Update is safe to call at any time, also from OnEvent.
func (m *Monitor) Update(targets []Target) {
	// want holds the index in targets of each key's target: an index, not
	// a copy, keeps the map small (a reload gives 50,000 targets).
	want := make(map[Key]int, len(targets))
	for i := range targets {
		tg := &targets[i]
		if err := validTarget(*tg); err != nil {
			m.log.Error("monitor: skipping target", "target", tg.Key.String(), "err", err)
			continue
		}
		if _, dup := want[tg.Key]; dup {
			m.log.Error("monitor: skipping duplicate target", "target", tg.Key.String())
			continue
		}
		want[tg.Key] = i
	}

	var stopped []chan struct{}
	var replaced, carried map[Key]*target
	changed := false
	m.mu.Lock()
	for key, old := range m.targets {
		i, ok := want[key]
		sameFacts := ok && old.addr == targets[i].Addr && old.spec == targets[i].Spec
		if sameFacts && old.sched == targets[i].Schedule {
			continue
		}
		changed = true
		if sameFacts {
			if carried == nil {
				carried = make(map[Key]*target)
			}
			carried[key] = old // only the schedule changed: keep the facts
		}
		if !sameFacts {
			m.forgetAbstention(old)
		}
		old.removed = true
		m.unqueueLocked(old)
		if old.inflight {
			if replaced == nil {
				replaced = make(map[Key]*target)
			}
			replaced[key] = old
			if old.cancel != nil {
				old.cancel()
				old.exited = make(chan struct{})
				stopped = append(stopped, old.exited)
			}
		}
		delete(m.targets, key)
		delete(m.byKind[key.Kind], old)
		if ok {
			m.log.Debug("monitor: target changed, restarting", "target", key.String())
		} else {
			m.log.Debug("monitor: target removed", "target", key.String())
		}
	}
	now := m.opts.Now()
	for key, i := range want {
		if _, ok := m.targets[key]; ok {
			continue
		}
		changed = true
		tg := targets[i]
		t := m.newTarget(tg, now)
		if old := carried[key]; old != nil {
			old.mu.Lock()
			t.tracker = old.tracker.WithThresholds(tg.Schedule.Rise, tg.Schedule.Fall)
			t.last, t.lastAt = old.last, old.lastAt
			old.mu.Unlock()
		}
		m.targets[key] = t
		if m.byKind[key.Kind] == nil {
			m.byKind[key.Kind] = make(map[*target]struct{})
		}
		m.byKind[key.Kind][t] = struct{}{}
		if old := replaced[key]; old != nil {
			old.successor = t // queued when old's check ends
		} else if m.running {
			m.queueLocked(t, time.Now().Add(m.firstDelay(t.sched.Interval)))
		}
	}
	if changed {
		m.changes.Add(1) // after the new targets are visible (see Changes)
	}
	m.mu.Unlock()
	if changed && m.opts.OnChange != nil {
		m.opts.OnChange()
	}

	for _, done := range stopped {
		<-done
	}
}

// Changes counts the changes of the targets' health states: every state
// transition, and every Update that added, replaced or removed a target.
// It moves after the change can be seen, so that a reader who read
// Changes, then Status, then Changes again with the same count read
// every target's current state.
func (m *Monitor) Changes() uint64 { return m.changes.Load() }

// newTarget returns the state of tg, not queued.
func (m *Monitor) newTarget(tg Target, now time.Time) *target {
	t := &target{
		key:     tg.Key,
		addr:    tg.Addr,
		sched:   tg.Schedule,
		checker: tg.Checker,
		spec:    tg.Spec,
		tracker: health.NewTracker(tg.Schedule.Rise, tg.Schedule.Fall, now),
	}
	if a, ok := tg.Checker.(AsyncChecker); ok {
		t.async = a
		t.batch, _ = a.(BatchChecker)
		t.done = func(r check.Result) { m.finishAsync(t, r) }
	}
	t.coalesce = min(m.coalesce(), tg.Schedule.Interval/50)
	t.hold = m.opts.AbstainHold
	return t
}

// coalesce is the scheduler's coalescing window (Options.Coalesce).
func (m *Monitor) coalesce() time.Duration {
	if m.opts.Coalesce == 0 {
		return DefaultCoalesce
	}
	return max(m.opts.Coalesce, 0)
}

// validTarget reports why a target cannot be scheduled.
func validTarget(tg Target) error {
	switch {
	case tg.Key == Key{}:
		return errors.New("empty key")
	case tg.Checker == nil:
		return errors.New("no checker")
	case tg.Schedule.Interval <= 0:
		return fmt.Errorf("interval %v must be positive", tg.Schedule.Interval)
	case tg.Schedule.Timeout <= 0:
		return fmt.Errorf("timeout %v must be positive", tg.Schedule.Timeout)
	}
	return nil
}
