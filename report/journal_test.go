package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/health"
	"lbdns/intent"
	"lbdns/monitor"
	"lbdns/resolvers"
	"lbdns/vip"
)

// logRecord is one log line as recordHandler saw it.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recordHandler is a slog.Handler that keeps every record.
type recordHandler struct {
	mu   sync.Mutex
	recs []logRecord
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// journalRun runs do on a Journal over a recording logger, a real event
// log and real metrics, and returns the log lines, the events (Seq and
// Time cleared) and the metric samples (as gather gives them).
func journalRun(t *testing.T, do func(j *Journal)) ([]logRecord, []control.Event, map[string]float64) {
	t.Helper()
	h := &recordHandler{}
	evlog := control.NewEventLog(100, func() time.Time { return t0 })
	samples, _ := gather(t, testInput(t), func(m *Metrics) { do(NewJournal(slog.New(h), evlog, m)) })
	evs, _, _ := evlog.Since(0)
	for i := range evs {
		evs[i].Seq, evs[i].Time = 0, time.Time{}
	}
	return h.recs, evs, samples
}

// checkLogs compares the log lines with want, every attribute of want's
// and no other.
func checkLogs(t *testing.T, got, want []logRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d log lines %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i].level != want[i].level || got[i].msg != want[i].msg || !maps.Equal(got[i].attrs, want[i].attrs) {
			t.Errorf("log line %d:\n got %v %q %v\nwant %v %q %v", i, got[i].level, got[i].msg, got[i].attrs,
				want[i].level, want[i].msg, want[i].attrs)
		}
	}
}

