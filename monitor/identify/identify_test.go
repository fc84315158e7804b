package identify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

var errNoVersion = errors.New("no version")

func identAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}), 53)
}

// runIdentifier runs id until the test's bubble ends.
func runIdentifier(t *testing.T, id *Identifier) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- id.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// TestIdentifierSchedule: first try at start, then every Every; a failed
// try whose back end did not answer is repeated after Retry; one that
// answered without a version keeps the normal period; the last good
// version stays while later tries fail.
func TestIdentifierSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		calls := map[netip.AddrPort][]time.Duration{}
		t0 := time.Now()
		identify := func(ctx context.Context, a netip.AddrPort) (string, error) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("identify without deadline")
			}
			mu.Lock()
			defer mu.Unlock()
			calls[a] = append(calls[a], time.Since(t0))
			n := len(calls[a])
			switch a {
			case identAddr(1): // down at start, then up
				if n == 1 {
					return "", errors.New("connection refused")
				}
				return fmt.Sprintf("unbound 1.17.%d", n), nil
			case identAddr(2): // Knot: answers, no version
				return "", fmt.Errorf("rcode SERVFAIL: %w", errNoVersion)
			default: // good, then failing
				if n == 1 {
					return "9.18.1", nil
				}
				return "", errors.New("timeout after 1s")
			}
		}
		id := New(Options{
			Identify: identify,
			Answered: func(err error) bool { return errors.Is(err, errNoVersion) },
			VendorOf: func(v string) string { return strings.Fields(v)[0] },
			Every:    10 * time.Minute, Retry: 30 * time.Second,
		})
		id.Update([]Target{
			{Resolver: "a", Addr: identAddr(1), Vendor: "unbound", Timeout: time.Second},
			{Resolver: "knot", Addr: identAddr(2), Vendor: "knot", Timeout: time.Second},
			{Resolver: "bind", Addr: identAddr(3), Vendor: "bind", Timeout: time.Second},
		})
		runIdentifier(t, id)
		time.Sleep(21 * time.Minute)
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		want := map[netip.AddrPort][]time.Duration{
			identAddr(1): {0, 30 * time.Second, 30*time.Second + 10*time.Minute, 30*time.Second + 20*time.Minute},
			identAddr(2): {0, 10 * time.Minute, 20 * time.Minute},
			identAddr(3): {0, 10 * time.Minute, 10*time.Minute + 30*time.Second, 10*time.Minute + time.Minute},
		}
		for a, w := range want {
			got := calls[a]
			if len(got) < len(w) || fmt.Sprint(got[:len(w)]) != fmt.Sprint(w) {
				t.Errorf("%v asked at %v, want first %v", a, got, w)
			}
		}
		got, ok := id.Identity("a")
		if !ok || got.Version != "unbound 1.17.4" || got.Vendor != "unbound" || got.Err != "" || got.At.IsZero() {
			t.Errorf("a = %+v, %v", got, ok)
		}
		if b, _ := id.Identity("bind"); b.Version != "9.18.1" || b.Err != "timeout after 1s" {
			t.Errorf("bind = %+v, want the last good version and the error", b)
		}
		if k := id.Identities()["knot"]; k.Version != "" || !strings.Contains(k.Err, "rcode SERVFAIL") {
			t.Errorf("knot = %+v", k)
		}
	})
}

// TestIdentifierNeverWaitsForOthers: a back end whose identification hangs
// until its timeout does not delay another's.
func TestIdentifierNeverWaitsForOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		at := map[netip.AddrPort]time.Duration{}
		t0 := time.Now()
		id := New(Options{Identify: func(ctx context.Context, a netip.AddrPort) (string, error) {
			if a == identAddr(1) {
				<-ctx.Done()
				return "", ctx.Err()
			}
			mu.Lock()
			at[a] = time.Since(t0)
			mu.Unlock()
			return "unbound 1.17.1", nil
		}})
		id.Update([]Target{
			{Resolver: "slow", Addr: identAddr(1), Timeout: time.Minute},
			{Resolver: "fast", Addr: identAddr(2), Timeout: time.Minute},
		})
		runIdentifier(t, id)
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if d, ok := at[identAddr(2)]; !ok || d != 0 {
			t.Errorf("fast identified at %v (%v), want at once", d, ok)
		}
	})
}

// TestIdentifierLogsNewIdentity: one line per new version, a warning when
// the identified vendor is not the configured one.
func TestIdentifierLogsNewIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
		id := New(Options{
			Identify: func(context.Context, netip.AddrPort) (string, error) { return "unbound 1.17.1", nil },
			VendorOf: func(v string) string { return strings.Fields(v)[0] },
			Every:    time.Minute,
			Logger:   log,
		})
		id.Update([]Target{
			{Resolver: "ok", Addr: identAddr(1), Vendor: "unbound", Timeout: time.Second},
			{Resolver: "wrong", Addr: identAddr(2), Vendor: "bind", Timeout: time.Second},
		})
		runIdentifier(t, id)
		time.Sleep(5 * time.Minute) // asked 6 times each, logged once
		synctest.Wait()
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		if n := strings.Count(out, "msg=\"backend identified\" resolver=ok"); n != 1 {
			t.Errorf("%d info lines for ok, want 1:\n%s", n, out)
		}
		if n := strings.Count(out, "level=WARN msg=\"backend identifies as another vendor than configured\" resolver=wrong"); n != 1 {
			t.Errorf("%d warnings for wrong, want 1:\n%s", n, out)
		}
	})
}

