// Package monitor schedules health probes per target, feeds each result to
// the target's health.Tracker, and emits an Event on every state change.
//
// Each target runs in its own goroutine with one timer: the first probe
// comes after a random delay in [0, interval) so that targets loaded at the
// same moment spread out, later probes every interval ± up to 2%. A target
// has at most one probe in flight: the next probe is scheduled only when the
// previous one returned, so a probe slower than the interval delays the next
// one instead of overlapping it. Each probe's context has the check's
// timeout as its deadline.
//
// Timers and probe deadlines use the real clock; the times recorded in
// health facts come from Options.Now.
package monitor

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/probes"
)

// DefaultIdentifyEvery is how often a target's identity is asked again when
// Options.IdentifyEvery is zero.
const DefaultIdentifyEvery = 10 * time.Minute

// DefaultIdentifyRetry is how soon a failed identification is tried again
// when Options.IdentifyRetry is zero (never later than IdentifyEvery).
const DefaultIdentifyRetry = 30 * time.Second

// eventBuffer is the number of events that may wait for OnEvent before
// target goroutines block.
const eventBuffer = 256

// ErrRunning is returned by Run when the monitor is already running.
var ErrRunning = errors.New("monitor: already running")

// Target is one thing to probe with one check.
type Target struct {
	// ID identifies the target; it must be stable across reloads for an
	// unchanged target (the caller builds it, for example from the
	// resolver name and the check name) and unique within one Update.
	ID string
	// Addr is the address the probe goes to.
	Addr netip.AddrPort
	// Check is the check profile; Interval and Timeout must be positive.
	Check *configs.Check
}

// Event is one state change of one target.
type Event struct {
	TargetID   string
	Addr       netip.AddrPort
	Transition health.Transition
	// Result is the probe result that caused the change.
	Result probes.Result
}

// TargetStatus is what the monitor knows about one target.
type TargetStatus struct {
	ID        string
	Addr      netip.AddrPort
	CheckName string
	// Interval is the check's probe interval, the unit of freshness.
	Interval time.Duration
	// Timeout is the check's probe timeout.
	Timeout time.Duration
	// InFlightSince is when the probe in flight started (zero when none
	// is): a probe that has waited long already hints at a failure before
	// its result arrives.
	InFlightSince time.Time
	// Health is the tracker's state and counters.
	Health health.Status
	// Last is the last probe result, at LastAt (zero before the first).
	Last   probes.Result
	LastAt time.Time
	// Identity is the last answer of Options.Identify ("" when none yet or
	// none configured); IdentityErr the text of its last error ("" when
	// the last call succeeded); IdentifiedAt the time of the last call.
	Identity     string
	IdentityErr  string
	IdentifiedAt time.Time
}

// Fresh reports whether the target's facts are at most 3 intervals old.
func (s TargetStatus) Fresh(now time.Time) bool {
	return s.Health.Fresh(now, 3*s.Interval)
}

// Slow reports whether a probe has been in flight for more than half the
// check's timeout at now.
func (s TargetStatus) Slow(now time.Time) bool {
	return !s.InFlightSince.IsZero() && now.Sub(s.InFlightSince) > s.Timeout/2
}

// Options configure a Monitor. Probe is required; the rest have defaults.
type Options struct {
	// Probe performs one probe. Required.
	Probe probes.Func
	// Identify, when set, asks a target who it is (for example its vendor
	// and version). It is called in the target's goroutine before its
	// first probe and then every IdentifyEvery, for checks whose Identify
	// is unset or true, with the check's timeout as deadline.
	Identify func(ctx context.Context, addr netip.AddrPort) (string, error)
	// IdentifyEvery is the period of Identify. Default 10 minutes.
	IdentifyEvery time.Duration
	// IdentifyRetry is how soon a failed Identify (a back end that was
	// down at start, say) is tried again, if sooner than IdentifyEvery.
	// Default 30 seconds.
	IdentifyRetry time.Duration
	// Now is the clock of health facts. Default time.Now.
	Now func() time.Time
	// Rand draws scheduling jitter; access is serialized by the monitor.
	// Default: the math/rand/v2 top-level functions.
	Rand *rand.Rand
	// OnEvent is called on each transition, one at a time from the
	// goroutine running Run, in the order each target produced them. It
	// must not block long: while it runs, further events queue and, once
	// the queue is full, probing stalls. Events of targets that were
	// removed or restarted by Update before delivery are dropped.
	OnEvent func(Event)
	// OnResult, when set, is called with every probe result (for metrics),
	// from the target's goroutine; it must be safe for concurrent use.
	OnResult func(targetID string, r probes.Result)
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
	targets map[string]*target
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
	id    string
	addr  netip.AddrPort
	check configs.Check

	// Set when the goroutine is started, under Monitor.mu.
	cancel context.CancelFunc
	done   chan struct{}
	// prev, when set, is closed when the goroutine of the target this one
	// replaces has exited; the new goroutine waits for it so that the two
	// never probe at the same time.
	prev chan struct{}

	// Owned by the target's goroutine.
	nextIdentify time.Time

	mu           sync.Mutex
	tracker      *health.Tracker
	last         probes.Result
	lastAt       time.Time
	identity     string
	identityErr  string
	identifiedAt time.Time
	// probeStart is when the probe in flight started; zero when none is.
	probeStart time.Time
}

