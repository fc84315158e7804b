package gslb

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/health"
	"lbdns/monitor"
)

const testDoc = `
[check.a]
interval = "1s"
timeout = "500ms"
rise = 1
fall = 2
[check.a.dns]
qname = "a.example."

[check.b.dns]
qname = "b.example."

[check.c.dns]
qname = "c.example."

[[gslb.pool]]
name = "all"
monitors = ["a", "b", "c"]

[[gslb.pool.member]]
name = "m"
address = "192.0.2.1"

[[gslb.pool]]
name = "two"
monitors = ["a", "b", "c"]
combine = "at_least"
at_least = 2

[[gslb.pool.member]]
name = "m"
address = "192.0.2.2"
probe_address = "198.51.100.2"
weight = 7
priority = 3

[[gslb.pool.member]]
name = "own"
address = "2001:db8::3"
monitors = ["c", "b"]
`

func loadTest(t *testing.T) *configs.Config {
	t.Helper()
	cfg, err := configs.Parse([]byte(testDoc), "gslb-test.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns t0 + s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestTargets(t *testing.T) {
	cfg := loadTest(t)
	var built []netip.AddrPort
	build := func(chk *configs.Check, a netip.AddrPort) (check.Checker, error) {
		built = append(built, a)
		if chk.Name == "b" && a.Addr() == netip.MustParseAddr("2001:db8::3") {
			return nil, errors.New("boom")
		}
		return check.Func(func(context.Context) check.Result { return check.Result{OK: true} }), nil
	}
	targets, err := Targets(cfg, build)
	if err == nil || !strings.Contains(err.Error(), "gslb pool two, member own, monitor b: boom") {
		t.Errorf("err = %v, want the failed build named", err)
	}
	if len(built) != 8 || len(targets) != 7 {
		t.Fatalf("built %d, targets %d; want 8 and 7", len(built), len(targets))
	}
	byKey := map[monitor.Key]monitor.Target{}
	for _, tg := range targets {
		byKey[tg.Key] = tg
	}
	// The probe address is probed, with the dns kind's port 53.
	tg, ok := byKey[monitor.Key{Kind: "gslb", Owner: "two", Member: "m", Check: "a"}]
	if !ok {
		t.Fatalf("no target two/m/a in %v", byKey)
	}
	if tg.Addr != netip.MustParseAddrPort("198.51.100.2:53") {
		t.Errorf("two/m/a probes %v, want the probe address 198.51.100.2:53", tg.Addr)
	}
	if s := tg.Schedule; s.Interval != time.Second || s.Timeout != 500*time.Millisecond || s.Rise != 1 || s.Fall != 2 {
		t.Errorf("schedule = %+v", s)
	}
	if tg.Spec != cfg.Checks["a"].ProbeIdentity() {
		t.Errorf("spec = %q", tg.Spec)
	}
	if tg := byKey[MonitorKey("all", "m", "c")]; tg.Addr != netip.MustParseAddrPort("192.0.2.1:53") {
		t.Errorf("all/m/c probes %v, want the answer address", tg.Addr)
	}
	if _, ok := byKey[MonitorKey("two", "own", "a")]; ok {
		t.Error("member own has its own monitors, but a target of the pool's monitor a exists")
	}
}

func TestProbeAddrPort(t *testing.T) {
	a := netip.MustParseAddr("2001:db8::1")
	if got := ProbeAddrPort(&configs.Check{Kind: "tcp"}, a); got != netip.AddrPortFrom(a, 0) {
		t.Errorf("tcp: %v, want port 0", got)
	}
	if got := ProbeAddrPort(&configs.Check{Kind: "dns"}, a); got != netip.AddrPortFrom(a, 53) {
		t.Errorf("dns: %v, want port 53", got)
	}
}

// st is a monitor status in state s since second since, with the last
// result detail.
func st(s health.State, since int, detail string) monitor.TargetStatus {
	ts := monitor.TargetStatus{Health: health.Status{State: s, Since: at(since)}}
	if s == health.Unknown {
		return ts
	}
	ts.LastAt = at(since)
	ts.Last = check.Result{OK: s == health.Up, Detail: detail, RTT: 3 * time.Millisecond}
	if s == health.Down {
		ts.Health.LastFailReason = detail
	}
	return ts
}

func TestEvaluate(t *testing.T) {
	cfg := loadTest(t)
	U, D, X := health.Up, health.Down, health.Unknown
	type mon = map[string]monitor.TargetStatus
	cases := []struct {
		name   string
		pool   string
		member string
		mons   mon // by monitor name; missing = no target
		state  health.State
		since  time.Time
		reason string
	}{
		{"all: nothing started yet", "all", "m", mon{}, X, at(100),
			"0 of 3 monitors up (all needed); unknown: a (not monitored), b (not monitored), c (not monitored)"},
		{"all: first round running", "all", "m", mon{"a": st(X, 0, ""), "b": st(U, 2, "ok"), "c": st(X, 0, "")}, X, at(2),
			"1 of 3 monitors up (all needed); unknown: a (no verdict yet), c (no verdict yet)"},
		{"all: every monitor up, since the last came up", "all", "m", mon{"a": st(U, 5, ""), "b": st(U, 9, ""), "c": st(U, 7, "")}, U, at(9),
			"3 of 3 monitors up (all needed)"},
		{"all: one down is down, since the first went down", "all", "m", mon{"a": st(D, 20, "timeout after 1s"), "b": st(D, 15, "rcode SERVFAIL"), "c": st(U, 1, "")}, D, at(15),
			"1 of 3 monitors up (all needed); down: a (timeout after 1s), b (rcode SERVFAIL)"},
		{"all: down wins over unknown", "all", "m", mon{"a": st(D, 20, "refused"), "b": st(X, 0, "")}, D, at(20),
			"0 of 3 monitors up (all needed); down: a (refused); unknown: b (no verdict yet), c (not monitored)"},
		{"at_least 2: two up of three", "two", "m", mon{"a": st(U, 4, ""), "b": st(D, 6, "status 503"), "c": st(U, 8, "")}, U, at(8),
			"2 of 3 monitors up (at least 2 needed); down: b (status 503)"},
		{"at_least 2: up since the second came up", "two", "m", mon{"a": st(U, 4, ""), "b": st(U, 6, ""), "c": st(U, 8, "")}, U, at(6),
			"3 of 3 monitors up (at least 2 needed)"},
		{"at_least 2: one up, one unknown can still make it", "two", "m", mon{"a": st(U, 4, ""), "b": st(D, 6, "x"), "c": st(X, 0, "")}, X, at(6),
			"1 of 3 monitors up (at least 2 needed); down: b (x); unknown: c (no verdict yet)"},
		{"at_least 2: two down cannot make it", "two", "m", mon{"a": st(U, 4, ""), "b": st(D, 6, "x"), "c": st(D, 10, "y")}, D, at(10),
			"1 of 3 monitors up (at least 2 needed); down: b (x), c (y)"},
		{"at_least 2: own monitors, in their order", "two", "own", mon{"c": st(D, 3, "loss 100%"), "b": st(U, 1, "")}, D, at(3),
			"1 of 2 monitors up (at least 2 needed); down: c (loss 100%)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			statuses := map[monitor.Key]monitor.TargetStatus{}
			for name, s := range tc.mons {
				s.Key = MonitorKey(tc.pool, tc.member, name)
				statuses[s.Key] = s
			}
			var got *MemberState
			for _, p := range Evaluate(cfg, statuses, at(100)) {
				for i := range p.Members {
					if p.Name == tc.pool && p.Members[i].Name == tc.member {
						got = &p.Members[i]
					}
				}
			}
			if got == nil {
				t.Fatal("member not evaluated")
			}
			if got.State != tc.state || !got.Since.Equal(tc.since) || got.Reason != tc.reason {
				t.Errorf("got %s since %v, %q\nwant %s since %v, %q", got.State, got.Since, got.Reason, tc.state, tc.since, tc.reason)
			}
		})
	}
}

