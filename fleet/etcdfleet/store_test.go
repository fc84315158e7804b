package etcdfleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/configs"
	"lbdns/intent"
	"lbdns/testkit/etcdtest"
)

// testFleet is one test's fleet: a prefix of its own, a user whose role
// is limited to it, and the nodes' stores.
type testFleet struct {
	t *testing.T
	c *etcdtest.Cluster
	f *configs.Fleet
}

func newFleet(t *testing.T, user string) *testFleet {
	c := etcd.Cluster(t)
	return &testFleet{t: t, c: c, f: fleetFor(t, c, user, "lb", "dc1")}
}

// node connects node name of cluster (the host alone when "") and
// returns its store and client.
func (tf *testFleet) node(name, cluster string, opts StoreOptions) (*Store, *clientv3.Client) {
	f := *tf.f
	f.Name, f.Cluster = name, cluster
	cli := connect(tf.t, &f)
	opts.Keys = KeysOf(f.Prefix, cluster, name)
	return NewStore(cli, opts), cli
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func override(resolver string) intent.Override {
	return intent.Override{Resolver: resolver, Action: intent.ActionDisable, Set: time.Unix(1700000000, 0).UTC(), By: "uid 0"}
}

func emergency() intent.Emergency {
	return intent.Emergency{Mode: intent.ModeStatic, Set: time.Unix(1700000000, 0).UTC(), By: "uid 0"}
}

// TestStoreSaveLoad: a save is read back whole by another node, at the
// etcd mod revision of the intent key it wrote.
func TestStoreSaveLoad(t *testing.T) {
	tf := newFleet(t, "saveload")
	a, _ := tf.node("a", "c1", StoreOptions{})
	b, _ := tf.node("b", "c1", StoreOptions{})
	ctx := ctxT(t)
	st, err := a.Load(ctx)
	if err != nil || st.Revision != 0 || len(st.State.Overrides) != 0 {
		t.Fatalf("Load of an empty prefix = %+v, %v; want the zero state at revision 0", st, err)
	}
	want := intent.State{Overrides: []intent.Override{override("r1")}}
	rev, err := a.Save(ctx, want, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != rev || len(got.State.Overrides) != 1 || got.State.Overrides[0] != want.Overrides[0] {
		t.Fatalf("b loads %+v, want %+v at revision %d", got, want, rev)
	}
	kv, err := tf.c.Root().Get(ctx, tf.f.Prefix+"intent/cluster/c1")
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("the cluster's key: %v, %v", kv, err)
	}
	if mod := kv.Kvs[0].ModRevision; intent.Revision(mod) != rev {
		t.Errorf("revision %d, the key's mod revision %d", rev, mod)
	}
	// Only the cluster's key was written: the fleet's revision, which
	// every other cluster's nodes apply, did not move.
	if fl, err := tf.c.Root().Get(ctx, tf.f.Prefix+"intent/fleet"); err != nil || len(fl.Kvs) != 0 {
		t.Errorf("the fleet's key after an override: %v, %v; want none", fl.Kvs, err)
	}
}

// TestStoreConflict: a write decided on a revision that is no longer the
// stored one is refused, says what is stored, and changes nothing.
func TestStoreConflict(t *testing.T) {
	tf := newFleet(t, "conflict")
	a, _ := tf.node("a", "c1", StoreOptions{})
	b, _ := tf.node("b", "", StoreOptions{})
	ctx := ctxT(t)
	seen, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// a switches the fleet's GSLB answers off; b, still at the revision
	// it read, tries to drain a resolver of its own.
	rev, err := a.Save(ctx, intent.State{Emergencies: []intent.Emergency{emergency()}}, seen.Revision)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Save(ctx, intent.State{Overrides: []intent.Override{override("r9")}}, seen.Revision)
	var ce *intent.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("stale Save: %v, want a *intent.ConflictError", err)
	}
	if ce.Expected != seen.Revision || ce.Actual != rev || len(ce.Current.Emergencies) != 1 {
		t.Fatalf("conflict %+v, want expected %d, actual %d with the emergency switch", ce, seen.Revision, rev)
	}
	t.Logf("refused: %v", ce)
	now, err := b.Load(ctx)
	if err != nil || now.Revision != rev || len(now.State.Overrides) != 0 {
		t.Fatalf("after the refusal b loads %+v, %v; want revision %d without overrides", now, err, rev)
	}
	// Decided again on the current revision, the write goes through.
	if _, err := b.Save(ctx, intent.State{Overrides: []intent.Override{override("r9")}, Emergencies: now.State.Emergencies}, now.Revision); err != nil {
		t.Fatalf("Save on the current revision: %v", err)
	}
}

