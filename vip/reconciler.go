package vip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ReconcilerStats counts what a Reconciler has done since it was made.
type ReconcilerStats struct {
	// OpsApplied counts operations that succeeded.
	OpsApplied uint64
	// OpErrors counts failed attempts, each try of each operation.
	OpErrors uint64
	// OpsFailed counts operations that still failed after all retries.
	OpsFailed uint64
	// Retries counts second and later attempts of operations and dumps.
	Retries uint64
	// Dumps counts reads of the whole table (one per Resync attempt).
	Dumps uint64
	// DumpErrors counts dumps that failed.
	DumpErrors uint64
	// Syncs and Resyncs count calls; a Sync that had to resync counts as
	// both.
	Syncs, Resyncs uint64
}

// defaultBackoff is the wait before each retry of a failed operation: three
// tries in all.
func defaultBackoff() []time.Duration {
	return []time.Duration{50 * time.Millisecond, 200 * time.Millisecond}
}

// Reconciler brings the owned part of an IPVS table to a desired table
// through a Client, keeping a cached view of what the kernel holds so that
// routine changes cost no reads. See the package documentation for the
// ownership rule, adoption and drift repair. It is safe for concurrent use;
// Sync and Resync are serialized, and each publishes a Snapshot at its end
// that the readers (Snapshot, Table, Has, Stats, Dirty) get without
// waiting for the next.
type Reconciler struct {
	// Backoff is the wait before each retry of a failed operation or
	// dump; its length is the number of retries. NewReconciler sets 50ms
	// and 200ms. Set it before the first call.
	Backoff []time.Duration

	c     Client
	owned func(ServiceKey) bool
	// sleep waits for d or until ctx is done.
	sleep func(ctx context.Context, d time.Duration) error

	mu    sync.Mutex
	cache Table
	dirty bool
	stats ReconcilerStats
	// touched holds the services the current call changed in cache since
	// the last publish; all means the whole cache was replaced.
	touched map[ServiceKey]bool
	all     bool

	// snap is the last published Snapshot: readers never take mu.
	snap atomic.Pointer[Snapshot]
}

// Snapshot is what a Reconciler published at the end of its latest Sync or
// Resync (or at its creation): the applied table and the counters. It is
// immutable: share it, never modify it, Table included.
type Snapshot struct {
	// Table is the cached view of the kernel's owned services after the
	// call: what the kernel is believed to hold.
	Table Table
	// Stats are the counters after the call.
	Stats ReconcilerStats
	// Dirty reports whether the next Sync will do a Resync.
	Dirty bool
}

// NewReconciler returns a Reconciler over c that touches only services for
// which owned returns true (nil owns every service). Its cache starts dirty:
// the first Sync is a Resync.
func NewReconciler(c Client, owned func(ServiceKey) bool) *Reconciler {
	if owned == nil {
		owned = func(ServiceKey) bool { return true }
	}
	r := &Reconciler{
		Backoff: defaultBackoff(),
		c:       c,
		owned:   owned,
		sleep:   sleepCtx,
		cache:   make(Table),
		dirty:   true,
	}
	r.snap.Store(&Snapshot{Table: Table{}, Dirty: true})
	return r
}

// sleepCtx waits for d, or returns ctx's error when it is done first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Snapshot returns the last published snapshot, without waiting for a
// Sync or Resync in progress (a netlink resync can take seconds): status
// pages and metrics read it. It must not be modified.
func (r *Reconciler) Snapshot() *Snapshot {
	return r.snap.Load()
}

// Table returns a deep copy of the table of the last published Snapshot:
// what the kernel is believed to hold for owned services. It does not wait
// for a Sync or Resync in progress.
func (r *Reconciler) Table() Table {
	return r.snap.Load().Table.Clone()
}

// Has reports whether the last published Snapshot holds service k, without
// copying the table.
func (r *Reconciler) Has(k ServiceKey) bool {
	_, ok := r.snap.Load().Table[k]
	return ok
}

// Stats returns the counters of the last published Snapshot. It does not
// wait for a Sync or Resync in progress.
func (r *Reconciler) Stats() ReconcilerStats {
	return r.snap.Load().Stats
}

