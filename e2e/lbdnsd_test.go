package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
)

// lbdnsd is one daemon process.
type lbdnsd struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *testlog.Buffer
	done   chan struct{} // closed when the process was waited for
	// socket is the control socket the daemon serves.
	socket string
	// spawned is when the process was started.
	spawned time.Time
}

// startTimeout bounds how long a daemon takes to start (and to stop).
const startTimeout = 15 * time.Second

// start starts lbdnsd -dry-run over the world's configuration and waits
// until it is ready: its control socket answers status and it is warm.
func (w *world) start(args ...string) *lbdnsd {
	w.t.Helper()
	d := w.spawn(args...)
	d.waitReady()
	return d
}

// spawn starts lbdnsd -dry-run -log-format json over the world's
// configuration, with args added, and returns at once. Cleanup stops it
// (SIGTERM, then SIGKILL), and fails the test if the daemon reported a
// data race (binaries built with -race) or if a SIGTERM did not end it
// with status 0.
func (w *world) spawn(args ...string) *lbdnsd {
	w.t.Helper()
	all := append([]string{"-config", w.cfgPath, "-dry-run", "-log-format", "json"}, args...)
	return spawnLbdnsd(w.t, w.socket, exec.Command(binaries.lbdnsd, all...))
}

// spawnLbdnsd starts cmd, an lbdnsd serving its control socket at
// socket, and returns at once; Cleanup stops it as spawn says.
func spawnLbdnsd(t *testing.T, socket string, cmd *exec.Cmd) *lbdnsd {
	t.Helper()
	d := &lbdnsd{t: t, stderr: &testlog.Buffer{}, done: make(chan struct{}), socket: socket, spawned: time.Now(), cmd: cmd}
	if _, set := os.LookupEnv("GORACE"); !set {
		// A race-built daemon sleeps a second at exit by default.
		d.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=50")
	}
	d.cmd.Stderr = d.stderr
	d.cmd.Stdout = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start lbdnsd: %v", err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(d.cleanup)
	return d
}

// cleanup stops the daemon if it still runs and checks how it ended.
func (d *lbdnsd) cleanup() {
	if !d.exited() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
			if code := d.cmd.ProcessState.ExitCode(); code != 0 {
				d.t.Errorf("lbdnsd (pid %d) exited with status %d after SIGTERM", d.cmd.Process.Pid, code)
			}
		case <-time.After(startTimeout):
			d.t.Errorf("lbdnsd (pid %d) still running %s after SIGTERM; killing it", d.cmd.Process.Pid, startTimeout)
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	if strings.Contains(d.stderr.String(), "DATA RACE") {
		d.t.Errorf("lbdnsd (pid %d) reported a data race", d.cmd.Process.Pid)
	}
	if d.t.Failed() {
		d.t.Logf("lbdnsd (pid %d) %s; its log:\n%s", d.cmd.Process.Pid, d.cmd.ProcessState, d.stderr.String())
	}
}

// exited reports whether the process has ended.
func (d *lbdnsd) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// pid is the daemon's process id.
func (d *lbdnsd) pid() int { return d.cmd.Process.Pid }

// logLines decodes the daemon's JSON log lines (other lines are skipped:
// a race report, say).
func (d *lbdnsd) logLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(d.stderr.String()))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// waitReady waits until the daemon answers status on its control socket
// (this process, not an earlier one: it started after spawn) and says it
// is warm. It fails the test if the daemon exits first.
func (d *lbdnsd) waitReady() {
	d.t.Helper()
	c := control.NewClient(d.socket)
	poll.Until(d.t, startTimeout, "lbdnsd answering status, warm", func() (bool, string) {
		if d.exited() {
			return true, ""
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.Status(ctx)
		switch {
		case err != nil:
			return false, err.Error()
		case st.Daemon.Started.Before(d.spawned):
			return false, fmt.Sprintf("an earlier daemon (started %s) answers", st.Daemon.Started)
		case !st.Daemon.Warm:
			return false, "not warm"
		}
		return true, ""
	})
	if d.exited() {
		d.t.Fatalf("lbdnsd exited before it was ready (%s):\n%s", d.cmd.ProcessState, d.stderr.String())
	}
}

// statusURL returns the status endpoint, "http://ADDR". The daemon's log
// is the only place that tells the address (status_listen's port 0 picks
// one), so it is read from there; the daemon logs it as it starts serving.
func (d *lbdnsd) statusURL() string {
	d.t.Helper()
	var url string
	poll.Until(d.t, startTimeout, "lbdnsd logging its status endpoint", func() (bool, string) {
		for _, m := range d.logLines() {
			if m["msg"] == "status endpoint listening (read-only)" {
				u, _ := m["url"].(string)
				url = strings.TrimSuffix(u, "/")
				return url != "", ""
			}
		}
		return false, d.stderr.String()
	})
	return url
}

// waitExit waits for the process to end and returns its exit status (-1
// when a signal ended it).
func (d *lbdnsd) waitExit() int {
	d.t.Helper()
	select {
	case <-d.done:
		return d.cmd.ProcessState.ExitCode()
	case <-time.After(startTimeout):
		d.t.Fatalf("lbdnsd (pid %d) still running after %s", d.pid(), startTimeout)
		return 0
	}
}

// kill9 sends SIGKILL and waits for the process to end.
func (d *lbdnsd) kill9() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		d.t.Fatalf("kill -9 lbdnsd: %v", err)
	}
	if code := d.waitExit(); code != -1 {
		d.t.Fatalf("lbdnsd exited with status %d, not killed by SIGKILL", code)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (d *lbdnsd) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatalf("stop lbdnsd: %v", err)
	}
	if code := d.waitExit(); code != 0 {
		d.t.Fatalf("lbdnsd exited with status %d after SIGTERM", code)
	}
}

// signal sends sig to the daemon.
func (d *lbdnsd) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal %s to lbdnsd: %v", sig, err)
	}
}
