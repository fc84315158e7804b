package control

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"lbdns/testkit/poll"
)

// TestClientAgainstServer runs the real Client against the real Server
// over a real socket.
func TestClientAgainstServer(t *testing.T) {
	problems := []Problem{{File: "/etc/lbdns.toml", Line: 3, Key: "pools.main.check", Value: "nope", Message: "no such check", Text: "/etc/lbdns.toml:3: pools.main.check = \"nope\": no such check"}}
	st := &Status{Version: StatusVersion, Daemon: Daemon{Config: "/etc/lbdns.toml", Warm: true},
		VIPs: []VIP{{Name: "dns-v4", Address: "192.0.2.53", Pool: "main"}}}
	fb := &fakeBackend{
		status:      st,
		reloadErr:   &Error{Kind: InvalidConfig, Code: 422, Message: "configuration rejected", Problems: problems},
		overrideErr: nil,
	}
	ev := NewEventLog(100, nil)
	ev.Append(Event{Kind: EventDaemon, Message: "started"})
	srv := startServer(t, ServerOptions{Backend: fb, Events: ev})
	c := NewClient(srv.path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("Status = %+v; want %+v", got, st)
	}

	rep, err := c.SetOverride(ctx, OverrideRequest{Action: ActionDisable, Resolver: "bind-2", VIP: "dns-v4", Reason: "disk"})
	if err != nil {
		t.Fatalf("SetOverride: %v", err)
	}
	if rep.Message != "bind-2 disable" || !rep.Changed {
		t.Errorf("SetOverride reply = %+v", rep)
	}
	if call := fb.lastOverride(t); call.req.VIP != "dns-v4" || call.by == "" || call.by == "unknown" {
		t.Errorf("backend got %+v", call)
	}

	_, err = c.SetOverride(ctx, OverrideRequest{Action: "restart", Resolver: "bind-2"})
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != 400 {
		t.Errorf("SetOverride(restart) = %v; want a 400 *Error", err)
	}

	_, err = c.Reload(ctx)
	if !errors.As(err, &ce) || ce.Code != 422 || !reflect.DeepEqual(ce.Problems, problems) {
		t.Errorf("Reload = %#v; want a 422 *Error with the problems", err)
	}

	evs, err := c.Events(ctx, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(evs.Events) != 1 || evs.Events[0].Message != "started" || evs.Next != 1 {
		t.Errorf("Events = %+v", evs)
	}

	// Follow gets the kept events after 0, then one appended while it
	// runs, and ends with nil when its context ends.
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	var mu sync.Mutex
	var seen []Event
	done := make(chan error, 1)
	go func() {
		done <- c.Follow(fctx, 0, func(e Event) error {
			mu.Lock()
			seen = append(seen, e)
			mu.Unlock()
			return nil
		})
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	poll.Until(t, 10*time.Second, "the kept event", poll.True(func() bool { return count() == 1 }))
	ev.Append(Event{Kind: EventOverride, Subject: "bind-2", Message: "disabled"})
	poll.Until(t, 10*time.Second, "the new event", poll.True(func() bool { return count() == 2 }))
	fcancel()
	if err := <-done; err != nil {
		t.Errorf("Follow after cancel = %v; want nil", err)
	}
	mu.Lock()
	if seen[0].Seq != 1 || seen[1].Seq != 2 || seen[1].Message != "disabled" {
		t.Errorf("followed %+v", seen)
	}
	mu.Unlock()
}

// TestClientFollowEndsWhenServerStops: a stopping daemon ends the stream
// and Follow says so.
func TestClientFollowEndsWhenServerStops(t *testing.T) {
	ev := NewEventLog(10, nil)
	srv := startServer(t, ServerOptions{Backend: &fakeBackend{}, Events: ev})
	got := make(chan Event, 1)
	done := make(chan error, 1)
	go func() {
		done <- NewClient(srv.path).Follow(context.Background(), 0, func(e Event) error {
			got <- e
			return nil
		})
	}()
	// Appending until one arrives proves the stream is open (the first
	// append may come before the request).
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-got:
			break wait
		case <-tick.C:
			if ev.Last() == 0 {
				ev.Append(Event{Kind: EventDaemon})
			}
		case <-deadline:
			t.Fatal("no event arrived")
		}
	}
	if err := srv.stop(); err != nil {
		t.Errorf("Serve = %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("Follow returned nil; want an error saying the daemon closed the stream")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not end when the server stopped")
	}
}

func TestClientUnreachable(t *testing.T) {
	dir := shortDir(t)
	missing := filepath.Join(dir, "missing.sock")
	_, err := NewClient(missing).Status(context.Background())
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.Socket != missing || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Status on a missing socket = %#v; want *UnreachableError wrapping ErrNotExist", err)
	}

	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	_, err = NewClient(stale).Reload(context.Background())
	if !errors.As(err, &ue) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Reload on a stale socket = %v; want *UnreachableError wrapping ECONNREFUSED", err)
	}
	_ = os.Remove(stale)
}

func TestServeFailsOnClosedListener(t *testing.T) {
	ln, err := ListenUnix(filepath.Join(shortDir(t), "ctl.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := NewServer(ServerOptions{Backend: &fakeBackend{}}).Serve(ctx, ln); err == nil || ctx.Err() != nil {
		t.Errorf("Serve on a closed listener = %v; want an error at once", err)
	}
}

// TestClientNoReply: a request read whole by a daemon that then closes the
// connection is a *NoReplyError, a change only for requests that change
// state.
func TestClientNoReply(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "cut.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() {
		ln.Close()
		wg.Wait()
	}()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				io.Copy(io.Discard, req.Body)
			}
			c.Close()
		}
	})
	c := NewClient(socket)
	ctx := t.Context()
	_, err = c.SetOverride(ctx, OverrideRequest{Resolver: "bind-1", Action: "drain"})
	var nr *NoReplyError
	if !errors.As(err, &nr) || !nr.Change || nr.Method != http.MethodPost || nr.Path != "/overrides" {
		t.Errorf("SetOverride: %#v, want a *NoReplyError of a change", err)
	}
	_, err = c.Status(ctx)
	if !errors.As(err, &nr) || nr.Change {
		t.Errorf("Status: %#v, want a *NoReplyError of no change", err)
	}
	_, err = c.Explain(ctx, GSLBExplainRequest{Name: "www.example.test"})
	if !errors.As(err, &nr) || nr.Change {
		t.Errorf("Explain: %#v, want a *NoReplyError of no change", err)
	}
}