// checkEvents compares the events with want.
func checkEvents(t *testing.T, got, want []control.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestJournalStateChange(t *testing.T) {
	addr := netip.MustParseAddrPort("198.51.100.1:53")
	logs, evs, samples := journalRun(t, func(j *Journal) {
		j.StateChange(monitor.Event{Key: resolvers.MonitorKey("a", "rec"), Addr: addr,
			Transition: health.Transition{From: health.Up, To: health.Down, Reason: "timeout"},
			Result:     check.Result{RTT: 1234567 * time.Nanosecond}})
		j.StateChange(monitor.Event{Key: monitor.Key{Kind: "gslb", Owner: "web", Member: "m1", Check: "http"}, Addr: addr,
			Transition: health.Transition{From: health.Unknown, To: health.Up, Reason: "200 OK"},
			Result:     check.Result{OK: true, RTT: time.Millisecond}})
		j.StateChange(monitor.Event{Key: monitor.Key{Kind: "gslb", Owner: "web", Member: "m1", Check: "ping"}, Addr: netip.MustParseAddrPort("198.51.100.1:0"),
			Transition: health.Transition{From: health.Unknown, To: health.Up, Reason: "3/3 echoes"},
			Result:     check.Result{OK: true, RTT: time.Millisecond}})
	})
	checkLogs(t, logs, []logRecord{
		{slog.LevelInfo, "backend state change", map[string]string{"target": "a/rec", "addr": "198.51.100.1:53",
			"from": "up", "to": "down", "reason": "timeout", "rtt": "1.234567ms"}},
		{slog.LevelInfo, "backend state change", map[string]string{"target": "gslb:web/m1/http", "addr": "198.51.100.1:53",
			"from": "unknown", "to": "up", "reason": "200 OK", "rtt": "1ms"}},
		// icmp has no port: the address alone.
		{slog.LevelInfo, "backend state change", map[string]string{"target": "gslb:web/m1/ping", "addr": "198.51.100.1",
			"from": "unknown", "to": "up", "reason": "3/3 echoes", "rtt": "1ms"}},
	})
	checkEvents(t, evs, []control.Event{
		{Kind: control.EventState, Subject: "a/rec", Error: true, Message: "up -> down: timeout (rtt 1.235ms)", Verdict: control.VerdictDown},
		// Up at the first checks: routine work (a first down is not).
		{Kind: control.EventState, Subject: "gslb:web/m1/http", Message: "unknown -> up: 200 OK (rtt 1ms)",
			Verdict: control.VerdictUp, Routine: control.RoutineFirstUp},
		{Kind: control.EventState, Subject: "gslb:web/m1/ping", Message: "unknown -> up: 3/3 echoes (rtt 1ms)",
			Verdict: control.VerdictUp, Routine: control.RoutineFirstUp},
	})
	for k, want := range map[string]float64{
		"lbdns_backend_transitions_total{check=rec,resolver=a,to=down}":     1,
		"lbdns_gslb_transitions_total{check=http,member=m1,pool=web,to=up}": 1,
		"lbdns_backend_transitions_total{check=http,resolver=m1,to=up}":     0,
	} {
		if samples[k] != want {
			t.Errorf("%s = %v, want %v", k, samples[k], want)
		}
	}
}

func TestJournalVerdicts(t *testing.T) {
	verdicts := []resolvers.Event{
		{Pool: "p", From: resolvers.Healthy, To: resolvers.Degraded, Detail: "1 of 4 down"},
		{Pool: "q", From: resolvers.Healthy, To: resolvers.NoFacts, Detail: "no facts"},
		{Pool: "r", From: resolvers.Degraded, To: resolvers.VendorWide, Detail: "bind down"},
		{Pool: "s", From: resolvers.Healthy, To: resolvers.BelowMinimum, FailOpen: true, Detail: "2 < 3"},
		{Pool: "t", From: resolvers.NoFacts, To: resolvers.Healthy, Detail: "5 of 5 up"},
	}
	logs, evs, _ := journalRun(t, func(j *Journal) { j.Verdicts(context.Background(), verdicts) })
	attrs := func(pool, from, to, fo, detail string) map[string]string {
		return map[string]string{"pool": pool, "from": from, "to": to, "fail_open": fo, "detail": detail}
	}
	checkLogs(t, logs, []logRecord{
		{slog.LevelInfo, "pool verdict", attrs("p", "healthy", "degraded", "false", "1 of 4 down")},
		{slog.LevelWarn, "pool verdict", attrs("q", "healthy", "no-facts", "false", "no facts")},
		{slog.LevelError, "pool verdict", attrs("r", "degraded", "vendor-wide-failure", "false", "bind down")},
		{slog.LevelError, "pool verdict", attrs("s", "healthy", "below-minimum", "true", "2 < 3")},
		{slog.LevelInfo, "pool verdict", attrs("t", "no-facts", "healthy", "false", "5 of 5 up")},
	})
	var want []control.Event
	stands := []string{control.VerdictWarn, control.VerdictWarn, control.VerdictDown, control.VerdictDown, control.VerdictUp}
	for i, v := range verdicts {
		want = append(want, control.Event{Kind: control.EventPool, Subject: v.Pool, Message: v.String(), Error: i == 2 || i == 3, Verdict: stands[i]})
	}
	checkEvents(t, evs, want)
}

func TestJournalIPVSOps(t *testing.T) {
	key := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Proto: vip.UDP}
	a := netip.MustParseAddrPort("198.51.100.1:53")
	ops := []vip.Op{
		{Kind: vip.DeleteDest, Service: vip.Service{Key: key}, Dest: vip.Destination{Addr: a}},
		{Kind: vip.DeleteService, Service: vip.Service{Key: key}},
	}
	for _, dryRun := range []bool{false, true} {
		t.Run(fmt.Sprint("dryRun=", dryRun), func(t *testing.T) {
			logs, evs, samples := journalRun(t, func(j *Journal) { j.IPVSOps(ops, dryRun) })
			msg, suffix, routine := "ipvs op applied", "", control.RoutineIPVS
			if dryRun {
				msg, suffix, routine = "ipvs op (dry-run, NOT applied)", " (dry-run, NOT applied)", control.RoutineIPVSDryRun
			}
			checkLogs(t, logs, []logRecord{
				{slog.LevelInfo, msg, map[string]string{"op": "delete-dest udp/192.0.2.1:53 -> 198.51.100.1:53"}},
				{slog.LevelInfo, msg, map[string]string{"op": "delete-service udp/192.0.2.1:53"}},
			})
			checkEvents(t, evs, []control.Event{
				{Kind: control.EventIPVS, Subject: "udp/192.0.2.1:53", Message: "delete-dest udp/192.0.2.1:53 -> 198.51.100.1:53" + suffix, Routine: routine},
				{Kind: control.EventIPVS, Subject: "udp/192.0.2.1:53", Message: "delete-service udp/192.0.2.1:53" + suffix, Routine: routine},
			})
			for _, k := range []string{"lbdns_ipvs_operations_total{op=delete-dest}", "lbdns_ipvs_operations_total{op=delete-service}"} {
				if samples[k] != 1 {
					t.Errorf("%s = %v, want 1", k, samples[k])
				}
			}
		})
	}
}

