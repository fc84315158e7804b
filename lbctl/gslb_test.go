package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

// sampleGSLB is a status with two GSLB pools: "web" (combine all) with a
// member up, one down behind a probe address with an expiring
// certificate, and one still unknown; "edge" (at least 1 of 2) with one
// member up over ICMP and TCP.
func sampleGSLB() control.Status {
	gen := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	return control.Status{
		Version:   control.StatusVersion,
		Generated: gen,
		Daemon:    control.Daemon{Config: "/etc/lbdns/lbdns.toml", Started: gen.Add(-time.Hour), Warm: true},
		VIPs:      []control.VIP{},
		Pools:     []control.Pool{},
		Overrides: []control.Override{},
		GSLB: []control.GSLBPool{
			{Name: "web", Combine: "all", Up: 1, Total: 3, Members: []control.GSLBMember{
				{Name: "web-1", Address: "192.0.2.10", Weight: 100, State: "up", Since: gen.Add(-(3*time.Minute + 12*time.Second)),
					Monitors: []control.GSLBMonitor{
						{Check: "https-health", Kind: "https", State: "up", Since: gen.Add(-3 * time.Minute), LastProbe: gen.Add(-time.Second),
							LastResult: "ok", RTTMillis: 12.34, Facts: []control.Fact{{Name: "cert_days_left", Value: 41}}},
					}},
				{Name: "web-2", Address: "2001:db8::11", ProbeAddress: "10.0.0.11", Weight: 50, Priority: 1, State: "down",
					Since: gen.Add(-2 * time.Hour), Reason: "https-health down: certificate expired",
					Monitors: []control.GSLBMonitor{
						{Check: "https-health", Kind: "https", State: "down", Since: gen.Add(-2 * time.Hour), LastProbe: gen.Add(-2 * time.Second),
							LastResult: "x509: certificate has expired", RTTMillis: 3, Facts: []control.Fact{{Name: "cert_days_left", Value: -2}}},
					}},
				{Name: "web-3", Address: "192.0.2.12", ProbeAddress: "192.0.2.12", Weight: 100, State: "unknown",
					Monitors: []control.GSLBMonitor{{Check: "https-health", Kind: "https", State: "unknown"}}},
			}},
			{Name: "edge", Combine: "at_least", AtLeast: 1, Up: 1, Total: 1, Members: []control.GSLBMember{
				{Name: "edge-1", Address: "198.51.100.7", Weight: 100, State: "up", Since: gen.Add(-time.Hour),
					Monitors: []control.GSLBMonitor{
						{Check: "ping", Kind: "icmp", State: "up", Since: gen.Add(-time.Hour), LastProbe: gen.Add(-time.Second),
							LastResult: "ok", RTTMillis: 0.8, Facts: []control.Fact{{Name: "loss_percent", Value: 0}, {Name: "socket", Text: "unprivileged"}}},
						{Check: "tcp-443", Kind: "tcp", State: "down", Since: gen.Add(-time.Minute), LastProbe: gen.Add(-time.Second),
							LastResult: "connection refused", RTTMillis: 0.2},
					}},
			}},
		},
	}
}

var (
	gslbMemberColumns  = []string{"MEMBER", "ADDRESS", "WEIGHT", "PRIORITY", "STATE", "SINCE", "REASON"}
	gslbMonitorColumns = []string{"MEMBER", "CHECK", "KIND", "STATE", "SINCE", "LAST", "RTT", "CERT DAYS", "LOSS", "SOCKET"}
)

