package main

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

// sampleStatus is a status with one pool of three members: one up and
// drained with stats, one down and stale with a mismatched identity, one
// disabled and out of traffic; and two overrides, one orphaned.
func sampleStatus(dryRun, failOpen bool) control.Status {
	gen := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	// unbound-1 is down but in traffic: held by fail-open, or (without
	// fail-open) a verdict the applied table has not caught up with.
	why, whyText := control.WhyDown, "down: timeout"
	if failOpen {
		why, whyText = control.WhyHeldFailOpen, "failing its check (down: timeout), held by fail-open: in traffic before the pool collapsed"
	}
	return control.Status{
		Version:   control.StatusVersion,
		Generated: gen,
		Daemon: control.Daemon{
			Config: "/etc/lbdns/lbdns.toml", Started: gen.Add(-26 * time.Hour), DryRun: dryRun, Warm: true,
			LastReload: gen.Add(-5 * time.Minute), IPVSOps: 12,
		},
		VIPs: []control.VIP{{
			Name: "dns-v4", Address: "192.0.2.53", Pool: "main",
			Services: []control.Service{
				{Proto: "udp", Address: "192.0.2.53:53", Scheduler: "wrr"},
				{Proto: "tcp", Address: "192.0.2.53:53", Scheduler: "wrr"},
			},
		}},
		Pools: []control.Pool{{
			Name: "main", Check: "recursive", VIPs: []string{"dns-v4"}, MinHealthy: 2,
			Total: 3, Enabled: 2, Healthy: 1, FailOpen: failOpen, Diagnosis: "below-minimum",
			Detail:  "1 of 2 enabled members healthy",
			Vendors: []control.VendorCount{{Vendor: "bind", Total: 2, Healthy: 1}, {Vendor: "unbound", Total: 1}},
			Members: []control.Member{
				{
					Resolver: "bind-1", Address: "198.51.100.11", Vendor: "bind", IdentifiedVendor: "bind",
					State: "up", Since: gen.Add(-(3*time.Minute + 12*time.Second)), Fresh: true,
					LastProbe: gen.Add(-time.Second), LastResult: "ok", RTTMillis: 1.24, Flaps: 2,
					Override: "drain", OverrideReason: "disk full", InTraffic: true, Weight: 0,
					Why: control.WhyDrained, WhyText: "drained by an operator: weight 0 (healthy)",
					Stats: &control.DestStats{ActiveConns: 5, InactiveConns: 2, PPSIn: 340},
				},
				{
					Resolver: "unbound-1", Address: "198.51.100.12", Vendor: "unbound", IdentifiedVendor: "bind",
					State: "down", Since: gen.Add(-2 * time.Hour), Fresh: false,
					LastProbe: gen.Add(-90 * time.Second), LastResult: "timeout", RTTMillis: 300, Flaps: 7,
					Override: "none", InTraffic: true, Weight: 100, Why: why, WhyText: whyText,
				},
				{
					Resolver: "bind-2", Address: "198.51.100.13", Vendor: "bind",
					State: "unknown", Override: "disable", Why: control.WhyDisabled, WhyText: "disabled by an operator",
				},
			},
		}},
		Overrides: []control.Override{
			{Resolver: "bind-1", Pool: "main", Action: "drain", Reason: "disk full", Set: gen.Add(-10 * time.Minute), By: "uid 0"},
			{Resolver: "ghost", Action: "disable", Set: gen.Add(-49 * time.Hour), By: "uid 1000", Orphaned: true},
		},
		Prefetch: []control.PrefetchEntry{
			{Name: "a.example.", Type: "A", Resolver: "bind-1", State: "ok"},
			{Name: "a.example.", Type: "A", Resolver: "unbound-1", State: "failing"},
			{Name: "b.example.", Type: "AAAA", Resolver: "unbound-1", State: "parked"},
			{Name: "c.example.", Type: "A", Resolver: "bind-1", State: "expired"},
		},
	}
}

