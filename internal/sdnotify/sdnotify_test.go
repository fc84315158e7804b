package sdnotify_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/internal/sdnotify"
	"lbdns/testkit/sdtest"
)

// count returns how many of msgs are exactly want.
func count(msgs []string, want string) int {
	n := 0
	for _, m := range msgs {
		if m == want {
			n++
		}
	}
	return n
}

// TestNotifier drives a Notifier over a real NOTIFY_SOCKET with a fake
// loop (a goroutine calling Alive every second) in a synctest bubble:
// nothing before the loop runs, READY=1 at its first tick, watchdog pings
// only while the loop ticks (they stop within half the watchdog interval
// of the loop blocking and resume when it runs again), RELOADING=1 with
// MONOTONIC_USEC then READY=1 around a reload, STOPPING=1 at the end.
func TestNotifier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sock := sdtest.Listen(t, 8*time.Second)
		n, err := sdnotify.New(sdnotify.Options{})
		if err != nil || n == nil {
			t.Fatalf("New under NOTIFY_SOCKET = %v, %v", n, err)
		}
		if n.Watchdog() != 8*time.Second {
			t.Fatalf("Watchdog() = %v, want 8s", n.Watchdog())
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { n.Run(ctx); close(done) }()

		// The loop has not run: neither READY nor pings.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := sock.Drain(); len(got) != 0 {
			t.Fatalf("before the loop ran, got %q; want nothing", got)
		}

		block := make(chan chan struct{})
		stopLoop := make(chan struct{})
		loopDone := make(chan struct{})
		go func() { // the daemon's loop, reduced to its tick
			defer close(loopDone)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					n.Alive()
				case resume := <-block:
					<-resume // stuck, as a loop in a netlink call that never returns
				case <-stopLoop:
					return
				}
			}
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		got := sock.Drain()
		if len(got) == 0 || !strings.HasPrefix(got[0], "READY=1\n") || count(got, "READY=1\nSTATUS=running") != 1 {
			t.Fatalf("after the loop's first ticks got %q; want READY=1 first, once", got)
		}
		// Pings every 2 s (a quarter of 8 s) from the first tick on.
		if p := count(got, "WATCHDOG=1"); p < 4 {
			t.Fatalf("%d watchdog pings in 10 s of a live loop, want >= 4: %q", p, got)
		}

		resume := make(chan struct{})
		block <- resume
		// Within half the interval (4 s) of the last tick the pings stop.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		sock.Drain()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := sock.Drain(); len(got) != 0 {
			t.Fatalf("loop blocked for 20 s more: got %q; want no watchdog ping", got)
		}
		close(resume)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := sock.Drain(); count(got, "WATCHDOG=1") < 1 || count(got, "READY=1\nSTATUS=running") != 0 {
			t.Fatalf("loop running again: got %q; want pings again, no second READY", got)
		}

		rejected := errors.New("bad config")
		if err := n.Reload(func() error { return rejected }); !errors.Is(err, rejected) {
			t.Fatalf("Reload returned %v, want the reload's error", err)
		}
		if err := n.Reload(func() error { return nil }); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		got = sock.Drain()
		var reloads []string
		for _, m := range got {
			if m != "WATCHDOG=1" {
				reloads = append(reloads, m)
			}
		}
		if len(reloads) != 4 {
			t.Fatalf("two reloads sent %q; want RELOADING, READY twice", reloads)
		}
		for i, m := range reloads {
			lines := strings.Split(m, "\n")
			if i%2 == 0 {
				if lines[0] != "RELOADING=1" || !strings.HasPrefix(lines[1], "MONOTONIC_USEC=") {
					t.Errorf("reload message %d = %q, want RELOADING=1 then MONOTONIC_USEC=", i, m)
				}
			} else if lines[0] != "READY=1" {
				t.Errorf("reload message %d = %q, want READY=1", i, m)
			}
		}
		if !strings.Contains(reloads[1], "rejected") || strings.Contains(reloads[3], "rejected") {
			t.Errorf("STATUS after a rejected then an applied reload: %q, %q", reloads[1], reloads[3])
		}

		close(stopLoop)
		<-loopDone
		cancel()
		<-done
		if got := sock.Drain(); len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "STOPPING=1") {
			t.Fatalf("after stop got %q; want STOPPING=1 last", got)
		}
	})
}

// TestNotifierWithoutWatchdog: without WATCHDOG_USEC nothing pings, and
// the notices are still sent.
func TestNotifierWithoutWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sock := sdtest.Listen(t, 0)
		n, err := sdnotify.New(sdnotify.Options{})
		if err != nil || n == nil || n.Watchdog() != 0 {
			t.Fatalf("New = %v, %v", n, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { n.Run(ctx); close(done) }()
		n.Alive()
		time.Sleep(time.Minute)
		n.Alive()
		cancel()
		<-done
		got := sock.Drain()
		want := []string{"READY=1\nSTATUS=running", "STOPPING=1\nSTATUS=stopping"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// TestOutsideSystemd: without NOTIFY_SOCKET New returns nil, and a nil
// Notifier does nothing but run the reload.
func TestOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n, err := sdnotify.New(sdnotify.Options{})
	if n != nil || err != nil {
		t.Fatalf("New without NOTIFY_SOCKET = %v, %v; want nil, nil", n, err)
	}
	n.Alive()
	ran := false
	if err := n.Reload(func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("nil Reload: ran %v, err %v", ran, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n.Run(ctx)
	if n.Watchdog() != 0 {
		t.Fatal("nil Watchdog() != 0")
	}
}