func TestGSLBMembers(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/status": {body: sampleGSLB()}})
	for _, sub := range []string{"members", "status"} {
		t.Run(sub, func(t *testing.T) {
			r := lbctl(t, "-socket", f.socket, "gslb", sub)
			if r.code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			for _, want := range []string{"gslb pool web (all): 1/3 up", "gslb pool edge (at least 1): 1/1 up"} {
				if !hasLine(r.stdout, want) {
					t.Errorf("no line %q:\n%s", want, r.stdout)
				}
			}
			members := table(t, r.stdout, gslbMemberColumns...)
			if len(members) != 3 {
				t.Fatalf("want the 3 members of web in the first table:\n%s", r.stdout)
			}
			for name, want := range map[string]map[string]string{
				"web-1": {"ADDRESS": "192.0.2.10", "WEIGHT": "100", "PRIORITY": "0", "STATE": "up", "SINCE": "3m12s", "REASON": "-"},
				"web-2": {"ADDRESS": "2001:db8::11 (probe 10.0.0.11)", "WEIGHT": "50", "PRIORITY": "1", "STATE": "down", "SINCE": "2h0m",
					"REASON": "https-health down: certificate expired"},
				"web-3": {"ADDRESS": "192.0.2.12", "STATE": "unknown", "SINCE": "-", "REASON": "-"},
			} {
				got := row(t, members, "MEMBER", name)
				for col, w := range want {
					if got[col] != w {
						t.Errorf("%s %s = %q, want %q", name, col, got[col], w)
					}
				}
			}
			monitors := table(t, r.stdout, gslbMonitorColumns...)
			for name, want := range map[string]map[string]string{
				"web-1": {"CHECK": "https-health", "KIND": "https", "STATE": "up", "LAST": "ok", "RTT": "12.3ms", "CERT DAYS": "41", "LOSS": "-", "SOCKET": "-"},
				"web-2": {"STATE": "down", "LAST": "x509: certificate has expired", "RTT": "3.0ms", "CERT DAYS": "-2"},
				"web-3": {"STATE": "unknown", "LAST": "-", "RTT": "-", "CERT DAYS": "-"},
			} {
				got := row(t, monitors, "MEMBER", name)
				for col, w := range want {
					if got[col] != w {
						t.Errorf("%s monitor %s = %q, want %q", name, col, got[col], w)
					}
				}
			}
			// The second pool's monitor table: one row per monitor.
			var edgeRows int
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), "edge-1 ") && (strings.Contains(l, " icmp ") || strings.Contains(l, " tcp ")) {
					edgeRows++
				}
			}
			if edgeRows != 2 {
				t.Errorf("want 2 monitor rows of edge-1:\n%s", r.stdout)
			}
			for _, want := range []string{"0%", "unprivileged", "connection refused"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, r.stdout)
				}
			}
		})
	}
}

func TestGSLBMembersPool(t *testing.T) {
	st := sampleGSLB()
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})

	r := lbctl(t, "-socket", f.socket, "gslb", "members", "--pool", "edge")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "web") || !hasLine(r.stdout, "gslb pool edge (at least 1): 1/1 up") {
		t.Errorf("--pool edge shows other pools or not edge:\n%s", r.stdout)
	}
	monitors := table(t, r.stdout, gslbMonitorColumns...)
	if len(monitors) != 2 || monitors[0]["KIND"] != "icmp" || monitors[0]["LOSS"] != "0%" || monitors[0]["SOCKET"] != "unprivileged" ||
		monitors[1]["KIND"] != "tcp" || monitors[1]["LAST"] != "connection refused" {
		t.Errorf("edge monitors %v", monitors)
	}

	r = lbctl(t, "-socket", f.socket, "-o", "json", "gslb", "members", "--pool", "web")
	var got []control.GSLBPool
	decodeJSON(t, r.stdout, &got)
	if r.code != exitOK || !reflect.DeepEqual(got, st.GSLB[:1]) {
		t.Errorf("json --pool web: exit %d\n got %+v\nwant %+v", r.code, got, st.GSLB[:1])
	}
	for _, key := range []string{`"probe_address": "10.0.0.11"`, `"cert_days_left": -2`, `"rtt_ms": 12.34`, `"combine": "all"`} {
		if !strings.Contains(r.stdout, key) {
			t.Errorf("json lacks %s:\n%s", key, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "loss_percent") || strings.Contains(r.stdout, "socket") {
		t.Errorf("json of https monitors has icmp fields:\n%s", r.stdout)
	}

	r = lbctl(t, "-socket", f.socket, "gslb", "members", "--pool", "nope")
	if r.code != exitRefused || !strings.Contains(r.stderr, `no GSLB pool "nope" (pools: web, edge)`) || r.stdout != "" {
		t.Errorf("unknown pool: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestGSLBMembersNone(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/status": {body: sampleStatus(false, false)}})
	r := lbctl(t, "-socket", f.socket, "gslb", "members")
	if r.code != exitOK || strings.TrimSpace(r.stdout) != "no GSLB pools configured" {
		t.Errorf("no pools: exit %d %q", r.code, r.stdout)
	}
	r = lbctl(t, "-socket", f.socket, "gslb", "members", "-o", "json")
	if r.code != exitOK || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("no pools, json: exit %d %q", r.code, r.stdout)
	}
	r = lbctl(t, "-socket", f.socket, "gslb", "members", "--pool", "web")
	if r.code != exitRefused || !strings.Contains(r.stderr, `no GSLB pool "web" (none configured)`) {
		t.Errorf("unknown pool without pools: exit %d %q", r.code, r.stderr)
	}
	if r := lbctl(t, "-socket", f.socket, "status"); r.code != exitOK || strings.Contains(r.stdout, "gslb") {
		t.Errorf("status without GSLB pools shows a gslb section: exit %d\n%s", r.code, r.stdout)
	}
}

