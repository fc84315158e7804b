package incident

import (
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

var t0 = time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)

// brokenQuickstart is the quick start's status with east's two members
// stopped and one of the five resolvers killed, in a dry run.
func brokenQuickstart() *control.Status {
	up := func(name string) control.Member {
		return control.Member{Resolver: name, State: "up", Since: t0.Add(-time.Hour)}
	}
	return &control.Status{Generated: t0,
		Daemon: control.Daemon{DryRun: true, Warm: true},
		Pools: []control.Pool{{Name: "local", MinHealthy: 2, Total: 5, Enabled: 5, Healthy: 4, Diagnosis: "degraded",
			Members: []control.Member{up("bind"), up("knot"), up("pdns"), up("dnsmasq"),
				{Resolver: "unbound", State: "down", Since: t0.Add(-3 * time.Minute)}}}},
		GSLB: []control.GSLBPool{
			{Name: "east", Up: 0, Total: 2, Fallback: "west", Members: []control.GSLBMember{
				{Name: "east-1", State: "down", Reason: "tcp: i/o timeout", Since: t0.Add(-2 * time.Minute)},
				{Name: "east-2", State: "down", Reason: "tcp: i/o timeout", Since: t0.Add(-90 * time.Second)}}},
			{Name: "west", Up: 2, Total: 2, Members: []control.GSLBMember{{Name: "west-1", State: "up"}, {Name: "west-2", State: "up"}}},
		},
	}
}

// TestSummarizeBrokenQuickstart: the summary of the broken quick start
// says, worst first, that east is down and its clients go to west, that
// the resolver pool runs on 4 of 5, and that it is a dry run; each with
// since when and what to do.
func TestSummarizeBrokenQuickstart(t *testing.T) {
	got := Summarize(brokenQuickstart())
	if len(got) != 3 {
		t.Fatalf("%d incidents, want 3: %+v", len(got), got)
	}
	east, pool, dry := got[0], got[1], got[2]
	if east.Severity != Critical || !strings.Contains(east.Summary, "GSLB pool east DOWN: 0 of 2 members up") ||
		!strings.Contains(east.Effect, "answered from pool west") || !east.Since.Equal(t0.Add(-2*time.Minute)) ||
		east.Runbook != "RUNBOOK.md#lbdnsgslbpooldown" || east.Action == "" {
		t.Errorf("east: %+v", east)
	}
	if pool.Severity != Minor || !strings.Contains(pool.Summary, "4 of 5 resolvers healthy") ||
		!strings.Contains(pool.Effect, "served by 4 resolvers") || !pool.Since.Equal(t0.Add(-3*time.Minute)) ||
		!strings.HasPrefix(pool.Action, "lbctl status (pool local") {
		t.Errorf("pool: %+v", pool)
	}
	if dry.Severity != Info || !strings.Contains(dry.Summary, "DRY RUN") {
		t.Errorf("dry run: %+v", dry)
	}
}

// TestSummarizeGrades: a resolver pool is graded by the capacity left,
// and a GSLB pool down whose fallback is down too says so.
func TestSummarizeGrades(t *testing.T) {
	for _, c := range []struct {
		healthy, min int
		failOpen     bool
		want         string
	}{
		{4, 2, false, Minor}, {3, 2, false, Minor}, {2, 2, false, Major}, {1, 2, true, Critical}, {1, 1, false, Major}, {0, 1, true, Critical},
	} {
		st := &control.Status{Daemon: control.Daemon{Warm: true},
			Pools: []control.Pool{{Name: "p", Total: 5, Enabled: 5, Healthy: c.healthy, MinHealthy: c.min, FailOpen: c.failOpen}}}
		got := Summarize(st)
		if len(got) != 1 || got[0].Severity != c.want {
			t.Errorf("%d of 5 healthy (min %d): %+v, want one %s", c.healthy, c.min, got, c.want)
		}
	}
	st := brokenQuickstart()
	st.GSLB[1].Up = 0
	if got := Summarize(st); !strings.Contains(got[0].Effect, "last resort") || strings.Contains(got[0].Effect, "west") {
		t.Errorf("east and west down: %+v", got[0])
	}
	// All well: nothing at all (not nil: /status says summary []).
	st = &control.Status{Daemon: control.Daemon{Warm: true}, Pools: []control.Pool{{Name: "p", Total: 2, Enabled: 2, Healthy: 2}}}
	if got := Summarize(st); got == nil || len(got) != 0 {
		t.Errorf("all well: %+v", got)
	}
	if line := st.HealthyLine(); line != "All as configured: 1 resolver pool healthy." {
		t.Errorf("healthy line %q", line)
	}
}

// TestSummarizeSafetyNets: a VIP not serving, names on their last
// resort, etcd out of reach, a failed reload, a flood alarm and an
// unenforced block each become an incident, critical ones first, then
// by when they began (the unknown last).
func TestSummarizeSafetyNets(t *testing.T) {
	no := false
	st := &control.Status{Daemon: control.Daemon{Warm: true, LastReloadError: "x.toml:3: bad"},
		VIPs:          []control.VIP{{Name: "dns1", Address: "192.0.2.53", Pool: "local", Serving: &no, ServingReason: "no destination"}},
		GSLBResponder: &control.GSLBResponder{LastResort: []control.GSLBLastResort{{Name: "api.example.", Type: "A", LastResort: "static", Since: t0}}},
		Fleet:         &control.FleetEtcd{Reachable: false, Since: t0, Error: "context deadline exceeded", IntentSource: "local copy"},
		Flood:         &control.FloodStatus{On: true, Alarms: []control.FloodAlarm{{ID: "a", Reason: "dnstap at 9000/s", Since: t0}}},
		Clients:       &control.ClientsStatus{Enforced: false, Entries: []control.ClientEntry{{Client: "192.0.2.0/24", Action: "block"}}},
	}
	got := Summarize(st)
	want := []string{"GSLB last resort", "VIP dns1", "fleet etcd", "flood", "configuration", "client actions"}
	if len(got) != len(want) {
		t.Fatalf("%d incidents, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].What != w {
			t.Errorf("incident %d is %q, want %q", i, got[i].What, w)
		}
		if got[i].Runbook == "" {
			t.Errorf("%s: no runbook section", got[i].What)
		}
	}
}

// TestSummarizeBGPReason: a BGP session down is summarised with why it
// is down when the announcer knows (an MD5 mismatch), else with its last
// error; an established session is no incident.
func TestSummarizeBGPReason(t *testing.T) {
	st := &control.Status{Daemon: control.Daemon{Warm: true}, BGP: &control.BGPStatus{Peers: []control.BGPPeer{
		{Address: "198.51.100.254", AS: 65000, State: "active", LastError: "dial: timeout",
			Reason: "TCP MD5 signature mismatch with the router"},
		{Address: "2001:db8::fe", AS: 65000, State: "connect", LastError: "dial: timeout"},
		{Address: "198.51.100.253", AS: 65000, State: "established"},
	}}}
	got := Summarize(st)
	if len(got) != 2 {
		t.Fatalf("%d incidents, want 2: %+v", len(got), got)
	}
	for _, want := range []string{"is active (TCP MD5 signature mismatch with the router)", "is connect (dial: timeout)"} {
		found := false
		for _, in := range got {
			found = found || strings.Contains(in.Summary, want)
		}
		if !found {
			t.Errorf("no incident summary says %q: %+v", want, got)
		}
	}
}