// TestStoreScopes: GSLB switches and client actions are the whole
// fleet's; resolver overrides are the cluster's, or the host's alone
// without a cluster.
func TestStoreScopes(t *testing.T) {
	tf := newFleet(t, "scopes")
	a, _ := tf.node("a", "c1", StoreOptions{})
	b, _ := tf.node("b", "c1", StoreOptions{})
	c, _ := tf.node("c", "c2", StoreOptions{})
	d, _ := tf.node("d", "", StoreOptions{})
	e, _ := tf.node("e", "", StoreOptions{})
	ctx := ctxT(t)
	st, err := a.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	block := intent.ClientAction{Client: netip.MustParsePrefix("203.0.113.7/32"), Action: intent.ActionBlock, Until: time.Unix(2e9, 0).UTC(),
		Reason: "flood", Set: time.Unix(1, 0).UTC()}
	if _, err := a.Save(ctx, intent.State{Overrides: []intent.Override{override("r1")}, Emergencies: []intent.Emergency{emergency()},
		Clients: []intent.ClientAction{block}}, st.Revision); err != nil {
		t.Fatal(err)
	}
	dst, _ := d.Load(ctx)
	if _, err := d.Save(ctx, intent.State{Overrides: []intent.Override{override("r4")}, Emergencies: dst.State.Emergencies, Clients: dst.State.Clients}, dst.Revision); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s         *Store
		name      string
		overrides []string
	}{{a, "a", []string{"r1"}}, {b, "b", []string{"r1"}}, {c, "c", nil}, {d, "d", []string{"r4"}}, {e, "e", nil}} {
		got, err := tc.s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range got.State.Overrides {
			names = append(names, o.Resolver)
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.overrides) || len(got.State.Emergencies) != 1 {
			t.Errorf("%s: overrides %v and %d emergency switches, want %v and 1", tc.name, names, len(got.State.Emergencies), tc.overrides)
		}
		if len(got.State.Clients) != 1 || got.State.Clients[0] != block {
			t.Errorf("%s: client actions %+v, want the fleet's block %+v", tc.name, got.State.Clients, block)
		}
	}
}

// collect reads n revisions from ch, failing the test when ch closes or
// ctx ends first.
func collect(t *testing.T, ctx context.Context, ch <-chan intent.Stored, n int) []intent.Stored {
	t.Helper()
	var out []intent.Stored
	for len(out) < n {
		select {
		case st, ok := <-ch:
			if !ok {
				t.Fatalf("the watch closed after %d of %d revisions", len(out), n)
			}
			out = append(out, st)
		case <-ctx.Done():
			t.Fatalf("%d of %d revisions came: %v", len(out), n, out)
		}
	}
	return out
}

