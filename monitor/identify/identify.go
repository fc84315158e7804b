// Package identify learns the product behind each resolver back end
// (vendor identification: CHAOS TXT version.bind, asked through an
// injected function) on a schedule of its own beside the health
// monitor's: one scheduler over a heap of due times, a goroutine per try
// in flight, the first try spread over a window, then one per period, a
// failed try repeated sooner. It knows no configuration; package resolvers lists the
// targets (IdentifyTargets) and the daemon runs it.
package identify

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"lbdns/internal/timerheap"
)

// DefaultEvery is how often a back end's identity is asked again
// when Options.Every is zero.
const DefaultEvery = 10 * time.Minute

// DefaultRetry is how soon a failed identification is tried again
// when Options.Retry is zero (never later than Every).
const DefaultRetry = 30 * time.Second

// ErrRunning is returned by Identifier.Run when it is already
// running.
var ErrRunning = errors.New("identify: identifier already running")

// Target is one back end to identify.
type Target struct {
	// Resolver is the resolver's name; unique within one Update.
	Resolver string
	// Addr is where the question goes.
	Addr netip.AddrPort
	// Vendor is the configured vendor, compared with the identified one.
	Vendor string
	// Timeout bounds one identification. Required (positive).
	Timeout time.Duration
	// Spread is the span over which the first identifications of targets
	// added at once are spread out (a random delay in [0, Spread)); zero
	// asks at once.
	Spread time.Duration
}

// Identity is what the Identifier knows about one back end.
type Identity struct {
	// Version is the last answer ("" before the first good one).
	Version string
	// Vendor is Version mapped to a vendor name ("" when unknown).
	Vendor string
	// Err is the text of the last error ("" when the last try succeeded).
	Err string
	// At is the time of the last try (zero before the first).
	At time.Time
}

// Options configure an Identifier. Identify is required.
type Options struct {
	// Identify asks a back end who it is (probes.Identify: CHAOS TXT
	// version.bind). Required.
	Identify func(ctx context.Context, addr netip.AddrPort) (string, error)
	// Answered reports whether an error of Identify means the back end
	// answered, only without a version (probes.ErrNoVersion: Knot by
	// default, hidden versions): such a back end is asked again after
	// Every, not after Retry. Default: never.
	Answered func(err error) bool
	// VendorOf maps a version to a vendor name (probes.VendorOf).
	// Default: every version is of an unknown vendor.
	VendorOf func(version string) string
	// Every is the period of identification. Default 10 minutes.
	Every time.Duration
	// Retry is how soon a failed identification of a back end that did
	// not answer (down at start, say) is tried again, if sooner than
	// Every. Default 30 seconds.
	Retry time.Duration
	// Now is the clock of Identity.At. Default time.Now.
	Now func() time.Time
	// Logger receives a line per new identity: info, or a warning when
	// the identified vendor is not the configured one. Default: discard.
	Logger *slog.Logger
}

// Identifier learns the product of each back end (vendor identification),
// beside the health monitor and never in its way. One scheduler goroutine
// keeps the targets in a heap by the time of their next try and starts
// each try in a goroutine of its own, which ends with the try: a try that
// hangs until its timeout delays no other, and an idle target costs no
// goroutine, stack or timer (5,000 back ends asked every 10 minutes had
// 5,000 goroutines parked between tries). The first try comes at start
// (spread over Target.Spread), then one every Every after the previous
// one ended; a try the back end did not answer is repeated after Retry
// instead. A target has at most one try in flight.
type Identifier struct {
	opts Options
	log  *slog.Logger

	// wake tells the scheduler that the earliest due time moved.
	wake chan struct{}

	mu      sync.Mutex
	targets map[string]*identTarget
	running bool
	runCtx  context.Context
	// queue holds the targets waiting for their next try, by due time.
	queue timerheap.Heap[queued]
	// wg counts the tries in flight.
	wg sync.WaitGroup
}

// queued is one target in the Identifier's queue.
type queued struct {
	due time.Time
	t   *identTarget
}

// Before orders the queue by due time (timerheap.Item).
func (q queued) Before(o queued) bool { return q.due.Before(o.due) }

// SetIndex records the entry's place in its target (timerheap.Item).
func (q queued) SetIndex(i int) { q.t.idx = i }

