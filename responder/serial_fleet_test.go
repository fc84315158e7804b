package responder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"lbdns/fleet"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/testkit/poll"
)

// fakeRegister is a fleet's register of versions in memory, with
// fleet.Versions' rule; down makes it unreachable.
type fakeRegister struct {
	mu      sync.Mutex
	v       fleet.Versions
	down    bool
	changed chan struct{} // Watch calls changed on each receive
}

func newFakeRegister() *fakeRegister { return &fakeRegister{changed: make(chan struct{})} }

var errDown = errors.New("etcd unreachable")

func (f *fakeRegister) Version(ctx context.Context, hash string, floor uint32) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return 0, errDown
	}
	n, _ := f.v.Assign(hash, floor)
	return n, nil
}

func (f *fakeRegister) Watch(ctx context.Context, changed func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.changed:
			changed()
		}
	}
}

func (f *fakeRegister) setDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

func (f *fakeRegister) of(hash string) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v.Hashes[hash]
}

// fleetStore returns a loaded store of reg in dir.
func fleetStore(t *testing.T, dir string, reg VersionRegister) *SerialStore {
	t.Helper()
	s := NewFleetSerialStore(dir, reg)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	return s
}

// versionOf returns s.Version(hash), failing the test on an error.
func versionOf(t *testing.T, s *SerialStore, hash string) uint32 {
	t.Helper()
	v, err := s.Version(hash)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSerialStoreFleet: hosts of a fleet serving the same data get the
// same version whatever their history: through a rolling change, a
// rollback (which moves every host up, never back), a late joiner and a
// restart with an empty state directory; the version a host got from
// the fleet is kept in its file, so a restart without the register
// serves it.
func TestSerialStoreFleet(t *testing.T) {
	reg := newFakeRegister()
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := fleetStore(t, dirA, reg), fleetStore(t, dirB, reg)
	if va, vb := versionOf(t, a, "H1"), versionOf(t, b, "H1"); va != 1 || vb != 1 {
		t.Fatalf("first data: a %d, b %d; want 1, 1", va, vb)
	}
	// A rolling change: a first, b later.
	if va := versionOf(t, a, "H2"); va != 2 {
		t.Errorf("a on new data: %d, want 2", va)
	}
	if vb := versionOf(t, b, "H2"); vb != 2 {
		t.Errorf("b on the same new data: %d, want 2", vb)
	}
	// A rollback to H1: the version moves up, on both.
	va, vb := versionOf(t, a, "H1"), versionOf(t, b, "H1")
	if va != 3 || vb != 3 {
		t.Errorf("rollback to H1: a %d, b %d; want 3, 3 (never back to 1)", va, vb)
	}
	// A late joiner, then b restarted with an empty state directory.
	c := fleetStore(t, t.TempDir(), reg)
	if vc := versionOf(t, c, "H1"); vc != 3 {
		t.Errorf("late joiner: %d, want 3", vc)
	}
	if err := os.Remove(filepath.Join(dirB, SerialFile)); err != nil {
		t.Fatal(err)
	}
	b = fleetStore(t, dirB, reg)
	if vb := versionOf(t, b, "H1"); vb != 3 {
		t.Errorf("b restarted with an empty state: %d, want 3", vb)
	}
	if !b.Synced() || b.RegisterError() != nil {
		t.Errorf("b: synced %v, register error %v", b.Synced(), b.RegisterError())
	}
	// Restarted while the register cannot be reached: the saved version.
	reg.setDown(true)
	a = fleetStore(t, dirA, reg)
	if va := versionOf(t, a, "H1"); va != 3 {
		t.Errorf("a restarted without the register: %d, want 3 (its file's)", va)
	}
}

// TestSerialStoreFleetUnreachable: while the register cannot be reached
// the host keeps to its own count (new data: one more; a first start
// with an empty state: 1) and says why; Resync, once the register is
// back, moves it up to the fleet's version of the data, or raises the
// fleet's to the host's when the host's is higher; the serial never goes
// back on the host.
func TestSerialStoreFleetUnreachable(t *testing.T) {
	reg := newFakeRegister()
	a := fleetStore(t, t.TempDir(), reg)
	for _, h := range []string{"H1", "H2", "H3", "H4"} {
		versionOf(t, a, h) // the fleet is at 4 for H4
	}
	reg.setDown(true)
	empty := fleetStore(t, t.TempDir(), reg)
	if v := versionOf(t, empty, "H4"); v != 1 {
		t.Errorf("a first start without the register: %d, want 1 (the host's own count)", v)
	}
	if empty.Synced() || !errors.Is(empty.RegisterError(), errDown) {
		t.Errorf("synced %v, register error %v; want false, %v", empty.Synced(), empty.RegisterError(), errDown)
	}
	s1, err := empty.Serve(10)
	if err != nil || s1 != 11 {
		t.Fatalf("Serve(10) = %d, %v; want 11", s1, err)
	}
	if moved, err := empty.Resync(); moved || !errors.Is(err, errDown) {
		t.Errorf("Resync while down = %v, %v", moved, err)
	}
	reg.setDown(false)
	if moved, err := empty.Resync(); !moved || err != nil || empty.Current() != 4 || !empty.Synced() {
		t.Errorf("Resync once back = %v, %v: version %d synced %v; want the fleet's 4", moved, err, empty.Current(), empty.Synced())
	}
	if s2, _ := empty.Serve(10); s2 != 14 {
		t.Errorf("serial after Resync %d, want 14", s2)
	}

	// A host ahead of the fleet (its own count, while cut off, went to 9).
	reg.setDown(true)
	ahead := fleetStore(t, t.TempDir(), reg)
	for i := range 9 {
		versionOf(t, ahead, fmt.Sprint("x", i))
	}
	versionOf(t, ahead, "H5") // 10, the host's own
	reg.setDown(false)
	if moved, err := ahead.Resync(); moved || err != nil || ahead.Current() != 10 {
		t.Errorf("Resync of a host ahead = %v, %v, version %d; want it kept at 10", moved, err, ahead.Current())
	}
	if got := reg.of("H5"); got != 10 {
		t.Errorf("the fleet's version of H5 is %d, want 10 (raised to the host's)", got)
	}
	if v := versionOf(t, a, "H5"); v != 10 {
		t.Errorf("another host on H5: %d, want 10", v)
	}
}

// TestSerialStoreFleetServeAhead: when the intent revision goes back,
// Serve moves the version up (the serial never goes back) and the next
// Resync raises the fleet's version to it, so the others follow.
func TestSerialStoreFleetServeAhead(t *testing.T) {
	reg := newFakeRegister()
	a, b := fleetStore(t, t.TempDir(), reg), fleetStore(t, t.TempDir(), reg)
	versionOf(t, a, "H")
	versionOf(t, b, "H")
	if s, _ := a.Serve(20); s != 21 {
		t.Fatalf("serial %d, want 21", s)
	}
	if s, _ := a.Serve(5); s != 22 {
		t.Fatalf("serial after the revision went back %d, want 22", s)
	}
	if a.Synced() {
		t.Error("a still synced after Serve moved its version")
	}
	if _, err := a.Resync(); err != nil || reg.of("H") != 17 {
		t.Errorf("Resync: %v; fleet's version of H %d, want 17", err, reg.of("H"))
	}
	if moved, _ := b.Resync(); !moved || b.Current() != 17 {
		t.Errorf("b after a raised it: moved %v version %d, want 17", moved, b.Current())
	}
}

// TestSerialStoreFleetConcurrent: hosts asking for a new hash at once
// end with one version.
func TestSerialStoreFleetConcurrent(t *testing.T) {
	reg := newFakeRegister()
	stores := make([]*SerialStore, 8)
	for i := range stores {
		stores[i] = fleetStore(t, t.TempDir(), reg)
	}
	got := make([]uint32, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { got[i], _ = s.Version("H") })
	}
	wg.Wait()
	for i, v := range got {
		if v != got[0] {
			t.Errorf("store %d: version %d, store 0: %d", i, v, got[0])
		}
	}
}

