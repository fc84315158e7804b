package vip

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// gateClient passes calls on to its Client, except that once armed, the
// first Services call reports itself on entered and then blocks until
// release is closed: a netlink dump that hangs mid-resync.
type gateClient struct {
	Client
	entered chan struct{} // nil: not armed
	release chan struct{}
}

func (g *gateClient) Services() ([]Service, error) {
	if g.entered != nil {
		close(g.entered)
		g.entered = nil
		<-g.release
	}
	return g.Client.Services()
}

// TestSnapshotDoesNotWaitForResync: while a Resync is stuck in the kernel
// dump, Table, Stats, Has, Dirty and Snapshot return at once with what the
// last call published; the Resync publishes its own result when it ends.
func TestSnapshotDoesNotWaitForResync(t *testing.T) {
	ctx := context.Background()
	m := NewMemClient()
	g := &gateClient{Client: m}
	r, _ := newTestReconciler(g, nil)
	if _, err := r.Sync(ctx, desiredTable()); err != nil {
		t.Fatal(err)
	}
	before := r.Stats()
	if !tablesEqual(r.Table(), desiredTable()) || before.Syncs != 1 || before.OpsApplied != 6 {
		t.Fatalf("after the first Sync: table %v stats %+v", r.Table(), before)
	}

	next := desiredTable()
	a := netip.MustParseAddrPort("10.0.0.1:53")
	next[kU].Dests[a] = dest("10.0.0.1:53", 0, DirectRoute)
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	entered := g.entered
	done := make(chan error, 1)
	go func() {
		_, err := r.Resync(ctx, next)
		done <- err
	}()
	<-entered // the Resync holds the reconciler and waits in the dump

	type reading struct {
		table Table
		stats ReconcilerStats
		has   bool
		dirty bool
		snap  *Snapshot
	}
	read := make(chan reading, 1)
	go func() {
		read <- reading{table: r.Table(), stats: r.Stats(), has: r.Has(kU), dirty: r.Dirty(), snap: r.Snapshot()}
	}()
	var got reading
	select {
	case got = <-read:
	case <-time.After(time.Minute): // only if the readers wait behind the resync
		close(g.release)
		t.Fatal("readers waited behind the blocked resync")
	}
	select {
	case err := <-done:
		t.Fatalf("the resync finished (%v) while its dump was held", err)
	default: // still blocked in the client, as it should be
	}
	if !tablesEqual(got.table, desiredTable()) || got.stats != before || !got.has || got.dirty {
		t.Errorf("while blocked: table %v stats %+v has %v dirty %v; want the first Sync's %+v",
			got.table, got.stats, got.has, got.dirty, before)
	}
	if got.snap.Stats != before || !tablesEqual(got.snap.Table, desiredTable()) {
		t.Errorf("while blocked: snapshot %+v", got.snap)
	}

	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after := r.Snapshot()
	if !tablesEqual(after.Table, next) || after.Stats.Resyncs != before.Resyncs+1 || after.Stats.Dumps != before.Dumps+1 || after.Dirty {
		t.Errorf("after the resync: snapshot %+v, want table %v and one more resync and dump", after, next)
	}
	// The snapshot read while blocked is unchanged by the later publish.
	if w := got.snap.Table[kU].Dests[a].Weight; w != 100 {
		t.Errorf("an old snapshot changed: weight %d, want 100", w)
	}
}

// TestSnapshotSharesNothingWithCache: a published table never aliases the
// reconciler's working cache, so later Syncs cannot change it.
func TestSnapshotSharesNothingWithCache(t *testing.T) {
	ctx := context.Background()
	m := NewMemClient()
	r, _ := newTestReconciler(m, nil)
	if _, err := r.Sync(ctx, desiredTable()); err != nil {
		t.Fatal(err)
	}
	first := r.Snapshot()
	want := desiredTable()
	a := netip.MustParseAddrPort("10.0.0.2:53")
	want[kT].Dests[a] = dest("10.0.0.2:53", 3, DirectRoute)
	delete(want, kU)
	if _, err := r.Sync(ctx, want); err != nil {
		t.Fatal(err)
	}
	if !tablesEqual(first.Table, desiredTable()) {
		t.Errorf("first snapshot changed by a later Sync: %v", first.Table)
	}
	second := r.Snapshot()
	if !tablesEqual(second.Table, want) || r.Has(kU) || !tablesEqual(r.Table(), want) {
		t.Errorf("second snapshot %v, want %v", second.Table, want)
	}
	// An idle Sync publishes the same table again (only counters move).
	if _, err := r.Sync(ctx, want); err != nil {
		t.Fatal(err)
	}
	if third := r.Snapshot(); !tablesEqual(third.Table, want) || third.Stats.Syncs != second.Stats.Syncs+1 {
		t.Errorf("third snapshot %+v", third)
	}
}