func TestJournalSyncFailed(t *testing.T) {
	logs, evs, _ := journalRun(t, func(j *Journal) { j.SyncFailed(errors.New("netlink: busy"), 7) })
	checkLogs(t, logs, []logRecord{{slog.LevelError, "ipvs sync failed; will retry",
		map[string]string{"err": "netlink: busy", "errors_total": "7"}}})
	checkEvents(t, evs, []control.Event{{Kind: control.EventIPVS, Subject: "sync", Error: true,
		Message: "ipvs sync failed; will retry: netlink: busy"}})
}

func TestJournalWarm(t *testing.T) {
	logs, evs, _ := journalRun(t, func(j *Journal) { j.Warm(true) })
	checkLogs(t, logs, []logRecord{{slog.LevelInfo, "warm-up over; reconciling IPVS table",
		map[string]string{"all_targets_decided": "true"}}})
	checkEvents(t, evs, nil)
}

func TestJournalReloadApplied(t *testing.T) {
	cfg := testInput(t).Config
	logs, evs, _ := journalRun(t, func(j *Journal) { j.ReloadApplied("/etc/lbdns.toml", cfg) })
	checkLogs(t, logs, []logRecord{{slog.LevelInfo, "config reloaded",
		map[string]string{"config": "/etc/lbdns.toml", "summary": cfg.Summary()}}})
	checkEvents(t, evs, []control.Event{{Kind: control.EventReload, Subject: "/etc/lbdns.toml",
		Message: "config reloaded: " + cfg.Summary()}})
}

func TestJournalReloadRejected(t *testing.T) {
	_, bad := configs.Parse([]byte("[[vip]]\nname = \"v\"\naddress = \"nope\"\n[[pool]]\nname = 3\n"), "bad.toml")
	if n := len(configs.Problems(bad)); n < 2 {
		t.Fatalf("test config has %d problems (%v), want several", n, bad)
	}
	first := func(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }
	for _, tc := range []struct {
		name string
		err  error
		n    int
	}{
		{"problems", bad, len(configs.Problems(bad))},
		{"other", errors.New("open /etc/lbdns.toml: permission denied\nsecond line"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs, evs, _ := journalRun(t, func(j *Journal) { j.ReloadRejected("/etc/lbdns.toml", tc.err) })
			checkLogs(t, logs, []logRecord{{slog.LevelError, "reload rejected; running config unchanged",
				map[string]string{"config": "/etc/lbdns.toml", "err": tc.err.Error()}}})
			checkEvents(t, evs, []control.Event{{Kind: control.EventReload, Subject: "/etc/lbdns.toml", Error: true,
				Message: fmt.Sprintf("reload rejected (%d problems), running config unchanged: %s", tc.n, first(tc.err.Error()))}})
		})
	}
}