func TestEvaluatePoolAndMonitors(t *testing.T) {
	cfg := loadTest(t)
	k := MonitorKey("two", "m", "b")
	s := st(health.Down, 6, "status 503")
	s.Key, s.Addr = k, netip.MustParseAddrPort("198.51.100.2:53")
	statuses := map[monitor.Key]monitor.TargetStatus{
		k:                             s,
		MonitorKey("two", "m", "a"):   st(health.Up, 1, "NOERROR"),
		MonitorKey("two", "m", "c"):   st(health.Up, 1, "NOERROR"),
		MonitorKey("all", "m", "a"):   st(health.Up, 1, ""),
		MonitorKey("two", "own", "c"): st(health.Up, 1, ""),
	}
	pools := Evaluate(cfg, statuses, at(100))
	if len(pools) != 2 || pools[0].Name != "all" || pools[1].Name != "two" {
		t.Fatalf("pools = %+v", pools)
	}
	if p := pools[0]; p.Combine != "all" || p.AtLeast != 0 || p.Up != 0 || p.Total != 1 {
		t.Errorf("pool all = %+v", p)
	}
	p := pools[1]
	if p.Combine != "at_least" || p.AtLeast != 2 || p.Up != 1 || p.Total != 2 {
		t.Errorf("pool two: combine %s at_least %d up %d/%d", p.Combine, p.AtLeast, p.Up, p.Total)
	}
	m := p.Members[0]
	if m.Name != "m" || m.Weight != 7 || m.Priority != 3 || m.Addr != netip.MustParseAddr("192.0.2.2") || m.ProbeAddr != netip.MustParseAddr("198.51.100.2") {
		t.Errorf("member = %+v", m)
	}
	if len(m.Monitors) != 3 {
		t.Fatalf("monitors = %+v", m.Monitors)
	}
	b := m.Monitors[1]
	if b.Check != "b" || b.Kind != "dns" || b.Key != k || !b.Known || b.State != health.Down || !b.Since.Equal(at(6)) ||
		b.Last.Detail != "status 503" || b.Last.RTT != 3*time.Millisecond || !b.LastAt.Equal(at(6)) || b.FailReason != "status 503" ||
		b.Addr != netip.MustParseAddrPort("198.51.100.2:53") {
		t.Errorf("monitor b = %+v", b)
	}
	own := p.Members[1]
	if own.Monitors[0].Check != "c" || own.Monitors[1].Check != "b" || own.Monitors[1].Known {
		t.Errorf("own monitors = %+v", own.Monitors)
	}
	if own.Monitors[1].Addr != netip.MustParseAddrPort("[2001:db8::3]:53") {
		t.Errorf("own/b addr = %v, want the configured probe address while unmonitored", own.Monitors[1].Addr)
	}
}