// TestIdentifierUpdate: an unchanged address keeps the identity; a new
// address starts again; a removed target is forgotten.
func TestIdentifierUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		id := New(Options{Identify: func(_ context.Context, a netip.AddrPort) (string, error) {
			return "v" + a.Addr().String(), nil
		}})
		id.Update([]Target{
			{Resolver: "keep", Addr: identAddr(1), Timeout: time.Second},
			{Resolver: "move", Addr: identAddr(2), Timeout: time.Second},
			{Resolver: "gone", Addr: identAddr(3), Timeout: time.Second},
			{Resolver: "", Addr: identAddr(4), Timeout: time.Second},
			{Resolver: "zero", Addr: identAddr(5)},
		})
		runIdentifier(t, id)
		synctest.Wait()
		id.Update([]Target{
			{Resolver: "keep", Addr: identAddr(1), Timeout: 2 * time.Second},
			{Resolver: "move", Addr: identAddr(9), Timeout: time.Second, Spread: time.Hour},
		})
		all := id.Identities()
		if len(all) != 2 || all["keep"].Version != "v127.0.0.1" || all["move"].Version != "" {
			t.Errorf("identities = %+v", all)
		}
	})
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestIdentifierLogsFailureOnce: a target that keeps failing the same way
// is logged once (issue 11: "identify failed" every 30 s per target), again
// when the failure changes, and once more after it answered and failed
// again; an answer after failures is logged once.
func TestIdentifierLogsFailureOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		// Tries come at 0, 30 s, 60 s, ... (Retry while failing).
		var n int
		var nmu sync.Mutex
		refused := &net.OpError{Op: "read", Net: "udp", Err: syscall.ECONNREFUSED}
		id := New(identifyOptions(func(context.Context, netip.AddrPort) (string, error) {
			nmu.Lock()
			defer nmu.Unlock()
			n++
			switch {
			case n <= 4: // refused, each time from another source port
				return "", fmt.Errorf("read udp 127.0.0.1:%d->127.0.0.1:53: %w", 40000+n, refused)
			case n <= 6:
				return "", context.DeadlineExceeded
			case n == 7:
				return "unbound 1.17.1", nil
			default:
				return "", fmt.Errorf("read udp 127.0.0.1:%d->127.0.0.1:53: %w", 40000+n, refused)
			}
		}, log))
		id.Update([]Target{{Resolver: "r", Addr: identAddr(1), Vendor: "unbound", Timeout: time.Second}})
		runIdentifier(t, id)
		time.Sleep(7*30*time.Second + 10*time.Minute + 3*30*time.Second)
		synctest.Wait()
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		nmu.Lock()
		tries := n
		nmu.Unlock()
		if tries < 10 {
			t.Fatalf("%d tries, want at least 10", tries)
		}
		// refused (1..4), timeout (5..6), refused again after the answer (8..).
		if got := strings.Count(out, `msg="identify failed`); got != 3 {
			t.Errorf("%d identify failed lines over %d tries, want 3:\n%s", got, tries, out)
		}
		if got := strings.Count(out, `msg="identify answered again"`); got != 1 {
			t.Errorf("%d identify answered again lines, want 1:\n%s", got, out)
		}
	})
}

// identifyOptions returns the options of an Identifier asking with
// identify, every 10 minutes, retrying after 30 s, logging to log.
func identifyOptions(identify func(context.Context, netip.AddrPort) (string, error), log *slog.Logger) Options {
	return Options{Identify: identify, Every: 10 * time.Minute, Retry: 30 * time.Second, Logger: log,
		VendorOf: func(v string) string { return strings.Fields(v)[0] }}
}

// TestIdentifierIdleTargetsHoldNoGoroutine: between tries a target costs
// no goroutine (5,000 back ends held 5,000 parked goroutines and their
// stacks); every target is still asked on its schedule.
func TestIdentifierIdleTargetsHoldNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		asked := map[netip.AddrPort]int{}
		id := New(Options{Identify: func(_ context.Context, a netip.AddrPort) (string, error) {
			mu.Lock()
			asked[a]++
			mu.Unlock()
			return "unbound 1.17.1", nil
		}, Every: time.Minute})
		var targets []Target
		for n := range 200 {
			targets = append(targets, Target{Resolver: fmt.Sprint("r", n), Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 1, byte(n >> 8), byte(n)}), 53),
				Timeout: time.Second, Spread: 30 * time.Second})
		}
		id.Update(targets)
		before := runtime.NumGoroutine()
		runIdentifier(t, id)
		time.Sleep(150 * time.Second) // the first tries within 30 s, then two more rounds
		synctest.Wait()
		if n := runtime.NumGoroutine() - before; n > 2 {
			t.Errorf("%d goroutines for 200 idle targets, want at most 2 (Run's)", n)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, tg := range targets {
			if n := asked[tg.Addr]; n != 3 {
				t.Errorf("%s asked %d times in 150 s, want 3", tg.Resolver, n)
			}
		}
	})
}

// TestIdentifierUpdateStopsTry: removing a target whose try hangs cancels
// the try, and Update returns once it ended; the target is not asked
// again.
func TestIdentifierUpdateStopsTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		tries, ended := 0, 0
		id := New(Options{Identify: func(ctx context.Context, _ netip.AddrPort) (string, error) {
			mu.Lock()
			tries++
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			ended++
			mu.Unlock()
			return "", ctx.Err()
		}, Retry: time.Second})
		id.Update([]Target{{Resolver: "hang", Addr: identAddr(1), Timeout: time.Hour}})
		runIdentifier(t, id)
		time.Sleep(time.Minute)
		synctest.Wait()
		id.Update(nil)
		mu.Lock()
		if tries != 1 || ended != 1 {
			t.Errorf("after Update: %d tries, %d ended; want 1, 1", tries, ended)
		}
		mu.Unlock()
		time.Sleep(time.Hour)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if tries != 1 {
			t.Errorf("%d tries of a removed target, want 1", tries)
		}
	})
}