// quiet checks that ch delivers nothing more right now (a revision
// already queued would be there within the pause).
func quiet(t *testing.T, ch <-chan intent.Stored) {
	t.Helper()
	select {
	case st := <-ch:
		t.Fatalf("an extra revision %d was delivered", st.Revision)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestStoreWatch: every revision written by any node of the scope is
// delivered once, whole and in order; another cluster's writes are not;
// the resync delivers nothing twice. The resync runs every 250 ms: a
// watch that says nothing for a whole resync period while etcd is ahead
// is taken as stuck and read whole (skipping revisions, by design); at
// 20 ms a loaded machine's watch looked stuck.
func TestStoreWatch(t *testing.T) {
	tf := newFleet(t, "watch")
	a, _ := tf.node("a", "c1", StoreOptions{Resync: 250 * time.Millisecond})
	b, _ := tf.node("b", "c1", StoreOptions{})
	c, _ := tf.node("c", "c2", StoreOptions{})
	ctx := ctxT(t)
	if _, err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	ch := a.Watch(wctx)
	var revs []intent.Revision
	cur, _ := b.Load(ctx)
	for i := range 20 {
		st := cur.State
		st.Overrides = append(st.Overrides, override(fmt.Sprintf("r%d", i)))
		if i%5 == 4 {
			st.Emergencies = append(st.Emergencies, intent.Emergency{Name: fmt.Sprintf("n%d.g.test.", i), Mode: intent.ModeStatic, Set: time.Unix(1, 0).UTC()})
		}
		rev, err := b.Save(ctx, st, cur.Revision)
		if err != nil {
			t.Fatal(err)
		}
		cur = intent.Stored{State: st, Revision: rev}
		revs = append(revs, rev)
		cs, _ := c.Load(ctx)
		if _, err := c.Save(ctx, intent.State{Overrides: []intent.Override{override("other")}, Emergencies: cs.State.Emergencies}, cs.Revision); err != nil {
			t.Fatal(err)
		}
	}
	got := collect(t, ctx, ch, len(revs))
	for i, st := range got {
		if st.Revision != revs[i] || len(st.State.Overrides) != i+1 || len(st.State.Emergencies) != (i+1)/5 {
			t.Fatalf("delivery %d: revision %d with %d overrides, %d switches; want revision %d with %d, %d",
				i, st.Revision, len(st.State.Overrides), len(st.State.Emergencies), revs[i], i+1, (i+1)/5)
		}
	}
	quiet(t, ch)
	stop()
	for range ch { // closed when the context is done
	}
}

// TestStoreWatchAfterCompaction: a watch that starts behind a
// compaction reads the intent whole and delivers its latest revision
// once, then follows the next ones.
func TestStoreWatchAfterCompaction(t *testing.T) {
	tf := newFleet(t, "compact")
	a, _ := tf.node("a", "c1", StoreOptions{})
	b, _ := tf.node("b", "c1", StoreOptions{})
	ctx := ctxT(t)
	if _, err := a.Load(ctx); err != nil { // a's watch will start here
		t.Fatal(err)
	}
	cur, _ := b.Load(ctx)
	for i := range 5 {
		st := intent.State{Overrides: []intent.Override{override(fmt.Sprintf("r%d", i))}}
		rev, err := b.Save(ctx, st, cur.Revision)
		if err != nil {
			t.Fatal(err)
		}
		cur = intent.Stored{State: st, Revision: rev}
	}
	if _, err := tf.c.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch := a.Watch(wctx)
	got := collect(t, ctx, ch, 1)[0]
	if got.Revision != cur.Revision || got.State.Overrides[0].Resolver != "r4" {
		t.Fatalf("after the compaction: revision %d (%v), want the latest %d (r4)", got.Revision, got.State.Overrides, cur.Revision)
	}
	quiet(t, ch)
	next := intent.State{Overrides: []intent.Override{override("r5")}}
	rev, err := b.Save(ctx, next, cur.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, ctx, ch, 1)[0]; got.Revision != rev || got.State.Overrides[0].Resolver != "r5" {
		t.Fatalf("next: revision %d, want %d", got.Revision, rev)
	}
	stop()
	for range ch {
	}
}

// TestStoreBadDocument: intent in etcd that cannot be parsed fails Load
// (never read as no intent) and is skipped by a watch, which goes on.
func TestStoreBadDocument(t *testing.T) {
	tf := newFleet(t, "bad")
	a, _ := tf.node("a", "c1", StoreOptions{})
	ctx := ctxT(t)
	if _, err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch := a.Watch(wctx)
	if _, err := tf.c.Root().Put(ctx, tf.f.Prefix+"intent/fleet", `{"version": 1, "emergencies": [{"mode": "dynamic"}]}`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Load(ctx); err == nil {
		t.Fatal("Load of a bad document succeeded")
	} else {
		t.Logf("Load refused: %v", err)
	}
	good, err := intent.Marshal(intent.State{Emergencies: []intent.Emergency{emergency()}})
	if err != nil {
		t.Fatal(err)
	}
	put, err := tf.c.Root().Put(ctx, tf.f.Prefix+"intent/fleet", string(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, ctx, ch, 1)[0]; got.Revision != intent.Revision(put.Header.Revision) || len(got.State.Emergencies) != 1 {
		t.Fatalf("after the bad document: %+v, want the good one at %d", got, put.Header.Revision)
	}
}

// TestStoreWatchWithoutLoad: a watch on a store never loaded starts from
// what is stored when it is made, and delivers only what comes after.
func TestStoreWatchWithoutLoad(t *testing.T) {
	tf := newFleet(t, "noload")
	b, _ := tf.node("b", "c1", StoreOptions{})
	ctx := ctxT(t)
	first, err := b.Save(ctx, intent.State{Overrides: []intent.Override{override("r1")}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tf.node("a", "c1", StoreOptions{Resync: 50 * time.Millisecond})
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch := a.Watch(wctx)
	quiet(t, ch) // r1 was stored before the watch: not delivered, not even by the resync
	next, err := b.Save(ctx, intent.State{Overrides: []intent.Override{override("r2")}}, first)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, ctx, ch, 1)[0]; got.Revision != next {
		t.Fatalf("delivered revision %d, want %d", got.Revision, next)
	}
}
