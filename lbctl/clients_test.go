package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

func TestClientRequests(t *testing.T) {
	enforced := &control.ClientsStatus{Table: "lbdns", Enforced: true, MaxEntries: 1024}
	for _, tc := range []struct {
		name string
		args []string
		want control.ClientRequest
		rep  control.ClientReply
		out  string
	}{
		{"block", []string{"block", "203.0.113.7", "--for", "10m", "--reason", "flood"},
			control.ClientRequest{Action: "block", Client: "203.0.113.7", ForSeconds: 600, Reason: "flood"},
			control.ClientReply{Message: "blocked 203.0.113.7", Changed: true, Clients: enforced}, "blocked 203.0.113.7\n"},
		{"block forced", []string{"block", "100.64.1.1", "--force", "--for", "1h", "--reason", "attack"},
			control.ClientRequest{Action: "block", Client: "100.64.1.1", ForSeconds: 3600, Force: true, Reason: "attack"},
			control.ClientReply{Message: "blocked 100.64.1.1", Changed: true, Clients: enforced}, "blocked 100.64.1.1\n"},
		{"limit with a rate", []string{"limit", "198.51.100.0/24", "--rate", "20", "--for", "10m", "--reason", "launch"},
			control.ClientRequest{Action: "limit", Client: "198.51.100.0/24", Rate: 20, ForSeconds: 600, Reason: "launch"},
			control.ClientReply{Message: "limited", Changed: true, Clients: &control.ClientsStatus{Error: "no permission"}}, "NOT ENFORCED: the kernel's table was not changed (no permission); the intent below is stored but not in force\nlimited\n"},
		{"limit at the default rate", []string{"limit", "198.51.100.7", "--for", "30s", "--reason", "launch"},
			control.ClientRequest{Action: "limit", Client: "198.51.100.7", ForSeconds: 30, Reason: "launch"},
			control.ClientReply{Message: "limited", Changed: true, Clients: enforced}, "limited\n"},
		{"unblock", []string{"unblock", "203.0.113.7"}, control.ClientRequest{Action: "unblock", Client: "203.0.113.7"},
			control.ClientReply{Message: "removed block of 203.0.113.7", Changed: true, Clients: enforced}, "removed block of 203.0.113.7\n"},
		{"unblock not removed from the kernel", []string{"unblock", "203.0.113.7"}, control.ClientRequest{Action: "unblock", Client: "203.0.113.7"},
			control.ClientReply{Message: "203.0.113.7 is out of the intent, but its block is NOT REMOVED from the kernel", Changed: true,
				Clients: &control.ClientsStatus{Error: "no permission", Entries: []control.ClientEntry{{Client: "203.0.113.7", Action: "block", Unremoved: true}}}},
			"NOT ENFORCED: the kernel's table was not changed (no permission); the intent below is stored but not in force\n203.0.113.7 is out of the intent, but its block is NOT REMOVED from the kernel\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, map[string]reply{"POST /v1/clients": {body: tc.rep}})
			r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
			if r.code != exitOK || r.stdout != tc.out {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			reqs := f.received()
			if len(reqs) != 1 || reqs[0].route != "POST /v1/clients" {
				t.Fatalf("requests %+v", reqs)
			}
			var got control.ClientRequest
			decodeJSON(t, reqs[0].body, &got)
			if got != tc.want {
				t.Errorf("request %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestClientUsage(t *testing.T) {
	for _, args := range [][]string{
		{"block"}, {"block", "203.0.113.7", "--reason", "x"}, {"block", "203.0.113.7", "--for", "10m"},
		{"block", "203.0.113.7", "--for", "1500ms", "--reason", "x"}, {"block", "203.0.113.7", "--rate", "5", "--for", "1m", "--reason", "x"},
		{"limit", "203.0.113.7", "--force", "--for", "1m", "--reason", "x"}, {"limit", "203.0.113.7", "--rate", "-1", "--for", "1m", "--reason", "x"},
		{"limit", "203.0.113.7", "--rate", "0", "--for", "1m", "--reason", "x"}, {"block", "203.0.113.7", "--for", "-5s", "--reason", "x"},
		{"unblock"}, {"unblock", "a", "b"}, {"clients", "x"},
	} {
		f := startFake(t, nil)
		r := lbctl(t, append([]string{"-socket", f.socket}, args...)...)
		if r.code != exitUsage || len(f.received()) != 0 {
			t.Errorf("%v: exit %d stderr %q, requests %v", args, r.code, r.stderr, f.received())
		}
	}
}

// TestClientRefused: a refusal (a stale write, a protected client) exits
// 1 with the daemon's message.
func TestClientRefused(t *testing.T) {
	f := startFake(t, map[string]reply{"POST /v1/clients": {code: http.StatusConflict,
		body: control.Error{Code: http.StatusConflict, Message: "the operator intent changed meanwhile (revision 3, now 4: ...); nothing was changed: check it and retry"}}})
	r := lbctl(t, "-socket", f.socket, "block", "203.0.113.7", "--for", "10m", "--reason", "flood")
	if r.code != exitRefused || !strings.Contains(r.stderr, "changed meanwhile") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestClientsList(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	st := control.Status{Generated: now, Clients: &control.ClientsStatus{Table: "lbdns", Enforced: true, MaxEntries: 1024, Entries: []control.ClientEntry{
		{Client: "203.0.113.7", Action: "block", Until: now.Add(10 * time.Minute), Reason: "flood", Set: now.Add(-time.Minute), By: "uid 0", Enforced: true},
		{Client: "198.51.100.0/24", Action: "limit", Rate: 50, Until: now.Add(time.Hour), Reason: "launch storm", Set: now.Add(-2 * time.Minute), By: "uid 1000"},
		{Client: "192.0.2.9", Action: "block", Until: now.Add(5 * time.Minute), Reason: "scan", Set: now.Add(-3 * time.Minute), By: "uid 0", Unremoved: true},
	}}}
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "clients")
	want := `client actions: 2 of at most 1024, table inet lbdns, enforced
1 unblocked but NOT REMOVED from the kernel: it may still drop or limit their packets until each one's UNTIL
  CLIENT           ACTION  RATE  LEFT   UNTIL                 REASON        SET       BY        ENFORCED
  203.0.113.7      block   -     10m0s  2026-12-01T14:10:00Z  flood         1m0s ago  uid 0     yes
  198.51.100.0/24  limit   50/s  1h0m   2026-12-01T15:00:00Z  launch storm  2m0s ago  uid 1000  NO
  192.0.2.9        block   -     5m0s   2026-12-01T14:05:00Z  scan          3m0s ago  uid 0     NOT REMOVED
`
	if r.code != exitOK || r.stdout != want {
		t.Errorf("exit %d stderr %q stdout\n%s\nwant\n%s", r.code, r.stderr, r.stdout, want)
	}
	r = lbctl(t, "-socket", f.socket, "clients", "-o", "json")
	var got control.ClientsStatus
	decodeJSON(t, r.stdout, &got)
	if r.code != exitOK || len(got.Entries) != 3 || got.Entries[1].Rate != 50 || !got.Entries[2].Unremoved {
		t.Errorf("json: exit %d %+v", r.code, got)
	}
}

// TestClientUsageWords: a negative --for and --rate 0 are named as
// such, not as missing.
func TestClientUsageWords(t *testing.T) {
	f := startFake(t, nil)
	if r := lbctl(t, "-socket", f.socket, "block", "203.0.113.7", "--for", "-5s", "--reason", "x"); !strings.Contains(r.stderr, "--for -5s: want a positive duration") {
		t.Errorf("--for -5s: %q", r.stderr)
	}
	if r := lbctl(t, "-socket", f.socket, "limit", "203.0.113.7", "--rate", "0", "--for", "1m", "--reason", "x"); !strings.Contains(r.stderr, "--rate 0: want 1 to") {
		t.Errorf("--rate 0: %q", r.stderr)
	}
}
