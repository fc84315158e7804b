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
// Timers and check deadlines use the real clock; the times recorded in
// health facts come from Options.Now.
package monitor

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"lbdns/check"
	"lbdns/health"
)

// eventBuffer is the number of events that may wait in the channel for
// OnEvent; more wait in an overflow list, so that no check ever blocks on
// delivery.
const eventBuffer = 256

// DefaultCoalesce is the default Options.Coalesce. Each target's window is
// also capped at a 50th of its interval (20 ms at 1 s, the size of the
// ±2% jitter), so short intervals keep their pacing.
const DefaultCoalesce = 20 * time.Millisecond

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
}

// Fresh reports whether the target's facts are at most 3 intervals old.
func (s TargetStatus) Fresh(now time.Time) bool {
	return s.Health.Fresh(now, 3*s.Interval)
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
	// Logger receives debug and error logs. Default: discard.
	Logger *slog.Logger
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
	queue timerHeap
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

// workerIdle is how long a worker of synchronous checks waits for one
// before it ends.
const workerIdle = time.Minute

// syncJob is one synchronous check for a worker: of t, with ctx; start is
// when it was due (or started, when later), the base of the next due time.
type syncJob struct {
	ctx   context.Context
	t     *target
	start time.Time
}

// queuedEvent is an event waiting for delivery, with the target it came
// from so that delivery can tell whether the target is still current.
type queuedEvent struct {
	t  *target
	ev Event
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
	spec     string
	// done is the result callback of async checks, made once.
	done func(check.Result)

	// Scheduling state, under Monitor.mu.
	due     time.Time
	at      int64     // due as nanoseconds since Monitor.epoch
	started time.Time // when the check in flight started (real clock)
	// startedDue is when the check in flight was due: the next is due an
	// interval after it (or after started, when that is later).
	startedDue time.Time
	idx        int // index in Monitor.queue, -1 when not queued
	inflight   bool
	gen        uint64 // the Run that started it
	cancel     context.CancelFunc
	removed    bool
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
		idx:     -1,
		tracker: health.NewTracker(tg.Schedule.Rise, tg.Schedule.Fall, now),
	}
	if a, ok := tg.Checker.(AsyncChecker); ok {
		t.async = a
		t.batch, _ = a.(BatchChecker)
		t.done = func(r check.Result) { m.finishAsync(t, r) }
	}
	t.coalesce = min(m.coalesce(), tg.Schedule.Interval/50)
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

// queueLocked queues t for a check at due and wakes the scheduler when t
// is now the earliest. m.mu must be held.
func (m *Monitor) queueLocked(t *target, due time.Time) {
	t.due, t.at = due, int64(due.Sub(m.epoch))
	if t.idx >= 0 {
		m.queue[t.idx].at = t.at
		heap.Fix(&m.queue, t.idx)
	} else {
		heap.Push(&m.queue, t)
	}
	if t.idx == 0 {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// unqueueLocked takes t out of the queue if it is there. m.mu must be
// held.
func (m *Monitor) unqueueLocked(t *target) {
	if t.idx >= 0 {
		heap.Remove(&m.queue, t.idx)
	}
}

// Run probes the targets until ctx is done, delivering events to
// OnEvent. It returns nil after the scheduler and every synchronous check
// have returned, or ErrRunning at once if Run is already running. Health
// state is kept, so Run may be called again later.
func (m *Monitor) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return ErrRunning
	}
	m.running = true
	m.runCtx = ctx
	m.gen++
	now := time.Now()
	for _, t := range m.targets {
		if !t.inflight {
			m.queueLocked(t, now.Add(m.firstDelay(t.sched.Interval)))
		}
	}
	m.mu.Unlock()

	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		m.schedule(ctx)
	}()
	for {
		select {
		case <-ctx.Done():
			<-schedDone
			m.handleStop()
			return nil
		case qe := <-m.events:
			m.handleEvent(qe)
		case <-m.evKick:
			m.drainOverflow(ctx)
		}
	}
}