// watchedRegister is reg with a watch of its own.
type watchedRegister struct {
	*fakeRegister
	changed chan struct{}
}

func (w watchedRegister) Watch(ctx context.Context, changed func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.changed:
			changed()
		}
	}
}

// TestResponderFleetSerial: two responders with their own state
// directories, one of them with a history of its own, answer the same
// SOA serial once the register's watch has woken them: the one behind
// moves up.
func TestResponderFleetSerial(t *testing.T) {
	reg := newFakeRegister()
	dirA, dirB := t.TempDir(), t.TempDir()
	// b has served 6 versions of its own before it joined the fleet.
	local := NewSerialStore(dirB)
	for i := range 6 {
		if _, err := local.Version(fmt.Sprint("old", i)); err != nil {
			t.Fatal(err)
		}
	}
	var rev uint64 = 3
	run := func(dir string, watch chan struct{}) (*Responder, func()) {
		cfg := wwwConfig(t, dir, 30)
		h := hub.New(func() hub.Facts { return upStatus(health.Up) })
		h.Config.Publish(cfg)
		r := NewResponder(ResponderOptions{Hub: h, Versions: watchedRegister{reg, watch}, Revision: func() uint64 { return rev }, ResyncEvery: time.Hour})
		if err := r.Accept(cfg); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		poll.Until(t, 5*time.Second, "responder listening", poll.True(func() bool { return len(r.Addrs()) == 1 }))
		return r, func() { cancel(); <-done }
	}
	watchA := make(chan struct{})
	a, stopA := run(dirA, watchA)
	defer stopA()
	if got := soaOf(t, a.Addrs()[0].String()); got != 1+3 {
		t.Fatalf("a: serial %d, want 4", got)
	}
	b, stopB := run(dirB, make(chan struct{}))
	defer stopB()
	want := uint32(7 + 3) // b's own history is ahead: the fleet's version moves up to 7
	if got := soaOf(t, b.Addrs()[0].String()); got != want {
		t.Fatalf("b: serial %d, want %d", got, want)
	}
	watchA <- struct{}{} // the register's watch wakes a
	poll.Until(t, 5*time.Second, "a on the fleet's serial", func() (bool, string) {
		got := soaOf(t, a.Addrs()[0].String())
		return got == want, fmt.Sprint(got)
	})
}

