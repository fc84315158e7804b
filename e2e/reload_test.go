package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/testkit/poll"
)

// TestReload: a good configuration is applied by lbctl reload without
// resetting the health of unchanged back ends; a bad one is rejected whole
// with every problem (file:line, key, value), by lbctl reload and by
// SIGHUP alike, and the running configuration stays; lbctl check-config
// finds the same problems offline; a good one by SIGHUP is applied.
func TestReload(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(3))
	d := w.startReady()
	before := w.statusJSON()

	// Add r4.
	w.write(onePool(4))
	cfg, err := configs.Load(w.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	r := w.mustLbctl("reload")
	if r.stdout != "config reloaded: "+cfg.Summary()+"\n" {
		t.Errorf("reload printed %q, want the new summary %q", r.stdout, cfg.Summary())
	}
	st := w.waitUp()
	w.waitTable("r4 added", w.wantTable(nil, nil))
	checkKeptHealth(t, before, st, "r1", "r2", "r3")
	if st.Daemon.LastReloadError != "" || !st.Daemon.LastReload.After(before.Daemon.LastReload) {
		t.Errorf("after a good reload: last_reload %s (was %s), last_reload_error %q", st.Daemon.LastReload, before.Daemon.LastReload, st.Daemon.LastReloadError)
	}
	good := st

	// Two problems: an unknown key and a bad address.
	bad := onePool(4)
	bad.daemonExtra = `colour = "blue"`
	bad.resolvers[1].address = "not-an-ip"
	w.write(bad)
	wantProblems := []string{
		fmt.Sprintf("%s:%d: daemon.colour: unknown key", w.cfgPath, w.lineOf(`colour = "blue"`)),
		fmt.Sprintf(`%s:%d: resolver[1].address: value "not-an-ip": `, w.cfgPath, w.lineOf(`"not-an-ip"`)),
	}
	r = w.lbctl("reload")
	if r.code != 1 {
		t.Errorf("reload of a bad config: exit %d, want 1\n%s", r.code, r)
	}
	reloadProblems := problemLines(t, "lbctl reload", r.stderr, "reload rejected; running config unchanged:", wantProblems)
	checkUnchanged(t, w, good, "after lbctl reload of a bad config")
	if st := w.statusJSON(); !strings.Contains(st.Daemon.LastReloadError, "daemon.colour") {
		t.Errorf("last_reload_error %q does not tell the problem", st.Daemon.LastReloadError)
	}
	rejectedByLbctl := lastEvent(t, w, control.EventReload)
	if !rejectedByLbctl.Error || !strings.Contains(rejectedByLbctl.Message, "reload rejected (2 problems)") {
		t.Errorf("event of the rejected lbctl reload: %+v", rejectedByLbctl)
	}

	// The same file by SIGHUP.
	d.signal(syscall.SIGHUP)
	ev := w.waitEvent("a rejected SIGHUP reload", rejectedByLbctl.Seq, func(ev control.Event) bool { return ev.Kind == control.EventReload })
	if !ev.Error || ev.Message != rejectedByLbctl.Message {
		t.Errorf("SIGHUP reload event %+v; lbctl reload gave %+v", ev, rejectedByLbctl)
	}
	st = checkUnchanged(t, w, good, "after SIGHUP with a bad config")
	if !strings.Contains(st.Daemon.LastReloadError, "daemon.colour") || !strings.Contains(st.Daemon.LastReloadError, "not-an-ip") {
		t.Errorf("last_reload_error %q lacks the problems", st.Daemon.LastReloadError)
	}

	// Offline, the same problems.
	r = run(t, binaries.lbctl, "check-config", w.cfgPath)
	if r.code != 1 || r.stdout != "" {
		t.Errorf("check-config of the bad file: want exit 1 and no output; %s", r)
	}
	if got := problemLines(t, "lbctl check-config", r.stderr, "", wantProblems); strings.Join(got, "\n") != strings.Join(reloadProblems, "\n") {
		t.Errorf("check-config problems:\n%s\nlbctl reload's:\n%s", strings.Join(got, "\n"), strings.Join(reloadProblems, "\n"))
	}

	// A good file by SIGHUP: r1's weight changes.
	next := onePool(4)
	next.resolvers[0].weight = 15
	w.write(next)
	d.signal(syscall.SIGHUP)
	ev = w.waitEvent("an applied SIGHUP reload", ev.Seq, func(ev control.Event) bool { return ev.Kind == control.EventReload })
	if ev.Error || !strings.Contains(ev.Message, "config reloaded") {
		t.Errorf("SIGHUP reload event %+v, want config reloaded", ev)
	}
	w.waitTable("r1 at its new weight", w.wantTable(nil, nil))
	st = w.statusJSON()
	if st.Daemon.LastReloadError != "" {
		t.Errorf("last_reload_error %q after a good reload", st.Daemon.LastReloadError)
	}
	checkKeptHealth(t, good, st, "r1", "r2", "r3", "r4")
}

