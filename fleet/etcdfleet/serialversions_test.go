package etcdfleet

import (
	"sync"
	"testing"

	"lbdns/gslb/server"
)

// TestSerialVersions: against the real three-member cluster, two hosts
// with their own state directories and a late joiner with an empty one
// end with the same configuration version for the same served data; a
// change moves all of them up together; hosts allocating a new hash at
// once (guarded writes that lose re-read) end with one version.
func TestSerialVersions(t *testing.T) {
	tf := newFleet(t, "serial")
	store := func() *server.SerialStore {
		_, cli := tf.node("n", "", StoreOptions{})
		s := server.NewFleetSerialStore(t.TempDir(), NewSerialVersions(cli, tf.f.Prefix))
		if err := s.Load(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	version := func(s *server.SerialStore, hash string) uint32 {
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
	for _, s := range []*server.SerialStore{b, late, a} {
		if v := version(s, "H2"); v != 2 {
			t.Errorf("H2: %d, want 2", v)
		}
	}

	stores := []*server.SerialStore{a, b, late, store(), store()}
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
