package resolvers

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/health"
	"lbdns/monitor"
	"lbdns/monitor/identify"
)

// targetsConfig has bind-1 in two pools under check rec (one target),
// unbound-1 in the second pool also under check auth (identify off), and
// knot-1 only under auth.
const targetsConfig = `
[daemon]
state_dir = "/tmp/lbdns-targets-test"

[[vip]]
name = "a"
address = "192.0.2.53"
forwarding = "nat"
pool = "one"

[[vip]]
name = "b"
address = "192.0.2.54"
forwarding = "nat"
pool = "two"

[[vip]]
name = "c"
address = "192.0.2.55"
forwarding = "nat"
pool = "three"

[[pool]]
name = "one"
members = ["bind-1"]
check = "rec"

[[pool]]
name = "two"
members = ["bind-1", "unbound-1"]
check = "rec"

[[pool]]
name = "three"
members = ["unbound-1", "knot-1"]
check = "auth"

[[resolver]]
name = "bind-1"
address = "127.0.0.1:5301"
vendor = "bind"

[[resolver]]
name = "unbound-1"
address = "127.0.0.1:5302"
vendor = "unbound"

[[resolver]]
name = "knot-1"
address = "127.0.0.1:5303"
vendor = "knot"

[check.rec]
interval = "2s"
timeout = "500ms"

[check.rec.dns]
zone = "lbdns.test"

[check.auth]
interval = "3s"
timeout = "1s"

[check.auth.dns]
zone = "lbdns.test"
identify = false
`

