// Package monitor schedules health checks per target, feeds each result to
// the target's health.Tracker, and emits an Event on every state change. It
// knows no check kind: a Target brings its own check.Checker, built by the
// caller, and a comparable Spec saying what that checker asks.
//
// Each target runs in its own goroutine with one timer: the first check
// comes after a random delay in [0, interval) so that targets loaded at the
// same moment spread out, later checks every interval ± up to 2%. A target
// has at most one check in flight: the next check is scheduled only when
// the previous one returned, so a check slower than the interval delays the
// next one instead of overlapping it. Each check's context has the
// schedule's timeout as its deadline.
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
	"time"

	"lbdns/check"
	"lbdns/health"
)

// eventBuffer is the number of events that may wait for OnEvent before
// target goroutines block.
const eventBuffer = 256

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
	// Logger receives debug and error logs. Default: discard.
	Logger *slog.Logger
}

// Monitor probes a set of targets. Create it with New, give it targets
// with Update (before or while Run runs), and call Run.
type Monitor struct {
	opts   Options
	log    *slog.Logger
	events chan queuedEvent

	randMu sync.Mutex

	mu      sync.Mutex
	targets map[Key]*target
	running bool
	runCtx  context.Context
	wg      sync.WaitGroup
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
	spec    string

	// Set when the goroutine is started, under Monitor.mu.
	cancel context.CancelFunc
	done   chan struct{}
	// prev, when set, is closed when the goroutine of the target this one
	// replaces has exited; the new goroutine waits for it so that the two
	// never probe at the same time.
	prev chan struct{}

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
		targets: make(map[Key]*target),
	}
}

// Update replaces the set of targets. A target whose key, address, spec
// and schedule are unchanged keeps its goroutine, checker, schedule and
// health state. A target whose only change is its schedule (interval, fast
// interval, timeout, rise, fall) keeps its health state and restarts its
// schedule with the new checker; one whose address or spec changed
// restarts from Unknown (its new goroutine starts checking only after the
// old one exited). A removed target is stopped: Update cancels its context
// and waits until its goroutine exited (an in-flight check must return),
// so when Update returns it makes no more check calls and no more events
// of it are delivered. Targets with a zero or duplicate key, no checker,
// or a non-positive interval or timeout are logged and skipped. Update is
// safe to call at any time, also from OnEvent.
func (m *Monitor) Update(targets []Target) {
	want := make(map[Key]Target, len(targets))
	for _, tg := range targets {
		if err := validTarget(tg); err != nil {
			m.log.Error("monitor: skipping target", "target", tg.Key.String(), "err", err)
			continue
		}
		if _, dup := want[tg.Key]; dup {
			m.log.Error("monitor: skipping duplicate target", "target", tg.Key.String())
			continue
		}
		want[tg.Key] = tg
	}

	var stopped []chan struct{}
	replaced := make(map[Key]chan struct{})
	carried := make(map[Key]*target)
	m.mu.Lock()
	for key, old := range m.targets {
		tg, ok := want[key]
		sameFacts := ok && old.addr == tg.Addr && old.spec == tg.Spec
		if sameFacts && old.sched == tg.Schedule {
			continue
		}
		if sameFacts {
			carried[key] = old // only the schedule changed: keep the facts
		}
		if old.cancel != nil {
			old.cancel()
			stopped = append(stopped, old.done)
			replaced[key] = old.done
		}
		delete(m.targets, key)
		if ok {
			m.log.Debug("monitor: target changed, restarting", "target", key.String())
		} else {
			m.log.Debug("monitor: target removed", "target", key.String())
		}
	}
	now := m.opts.Now()
	for key, tg := range want {
		if _, ok := m.targets[key]; ok {
			continue
		}
		t := &target{
			key:     key,
			addr:    tg.Addr,
			sched:   tg.Schedule,
			checker: tg.Checker,
			spec:    tg.Spec,
			tracker: health.NewTracker(tg.Schedule.Rise, tg.Schedule.Fall, now),
			prev:    replaced[key],
		}
		if old := carried[key]; old != nil {
			old.mu.Lock()
			t.tracker = old.tracker.WithThresholds(tg.Schedule.Rise, tg.Schedule.Fall)
			t.last, t.lastAt = old.last, old.lastAt
			old.mu.Unlock()
		}
		m.targets[key] = t
		if m.running {
			m.startLocked(t)
		}
	}
	m.mu.Unlock()

	for _, done := range stopped {
		<-done
	}
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

// startLocked starts the goroutine of t. m.mu must be held and m.running
// true.
func (m *Monitor) startLocked(t *target) {
	ctx, cancel := context.WithCancel(m.runCtx)
	t.cancel = cancel
	t.done = make(chan struct{})
	m.wg.Add(1)
	go m.runTarget(ctx, t, t.done)
}

// Run probes the targets until ctx is done, delivering events to
// OnEvent. It returns nil after every target goroutine has exited, or
// ErrRunning at once if Run is already running. Health state is kept, so
// Run may be called again later.
func (m *Monitor) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return ErrRunning
	}
	m.running = true
	m.runCtx = ctx
	for _, t := range m.targets {
		m.startLocked(t)
	}
	m.mu.Unlock()

	for {
		select {
		case <-ctx.Done():
			m.handleStop()
			return nil
		case qe := <-m.events:
			m.handleEvent(qe)
		}
	}
}