// checkKeptHealth checks that the named members are up in after since the
// same time as in before, with the same flap count: a reload did not reset
// their health.
func checkKeptHealth(t *testing.T, before, after *control.Status, names ...string) {
	t.Helper()
	for _, name := range names {
		b, ok1 := member(before, "main", name)
		a, ok2 := member(after, "main", name)
		if !ok1 || !ok2 || a.State != "up" || !a.Since.Equal(b.Since) || a.Flaps != b.Flaps {
			t.Errorf("%s: before %s since %s (%d flaps), after %s since %s (%d flaps): health reset by the reload",
				name, b.State, b.Since.Format(time.RFC3339Nano), b.Flaps, a.State, a.Since.Format(time.RFC3339Nano), a.Flaps)
		}
	}
}

// checkUnchanged checks that the running configuration is still the one
// of good: the same members at the same addresses, last reload time
// unchanged, and returns the status.
func checkUnchanged(t *testing.T, w *world, good *control.Status, when string) *control.Status {
	t.Helper()
	st := w.statusJSON()
	if st.Daemon.LastReload != good.Daemon.LastReload {
		t.Errorf("%s: last_reload %s, was %s", when, st.Daemon.LastReload, good.Daemon.LastReload)
	}
	if len(st.Pools) != len(good.Pools) {
		t.Fatalf("%s: %d pools, was %d", when, len(st.Pools), len(good.Pools))
	}
	for i, p := range good.Pools {
		var got, want []string
		for _, m := range p.Members {
			want = append(want, m.Resolver+"@"+m.Address)
		}
		for _, m := range st.Pools[i].Members {
			got = append(got, m.Resolver+"@"+m.Address)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: pool %s members %v, was %v", when, p.Name, got, want)
		}
	}
	return st
}

// problemLines checks lbctl's stderr for a rejected configuration: the
// header line (when not empty), then one line per problem, each starting
// with one of want in that order; it returns the problem lines.
func problemLines(t *testing.T, what, stderr, header string, want []string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if header != "" {
		if len(lines) == 0 || lines[0] != header {
			t.Errorf("%s: stderr does not start with %q:\n%s", what, header, stderr)
			return nil
		}
		lines = lines[1:]
	}
	if len(lines) != len(want) {
		t.Errorf("%s: %d problem lines, want %d:\n%s", what, len(lines), len(want), stderr)
		return lines
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]) {
			t.Errorf("%s: problem %d is %q, want it to start with %q", what, i+1, l, want[i])
		}
	}
	return lines
}

// lastEvent returns the newest event of kind.
func lastEvent(t *testing.T, w *world, kind string) control.Event {
	t.Helper()
	evs := w.events()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i]
		}
	}
	t.Fatalf("no %s event in %+v", kind, evs)
	return control.Event{}
}

// waitEvent polls the event log for the first event after sequence number
// after that match accepts.
func (w *world) waitEvent(what string, after uint64, match func(control.Event) bool) control.Event {
	w.t.Helper()
	var found control.Event
	poll.Until(w.t, waitTimeout, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rep, err := w.client().Events(ctx, after)
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range rep.Events {
			if match(ev) {
				found = ev
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", rep.Events)
	})
	return found
}
