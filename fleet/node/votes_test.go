package node

import (
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/fleet"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/monitor"
)

const forcedDoc = `
[check.web]
kind = "tcp"
[check.web.tcp]
port = 80

[[gslb.pool]]
name = "p"
monitors = ["web"]

[[gslb.pool.member]]
name = "a"
address = "192.0.2.1"

[[gslb.pool.member]]
name = "b"
address = "192.0.2.2"

[[gslb.pool.member]]
name = "c"
address = "192.0.2.3"
`

// TestForcedStates: the fleet's verdicts become forced member states
// (held said in the reason, a member without a verdict not forced);
// judging from its own probes, a node forces the last fleet verdict only
// on members its own monitors have not judged yet; the states the votes
// are written from stay this node's own.
func TestForcedStates(t *testing.T) {
	cfg, err := configs.Parse([]byte(forcedDoc), "forced.toml")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	probers := []fleet.Prober{{Name: "n1"}, {Name: "n2"}}
	views := map[string]fleet.MemberView{
		"p/a": {Probers: probers, Decision: fleet.Decision{Verdict: fleet.VerdictUp, Since: t0, Decided: t0, Up: 2}},
		"p/b": {Probers: probers, Decision: fleet.Decision{Verdict: fleet.VerdictDown, Since: t0.Add(time.Second), Held: true, Down: 1}},
		"p/c": {Probers: probers, Decision: fleet.Decision{Verdict: fleet.VerdictNone}},
	}
	own := map[monitor.Key]monitor.TargetStatus{
		gslb.MonitorKey("p", "a", "web"): {Health: health.Status{State: health.Down, Since: t0}},
	}
	got := forcedStates(cfg, own, sourceFleet, views)
	want := gslb.ForcedStates{
		"p/a": {State: health.Up, Since: t0, By: sourceFleet, Reason: "fleet verdict up: 2 up, 0 down of 2 probers"},
		"p/b": {State: health.Down, Since: t0.Add(time.Second), By: sourceFleet, Reason: "fleet verdict down: 0 up, 1 down of 2 probers (held)"},
	}
	if !sameForced(got, want) {
		t.Errorf("by the fleet: forced %+v\nwant %+v", got, want)
	}
	pools := gslb.EvaluateForced(cfg, own, got, t0)
	if a := pools[0].Members[0]; a.State != health.Up || a.ForcedBy != sourceFleet || a.Monitors[0].State != health.Down {
		t.Errorf("p/a evaluated %s by %q (own monitor %s), want up by the fleet over its own monitor down", a.State, a.ForcedBy, a.Monitors[0].State)
	}
	got = forcedStates(cfg, own, sourceOwn, views)
	delete(want, "p/a") // judged by its own monitor: its own state wins
	if !sameForced(got, want) {
		t.Errorf("by its own probes: forced %+v\nwant %+v", got, want)
	}
	if got := forcedStates(cfg, own, sourceOwn, nil); got != nil {
		t.Errorf("own probes without any fleet verdict: forced %+v, want none", got)
	}
	if sameForced(nil, gslb.ForcedStates{}) {
		t.Error("sameForced(nil, empty): want a difference (the first publish of none)")
	}
}