// identTarget is the Identifier's state of one target.
type identTarget struct {
	Target

	// Scheduling state, under Identifier.mu: idx is the place in the
	// queue (-1 when not queued); while a try is in flight, cancel ends
	// it and exited, when set, is closed once it ended (Update waits for
	// it); removed is set when Update dropped the target.
	idx      int
	inflight bool
	cancel   context.CancelFunc
	exited   chan struct{}
	removed  bool

	mu sync.Mutex
	id Identity
	// logged is the version last logged.
	logged string
	// failing is the kind of the failure last logged (failureKind), ""
	// when the last try succeeded: a failure is logged once until its
	// kind changes or a try succeeds.
	failing string
}

// New returns an Identifier with no targets.
func New(opts Options) *Identifier {
	if opts.Answered == nil {
		opts.Answered = func(error) bool { return false }
	}
	if opts.VendorOf == nil {
		opts.VendorOf = func(string) string { return "" }
	}
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultRetry
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Identifier{opts: opts, log: log, targets: map[string]*identTarget{}, wake: make(chan struct{}, 1)}
}

// Update replaces the set of targets. A target whose address is unchanged
// keeps its identity and schedule (its vendor and timeout are updated); one
// whose address changed starts again with no identity. A removed target is
// stopped: Update cancels its try in flight and waits until it ended.
// Targets with an empty or duplicate name, no identify function, or a
// non-positive timeout are logged and skipped.
func (i *Identifier) Update(targets []Target) {
	want := make(map[string]Target, len(targets))
	for _, tg := range targets {
		switch _, dup := want[tg.Resolver]; {
		case tg.Resolver == "" || tg.Timeout <= 0 || i.opts.Identify == nil:
			i.log.Error("identify: skipping target", "resolver", tg.Resolver, "timeout", tg.Timeout.String())
			continue
		case dup:
			i.log.Error("identify: skipping duplicate target", "resolver", tg.Resolver)
			continue
		}
		want[tg.Resolver] = tg
	}
	var stopped []chan struct{}
	i.mu.Lock()
	for name, old := range i.targets {
		tg, ok := want[name]
		if ok && tg.Addr == old.Addr {
			old.mu.Lock()
			old.Vendor, old.Timeout = tg.Vendor, tg.Timeout
			old.mu.Unlock()
			continue
		}
		old.removed = true
		if old.idx >= 0 {
			i.queue.Remove(old.idx)
		}
		if old.inflight {
			old.cancel()
			old.exited = make(chan struct{})
			stopped = append(stopped, old.exited)
		}
		delete(i.targets, name)
	}
	for name, tg := range want {
		if _, ok := i.targets[name]; ok {
			continue
		}
		t := &identTarget{Target: tg, idx: -1}
		i.targets[name] = t
		if i.running {
			i.queueLocked(t, time.Now().Add(i.firstDelay(t.Spread)))
		}
	}
	i.mu.Unlock()
	for _, done := range stopped {
		<-done
	}
}

// queueLocked queues t for a try at due and wakes the scheduler when t is
// now the earliest. i.mu is held.
func (i *Identifier) queueLocked(t *identTarget, due time.Time) {
	i.queue.Push(queued{due: due, t: t})
	if t.idx == 0 {
		select {
		case i.wake <- struct{}{}:
		default:
		}
	}
}

// Run identifies the targets until ctx is done, then returns nil after
// every try in flight ended (or ErrRunning at once when already running).
// Identities are kept, so Run may be called again.
func (i *Identifier) Run(ctx context.Context) error {
	i.mu.Lock()
	if i.running {
		i.mu.Unlock()
		return ErrRunning
	}
	i.running, i.runCtx = true, ctx
	now := time.Now()
	for _, t := range i.targets {
		i.queueLocked(t, now.Add(i.firstDelay(t.Spread)))
	}
	i.mu.Unlock()
	i.schedule(ctx)
	i.mu.Lock()
	i.running, i.runCtx = false, nil
	for i.queue.Len() > 0 {
		i.queue.Pop()
	}
	for _, t := range i.targets {
		if t.inflight {
			t.cancel()
		}
	}
	i.mu.Unlock()
	i.wg.Wait()
	return nil
}