func parseTargetsConfig(t *testing.T) *configs.Config {
	t.Helper()
	cfg, err := configs.Parse([]byte(targetsConfig), "targets.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// okChecker is a checker that always succeeds.
var okChecker = check.Func(func(context.Context) check.Result { return check.Result{OK: true} })

// TestMonitorKeyRoundTrip: the monitor's key of a resolver target and the
// pool policy's key are one another's inverse, and keys of other kinds are
// not taken for resolvers.
func TestMonitorKeyRoundTrip(t *testing.T) {
	k := MonitorKey("bind-1", "rec")
	if k.Kind != MonitorKind || k.Member != "bind-1" || k.Check != "rec" || k.Owner != "" {
		t.Fatalf("MonitorKey = %+v", k)
	}
	tk, ok := TargetKeyOf(k)
	if !ok || tk != (TargetKey{Resolver: "bind-1", Check: "rec"}) {
		t.Fatalf("TargetKeyOf(%v) = %v, %v", k, tk, ok)
	}
	if tk.MonitorKey() != k {
		t.Fatalf("round trip: %v != %v", tk.MonitorKey(), k)
	}
	for _, other := range []monitor.Key{
		{Kind: "gslb", Owner: "web", Member: "a", Check: "http"},
		{Kind: "gslb", Member: "bind-1", Check: "rec"},
		{Kind: MonitorKind, Owner: "x", Member: "bind-1", Check: "rec"},
	} {
		if tk, ok := TargetKeyOf(other); ok {
			t.Errorf("TargetKeyOf(%v) = %v, true; want false", other, tk)
		}
	}
}

// TestTargets: one target per (resolver, check) pair, however many pools
// share it, with the check's schedule; the checker is built once each.
func TestTargets(t *testing.T) {
	cfg := parseTargetsConfig(t)
	built := map[netip.AddrPort][]string{}
	ts, err := Targets(cfg, func(chk *configs.Check, addr netip.AddrPort) (check.Checker, error) {
		built[addr] = append(built[addr], chk.Name)
		return okChecker, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range ts {
		got = append(got, tg.Key.String())
		if tg.Checker == nil || !tg.Addr.IsValid() {
			t.Errorf("target %v: checker %v, addr %v", tg.Key, tg.Checker, tg.Addr)
		}
	}
	want := []string{"resolver:bind-1/rec", "resolver:unbound-1/rec", "resolver:unbound-1/auth", "resolver:knot-1/auth"}
	if !slices.Equal(got, want) {
		t.Fatalf("targets = %v, want %v", got, want)
	}
	if b := built[netip.MustParseAddrPort("127.0.0.1:5301")]; !slices.Equal(b, []string{"rec"}) {
		t.Errorf("bind-1 (in two pools) built for %v, want once for rec", b)
	}
	if s := ts[0].Schedule; s.Interval != 2*time.Second || s.Timeout != 500*time.Millisecond || s.Rise == 0 || s.Fall == 0 {
		t.Errorf("bind-1's schedule = %+v", s)
	}
	if s := ts[3].Schedule; s.Interval != 3*time.Second || s.Timeout != time.Second {
		t.Errorf("knot-1's schedule = %+v", s)
	}
	if ts[0].Spec != cfg.Checks["rec"].ProbeIdentity() {
		t.Errorf("bind-1's spec is not its check's probe identity")
	}
}

// TestTargetsBuildError: a target whose checker cannot be built is left
// out and named (resolver and check) in the error; the others remain.
func TestTargetsBuildError(t *testing.T) {
	cfg := parseTargetsConfig(t)
	bad := errors.New("no such probe")
	ts, err := Targets(cfg, func(chk *configs.Check, addr netip.AddrPort) (check.Checker, error) {
		if addr.Port() == 5303 {
			return nil, bad
		}
		return okChecker, nil
	})
	if !errors.Is(err, bad) {
		t.Fatalf("err = %v, want it to wrap %v", err, bad)
	}
	if !strings.Contains(err.Error(), "knot-1") || !strings.Contains(err.Error(), "auth") {
		t.Errorf("err = %q, want it to name knot-1 and its check auth", err)
	}
	if len(ts) != 3 {
		t.Fatalf("%d targets, want the 3 that could be built", len(ts))
	}
	for _, tg := range ts {
		if tg.Key.Member == "knot-1" {
			t.Errorf("target %v returned although its checker failed", tg.Key)
		}
	}
}

// TestIdentifyTargets: every member of a pool whose check identifies, once
// (bind-1 is in two such pools), with that check's timeout and interval;
// members only under a check with identify = false are left out.
func TestIdentifyTargets(t *testing.T) {
	got := IdentifyTargets(parseTargetsConfig(t))
	want := []identify.Target{
		{Resolver: "bind-1", Addr: netip.MustParseAddrPort("127.0.0.1:5301"), Vendor: "bind", Timeout: 500 * time.Millisecond, Spread: 2 * time.Second},
		{Resolver: "unbound-1", Addr: netip.MustParseAddrPort("127.0.0.1:5302"), Vendor: "unbound", Timeout: 500 * time.Millisecond, Spread: 2 * time.Second},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("IdentifyTargets =\n%+v\nwant\n%+v", got, want)
	}
}

// statusList is a Statuses over a fixed list.
type statusList []monitor.TargetStatus

func (l statusList) Each(fn func(monitor.TargetStatus)) {
	for _, s := range l {
		fn(s)
	}
}

// TestFacts: the facts iterator turns each resolver target's status into
// its fact at now (fresh within three intervals, failing on a failed last
// check or a check in flight for over half its timeout), skips targets of
// other kinds, and stops when the consumer does.
func TestFacts(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	since := now.Add(-time.Hour)
	st := func(member string, h health.Status, inFlight time.Time) monitor.TargetStatus {
		h.Since = since
		return monitor.TargetStatus{Key: MonitorKey(member, "rec"), Interval: time.Second, Timeout: time.Second, Health: h, InFlightSince: inFlight}
	}
	src := statusList{
		st("up", health.Status{State: health.Up, LastOK: now.Add(-time.Second), LastReason: "ok"}, time.Time{}),
		st("stale", health.Status{State: health.Up, LastOK: now.Add(-4 * time.Second)}, time.Time{}),
		st("failing", health.Status{State: health.Up, LastFail: now.Add(-time.Second), ConsecutiveFail: 1, LastReason: "SERVFAIL"}, time.Time{}),
		st("slow", health.Status{State: health.Up, LastOK: now.Add(-time.Second)}, now.Add(-600*time.Millisecond)),
		st("inflight", health.Status{State: health.Up, LastOK: now.Add(-time.Second)}, now.Add(-400*time.Millisecond)),
		st("new", health.Status{State: health.Unknown}, time.Time{}),
		{Key: monitor.Key{Kind: "gslb", Owner: "web", Member: "a", Check: "http"}, Interval: time.Second},
	}
	got := maps.Collect(Facts(src, now))
	key := func(m string) TargetKey { return TargetKey{Resolver: m, Check: "rec"} }
	want := map[TargetKey]Fact{
		key("up"):       {State: health.Up, Since: since, Fresh: true, Reason: "ok"},
		key("stale"):    {State: health.Up, Since: since, Fresh: false},
		key("failing"):  {State: health.Up, Since: since, Fresh: true, Reason: "SERVFAIL", Failing: true},
		key("slow"):     {State: health.Up, Since: since, Fresh: true, Failing: true},
		key("inflight"): {State: health.Up, Since: since, Fresh: true},
		key("new"):      {State: health.Unknown, Since: since},
	}
	if !maps.Equal(got, want) {
		t.Fatalf("facts =\n%+v\nwant\n%+v", got, want)
	}
	n := 0
	for range Facts(src, now) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("iterator yielded %d facts after the consumer stopped", n)
	}
}

// TestFactsNoAllocs: reading every target's fact allocates nothing per
// target.
func TestFactsNoAllocs(t *testing.T) {
	src := make(statusList, 100)
	for i := range src {
		src[i] = monitor.TargetStatus{Key: MonitorKey("r", "rec"), Interval: time.Second}
	}
	now := time.Now()
	n := 0
	allocs := testing.AllocsPerRun(10, func() {
		for range Facts(src, now) {
			n++
		}
	})
	if allocs > 3 {
		t.Fatalf("%v allocations for %d targets", allocs, len(src))
	}
}