// TestJournalConfigWarnings: each warning of a configuration is one
// warning line naming the file, line and key; none without warnings.
func TestJournalConfigWarnings(t *testing.T) {
	cfg := testInput(t).Config
	logs, _, _ := journalRun(t, func(j *Journal) { j.ConfigWarnings(cfg) })
	checkLogs(t, logs, nil)
	cfg.Warnings = []configs.Problem{{File: "/etc/lbdns.toml", Line: 7, Key: "gslb.server.reply_cache", Value: "true", Msg: "has no effect; the reply cache was removed"}}
	logs, evs, _ := journalRun(t, func(j *Journal) { j.ConfigWarnings(cfg) })
	checkLogs(t, logs, []logRecord{{slog.LevelWarn, "config warning", map[string]string{"config": "/etc/lbdns.toml", "line": "7",
		"key": "gslb.server.reply_cache", "value": "true", "warning": "has no effect; the reply cache was removed"}}})
	checkEvents(t, evs, nil)
}

func TestJournalRestartOnlyKept(t *testing.T) {
	cfg := testInput(t).Config
	cfg.Daemon.StateDir, cfg.Daemon.ControlSocket, cfg.Daemon.StatusListen = "/var/lib/x", "/run/x.sock", "127.0.0.1:9"
	cfg.Daemon.StatusMaxRequests = 12
	cfg.Actions.NftTable = "lbdns"
	logs, evs, _ := journalRun(t, func(j *Journal) { j.RestartOnlyKept(cfg) })
	checkLogs(t, logs, []logRecord{{slog.LevelWarn,
		"daemon.state_dir, daemon.control_socket, daemon.status_listen, daemon.status_max_requests, actions.nft_table, [fleet] and [dnstap] take effect at the next restart; the running ones stay",
		map[string]string{"state_dir": "/var/lib/x", "control_socket": "/run/x.sock", "status_listen": "127.0.0.1:9", "status_max_requests": "12", "nft_table": "lbdns"}}})
	checkEvents(t, evs, nil)
}

func TestJournalOverride(t *testing.T) {
	logs, evs, _ := journalRun(t, func(j *Journal) {
		j.Override(control.OverrideRequest{Action: "drain", Resolver: "a", Pool: "p", Reason: "patching"}, "alice",
			intent.Result{Message: "a drained in pool p", Changed: true})
		j.Override(control.OverrideRequest{Action: "enable", Resolver: "b"}, "", intent.Result{Message: "b enabled", Changed: true})
	})
	// No log line: the control server's "override request" line is the
	// only one per override (issue 11: each override was logged twice).
	checkLogs(t, logs, nil)
	checkEvents(t, evs, []control.Event{
		{Kind: control.EventOverride, Subject: "a", Message: "a drained in pool p (reason: patching) by alice"},
		{Kind: control.EventOverride, Subject: "b", Message: "b enabled"},
	})
}

func TestJournalOrphans(t *testing.T) {
	cfg := testInput(t).Config
	logs, evs, _ := journalRun(t, func(j *Journal) {
		j.Orphans(cfg, []intent.Override{
			{Resolver: "a", Pool: "p", Action: intent.ActionDrain},
			{Resolver: "gone", Action: intent.ActionDisable, Reason: "broken"},
			{Resolver: "b", VIP: "v9", Action: intent.ActionDrain},
		})
	})
	checkLogs(t, logs, []logRecord{
		{slog.LevelWarn, "orphaned override kept (it applies again if the name comes back; lbctl enable clears it)",
			map[string]string{"resolver": "gone", "action": "disable", "scope": "in all pools",
				"why": "resolver gone is not in the configuration", "reason": "broken"}},
		{slog.LevelWarn, "orphaned override kept (it applies again if the name comes back; lbctl enable clears it)",
			map[string]string{"resolver": "b", "action": "drain", "scope": "in vip v9",
				"why": "VIP v9 is not in the configuration", "reason": ""}},
	})
	checkEvents(t, evs, []control.Event{
		{Kind: control.EventOverride, Subject: "gone", Error: true,
			Message: "orphaned override kept: disable gone in all pools: resolver gone is not in the configuration"},
		{Kind: control.EventOverride, Subject: "b", Error: true,
			Message: "orphaned override kept: drain b in vip v9: VIP v9 is not in the configuration"},
	})
}

