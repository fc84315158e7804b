package daemon

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/intent"
	"lbdns/internal/sdnotify"
	"lbdns/testkit/sdtest"
	"lbdns/vip"
)

// blockingStore is a memStore whose Save waits on unblock once blocked
// is closed: a loop saving an override is stuck there.
type blockingStore struct {
	memStore
	blocked chan struct{} // closed by Save when it starts waiting
	unblock chan struct{}
}

func (s *blockingStore) Save(ctx context.Context, st intent.State, expected intent.Revision) (intent.Revision, error) {
	close(s.blocked)
	<-s.unblock
	return s.memStore.Save(ctx, st, expected)
}

// nextOf waits (real time, up to timeout) for a message starting with
// prefix, skipping watchdog pings; it returns "" when none came.
func nextOf(sock *sdtest.Socket, prefix string, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for left := timeout; left > 0; left = time.Until(deadline) {
		m := sock.Next(left)
		if strings.HasPrefix(m, prefix) {
			return m
		}
	}
	return ""
}

// TestSystemdNotify runs the daemon as systemd would, with a real
// NOTIFY_SOCKET and a watchdog: READY=1 once the loop runs, RELOADING=1
// then READY=1 around a reload (as lbctl reload and SIGHUP do it), and
// watchdog pings fed by the loop itself: when the loop is stuck (in a
// store's Save, the test's seam) the pings stop, and they resume when it
// runs again; STOPPING=1 on stop.
func TestSystemdNotify(t *testing.T) {
	const watchdog = 400 * time.Millisecond // pings every 100 ms while the loop ticked within 200 ms
	sock := sdtest.Listen(t, watchdog)
	n, err := sdnotify.New(sdnotify.Options{})
	if err != nil || n == nil {
		t.Fatalf("sdnotify.New = %v, %v", n, err)
	}
	dir := t.TempDir()
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	store := &blockingStore{blocked: make(chan struct{}), unblock: make(chan struct{})}
	d, err := New(Options{ConfigPath: writeConfig(t, dir, ""), Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify,
		TickInterval: 20 * time.Millisecond, Store: store, Notifier: n})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone, notifyDone := make(chan error, 1), make(chan struct{})
	go func() { runDone <- d.Run(ctx) }()
	go func() { n.Run(ctx); close(notifyDone) }()

	if m := sock.Next(5 * time.Second); !strings.HasPrefix(m, "READY=1") {
		t.Fatalf("first message = %q, want READY=1", m)
	}
	if m := nextOf(sock, "WATCHDOG=1", time.Second); m == "" {
		t.Fatal("no watchdog ping within 1 s of a live loop")
	}

	if err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if m := nextOf(sock, "RELOADING=1", time.Second); !strings.Contains(m, "\nMONOTONIC_USEC=") {
		t.Fatalf("reload: got %q, want RELOADING=1 with MONOTONIC_USEC", m)
	}
	if m := nextOf(sock, "READY=1", time.Second); m == "" {
		t.Fatal("no READY=1 after the reload")
	}

	// Stick the loop in the store's Save (an override persists there).
	overrideDone := make(chan error, 1)
	go func() {
		_, err := d.SetOverride(ctx, control.OverrideRequest{Action: "drain", Resolver: "bind-1", Reason: "test"}, "test")
		overrideDone <- err
	}()
	<-store.blocked
	// Pings may go on for half the interval after the last tick; then none.
	for deadline := time.Now().Add(watchdog / 2); time.Now().Before(deadline); {
		sock.Next(time.Until(deadline))
	}
	if m := sock.Next(2 * watchdog); m != "" {
		t.Fatalf("loop stuck for %v: got %q; want no watchdog ping", 2*watchdog, m)
	}
	close(store.unblock)
	if err := <-overrideDone; err != nil {
		t.Fatalf("override after the loop resumed: %v", err)
	}
	if m := nextOf(sock, "WATCHDOG=1", time.Second); m == "" {
		t.Fatal("no watchdog ping within 1 s of the loop running again")
	}

	cancel()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
	<-notifyDone
	if m := nextOf(sock, "STOPPING=1", time.Second); m == "" {
		t.Fatal("no STOPPING=1 on stop")
	}
}