// TestResponderFleetSerialUnreachable: a responder that starts with an
// empty state while the register cannot be reached serves its own count
// at once, and moves up to the fleet's serial once the register is back
// (asked again every ResyncEvery).
func TestResponderFleetSerialUnreachable(t *testing.T) {
	reg := newFakeRegister()
	for _, h := range []string{"x1", "x2", "x3", "x4"} {
		reg.Version(context.Background(), h, 1)
	}
	cfg := wwwConfig(t, t.TempDir(), 30)
	hash := ConfigHash(cfg)
	reg.Version(context.Background(), hash, 1) // the fleet serves cfg at version 5
	reg.setDown(true)
	h := hub.New(func() hub.Facts { return upStatus(health.Up) })
	h.Config.Publish(cfg)
	r := NewResponder(ResponderOptions{Hub: h, Versions: watchedRegister{reg, make(chan struct{})}, Revision: func() uint64 { return 2 }, ResyncEvery: 20 * time.Millisecond})
	if err := r.Accept(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 5*time.Second, "responder listening", poll.True(func() bool { return len(r.Addrs()) == 1 }))
	addr := r.Addrs()[0].String()
	if got := soaOf(t, addr); got != 1+2 {
		t.Fatalf("serial without the register %d, want 3 (its own count)", got)
	}
	reg.setDown(false)
	poll.Until(t, 5*time.Second, "the fleet's serial", func() (bool, string) {
		got := soaOf(t, addr)
		return got == 5+2, fmt.Sprint(got)
	})
}
