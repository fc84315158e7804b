package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

// TestTop lists the heaviest keys with their error bounds, asks for the
// kind and window given, and refuses an unknown kind without asking.
func TestTop(t *testing.T) {
	rep := control.TopReply{Kind: "names", Window: "30s", Seconds: 36, Queries: 90000, Rate: 3000, // the epochs merged cover 36 s
		Rcodes: map[string]uint64{"NOERROR": 89000, "NXDOMAIN": 1000},
		Entries: []control.TopEntry{{Key: "boom.app.gslb.example.", Count: 60000, Error: 120, Rate: 2000, RateError: 4, Share: 0.667},
			{Key: "www.gslb.example.", Count: 3000, Error: 120, Rate: 100, RateError: 4, Share: 0.033}}}
	f := startFake(t, map[string]reply{"GET /v1/top": {body: rep}})
	r := lbctl(t, "-socket", f.socket, "top", "names", "--window", "30s", "--source", "responder")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"top names of the responder's queries over the last 30s: 90000 queries, 3000/s (NOERROR 89000, NXDOMAIN 1000)",
		"boom.app.gslb.example.  60000    -120   2000.0  66.7%",
		"www.gslb.example.       3000     -120   100.0   3.3%",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if got := f.received(); len(got) != 1 || got[0].query != "kind=names&source=responder&window=30s" {
		t.Errorf("requests %+v", got)
	}
	// By default both sources, each apart (dnstap's as it counted some).
	r = lbctl(t, "-socket", f.socket, "top", "names")
	if i, j := strings.Index(r.stdout, "top names of the responder's queries"), strings.Index(r.stdout, "top names of the resolvers' (dnstap) queries"); i < 0 || j < i {
		t.Errorf("top of both sources:\n%s", r.stdout)
	}
	r = lbctl(t, "-socket", f.socket, "-o", "json", "top")
	var got []control.TopReply
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 2 || len(got[0].Entries) != 2 || got[0].Source != "responder" || got[1].Source != "dnstap" {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	if q := f.received(); q[3].query != "kind=clients&source=responder" || q[4].query != "kind=clients&source=dnstap" {
		t.Errorf("default requests %q %q, want kind=clients of each source", q[3].query, q[4].query)
	}
	r = lbctl(t, "-socket", f.socket, "-o", "json", "top", "--source", "dnstap")
	var one control.TopReply
	if err := json.Unmarshal([]byte(r.stdout), &one); err != nil || one.Source != "dnstap" {
		t.Fatalf("json of one source: %v\n%s", err, r.stdout)
	}
	r = lbctl(t, "-socket", f.socket, "top", "names", "--limit", "1", "--source", "responder")
	if !strings.Contains(r.stdout, "boom.app.gslb.example.") || strings.Contains(r.stdout, "www.gslb.example.") || !strings.Contains(r.stdout, "(1 more keys: --limit 0 prints them all)") {
		t.Errorf("--limit 1:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"top", "talkers"}, {"top", "names", "extra"}, {"top", "--window", "-1s"}, {"top", "--limit", "-1"}, {"top", "--source", "both"}} {
		if r := lbctl(t, append([]string{"-socket", f.socket}, args...)...); r.code != exitUsage {
			t.Errorf("%q: exit %d, want usage", args, r.code)
		}
	}
	if n := len(f.received()); n != 7 {
		t.Errorf("usage errors reached the daemon: %d requests", n)
	}
}

// TestTopOff: a daemon that counts nothing says so; lbctl exits 1.
func TestTopOff(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/top": {code: http.StatusServiceUnavailable, body: control.ErrorReply{Error: "queries are not counted: [flood] enabled = false (a restart applies it)"}}})
	r := lbctl(t, "-socket", f.socket, "top")
	if r.code != exitRefused || !strings.Contains(r.stderr, "queries are not counted") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestStatusFloodBanner: lbctl status opens with a line per flood alarm
// raised, naming its heaviest client and name.
func TestStatusFloodBanner(t *testing.T) {
	since := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	top := []control.TopReply{{Source: "responder", Kind: "clients", Entries: []control.TopEntry{{Key: "203.0.113.66", Rate: 5000}}},
		{Source: "responder", Kind: "prefixes", Entries: []control.TopEntry{{Key: "203.0.113.0/24", Rate: 5000}}},
		{Source: "responder", Kind: "names", Entries: []control.TopEntry{{Key: "boom.gslb.example.", Rate: 5010}}}}
	st := control.Status{Generated: since.Add(time.Minute), Flood: &control.FloodStatus{On: true, Window: "10s", Alarms: []control.FloodAlarm{
		{ID: "responder", Reason: "rise", Since: since, Rate: 5400, Baseline: 400, Floor: 1000, Top: top},
		{ID: "share responder clients 203.0.113.66", Source: "responder", Reason: "share", Kind: "clients", Key: "203.0.113.66", Share: 0.93, Since: since, Rate: 5400, Top: top}}}}
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"!! FLOOD ALARM since 2026-12-01T12:00:00Z: responder at 5400/s, baseline 400/s; of the responder's queries, top client 203.0.113.66 5000/s, top name boom.gslb.example. 5010/s (lbctl top)",
		"!! FLOOD ALARM since 2026-12-01T12:00:00Z: client 203.0.113.66 has 93% of the responder's 5400 queries/s; of the responder's queries, top client",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
}