// table finds the table whose header line holds every one of columns and
// returns its rows as maps from column title to cell (cells are separated
// by two or more spaces, as tabwriter pads them).
func table(t *testing.T, out string, columns ...string) []map[string]string {
	t.Helper()
	sep := regexp.MustCompile(`\s{2,}`)
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		head := sep.Split(strings.TrimSpace(l), -1)
		if !reflect.DeepEqual(head, columns) {
			continue
		}
		var rows []map[string]string
		for _, row := range lines[i+1:] {
			if strings.TrimSpace(row) == "" {
				break
			}
			cells := sep.Split(strings.TrimSpace(row), -1)
			m := map[string]string{}
			for j, c := range cells {
				if j < len(head) {
					m[head[j]] = c
				} else {
					m[fmt.Sprint(j)] = c
				}
			}
			rows = append(rows, m)
		}
		return rows
	}
	t.Fatalf("no table with columns %q in:\n%s", columns, out)
	return nil
}

// row returns the row whose first column is name.
func row(t *testing.T, rows []map[string]string, col, name string) map[string]string {
	t.Helper()
	for _, r := range rows {
		if r[col] == name {
			return r
		}
	}
	t.Fatalf("no row with %s %q in %v", col, name, rows)
	return nil
}

// lines reports whether out has a line equal to want.
func hasLine(out, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

var memberColumns = []string{"RESOLVER", "ADDRESS", "VENDOR", "IDENTIFIED", "STATE", "SINCE", "LAST", "RTT", "FLAPS", "OVERRIDE", "WHY", "WEIGHT", "CONNS", "PPS"}

func TestStatusTable(t *testing.T) {
	st := sampleStatus(true, true)
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	out := r.stdout
	if !strings.Contains(out, "config /etc/lbdns/lbdns.toml") || !strings.Contains(out, "(1d2h)") {
		t.Errorf("daemon line lacks the config or the uptime:\n%s", out)
	}
	if !hasLine(out, "DRY RUN: the IPVS table is computed but NOT applied") {
		t.Errorf("no DRY RUN line:\n%s", out)
	}
	if !strings.Contains(out, "ipvs 12 ops computed, not applied\n") || strings.Contains(out, "errors") {
		t.Errorf("dry-run daemon line does not say the ops were computed, not applied:\n%s", out)
	}
	if !hasLine(out, "pool main (check recursive): below-minimum, 1 of 3 up (2 enabled, min healthy 2)") {
		t.Errorf("no pool header:\n%s", out)
	}
	if !hasLine(out, "FAIL-OPEN: last good set held in traffic although failing: unbound-1") {
		t.Errorf("no FAIL-OPEN line naming the held member:\n%s", out)
	}
	if strings.Contains(out, "every enabled member") || strings.Contains(out, "kept out") {
		t.Errorf("FAIL-OPEN says every member is kept, or names members kept out, though it holds its last good set:\n%s", out)
	}
	if !hasLine(out, "bind 1/2  unbound 0/1") {
		t.Errorf("no vendor counts:\n%s", out)
	}
	if !hasLine(out, "1 of 2 enabled members healthy") {
		t.Errorf("no pool detail:\n%s", out)
	}
	vips := table(t, out, "NAME", "ADDRESS", "POOL", "SERVICES", "SERVING")
	if v := row(t, vips, "NAME", "dns-v4"); v["POOL"] != "main" || v["SERVICES"] != "udp/53 tcp/53" {
		t.Errorf("vip row %v", v)
	}

	members := table(t, out, memberColumns...)
	if len(members) != 3 {
		t.Fatalf("%d member rows, want 3:\n%s", len(members), out)
	}
	for _, tc := range []struct {
		resolver string
		want     map[string]string
	}{
		{"bind-1", map[string]string{"IDENTIFIED": "bind", "STATE": "up", "SINCE": "3m12s", "LAST": "ok", "RTT": "1.2ms",
			"FLAPS": "2", "OVERRIDE": "drain (disk full)", "WHY": "drained", "WEIGHT": "0", "CONNS": "7", "PPS": "340"}},
		{"unbound-1", map[string]string{"IDENTIFIED": "bind!", "STATE": "down (stale)", "SINCE": "2h0m", "LAST": "timeout (1m30s ago)",
			"RTT": "300.0ms", "FLAPS": "7", "OVERRIDE": "-", "WHY": "held-fail-open", "WEIGHT": "100", "CONNS": "-", "PPS": "-"}},
		{"bind-2", map[string]string{"IDENTIFIED": "-", "STATE": "unknown", "SINCE": "-", "LAST": "-", "RTT": "-",
			"OVERRIDE": "disable", "WHY": "disabled", "WEIGHT": "-"}},
	} {
		m := row(t, members, "RESOLVER", tc.resolver)
		for col, want := range tc.want {
			if m[col] != want {
				t.Errorf("%s %s = %q, want %q", tc.resolver, col, m[col], want)
			}
		}
	}

	ovs := table(t, out, "RESOLVER", "SCOPE", "ACTION", "REASON", "SET", "BY")
	if len(ovs) != 2 {
		t.Fatalf("%d override rows, want 2:\n%s", len(ovs), out)
	}
	if o := row(t, ovs, "RESOLVER", "bind-1"); o["SCOPE"] != "pool main" || o["ACTION"] != "drain" ||
		o["REASON"] != "disk full" || o["SET"] != "10m0s ago" || o["BY"] != "uid 0" || o["6"] != "" {
		t.Errorf("override row %v", o)
	}
	if o := row(t, ovs, "RESOLVER", "ghost"); o["SCOPE"] != "all pools" || o["REASON"] != "-" || o["6"] != "ORPHANED" {
		t.Errorf("orphaned override row %v", o)
	}
	if !hasLine(out, "prefetch: 4 entries, failing 1, expired 1 (not refreshed in their window: lbctl prefetch), parked 1") {
		t.Errorf("no prefetch summary:\n%s", out)
	}
}

func TestStatusFailOpenReasons(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(ms []control.Member)
		lines []string
	}{
		{"last good set, one kept out", func(ms []control.Member) {
			ms[2].Override, ms[2].Why, ms[2].WhyText = "none", control.WhyOutFailOpen, "out although the pool fails open: already failing before the collapse (no verdict yet)"
		}, []string{"FAIL-OPEN: last good set held in traffic although failing: unbound-1", "kept out, already failing before the collapse: bind-2"}},
		{"no last good set", func(ms []control.Member) {
			ms[1].Why = control.WhyFailOpenAll
			ms[2].Override, ms[2].Why, ms[2].InTraffic = "none", control.WhyFailOpenAll, true
		}, []string{"FAIL-OPEN: no last good set (cold start, or the pool changed): every enabled member kept in traffic, failing ones too: unbound-1, bind-2"}},
		{"a daemon without reasons", func(ms []control.Member) {
			for i := range ms {
				ms[i].Why, ms[i].WhyText = "", ""
			}
		}, []string{"FAIL-OPEN: the members in traffic before the collapse (last good set) are held; those failing before it stay out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sampleStatus(false, true)
			tc.edit(st.Pools[0].Members)
			var b strings.Builder
			if err := writeStatus(&b, &st); err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.lines {
				if !hasLine(b.String(), l) {
					t.Errorf("no line %q:\n%s", l, b.String())
				}
			}
			if strings.Count(b.String(), "FAIL-OPEN") != 1 {
				t.Errorf("want one FAIL-OPEN line:\n%s", b.String())
			}
		})
	}
}