// schedule is the scheduler: it starts the checks that are due and sleeps
// until the next one is, until ctx is done.
func (m *Monitor) schedule(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	coalesce := m.coalesce()
	var due, later []*target
	var flushers []Flusher
	for {
		now := time.Now()
		horizon := int64(now.Add(coalesce).Sub(m.epoch))
		due = due[:0]
		m.mu.Lock()
		for len(m.queue) > 0 && m.queue[0].at <= horizon {
			t := heap.Pop(&m.queue).(*target)
			if t.due.After(now.Add(t.coalesce)) {
				later = append(later, t) // beyond its own window
				continue
			}
			t.inflight, t.started, t.startedDue, t.gen = true, now, t.due, m.gen
			if t.async == nil {
				cctx, cancel := context.WithTimeout(m.runCtx, t.sched.Timeout)
				t.cancel = cancel
				m.wg.Add(1)
				base := t.due // the next check is due an interval after
				if now.After(base) {
					base = now
				}
				job := syncJob{ctx: cctx, t: t, start: base}
				select {
				case m.jobs <- job:
				default:
					go m.worker(ctx, job)
				}
				continue
			}
			due = append(due, t)
		}
		for _, t := range later {
			heap.Push(&m.queue, t)
		}
		clear(later)
		later = later[:0]
		wait := time.Hour
		if len(m.queue) > 0 {
			wait = m.queue[0].t.due.Sub(now)
		}
		m.mu.Unlock()
		var probeStart time.Time // one clock reading for the checks of a wake-up
		if len(due) > 0 {
			probeStart = m.opts.Now()
		}
		for _, t := range due {
			t.mu.Lock()
			t.probeStart = probeStart
			t.mu.Unlock()
			deadline := now.Add(t.sched.Timeout)
			if t.batch == nil {
				t.async.StartCheck(deadline, t.done)
				continue
			}
			if f := t.batch.StartHeld(deadline, t.done); f != nil && !slices.Contains(flushers, f) {
				flushers = append(flushers, f)
			}
		}
		for _, f := range flushers {
			f.Flush()
		}
		clear(flushers)
		flushers = flushers[:0]
		clear(due)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-m.wake:
		}
	}
}

// worker runs synchronous checks: job, then those handed to it, until it
// has waited workerIdle for one or ctx (its Run's) is done.
func (m *Monitor) worker(ctx context.Context, job syncJob) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		m.runSync(job.ctx, job.t, job.start)
		idle.Reset(workerIdle)
		select {
		case job = <-m.jobs:
		case <-idle.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// runSync runs one synchronous check of t started at start, with ctx
// (its deadline the schedule's timeout), and records it.
func (m *Monitor) runSync(ctx context.Context, t *target, start time.Time) {
	defer m.wg.Done()
	t.mu.Lock()
	t.probeStart = m.opts.Now()
	t.mu.Unlock()
	r := t.checker.Check(ctx)
	// Stopped or removed while checking: the result says more about our
	// own cancellation than about the target.
	m.finish(t, start, r, (ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded)) && m.current(t))
}

// current reports whether t is still a target of the running monitor, in
// the Run that started its check.
func (m *Monitor) current(t *target) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running && !t.removed && t.gen == m.gen
}

// finishAsync is the done callback of t's async checks.
func (m *Monitor) finishAsync(t *target, r check.Result) {
	m.mu.Lock()
	start := t.startedDue
	if t.started.After(start) {
		start = t.started
	}
	current := m.running && !t.removed && t.gen == m.gen // m.current, one lock
	m.mu.Unlock()
	m.finish(t, start, r, current)
}

// finish ends t's check started at start: it records r when record is
// set, then queues t's next check, or, when t was removed, its successor's
// first.
func (m *Monitor) finish(t *target, start time.Time, r check.Result, record bool) {
	next := t.sched.Interval
	if record {
		if m.handleResult(nil, t, r) {
			next = t.fastInterval()
		}
	} else {
		t.mu.Lock()
		t.probeStart = time.Time{}
		t.mu.Unlock()
	}
	next = m.nextDelay(next)
	m.mu.Lock()
	defer m.mu.Unlock()
	t.inflight = false
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
	if t.exited != nil {
		close(t.exited)
		t.exited = nil
	}
	if !m.running {
		return
	}
	if t.removed {
		if s := t.successor; s != nil && !s.removed {
			m.queueLocked(s, time.Now().Add(m.firstDelay(s.sched.Interval)))
		}
		t.successor = nil
		return
	}
	m.queueLocked(t, start.Add(next))
}