// Dirty reports whether the next Sync will do a Resync, because an
// operation failed, the kernel surprised the reconciler, or no Resync has
// succeeded yet (as of the last published Snapshot).
func (r *Reconciler) Dirty() bool {
	return r.snap.Load().Dirty
}

// publish makes the state after a call the new Snapshot. Only the services
// the call touched are copied; the others are shared with the previous
// snapshot, which nobody modifies. Callers hold mu.
func (r *Reconciler) publish() {
	prev := r.snap.Load()
	t := prev.Table
	switch {
	case r.all:
		t = r.cache.Clone()
	case len(r.touched) > 0:
		t = make(Table, len(prev.Table)+len(r.touched))
		for k, s := range prev.Table {
			t[k] = s
		}
		for k := range r.touched {
			if s, ok := r.cache[k]; ok {
				t[k] = s.Clone()
			} else {
				delete(t, k)
			}
		}
	}
	r.touched, r.all = nil, false
	r.snap.Store(&Snapshot{Table: t, Stats: r.stats, Dirty: r.dirty})
}

// Resync reads the kernel table once (Services, then Destinations for each
// owned service only), diffs it against desired and applies the difference.
// It flushes nothing: at start-up it adopts whatever matches, and later it
// repairs drift made by hand. It returns the operations that succeeded and
// all errors joined.
func (r *Reconciler) Resync(ctx context.Context, desired Table) ([]Op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.publish()
	return r.resync(ctx, desired)
}

// Sync diffs desired against the cached view (no read from the kernel) and
// applies only the changes: one changed destination costs one write. If the
// cache is dirty it does a Resync instead. It returns the operations that
// succeeded and all errors joined.
func (r *Reconciler) Sync(ctx context.Context, desired Table) ([]Op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.publish()
	r.stats.Syncs++
	if r.dirty {
		return r.resync(ctx, desired)
	}
	return r.apply(ctx, Diff(r.cache, desired, r.owned))
}

func (r *Reconciler) resync(ctx context.Context, desired Table) ([]Op, error) {
	r.stats.Resyncs++
	r.dirty = true
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("vip: resync: %w", err)
	}
	var current Table
	err := r.retry(ctx, r.Backoff, func() error {
		r.stats.Dumps++
		t, err := r.dump()
		if err != nil {
			r.stats.DumpErrors++
			return fmt.Errorf("vip: dump: %w", err)
		}
		current = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.cache = current
	r.all = true
	r.dirty = false
	return r.apply(ctx, Diff(r.cache, desired, r.owned))
}

// dump reads the owned part of the table.
func (r *Reconciler) dump() (Table, error) {
	svcs, err := r.c.Services()
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	t := make(Table)
	for _, s := range svcs {
		if !r.owned(s.Key) {
			continue
		}
		ds, err := r.c.Destinations(s.Key)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted between the two reads
		}
		if err != nil {
			return nil, fmt.Errorf("list destinations of %s: %w", s.Key, err)
		}
		svc := Service{Key: s.Key, Scheduler: s.Scheduler, Dests: make(map[netip.AddrPort]Destination, len(ds))}
		for _, d := range ds {
			svc.Dests[d.Addr] = d
		}
		t[s.Key] = svc
	}
	return t, nil
}

// retry runs f until it succeeds, with a wait from Backoff before each
// retry. It gives up when backoff is used up or ctx is done, returning the
// last error (joined with ctx's).
func (r *Reconciler) retry(ctx context.Context, backoff []time.Duration, f func() error) error {
	for i := 0; ; i++ {
		err := f()
		if err == nil {
			return nil
		}
		if i >= len(backoff) {
			return err
		}
		if werr := r.sleep(ctx, backoff[i]); werr != nil {
			return errors.Join(err, werr)
		}
		r.stats.Retries++
	}
}