// handleStop stops every target goroutine and waits for them.
func (m *Monitor) handleStop() {
	m.mu.Lock()
	m.running = false
	m.runCtx = nil
	for _, t := range m.targets {
		if t.cancel != nil {
			t.cancel()
			t.cancel, t.done = nil, nil
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
	// Drop events still queued: their targets' goroutines are gone and a
	// later Run starts from the facts in the trackers.
	for {
		select {
		case <-m.events:
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

// runTarget is the goroutine of one target: it waits for its timer and
// probes, one probe at a time, until ctx is done; then it closes done.
func (m *Monitor) runTarget(ctx context.Context, t *target, done chan struct{}) {
	defer m.wg.Done()
	defer close(done)
	if t.prev != nil {
		select {
		case <-t.prev:
		case <-ctx.Done():
			return
		}
	}
	timer := time.NewTimer(m.firstDelay(t.sched.Interval))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			timer.Reset(m.handleTick(ctx, t))
		}
	}
}

// handleTick runs one scheduled check of t, records the result, and
// returns the delay until the next check.
func (m *Monitor) handleTick(ctx context.Context, t *target) time.Duration {
	start := time.Now()
	next := m.nextDelay(t.sched.Interval)
	if ctx.Err() != nil {
		return next
	}
	pctx, cancel := context.WithTimeout(ctx, t.sched.Timeout)
	t.mu.Lock()
	t.probeStart = m.opts.Now()
	t.mu.Unlock()
	r := t.checker.Check(pctx)
	cancel()
	if ctx.Err() != nil {
		// Stopped while checking: the result says more about our own
		// cancellation than about the target.
		t.mu.Lock()
		t.probeStart = time.Time{}
		t.mu.Unlock()
		return next
	}
	if m.handleResult(ctx, t, r) {
		next = m.nextDelay(t.fastInterval())
	}
	return max(next-time.Since(start), 0)
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
// and queues an event on a state change; it reports whether t is then
// transitioning (see transitioningLocked). It blocks while the event queue
// is full, until ctx is done. One lock per probe result: this runs
// thousands of times a second.
func (m *Monitor) handleResult(ctx context.Context, t *target, r check.Result) (transitioning bool) {
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
	qe := queuedEvent{t: t, ev: Event{Key: t.key, Addr: t.addr, Transition: tr, Result: r}}
	select {
	case m.events <- qe:
	case <-ctx.Done():
	}
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
	m.mu.Lock()
	ts := make([]*target, 0, len(m.targets))
	for _, t := range m.targets {
		ts = append(ts, t)
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