// New returns a monitor with no targets.
func New(opts Options) *Monitor {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.IdentifyEvery <= 0 {
		opts.IdentifyEvery = DefaultIdentifyEvery
	}
	if opts.IdentifyRetry <= 0 {
		opts.IdentifyRetry = DefaultIdentifyRetry
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{
		opts:    opts,
		log:     log,
		events:  make(chan queuedEvent, eventBuffer),
		targets: make(map[string]*target),
	}
}

// Update replaces the set of targets. A target whose ID, address and check
// settings are unchanged keeps its goroutine, schedule and health state. A
// target whose only change is its pacing (interval, fast interval, timeout,
// rise, fall, identify) keeps its health state and restarts its schedule;
// one whose address or question changed restarts from Unknown (its new
// goroutine starts probing only after the old one exited). A
// removed target is stopped: Update cancels its context and waits until its
// goroutine exited (an in-flight probe must return), so when Update returns
// it makes no more probe calls and no more events of it are delivered. Targets with an empty or
// duplicate ID, a nil check, or a non-positive interval or timeout are
// logged and skipped. Update is safe to call at any time, also from
// OnEvent.
func (m *Monitor) Update(targets []Target) {
	want := make(map[string]Target, len(targets))
	for _, tg := range targets {
		if err := validTarget(tg); err != nil {
			m.log.Error("monitor: skipping target", "target", tg.ID, "err", err)
			continue
		}
		if _, dup := want[tg.ID]; dup {
			m.log.Error("monitor: skipping duplicate target", "target", tg.ID)
			continue
		}
		want[tg.ID] = tg
	}

	var stopped []chan struct{}
	replaced := make(map[string]chan struct{})
	carried := make(map[string]*target)
	m.mu.Lock()
	for id, old := range m.targets {
		tg, ok := want[id]
		if ok && old.addr == tg.Addr && old.check.Equal(tg.Check) {
			continue
		}
		if ok && old.addr == tg.Addr && old.check.SameProbe(tg.Check) {
			carried[id] = old // only the pacing changed: keep the facts
		}
		if old.cancel != nil {
			old.cancel()
			stopped = append(stopped, old.done)
			replaced[id] = old.done
		}
		delete(m.targets, id)
		if ok {
			m.log.Debug("monitor: target changed, restarting", "target", id)
		} else {
			m.log.Debug("monitor: target removed", "target", id)
		}
	}
	now := m.opts.Now()
	for id, tg := range want {
		if _, ok := m.targets[id]; ok {
			continue
		}
		t := &target{
			id:      id,
			addr:    tg.Addr,
			check:   *tg.Check,
			tracker: health.NewTracker(tg.Check.Rise, tg.Check.Fall, now),
			prev:    replaced[id],
		}
		if old := carried[id]; old != nil {
			old.mu.Lock()
			t.tracker = old.tracker.WithThresholds(tg.Check.Rise, tg.Check.Fall)
			t.last, t.lastAt = old.last, old.lastAt
			t.identity, t.identityErr, t.identifiedAt = old.identity, old.identityErr, old.identifiedAt
			old.mu.Unlock()
		}
		m.targets[id] = t
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
	case tg.ID == "":
		return errors.New("empty id")
	case tg.Check == nil:
		return errors.New("no check")
	case tg.Check.Interval.Duration <= 0:
		return errors.New("interval must be positive")
	case tg.Check.Timeout.Duration <= 0:
		return errors.New("timeout must be positive")
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
	current := m.targets[qe.t.id] == qe.t
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
	timer := time.NewTimer(m.firstDelay(t.check.Interval.Duration))
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

// handleTick runs one scheduled probe of t (and Identify when due), records
// the result, and returns the delay until the next probe.
func (m *Monitor) handleTick(ctx context.Context, t *target) time.Duration {
	start := time.Now()
	next := m.nextDelay(t.check.Interval.Duration)
	if ctx.Err() != nil {
		return next
	}
	m.identifyIfDue(ctx, t)
	pctx, cancel := context.WithTimeout(ctx, t.check.Timeout.Duration)
	t.mu.Lock()
	t.probeStart = m.opts.Now()
	t.mu.Unlock()
	r := m.opts.Probe(pctx, t.addr, &t.check)
	cancel()
	if ctx.Err() != nil {
		// Stopped while probing: the result says more about our own
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

// fastInterval is the check's fast_interval, or its interval when unset.
func (t *target) fastInterval() time.Duration {
	if f := t.check.FastInterval.Duration; f > 0 && f < t.check.Interval.Duration {
		return f
	}
	return t.check.Interval.Duration
}

// identifyIfDue calls Options.Identify for t when it is due.
func (m *Monitor) identifyIfDue(ctx context.Context, t *target) {
	if m.opts.Identify == nil || (t.check.Identify != nil && !*t.check.Identify) {
		return
	}
	if time.Now().Before(t.nextIdentify) {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, t.check.Timeout.Duration)
	id, err := m.opts.Identify(ictx, t.addr)
	cancel()
	next := m.opts.IdentifyEvery
	if err != nil && !errors.Is(err, probes.ErrNoVersion) {
		// No answer (down at start, say): ask again soon. A back end
		// that answers without a version (Knot by default, hidden
		// versions) keeps the normal period.
		next = min(next, m.opts.IdentifyRetry)
	}
	t.nextIdentify = time.Now().Add(next)
	if ctx.Err() != nil {
		return
	}
	at := m.opts.Now()
	t.mu.Lock()
	t.identifiedAt = at
	if err != nil {
		t.identityErr = err.Error()
	} else {
		t.identity, t.identityErr = id, ""
	}
	t.mu.Unlock()
	if err != nil {
		m.log.Debug("monitor: identify failed", "target", t.id, "addr", t.addr, "err", err)
	}
}

// handleResult ends t's probe in flight, feeds its result to t's tracker
// and queues an event on a state change; it reports whether t is then
// transitioning (see transitioningLocked). It blocks while the event queue
// is full, until ctx is done. One lock per probe result: this runs
// thousands of times a second.
func (m *Monitor) handleResult(ctx context.Context, t *target, r probes.Result) (transitioning bool) {
	now := m.opts.Now()
	t.mu.Lock()
	t.probeStart = time.Time{}
	t.last, t.lastAt = r, now
	tr, changed := t.tracker.Observe(r.OK, r.Detail, now)
	transitioning = t.transitioningLocked()
	t.mu.Unlock()
	if m.opts.OnResult != nil {
		m.opts.OnResult(t.id, r)
	}
	if !changed {
		return transitioning
	}
	qe := queuedEvent{t: t, ev: Event{TargetID: t.id, Addr: t.addr, Transition: tr, Result: r}}
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

// Status returns the status of every current target by ID.
func (m *Monitor) Status() map[string]TargetStatus {
	m.mu.Lock()
	ts := make([]*target, 0, len(m.targets))
	for _, t := range m.targets {
		ts = append(ts, t)
	}
	m.mu.Unlock()
	out := make(map[string]TargetStatus, len(ts))
	for _, t := range ts {
		out[t.id] = t.status()
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
		ID:            t.id,
		Addr:          t.addr,
		CheckName:     t.check.Name,
		Interval:      t.check.Interval.Duration,
		Timeout:       t.check.Timeout.Duration,
		InFlightSince: t.probeStart,
		Health:        t.tracker.Snapshot(),
		Last:          t.last,
		LastAt:        t.lastAt,
		Identity:      t.identity,
		IdentityErr:   t.identityErr,
		IdentifiedAt:  t.identifiedAt,
	}
}