func TestJournalIntentChanged(t *testing.T) {
	st := intent.State{Overrides: []intent.Override{{Resolver: "a", Action: intent.ActionDrain}, {Resolver: "b", Action: intent.ActionDrain}}}
	logs, evs, _ := journalRun(t, func(j *Journal) { j.IntentChanged(st) })
	checkLogs(t, logs, []logRecord{{slog.LevelInfo, "operator intent changed elsewhere; applying it",
		map[string]string{"overrides": "2"}}})
	checkEvents(t, evs, []control.Event{{Kind: control.EventOverride, Subject: "intent",
		Message: "operator intent changed elsewhere: 2 overrides in force"}})
}

func TestJournalStateDiscarded(t *testing.T) {
	logs, evs, _ := journalRun(t, func(j *Journal) {
		j.StateDiscarded("/var/lib/lbdns/overrides.json.bad-1", errors.New("unexpected EOF"))
	})
	checkLogs(t, logs, []logRecord{{slog.LevelError,
		"state file could not be parsed and was moved aside (-discard-bad-state); starting WITHOUT its overrides",
		map[string]string{"copy": "/var/lib/lbdns/overrides.json.bad-1", "err": "unexpected EOF"}}})
	checkEvents(t, evs, []control.Event{{Kind: control.EventDaemon, Subject: "state", Error: true,
		Message: "overrides file could not be parsed; moved aside to /var/lib/lbdns/overrides.json.bad-1; started without overrides"}})
}

func TestJournalStarted(t *testing.T) {
	cfg := testInput(t).Config
	for _, tc := range []struct {
		ipvs IPVSMode
		mode string
	}{{IPVSKernel, "kernel"}, {IPVSDryRun, "dry-run (IPVS table computed, NOT applied)"}, {IPVSNone, "none (no [[vip]]: no IPVS client opened)"}} {
		logs, evs, _ := journalRun(t, func(j *Journal) { j.Started("/etc/lbdns.toml", cfg, tc.ipvs) })
		checkLogs(t, logs, []logRecord{{slog.LevelInfo, "lbdnsd started", map[string]string{"config": "/etc/lbdns.toml",
			"ipvs": tc.mode, "summary": cfg.Summary(), "warm_up": resolvers.WarmUp(cfg).String()}}})
		checkEvents(t, evs, []control.Event{{Kind: control.EventDaemon, Subject: "lbdnsd",
			Message: "started (ipvs " + tc.mode + "): " + cfg.Summary(), Routine: control.RoutineStart}})
	}
}

func TestJournalStoppingStopped(t *testing.T) {
	logs, evs, _ := journalRun(t, func(j *Journal) {
		j.Stopping()
		j.Stopped()
	})
	checkLogs(t, logs, []logRecord{{slog.LevelInfo, "lbdnsd stopped; IPVS table left in place", map[string]string{}}})
	checkEvents(t, evs, []control.Event{{Kind: control.EventDaemon, Subject: "lbdnsd", Message: "stopping; IPVS table left in place"}})
}

// TestJournalStoppingStoppedDryRun checks that a dry run does not claim to
// leave a table in place: nothing was applied.
func TestJournalStoppingStoppedDryRun(t *testing.T) {
	cfg := testInput(t).Config
	logs, evs, _ := journalRun(t, func(j *Journal) {
		j.Started("/etc/lbdns.toml", cfg, IPVSDryRun)
		j.Stopping()
		j.Stopped()
	})
	const fate = "dry run: no IPVS table was applied, nothing left behind"
	if got := logs[len(logs)-1]; got.msg != "lbdnsd stopped; "+fate {
		t.Errorf("stop log = %q, want %q", got.msg, "lbdnsd stopped; "+fate)
	}
	if got := evs[len(evs)-1].Message; got != "stopping; "+fate {
		t.Errorf("stop event = %q, want %q", got, "stopping; "+fate)
	}
	for _, l := range logs {
		if strings.Contains(l.msg, "left in place") {
			t.Errorf("dry-run log %q says the table was left in place", l.msg)
		}
	}
}