func TestGSLBUsageErrors(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/status": {body: sampleGSLB()}})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gslb"}, "missing subcommand"},
		{[]string{"gslb", "pools"}, `unknown gslb subcommand "pools"`},
		{[]string{"gslb", "members", "web"}, `unexpected argument "web"`},
		{[]string{"gslb", "members", "--pool"}, "pool"},
	} {
		r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "Usage: lbctl [global flags] gslb members [--pool P]") {
			t.Errorf("%q: exit %d, stderr:\n%s", tc.args, r.code, r.stderr)
		}
	}
	if got := f.received(); len(got) != 0 {
		t.Errorf("usage errors reached the daemon: %+v", got)
	}
}

func TestStatusGSLBSection(t *testing.T) {
	st := sampleStatus(false, false)
	st.GSLB = sampleGSLB().GSLB
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if !hasLine(r.stdout, "gslb pools:") {
		t.Fatalf("no gslb section:\n%s", r.stdout)
	}
	rows := table(t, r.stdout, "POOL", "COMBINE", "UP", "NOT UP")
	if len(rows) != 2 {
		t.Fatalf("want 2 gslb pool rows: %v", rows)
	}
	web, edge := row(t, rows, "POOL", "web"), row(t, rows, "POOL", "edge")
	if web["UP"] != "1/3" || web["COMBINE"] != "all" ||
		web["NOT UP"] != "web-2 down (https-health down: certificate expired), web-3 unknown" {
		t.Errorf("web row %v", web)
	}
	if edge["UP"] != "1/1" || edge["COMBINE"] != "at least 1" || edge["NOT UP"] != "-" {
		t.Errorf("edge row %v", edge)
	}
	// The resolver pools are still all there.
	if len(table(t, r.stdout, memberColumns...)) != 3 {
		t.Errorf("resolver member rows missing:\n%s", r.stdout)
	}
}

// TestGSLBMembersVotes: in a fleet, each member's verdict with its
// probers and their votes by location; -o json carries them.
func TestGSLBMembersVotes(t *testing.T) {
	st := sampleGSLB()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range st.GSLB {
		for j := range st.GSLB[i].Members {
			st.GSLB[i].Members[j].Fleet = &control.GSLBFleetVerdict{Source: "fleet", Verdict: "down", Decided: at, Quorum: 2,
				Probers: []control.GSLBProber{{Name: "lb1", Location: "fra"}, {Name: "lb2", Location: "ams"}},
				Votes:   []control.GSLBVote{{Prober: "lb1", Location: "fra", At: at}, {Prober: "lb2", Location: "ams", At: at}}}
		}
	}
	st.GSLB[0].Members[0].Fleet.Verdict, st.GSLB[0].Members[0].Fleet.Held = "up", true
	st.GSLB[0].Members[0].Fleet.Votes[1].Up = true
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "gslb", "members", "--pool", "web")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	rows := table(t, r.stdout, "MEMBER", "FLEET VERDICT", "FROM", "PROBERS", "VOTES")
	first := st.GSLB[0].Members[0].Name
	if len(rows) == 0 || rows[0]["MEMBER"] != first || rows[0]["FLEET VERDICT"] != "up (held)" || rows[0]["FROM"] != "fleet" ||
		rows[0]["PROBERS"] != "lb1@fra lb2@ams" || rows[0]["VOTES"] != "lb1@fra down, lb2@ams up" {
		t.Errorf("votes table %v:\n%s", rows, r.stdout)
	}
	r = lbctl(t, "-socket", f.socket, "-o", "json", "gslb", "members", "--pool", "web")
	var got []control.GSLBPool
	decodeJSON(t, r.stdout, &got)
	if len(got) != 1 || got[0].Members[0].Fleet == nil || len(got[0].Members[0].Fleet.Votes) != 2 || got[0].Members[0].Fleet.Votes[0].Location != "fra" {
		t.Errorf("json: %s", r.stdout)
	}
}