// TestEvaluateForced: a forced state replaces what the monitors say (up
// over a monitor down, down over monitors up), with the forcer's since
// and reason, and leaves the monitors' own facts and the other members
// as they are; an Unknown forced state forces nothing.
func TestEvaluateForced(t *testing.T) {
	cfg := loadTest(t)
	statuses := map[monitor.Key]monitor.TargetStatus{
		MonitorKey("two", "m", "a"):   st(health.Up, 1, "NOERROR"),
		MonitorKey("two", "m", "b"):   st(health.Up, 1, "NOERROR"),
		MonitorKey("two", "own", "c"): st(health.Down, 4, "loss 100%"),
		MonitorKey("two", "own", "b"): st(health.Up, 1, ""),
		MonitorKey("all", "m", "a"):   st(health.Up, 1, ""),
	}
	forced := ForcedStates{
		MemberKey("two", "m"):   {State: health.Down, Since: at(50), By: "fleet", Reason: "fleet verdict down"},
		MemberKey("two", "own"): {State: health.Up, Since: at(60), By: "fleet", Reason: "fleet verdict up"},
		MemberKey("all", "m"):   {State: health.Unknown, By: "fleet", Reason: "none"},
	}
	pools := EvaluateForced(cfg, statuses, forced, at(100))
	m, own := pools[1].Members[0], pools[1].Members[1]
	if m.State != health.Down || !m.Since.Equal(at(50)) || m.Reason != "fleet verdict down" || m.ForcedBy != "fleet" {
		t.Errorf("two/m = %s since %v %q by %q, want down since t+50 by the fleet", m.State, m.Since, m.Reason, m.ForcedBy)
	}
	if m.Monitors[0].State != health.Up || m.Monitors[0].Last.Detail != "NOERROR" {
		t.Errorf("two/m's own monitor a = %+v, want its own fact kept", m.Monitors[0])
	}
	if own.State != health.Up || !own.Since.Equal(at(60)) || own.Monitors[0].State != health.Down {
		t.Errorf("two/own = %s since %v (monitor c %s), want up since t+60 with its monitor down", own.State, own.Since, own.Monitors[0].State)
	}
	if pools[1].Up != 1 {
		t.Errorf("pool two up = %d, want 1 (the forced up member)", pools[1].Up)
	}
	if a := pools[0].Members[0]; a.ForcedBy != "" || a.State != health.Unknown || !strings.HasPrefix(a.Reason, "1 of 3 monitors up") {
		t.Errorf("all/m = %s %q by %q, want the monitors' verdict (an unknown forced state forces nothing)", a.State, a.Reason, a.ForcedBy)
	}
	plain := Evaluate(cfg, statuses, at(100))
	if got := plain[1].Members[0]; got.State != health.Up || got.ForcedBy != "" {
		t.Errorf("Evaluate without forced states: two/m = %s by %q, want up by its monitors", got.State, got.ForcedBy)
	}
}
