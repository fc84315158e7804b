package main

import (
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

func TestPrefetch(t *testing.T) {
	gen := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := control.Status{Version: 1, Generated: gen, Prefetch: []control.PrefetchEntry{
		{Name: "api.example.", Type: "A", Resolver: "bind-1", Mode: "window", State: "expired", LastRefresh: gen.Add(-4 * time.Second),
			TTLSeconds: 30, RemainingSeconds: 26, NextRun: gen.Add(24 * time.Second), Expired: 5, GapMillis: 133.5, MaxGapMillis: 210},
		{Name: "api.example.", Type: "A", Resolver: "dnsmasq-1", Partition: "eu", Mode: "expiry", State: "failing",
			Failures: 3, LastError: "rcode SERVFAIL", NextRun: gen.Add(8 * time.Second)},
		{Name: "cdn.example.", Type: "AAAA", Resolver: "bind-1", Mode: "window", State: "parked"},
	}}
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})

	r := lbctl(t, "-socket", f.socket, "prefetch")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("want a header and 3 rows:\n%s", r.stdout)
	}
	for i, want := range [][]string{
		{"api.example.", "bind-1", "window", "expired", "4s ago", "30s", "26s", "in 24s", " 5 ", "133.5ms (210.0ms)"},
		{"dnsmasq-1", "eu", "expiry", "failing", "never", "in 8s", "3", "rcode SERVFAIL"},
		{"cdn.example.", "AAAA", "parked", "never"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("row %d lacks %q: %s", i+1, w, lines[i+1])
			}
		}
	}

	r = lbctl(t, "-socket", f.socket, "prefetch", "--resolver", "bind-1", "-o", "json")
	var got []control.PrefetchEntry
	decodeJSON(t, r.stdout, &got)
	if r.code != exitOK || len(got) != 2 || got[0].Resolver != "bind-1" || got[1].Name != "cdn.example." {
		t.Fatalf("filtered json: exit %d %+v", r.code, got)
	}
	r = lbctl(t, "-socket", f.socket, "prefetch", "--name", "nope.example.")
	if r.code != exitOK || !strings.Contains(r.stdout, "no entry matches (3 entries in all)") {
		t.Fatalf("no match: %d %q", r.code, r.stdout)
	}
	if r := lbctl(t, "-socket", f.socket, "prefetch", "extra"); r.code != exitUsage {
		t.Fatalf("extra argument: exit %d", r.code)
	}

	f2 := startFake(t, map[string]reply{"GET /v1/status": {body: control.Status{Version: 1, Generated: gen}}})
	r = lbctl(t, "-socket", f2.socket, "prefetch")
	if r.code != exitOK || !strings.Contains(r.stdout, "prefetcher not running") {
		t.Fatalf("no prefetcher: %d %q", r.code, r.stdout)
	}
}