// schedule starts the tries that are due and sleeps until the next one
// is, until ctx is done.
func (i *Identifier) schedule(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		wait := time.Hour
		i.mu.Lock()
		for i.queue.Len() > 0 {
			if due := i.queue.At(0).due; due.After(now) {
				wait = due.Sub(now)
				break
			}
			t := i.queue.Pop().t
			tctx, cancel := context.WithCancel(ctx)
			t.inflight, t.cancel = true, cancel
			i.wg.Add(1)
			go i.try(tctx, t)
		}
		i.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-i.wake:
		}
	}
}

// try makes one try of t with ctx and queues the next, unless t was
// removed or Run stopped meanwhile.
func (i *Identifier) try(ctx context.Context, t *identTarget) {
	defer i.wg.Done()
	next := i.identify(ctx, t)
	i.mu.Lock()
	defer i.mu.Unlock()
	t.cancel()
	t.inflight, t.cancel = false, nil
	if t.exited != nil {
		close(t.exited)
		t.exited = nil
	}
	if i.running && !t.removed {
		i.queueLocked(t, time.Now().Add(next))
	}
}

// identify asks t once, records the answer, logs a new identity, and
// returns the delay until the next try.
func (i *Identifier) identify(ctx context.Context, t *identTarget) time.Duration {
	t.mu.Lock()
	timeout := t.Timeout
	t.mu.Unlock()
	ictx, cancel := context.WithTimeout(ctx, timeout)
	version, err := i.opts.Identify(ictx, t.Addr)
	cancel()
	next := i.opts.Every
	if err != nil && !i.opts.Answered(err) {
		next = min(next, i.opts.Retry)
	}
	if ctx.Err() != nil {
		return next
	}
	at := i.opts.Now()
	t.mu.Lock()
	t.id.At = at
	if err != nil {
		t.id.Err = err.Error()
	} else {
		t.id = Identity{Version: version, Vendor: i.opts.VendorOf(version), At: at}
	}
	id, declared, fresh := t.id, t.Vendor, t.id.Version != "" && t.id.Version != t.logged
	if fresh {
		t.logged = t.id.Version
	}
	wasFailing, failing := t.failing, ""
	if err != nil {
		failing = failureKind(err)
	}
	t.failing = failing
	t.mu.Unlock()
	switch {
	case err != nil && failing != wasFailing:
		i.log.Debug("identify failed (logged once until it changes or succeeds)", "resolver", t.Resolver, "addr", t.Addr.String(), "err", err)
	case err == nil && wasFailing != "":
		i.log.Debug("identify answered again", "resolver", t.Resolver, "addr", t.Addr.String())
	}
	if fresh {
		i.note(t, id, declared)
	}
	return next
}

// failureKind classifies an identification error so that repeats of one
// failure compare equal although their texts differ (a fresh source port
// each time): a timeout, a refusal, or else the error's text.
func failureKind(err error) string {
	var nerr net.Error
	switch {
	case errors.As(err, &nerr) && nerr.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	}
	return err.Error()
}

// note logs a new identity, and warns when the product it names is not
// the vendor the config declares: a warning, never a failure, since
// version strings can be changed.
func (i *Identifier) note(t *identTarget, id Identity, declared string) {
	if id.Vendor != "" && declared != "" && declared != "other" && id.Vendor != declared {
		i.log.Warn("backend identifies as another vendor than configured", "resolver", t.Resolver, "addr", t.Addr.String(),
			"version", id.Version, "identified", id.Vendor, "configured", declared)
		return
	}
	i.log.Info("backend identified", "resolver", t.Resolver, "addr", t.Addr.String(), "version", id.Version, "vendor", id.Vendor)
}

// firstDelay returns a random delay in [0, spread).
func (i *Identifier) firstDelay(spread time.Duration) time.Duration {
	if spread <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(spread)))
}

// Identity returns what is known of resolver name's identity.
func (i *Identifier) Identity(name string) (Identity, bool) {
	i.mu.Lock()
	t := i.targets[name]
	i.mu.Unlock()
	if t == nil {
		return Identity{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id, true
}

// Identities returns the identity of every current target by resolver
// name.
func (i *Identifier) Identities() map[string]Identity {
	i.mu.Lock()
	ts := make([]*identTarget, 0, len(i.targets))
	for _, t := range i.targets {
		ts = append(ts, t)
	}
	i.mu.Unlock()
	out := make(map[string]Identity, len(ts))
	for _, t := range ts {
		t.mu.Lock()
		out[t.Resolver] = t.id
		t.mu.Unlock()
	}
	return out
}