// handleStop stops the scheduler's checks and waits for the synchronous
// ones; async checks in flight end later and are not recorded.
func (m *Monitor) handleStop() {
	m.mu.Lock()
	m.running = false
	m.runCtx = nil
	for len(m.queue) > 0 {
		heap.Pop(&m.queue)
	}
	m.mu.Unlock()
	m.wg.Wait()
	// Drop events still queued: their checks are over and a later Run
	// starts from the facts in the trackers.
	m.mu.Lock()
	m.overflow = nil
	m.mu.Unlock()
	for {
		select {
		case <-m.events:
		case <-m.evKick:
		default:
			return
		}
	}
}

// handleEvent delivers one event if its target is still current.
func (m *Monitor) handleEvent(qe queuedEvent) {
	m.mu.Lock()
	current := m.targets[qe.t.key] == qe.t
	m.mu.Unlock()
	if !current || m.opts.OnEvent == nil {
		return
	}
	m.opts.OnEvent(qe.ev)
}

// drainOverflow delivers the events in the channel, then those in
// overflow, in order, unless ctx is done.
func (m *Monitor) drainOverflow(ctx context.Context) {
	for {
		select {
		case qe := <-m.events:
			m.handleEvent(qe)
			continue
		default:
		}
		m.mu.Lock()
		evs := m.overflow
		m.overflow = nil
		m.mu.Unlock()
		if len(evs) == 0 {
			return
		}
		for _, qe := range evs {
			if ctx.Err() != nil {
				return
			}
			m.handleEvent(qe)
		}
	}
}

// queueEvent queues qe for Run without blocking.
func (m *Monitor) queueEvent(qe queuedEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.overflow) == 0 {
		select {
		case m.events <- qe:
			return
		default:
		}
	}
	m.overflow = append(m.overflow, qe)
	select {
	case m.evKick <- struct{}{}:
	default:
	}
}

// transitioningLocked reports whether t's state is not settled: unknown,
// or up with failures, or down with successes, not yet enough to change
// it. Such a target is probed every fast interval, so that a verdict (and
// the removal of a failed back end) does not wait fall × interval. t.mu
// must be held.
func (t *target) transitioningLocked() bool {
	s := t.tracker.Snapshot()
	switch s.State {
	case health.Up:
		return s.ConsecutiveFail > 0
	case health.Down:
		return s.ConsecutiveOK > 0
	}
	return true
}

// fastInterval is the schedule's fast interval, or its interval when
// unset.
func (t *target) fastInterval() time.Duration {
	if f := t.sched.FastInterval; f > 0 && f < t.sched.Interval {
		return f
	}
	return t.sched.Interval
}

// handleResult ends t's probe in flight, feeds its result to t's tracker
// and queues an event on a state change (never blocking); it reports
// whether t is then transitioning (see transitioningLocked). ctx is
// unused. One lock per probe result: this runs thousands of times a
// second.
func (m *Monitor) handleResult(_ context.Context, t *target, r check.Result) (transitioning bool) {
	now := m.opts.Now()
	t.mu.Lock()
	t.probeStart = time.Time{}
	t.last, t.lastAt = r, now
	tr, changed := t.tracker.Observe(r.OK, r.Detail, now)
	transitioning = t.transitioningLocked()
	t.mu.Unlock()
	if m.opts.OnResult != nil {
		m.opts.OnResult(t.key, r)
	}
	if !changed {
		return transitioning
	}
	m.changes.Add(1) // after the new state is visible (see Changes)
	if m.opts.OnChange != nil {
		m.opts.OnChange()
	}
	m.queueEvent(queuedEvent{t: t, ev: Event{Key: t.key, Addr: t.addr, Transition: tr, Result: r}})
	return transitioning
}

// firstDelay returns a random delay in [0, interval).
func (m *Monitor) firstDelay(interval time.Duration) time.Duration {
	return time.Duration(m.int64N(int64(interval)))
}

