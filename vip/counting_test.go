package vip_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"lbdns/testkit/vipfake"
	"lbdns/vip"
)

// The tests here count the calls the reconciler makes with
// vipfake.CountingClient, so they live in the external test package.

var (
	newTestReconciler = vip.NewTestReconciler
	desiredTable      = vip.DesiredTable
	tablesEqual       = vip.TablesEqual
	opStrings         = vip.OpStrings
	fill              = vip.Fill
	dest              = vip.Dest
	svc               = vip.Svc
	table             = vip.TableOf
	kU, kT, kX        = vip.KeyU, vip.KeyT, vip.KeyX
)

func TestReconcilerAdoptNoOps(t *testing.T) {
	m := vip.NewMemClient()
	fill(t, m, desiredTable())
	c := vipfake.NewCountingClient(m)
	r, _ := newTestReconciler(c, nil)
	ops, err := r.Resync(context.Background(), desiredTable())
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 0 {
		t.Errorf("adopting a matching table gave ops %q", opStrings(ops))
	}
	if n := c.Counts().Writes; n != 0 {
		t.Errorf("adopting a matching table made %d writes", n)
	}
	if !tablesEqual(r.Table(), desiredTable()) {
		t.Errorf("cache %v, want %v", r.Table(), desiredTable())
	}
}

