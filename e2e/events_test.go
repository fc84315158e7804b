package e2e

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/control"
)

// TestEventsFollow: lbctl events -f, started as a process, prints a state
// change that happens after it started and ends cleanly on SIGINT; a
// follower ends (exit 1, saying so) when the daemon stops; lbctl events -o
// json -n 5 prints the last five events, one per line.
func TestEventsFollow(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(3))
	d := w.startReady()

	f := follow(t, w)
	if err := w.backend("r2").Stop(); err != nil {
		t.Fatal(err)
	}
	for {
		c := strings.Fields(f.next("a state change of r2"))
		if len(c) >= 6 && c[3] == control.EventState && c[4] == "r2/rec" && strings.Contains(strings.Join(c[5:], " "), "up -> down") {
			break
		}
	}
	if err := f.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if r := f.wait(); r.code != 0 {
		t.Errorf("lbctl events -f after SIGINT: %s", r)
	}

	all := w.events()
	r := w.mustLbctl("-o", "json", "events", "--all", "-n", "5")
	last := decodeEvents(t, r.stdout)
	if n := strings.Count(r.stdout, "\n"); n != 5 || len(last) != 5 {
		t.Fatalf("events -o json --all -n 5: %d lines, %d events:\n%s", n, len(last), r.stdout)
	}
	if len(all) < 6 {
		t.Fatalf("only %d events in all; the test needs more than 5", len(all))
	}
	for i, ev := range last {
		if i > 0 && ev.Seq != last[i-1].Seq+1 {
			t.Errorf("events -n 5: seq %d after %d", ev.Seq, last[i-1].Seq)
		}
		if ev.Time.IsZero() || ev.Kind == "" || ev.Message == "" {
			t.Errorf("events -n 5: incomplete event %+v", ev)
		}
	}
	if last[0].Seq <= all[len(all)-6].Seq {
		t.Errorf("events -n 5 starts at seq %d; the log had %d events ending at seq %d", last[0].Seq, len(all), all[len(all)-1].Seq)
	}

	// A follower does not hang when the daemon goes away. (The header is
	// printed before the follow request is made: wait for an event that
	// can only come through the stream.)
	f = follow(t, w)
	w.mustLbctl("drain", "r1", "--reason", "followed")
	for !strings.Contains(f.next("the drain of r1"), "r1 drained") {
	}
	d.stop()
	if r := f.wait(); r.code != 1 || !strings.Contains(r.stderr, "closed the event stream") {
		t.Errorf("lbctl events -f when the daemon stopped: want exit 1 saying the stream was closed; %s", r)
	}
}

// follower is a running lbctl events -f.
type follower struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stdout strings.Builder // the lines read, for messages
	stderr strings.Builder
	done   chan struct{} // closed when the output was read to its end
}

// follow starts lbctl events -f and returns once it printed its header:
// by then it has read the events so far, and what happens next reaches it
// through the follow stream (which lbctl opens, on a new connection, after
// the header: events in between are not lost, but the connection may not
// be open yet).
func follow(t *testing.T, w *world) *follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	f := &follower{t: t, lines: make(chan string), done: make(chan struct{})}
	f.cmd = command(ctx, binaries.lbctl, "-socket", w.socket, "events", "-f")
	f.cmd.Stderr = &f.stderr
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(f.done)
		defer close(f.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case f.lines <- sc.Text():
			case <-ctx.Done():
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		cancel()
		<-f.done
		_ = f.cmd.Wait()
	})
	if h := strings.Fields(f.next("header")); strings.Join(h, " ") != "SEQ TIME KIND SUBJECT MESSAGE" {
		t.Fatalf("first line %q is not the header", h)
	}
	return f
}

// next returns the next line lbctl printed, failing the test when none
// comes within waitTimeout.
func (f *follower) next(what string) string {
	f.t.Helper()
	select {
	case l, ok := <-f.lines:
		if !ok {
			f.t.Fatalf("lbctl events -f ended before %s; stderr:\n%s", what, f.stderr.String())
		}
		f.stdout.WriteString(l + "\n")
		return l
	case <-time.After(waitTimeout):
		f.t.Fatalf("lbctl events -f printed no %s within %s; so far:\n%s", what, waitTimeout, f.stdout.String())
		return ""
	}
}

// wait reads the rest of the output and waits for lbctl to end, within
// waitTimeout.
func (f *follower) wait() result {
	f.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case l, ok := <-f.lines:
			if ok {
				f.stdout.WriteString(l + "\n")
				continue
			}
			err := f.cmd.Wait()
			if f.cmd.ProcessState == nil {
				f.t.Fatalf("lbctl events -f: %v", err)
			}
			return result{code: f.cmd.ProcessState.ExitCode(), stdout: f.stdout.String(), stderr: f.stderr.String()}
		case <-deadline:
			f.t.Fatalf("lbctl events -f still running %s later", waitTimeout)
		}
	}
}
