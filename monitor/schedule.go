package monitor

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"
)

// workerIdle is how long a worker of synchronous checks waits for one
// before it ends.
const workerIdle = time.Minute

// queueLocked queues t for a check at due and wakes the scheduler when t
// is now the earliest. A target queued already moves (its old entry goes
// stale). m.mu must be held.
func (m *Monitor) queueLocked(t *target, due time.Time) {
	t.due, t.at = due, int64(due.Sub(m.epoch))
	t.qseq++
	t.queued = true
	if m.queue.push(heapEntry{t.at, t, t.qseq}) {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// unqueueLocked takes t out of the queue if it is there (its entry goes
// stale). m.mu must be held.
func (m *Monitor) unqueueLocked(t *target) {
	t.queued = false
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
		for {
			e, ok := m.queue.first()
			if !ok || e.at > horizon {
				break
			}
			m.queue.pop()
			t := e.t
			t.queued = false
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
			t.queued = true // its sequence number unchanged
			m.queue.push(heapEntry{t.at, t, t.qseq})
		}
		clear(later)
		later = later[:0]
		wait := time.Hour
		if e, ok := m.queue.first(); ok {
			wait = e.t.due.Sub(now)
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

// handleStop stops the scheduler's checks and waits for the synchronous
// ones; async checks in flight end later and are not recorded.
func (m *Monitor) handleStop() {
	m.mu.Lock()
	m.running = false
	m.runCtx = nil
	m.queue.reset()
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
