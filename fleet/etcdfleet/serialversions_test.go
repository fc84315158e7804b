package etcdfleet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"lbdns/responder"
)

// TestSerialVersions: against the real three-member cluster, two hosts
// with their own state directories and a late joiner with an empty one
// end with the same configuration version for the same served data; a
// change moves all of them up together; hosts allocating a new hash at
// once (guarded writes that lose re-read) end with one version.
func TestSerialVersions(t *testing.T) {
	tf := newFleet(t, "serial")
	store := func() *responder.SerialStore {
		_, cli := tf.node("n", "", StoreOptions{})
		s := responder.NewFleetSerialStore(t.TempDir(), NewSerialVersions(cli, tf.f.Prefix))
		if err := s.Load(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	version := func(s *responder.SerialStore, hash string) uint32 {
		t.Helper()
		v, err := s.Version(hash)
		if err != nil || s.RegisterError() != nil {
			t.Fatalf("Version(%s): %v, register: %v", hash, err, s.RegisterError())
		}
		return v
	}
	a, b := store(), store()
	if va, vb := version(a, "H1"), version(b, "H1"); va != 1 || vb != 1 {
		t.Errorf("H1: a %d, b %d; want 1, 1", va, vb)
	}
	late := store()
	if v := version(late, "H1"); v != 1 {
		t.Errorf("late joiner on H1: %d, want 1", v)
	}
	for _, s := range []*responder.SerialStore{b, late, a} {
		if v := version(s, "H2"); v != 2 {
			t.Errorf("H2: %d, want 2", v)
		}
	}

	stores := []*responder.SerialStore{a, b, late, store(), store()}
	got := make([]uint32, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { got[i], _ = s.Version("H3") })
	}
	wg.Wait()
	for i, s := range stores {
		if got[i] != 3 || s.RegisterError() != nil {
			t.Errorf("store %d on H3 at once: %d (register: %v), want 3", i, got[i], s.RegisterError())
		}
	}
	doc, err := NewSerialVersions(tf.c.Root(), tf.f.Prefix).Read(ctxT(t))
	if err != nil || doc.Max != 3 || len(doc.Hashes) != 3 {
		t.Errorf("register %+v, %v; want max 3, three hashes", doc, err)
	}
}

// TestSerialVersionsWatch: a version another node registers wakes the
// watch, and the watch returns when its context is done.
func TestSerialVersionsWatch(t *testing.T) {
	tf := newFleet(t, "serialwatch")
	_, cli := tf.node("a", "", StoreOptions{})
	_, other := tf.node("b", "", StoreOptions{})
	reg := NewSerialVersions(cli, tf.f.Prefix)
	ctx, cancel := context.WithCancel(ctxT(t))
	woke := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		reg.Watch(ctx, func() { woke <- struct{}{} })
		close(done)
	}()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := NewSerialVersions(other, tf.f.Prefix).Version(ctxT(t), fmt.Sprint("H", time.Now().UnixNano()), 1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-woke:
		case <-time.After(200 * time.Millisecond):
			continue // the watch may not be open yet: write again
		case <-deadline:
			t.Fatal("no wake-up from the watch")
		}
		break
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after its context was done")
	}
}
