package monitor

import (
	"context"
	"errors"
	"time"

	"lbdns/check"
	"lbdns/health"
)

// syncJob is one synchronous check for a worker: of t, with ctx; start is
// when it was due (or started, when later), the base of the next due time.
type syncJob struct {
	ctx   context.Context
	t     *target
	start time.Time
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
	if r.Local() {
		// Status, lbctl and the page show the last result's detail:
		// say there that it is the prober's, and that the verdict holds.
		r.Detail = "local failure (" + r.Cause.String() + "), verdict held: " + r.Detail
	}
	t.mu.Lock()
	t.probeStart = time.Time{}
	t.last, t.lastAt = r, now
	var tr health.Transition
	var changed, started, ended bool
	var since time.Time
	if r.Local() {
		// The prober's own trouble: no evidence, the tracker abstains.
		started = t.tracker.Abstain(r.Detail, now)
	} else {
		if t.tracker.Abstaining() {
			ended, since = true, t.tracker.Snapshot().AbstainingSince
		}
		tr, changed = t.tracker.Observe(r.OK, r.Detail, now)
	}
	transitioning = t.transitioningLocked()
	t.mu.Unlock()
	if m.opts.OnResult != nil {
		m.opts.OnResult(t.key, r)
	}
	if started || ended {
		m.abstained(t, r, started, since, now)
	}
	if !changed {
		if started || ended {
			m.changes.Add(1) // the status's abstaining flag moved
			if m.opts.OnChange != nil {
				m.opts.OnChange()
			}
		}
		return transitioning
	}
	m.changes.Add(1) // after the new state is visible (see Changes)
	if m.opts.OnChange != nil {
		m.opts.OnChange()
	}
	m.queueEvent(queuedEvent{t: t, ev: Event{Key: t.key, Addr: t.addr, Transition: tr, Result: r}})
	return transitioning
}