// nextDelay returns interval ± up to 2%. The random first delay already
// spreads targets over the interval; the small jitter keeps them from
// falling into step while bounding detection: a failure is seen within
// about fall × interval × 1.02.
func (m *Monitor) nextDelay(interval time.Duration) time.Duration {
	span := int64(interval) / 50
	if span <= 0 {
		return interval
	}
	return interval + time.Duration(m.int64N(2*span+1)-span)
}

// int64N returns a random number in [0, n); n must be positive.
func (m *Monitor) int64N(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if m.opts.Rand == nil {
		return rand.Int64N(n)
	}
	m.randMu.Lock()
	defer m.randMu.Unlock()
	return m.opts.Rand.Int64N(n)
}

// Status returns the status of every current target by key.
func (m *Monitor) Status() map[Key]TargetStatus {
	m.mu.Lock()
	ts := make([]*target, 0, len(m.targets))
	for _, t := range m.targets {
		ts = append(ts, t)
	}
	m.mu.Unlock()
	out := make(map[Key]TargetStatus, len(ts))
	for _, t := range ts {
		out[t.key] = t.status()
	}
	return out
}

// Each calls fn with the status of every current target, in no particular
// order. Unlike Status it builds no map: a caller that reads every target
// often (the daemon, once a second) allocates nothing per target. fn runs
// without the monitor's lock held.
func (m *Monitor) Each(fn func(TargetStatus)) {
	m.each("", fn)
}

// EachKind is Each for the targets whose Key.Kind is kind only: the
// others' statuses are not even copied, so that a caller that reads one
// kind often (the daemon's tick reads the resolver targets once a second)
// pays nothing for thousands of targets of another kind (GSLB members).
func (m *Monitor) EachKind(kind string, fn func(TargetStatus)) {
	if kind == "" {
		return
	}
	m.each(kind, fn)
}

// OfKind returns a view of m's targets of kind only, for a reader of
// Each (resolvers.Facts): its Each is m.EachKind(kind, ...).
func (m *Monitor) OfKind(kind string) KindView { return KindView{m: m, kind: kind} }

// KindView is the targets of one kind of a Monitor (Monitor.OfKind).
type KindView struct {
	m    *Monitor
	kind string
}

// Each calls fn with the status of every current target of v's kind, as
// Monitor.EachKind does.
func (v KindView) Each(fn func(TargetStatus)) { v.m.EachKind(v.kind, fn) }

// each is Each over the targets of kind, or of every kind when kind is
// empty.
func (m *Monitor) each(kind string, fn func(TargetStatus)) {
	m.mu.Lock()
	var ts []*target
	if kind == "" {
		ts = slices.AppendSeq(make([]*target, 0, len(m.targets)), maps.Values(m.targets))
	} else {
		ts = slices.AppendSeq(make([]*target, 0, len(m.byKind[kind])), maps.Keys(m.byKind[kind]))
	}
	m.mu.Unlock()
	for _, t := range ts {
		fn(t.status())
	}
}

// status returns a copy of t's status.
func (t *target) status() TargetStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TargetStatus{
		Key:           t.key,
		Addr:          t.addr,
		Interval:      t.sched.Interval,
		Timeout:       t.sched.Timeout,
		InFlightSince: t.probeStart,
		Health:        t.tracker.Snapshot(),
		Last:          t.last,
		LastAt:        t.lastAt,
	}
}

// timerHeap orders targets by due time (container/heap). Each entry holds
// its target's due time as nanoseconds since the monitor's epoch, so that
// ordering reads the heap's own array, not every target's memory.
type timerHeap []heapEntry

// heapEntry is one queued target and its due time (target.at).
type heapEntry struct {
	at int64
	t  *target
}

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].t.idx, h[j].t.idx = i, j
}

func (h *timerHeap) Push(x any) {
	t := x.(*target)
	t.idx = len(*h)
	*h = append(*h, heapEntry{t.at, t})
}

func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = heapEntry{}
	e.t.idx = -1
	*h = old[:len(old)-1]
	return e.t
}