// apply runs ops one by one, keeping the cache in step with each success.
// A failed operation is retried (see Backoff); if it still fails the cache
// is marked dirty and the rest are still attempted, but once an operation
// has failed for good the others get one try each, so a broken kernel
// cannot stall the caller for long. The destinations of a service whose
// creation failed are skipped. A done ctx stops it.
//
// When the Client is a BatchClient and there is more than one operation,
// all of them go to the kernel in one ApplyBatch first; only those that
// failed there then take the path above, so the outcome, the counts and
// the errors are those of running them one by one.
func (r *Reconciler) apply(ctx context.Context, ops []Op) ([]Op, error) {
	var (
		done     []Op
		errs     []error
		backoff  = r.Backoff
		missing  map[ServiceKey]bool // services whose creation failed
		batched  []error             // per op: nil if ApplyBatch did it
		stopped  error               // ctx's error once it is done
		notTried int
	)
	if bc, ok := r.c.(BatchClient); ok && len(ops) > 1 && ctx.Err() == nil {
		batched = bc.ApplyBatch(ops)
		if len(batched) != len(ops) { // a broken client: trust none of it
			batched = nil
		}
	}
	for i, op := range ops {
		if batched != nil && batched[i] == nil {
			r.stats.OpsApplied++
			r.applied(op)
			done = append(done, op)
			continue
		}
		if stopped == nil {
			stopped = ctx.Err()
		}
		if stopped != nil {
			r.dirty = true
			notTried++
			continue
		}
		if missing[op.Service.Key] {
			continue // its destinations cannot be created either
		}
		err := r.retry(ctx, backoff, func() error {
			err := r.exec(op)
			if err != nil {
				r.stats.OpErrors++
				return fmt.Errorf("vip: %s: %w", op, err)
			}
			return nil
		})
		if err != nil {
			r.stats.OpsFailed++
			r.dirty = true
			if op.Kind == CreateService {
				if missing == nil {
					missing = make(map[ServiceKey]bool)
				}
				missing[op.Service.Key] = true
			}
			backoff = nil // no more retries in this pass
			errs = append(errs, err)
			continue
		}
		r.stats.OpsApplied++
		r.applied(op)
		done = append(done, op)
	}
	if notTried > 0 {
		errs = append(errs, fmt.Errorf("vip: %d operations not applied: %w", notTried, stopped))
	}
	return done, errors.Join(errs...)
}

// applied keeps the cache in step with op, which succeeded, and notes its
// service for the next publish.
func (r *Reconciler) applied(op Op) {
	applyOp(r.cache, op)
	if r.touched == nil {
		r.touched = make(map[ServiceKey]bool)
	}
	r.touched[op.Service.Key] = true
}

// exec performs op once. A create that finds the object already there
// updates it, an update that finds it gone creates it, and a delete of what
// is already gone succeeds; each such surprise means the cache was wrong,
// so it is marked dirty for a Resync at the next Sync.
func (r *Reconciler) exec(op Op) error {
	k := op.Service.Key
	switch op.Kind {
	case CreateService:
		err := r.c.CreateService(op.Service)
		if errors.Is(err, os.ErrExist) {
			r.dirty = true
			err = r.c.UpdateService(op.Service)
		}
		return err
	case UpdateService:
		err := r.c.UpdateService(op.Service)
		if errors.Is(err, os.ErrNotExist) {
			r.dirty = true
			err = r.c.CreateService(op.Service)
		}
		return err
	case DeleteService:
		err := r.c.DeleteService(k)
		if errors.Is(err, os.ErrNotExist) {
			r.dirty = true
			err = nil
		}
		return err
	case CreateDest:
		err := r.c.CreateDestination(k, op.Dest)
		if errors.Is(err, os.ErrExist) {
			r.dirty = true
			err = r.c.UpdateDestination(k, op.Dest)
		}
		return err
	case UpdateDest:
		err := r.c.UpdateDestination(k, op.Dest)
		if errors.Is(err, os.ErrNotExist) {
			r.dirty = true
			err = r.c.CreateDestination(k, op.Dest)
		}
		return err
	case DeleteDest:
		err := r.c.DeleteDestination(k, op.Dest.Addr)
		if errors.Is(err, os.ErrNotExist) {
			r.dirty = true
			err = nil
		}
		return err
	}
	return fmt.Errorf("unknown operation kind %d", op.Kind)
}