func TestStatusTableQuiet(t *testing.T) {
	st := sampleStatus(false, false)
	st.Overrides, st.Prefetch = nil, nil
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "ipvs 12 ops, 0 errors\n") {
		t.Errorf("daemon line does not count ops and errors:\n%s", r.stdout)
	}
	for _, absent := range []string{"DRY RUN", "FAIL-OPEN", "WARMING UP", "RELOAD FAILED", "overrides:", "prefetch:"} {
		if strings.Contains(r.stdout, absent) {
			t.Errorf("output has %q though nothing calls for it:\n%s", absent, r.stdout)
		}
	}
	if len(table(t, r.stdout, memberColumns...)) != 3 {
		t.Errorf("member rows missing:\n%s", r.stdout)
	}
}

func TestStatusWarnings(t *testing.T) {
	st := sampleStatus(false, false)
	st.Daemon.Warm = false
	st.Daemon.LastReloadError = "bad.toml:3: vip[0].address: not an IP address"
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"WARMING UP", "LAST RELOAD FAILED", st.Daemon.LastReloadError} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	want := sampleStatus(true, true)
	f := startFake(t, map[string]reply{"GET /v1/status": {body: want}})
	for _, args := range [][]string{{"-o", "json", "status"}, {"status", "-o", "json"}, {"status", "--o=json"}} {
		r := lbctl(t, append([]string{"-socket", f.socket}, args...)...)
		if r.code != exitOK {
			t.Fatalf("%q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		var got control.Status
		decodeJSON(t, r.stdout, &got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: decoded status differs:\n got %+v\nwant %+v", args, got, want)
		}
		if !strings.Contains(r.stdout, "\n  \"version\": 1") {
			t.Errorf("%q: not indented:\n%s", args, r.stdout)
		}
	}
}

func TestCompact(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{45*time.Second + 900*time.Millisecond, "45s"},
		{time.Minute, "1m0s"},
		{3*time.Minute + 12*time.Second, "3m12s"},
		{2*time.Hour + 5*time.Minute + 59*time.Second, "2h5m"},
		{3*24*time.Hour + 4*time.Hour + 30*time.Minute, "3d4h"},
	} {
		if got := compact(tc.d); got != tc.want {
			t.Errorf("compact(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestStatusSummaryFirst: lbctl status starts with the summary, worst
// first, each incident on one line with since when (absolute and
// relative) and what to do under it; with none, one OK line; from a
// daemon that sends no summary, nothing.
func TestStatusSummaryFirst(t *testing.T) {
	now := time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)
	st := control.Status{Generated: now, Daemon: control.Daemon{Warm: true},
		Pools: []control.Pool{{Name: "local", Total: 2, Enabled: 2, Healthy: 2}},
		Summary: []control.Incident{
			{Severity: "critical", What: "GSLB pool east", Summary: "GSLB pool east DOWN: 0 of 2 members up (needs 1)", Effect: "its clients are answered from pool west",
				Since: now.Add(-150 * time.Second), Action: "lbctl gslb status", Runbook: "RUNBOOK.md#lbdnsgslbpooldown"},
			{Severity: "info", What: "dry run", Summary: "DRY RUN: the IPVS table is computed, NOT applied"},
		}}
	var b strings.Builder
	if err := writeStatus(&b, &st); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	want := []string{
		"CRITICAL  GSLB pool east DOWN: 0 of 2 members up (needs 1) — its clients are answered from pool west (since 2026-12-03 02:57:30 UTC, 2m30s ago)",
		"      do: lbctl gslb status; runbook: RUNBOOK.md#lbdnsgslbpooldown",
		"INFO  DRY RUN: the IPVS table is computed, NOT applied",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d:\n%q\nwant\n%q", i, lines[i], w)
		}
	}
	st.Summary = []control.Incident{}
	b.Reset()
	_ = writeStatus(&b, &st)
	if first := strings.SplitN(b.String(), "\n", 2)[0]; first != "OK  All as configured: 1 resolver pool healthy." {
		t.Errorf("all well: first line %q", first)
	}
	st.Summary = nil
	b.Reset()
	_ = writeStatus(&b, &st)
	if strings.HasPrefix(b.String(), "OK") {
		t.Errorf("no summary sent, yet lbctl printed one:\n%s", b.String())
	}
}

// TestOneLine: a long text is cut between words, within n runes, a cut
// marked; a first word longer than n is cut inside it; spacing is made
// one line.
func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"down: member (timeout after 1s)", 50, "down: member (timeout after 1s)"},
		{"down: member (timeout after 1s)", 20, "down: member …"},
		{"down:\n  member\ttimeout", 40, "down: member timeout"},
		{"connection refused, twice", 20, "connection refused …"},
		{"connection refused, twice", 19, "connection …"},
		{"averyveryverylongword and more", 10, "averyvery…"},
	} {
		got := oneLine(c.in, c.n)
		if got != c.want || len([]rune(got)) > c.n {
			t.Errorf("oneLine(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