func TestReconcilerResyncDumpsOnceOwnedOnly(t *testing.T) {
	m := vip.NewMemClient()
	fill(t, m, desiredTable())
	fill(t, m, table(svc(kX, "rr", dest("10.0.0.9:80", 1, vip.NAT))))
	c := vipfake.NewCountingClient(m)
	owned := func(k vip.ServiceKey) bool { return k != kX }
	r, _ := newTestReconciler(c, owned)

	want := desiredTable()
	want[kU].Dests[netip.MustParseAddrPort("10.0.0.1:53")] = dest("10.0.0.1:53", 0, vip.DirectRoute)
	ops, err := r.Resync(context.Background(), want)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Counts()
	if got.Services != 1 || got.Destinations != 2 || got.Writes != 1 {
		t.Errorf("counts %+v, want 1 services read, 2 destinations reads (owned only), 1 write", got)
	}
	if len(ops) != 1 || ops[0].Kind != vip.UpdateDest {
		t.Errorf("ops %q, want one update-dest", opStrings(ops))
	}
	if _, ok := r.Table()[kX]; ok {
		t.Error("cache holds an unowned service")
	}
	if s := m.Table()[kX]; s.Scheduler != "rr" || len(s.Dests) != 1 {
		t.Errorf("unowned service changed: %v", s)
	}
	if st := r.Stats(); st.Dumps != 1 || st.Resyncs != 1 || st.OpsApplied != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestReconcilerSyncOneChangeOneWrite(t *testing.T) {
	m := vip.NewMemClient()
	c := vipfake.NewCountingClient(m)
	r, _ := newTestReconciler(c, nil)
	ctx := context.Background()
	if _, err := r.Sync(ctx, desiredTable()); err != nil { // first Sync resyncs
		t.Fatal(err)
	}
	if !tablesEqual(m.Table(), desiredTable()) {
		t.Fatalf("kernel %v, want %v", m.Table(), desiredTable())
	}
	before := c.Counts()

	want := desiredTable()
	want[kT].Dests[netip.MustParseAddrPort("10.0.0.2:53")] = dest("10.0.0.2:53", 0, vip.DirectRoute)
	ops, err := r.Sync(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	after := c.Counts()
	if w := after.Writes - before.Writes; w != 1 {
		t.Errorf("one change made %d writes, want 1", w)
	}
	if after.Services != before.Services || after.Destinations != before.Destinations {
		t.Errorf("Sync read the kernel: before %+v after %+v", before, after)
	}
	if len(ops) != 1 || ops[0].String() != "update-dest tcp/192.0.2.1:53 -> 10.0.0.2:53 w=0 dr" {
		t.Errorf("ops %q", opStrings(ops))
	}
	if !tablesEqual(m.Table(), want) || !tablesEqual(r.Table(), want) {
		t.Errorf("kernel %v cache %v, want %v", m.Table(), r.Table(), want)
	}
	// Nothing changed: nothing written.
	if ops, err := r.Sync(ctx, want); err != nil || len(ops) != 0 || c.Counts() != after {
		t.Errorf("idle Sync: ops %q err %v counts %+v", opStrings(ops), err, c.Counts())
	}
}

func TestReconcilerDirtyResyncRepairs(t *testing.T) {
	boom := errors.New("boom")
	m := vip.NewMemClient()
	f, heal := vip.NewFailKindClient(m, "UpdateDestination", boom)
	c := vipfake.NewCountingClient(f)
	r, _ := newTestReconciler(c, nil)
	ctx := context.Background()
	if _, err := r.Sync(ctx, desiredTable()); err != nil {
		t.Fatal(err)
	}
	want := desiredTable()
	want[kU].Dests[netip.MustParseAddrPort("10.0.0.1:53")] = dest("10.0.0.1:53", 5, vip.DirectRoute)
	want[kU].Dests[netip.MustParseAddrPort("10.0.0.3:53")] = dest("10.0.0.3:53", 5, vip.DirectRoute)
	ops, err := r.Sync(ctx, want)
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if len(ops) != 1 || ops[0].Kind != vip.CreateDest {
		t.Errorf("applied %q, want only the create-dest", opStrings(ops))
	}
	st := r.Stats()
	if st.OpsFailed != 1 || st.OpErrors != 3 || !r.Dirty() {
		t.Fatalf("stats %+v dirty %v, want 1 failed op after 3 tries, dirty", st, r.Dirty())
	}
	// The kernel heals; the next Sync must resync (one dump) and repair.
	heal()
	before := c.Counts()
	if _, err := r.Sync(ctx, want); err != nil {
		t.Fatal(err)
	}
	if d := c.Counts().Services - before.Services; d != 1 {
		t.Errorf("Sync after failure dumped %d times, want 1", d)
	}
	if !tablesEqual(m.Table(), want) || r.Dirty() {
		t.Errorf("kernel %v dirty %v, want %v", m.Table(), r.Dirty(), want)
	}
}

func TestReconcilerCancelledBeforeDump(t *testing.T) {
	m := vip.NewMemClient()
	c := vipfake.NewCountingClient(m)
	r, _ := newTestReconciler(c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Sync(ctx, desiredTable()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if got := c.Counts(); got != (vipfake.ClientCounts{}) {
		t.Errorf("cancelled Sync touched the client: %+v", got)
	}
	if !r.Dirty() {
		t.Error("not dirty")
	}
}

func TestReconcilerBatchOnlyForMany(t *testing.T) {
	ctx := context.Background()
	m := vip.NewMemClient()
	c := vipfake.NewCountingClient(m)
	r, _ := newTestReconciler(c, nil)
	if _, err := r.Sync(ctx, desiredTable()); err != nil {
		t.Fatal(err)
	}
	got := c.Counts()
	if want := (vipfake.ClientCounts{Services: 1, Writes: 6, Batches: 1}); got != want {
		t.Errorf("full sync counts %+v, want %+v", got, want)
	}
	want := desiredTable()
	want[kU].Dests[netip.MustParseAddrPort("10.0.0.1:53")] = dest("10.0.0.1:53", 5, vip.DirectRoute)
	if _, err := r.Sync(ctx, want); err != nil {
		t.Fatal(err)
	}
	got = c.Counts()
	if want := (vipfake.ClientCounts{Services: 1, Writes: 7, Batches: 1}); got != want {
		t.Errorf("after one change counts %+v, want %+v (one write, no batch)", got, want)
	}
	if !tablesEqual(m.Table(), want) {
		t.Errorf("table %v, want %v", m.Table(), want)
	}
}
