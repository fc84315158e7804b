package control

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// renderPage gets GET / from a status server over st at now.
func renderPage(t *testing.T, st *Status, now time.Time, refresh time.Duration) (int, string) {
	t.Helper()
	fb := &fakeBackend{status: st}
	h := NewStatusServer(StatusOptions{Backend: fb, Refresh: refresh, Now: func() time.Time { return now }}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	return rec.Code, unlabelled(t, rec.Body.String())
}

// dataLabel is the column label labelCells gives a data cell.
var dataLabel = regexp.MustCompile(` data-label="[^"]*"`)

// unlabelled is the served page without the cells' column labels
// (labelCells, tested on its own), so that a test reads cells as the
// template writes them; it fails t when a page with tables has none.
func unlabelled(t *testing.T, page string) string {
	t.Helper()
	if strings.Contains(page, "<tr><th>") && !dataLabel.MatchString(page) {
		t.Error("the page's tables have headers but no cell has a data-label")
	}
	return dataLabel.ReplaceAllString(page, "")
}

var memberRow = regexp.MustCompile(`<tr class="member state-([a-z]+)" data-pool="([^"]*)" data-resolver="([^"]*)" data-state="([^"]*)" data-override="([^"]*)" data-why="([^"]*)">`)

func TestPageMembers(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	code, page := renderPage(t, sampleStatus(now), now, 7*time.Second)
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	rows := memberRow.FindAllStringSubmatch(page, -1)
	want := [][]string{
		{"up", "main", "bind-1", "up", "none", "healthy"},
		{"down", "main", "bind-2", "down", "drain", "down"},
		{"unknown", "main", "unbound-1", "unknown", "disable", "disabled"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d member rows; want %d:\n%s", len(rows), len(want), page)
	}
	for i, w := range want {
		if got := rows[i][1:]; strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("row %d = %v; want %v", i, got, w)
		}
	}
	contains(t, "page", page,
		`<meta http-equiv="refresh" content="7">`,
		`/etc/lbdns/lbdns.toml`,
		`<td>1d2h</td>`, // up for
		`3m12s ago`,     // last reload
		`<td title="`+now.Add(-3*time.Minute-12*time.Second).Local().Format("2006-01-02 15:04:05 MST")+`">3m12s</td>`, // since
		`udp/192.0.2.53:53 (2), tcp/192.0.2.53:53 (1)`,
		`<span class="badge diag-warn">degraded</span> 1 of 3 down`,
		`<span class="bad" data-class="crit">1</span> / 3 / 3`, // below min healthy
		`bind <b class="bad" data-vendor="bind" data-class="crit">1/2</b>`,
		`class="wrap mismatch" title="identified as powerdns, declared bind"`, `(is powerdns)`,
		`<span class="stale"`,
		`timeout after 1s`,
		`<td class="num">1.2</td>`, // RTT ms
		`<td class="wrap ovr-drain">drain: `,
		`<td class="wrap ovr-disable">disable: disk swap</td>`,
		`<span class="ok">yes</span> / 100`,
		`<th>why in / out</th>`,
		`<td class="wrap why-in">healthy</td>`,
		`<td class="wrap why-out">drained by an operator and down: timeout after 1s &lt;id mismatch&gt;</td>`,
		`<td class="wrap why-disabled">disabled by an operator</td>`,
		`12 / 340`, `1.5k / 1.5k`, `2.4M / 9.1M`,
		`ORPHANED`, `uid 1000`,
		`www.example.com.`, `in 4m`,
		`schema version 1`,
	)
	// Every column has a label (issue 11: the overrides table had a blank
	// one), and the override that applies says so.
	if strings.Contains(page, "<th></th>") {
		t.Error("page has a column without a label")
	}
	contains(t, "page", page, `<th>by</th><th>applies</th></tr>`, `<td><span class="muted">yes</span></td></tr>`,
		`<th>diagnosis</th><td class="diagnosis">`)
	if strings.Count(page, "STALE") != 1 {
		t.Errorf("want exactly one STALE marker (unbound-1)")
	}
	if strings.Count(page, `mismatch"`) != 1 {
		t.Errorf("want exactly one vendor mismatch (bind-2)")
	}
}

func TestPageBanners(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := sampleStatus(now)
	_, page := renderPage(t, st, now, 0)
	for _, s := range []string{"FAIL-OPEN", "DRY RUN", "warming up", "reload error</th><td><span class=\"err\""} {
		if strings.Contains(page, s) {
			t.Errorf("page shows %q when not set", s)
		}
	}
	contains(t, "page", page, `content="5"`) // the default refresh

	st.Daemon.DryRun = true
	st.Daemon.Warm = false
	st.Daemon.LastReloadError = "pools.main.check: no such check"
	st.Daemon.IPVSErrors = 3
	st.Pools[0].FailOpen = true
	_, page = renderPage(t, st, now, 0)
	contains(t, "page", page,
		`<div class="banner warn" id="dry-run">DRY RUN — IPVS table computed, NOT applied (no VIP serves)</div>`,
		`<div class="banner warn" id="warming">warming up`,
		`<div class="banner crit fail-open">FAIL-OPEN: pool main`,
		`<span class="err">pools.main.check: no such check</span>`,
		// In a dry run nothing is applied: the ops are computed only.
		`<th>IPVS ops</th><td class="num" id="ipvs-ops">17 computed, not applied</td>`,
	)
	if strings.Contains(page, "IPVS ops / errors") {
		t.Error("dry-run page counts IPVS ops / errors as if applied")
	}

	st.Daemon.DryRun = false
	_, page = renderPage(t, st, now, 0)
	contains(t, "page", page, `<th>IPVS ops / errors</th><td class="num" id="ipvs-ops">17 / <span class="err">3</span>`)
	if strings.Contains(page, "computed, not applied") {
		t.Error("page says computed, not applied when not in a dry run")
	}
}

func TestPageFailOpenBanner(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	banner := regexp.MustCompile(`<div class="banner crit fail-open">([^<]*)</div>`)
	for _, tc := range []struct {
		name string
		edit func(p *Pool)
		want string
	}{
		{"last good set", func(p *Pool) {
			p.Members[1].Why, p.Members[1].Override = WhyHeldFailOpen, "none"
			p.Members[2].Why, p.Members[2].Override = WhyOutFailOpen, "none"
		}, "FAIL-OPEN: pool main is below its minimum of 2 healthy; the members in traffic before the collapse (its last good set) are held: bind-2; kept out, already failing before it: unbound-1"},
		{"no last good set", func(p *Pool) {
			p.Members[1].Why, p.Members[2].Why = WhyFailOpenAll, WhyFailOpenAll
		}, "FAIL-OPEN: pool main is below its minimum of 2 healthy; no last good set (cold start, or the pool changed): every enabled member is kept in traffic, failing ones too"},
		{"upstream, above the minimum", func(p *Pool) {
			p.Healthy, p.MinHealthy = 2, 1
			p.Members[1].Why = WhyHeldFailOpen
		}, "FAIL-OPEN: pool main fails open; the members in traffic before the collapse (its last good set) are held: bind-2"},
		// Every member failing at once: the cause is the upstream, even
		// though the pool is also below its minimum.
		{"upstream failure", func(p *Pool) {
			p.Healthy, p.MinHealthy, p.Diagnosis = 0, 2, "upstream-failure"
			p.Members[0].Why, p.Members[1].Why, p.Members[2].Why = WhyHeldFailOpen, WhyHeldFailOpen, WhyHeldFailOpen
		}, "FAIL-OPEN: pool main fails open: every member fails its check at once, which points at their upstream, not at the resolvers; the members in traffic before the collapse (its last good set) are held: bind-1, bind-2, unbound-1"},
		// Back at its minimum, the pool holds fail-open until
		// recover_healthy members are healthy (hysteresis).
		{"recovery hold", func(p *Pool) {
			p.Healthy, p.MinHealthy, p.Diagnosis = 2, 2, "degraded"
			p.Detail = "1 of 3 members down; recovering: fail-open held until 3 members are healthy (recover_healthy)"
			p.Members[2].Why = WhyHeldFailOpen
		}, "FAIL-OPEN: pool main is recovering (2 healthy, minimum 2) and stays failed open until 3 members are healthy (recover_healthy); the members in traffic before the collapse (its last good set) are held: unbound-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sampleStatus(now)
			st.Pools[0].FailOpen = true
			tc.edit(&st.Pools[0])
			_, page := renderPage(t, st, now, 0)
			m := banner.FindAllStringSubmatch(page, -1)
			if len(m) != 1 || m[0][1] != tc.want {
				t.Errorf("banners %q; want one: %q", m, tc.want)
			}
			if strings.Contains(page, "every enabled member") != (tc.name == "no last good set") {
				t.Errorf("page says every enabled member is kept (or does not) wrongly:\n%s", page)
			}
		})
	}
}

func TestPageEscapes(t *testing.T) {
	now := time.Now()
	st := sampleStatus(now)
	st.Pools[0].Members[0].Resolver = `x" onmouseover="alert(2)`
	st.Pools[0].Name = `<b>pool</b>`
	st.Pools[0].Members[1].WhyText = `down: <img src=x onerror="alert(3)">`
	st.Pools[0].Members[2].Why = `"><i>why</i>`
	_, page := renderPage(t, st, now, 0)
	for _, raw := range []string{"<script>alert(1)</script>", `x" onmouseover="alert(2)`, "<b>pool</b>", `<img src=x`, `<i>why</i>`} {
		if strings.Contains(page, raw) {
			t.Errorf("page contains %q unescaped", raw)
		}
	}
	contains(t, "page", page, "&lt;script&gt;alert(1)&lt;/script&gt;", `data-resolver="x&#34; onmouseover=&#34;alert(2)"`,
		`down: &lt;img src=x onerror=&#34;alert(3)&#34;&gt;`, `data-why="&#34;&gt;&lt;i&gt;why&lt;/i&gt;"`)
}

func TestPageHasNoExternalAssets(t *testing.T) {
	now := time.Now()
	_, page := renderPage(t, sampleStatus(now), now, 0)
	attr := regexp.MustCompile(`(?i)\b(src|href)\s*=\s*["']?([^"' >]*)`)
	for _, m := range attr.FindAllStringSubmatch(page, -1) {
		if strings.Contains(strings.ToLower(m[2]), "//") {
			t.Errorf("external asset: %s", m[0])
		}
	}
	if regexp.MustCompile(`(?i)<script[^>]*\bsrc`).MatchString(page) {
		t.Error("page loads a script")
	}
	if strings.Contains(page, "@import") || strings.Contains(page, "url(") {
		t.Error("CSS loads something")
	}
	// The internal links the page does have.
	contains(t, "page", page, `href="/status"`, `href="/metrics"`, `href="#pool-main"`, `id="pool-main"`)
}

func TestPageBackendError(t *testing.T) {
	fb := &fakeBackend{statusErr: Errorf(Unavailable, "not ready: <starting>")}
	h := NewStatusServer(StatusOptions{Backend: fb, Refresh: 2 * time.Second}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != 503 {
		t.Errorf("code = %d; want 503", rec.Code)
	}
	contains(t, "page", rec.Body.String(), `content="2"`, "Status unavailable: not ready: &lt;starting&gt;")
	if strings.Contains(rec.Body.String(), `class="member`) {
		t.Error("error page shows member rows")
	}
}

func TestCompact(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{400 * time.Millisecond, "0s"},
		{45 * time.Second, "45s"},
		{3*time.Minute + 12*time.Second, "3m12s"},
		{time.Hour, "1h"},
		{time.Hour + 2*time.Minute + 3*time.Second, "1h2m"},
		{26 * time.Hour, "1d2h"},
		{49*time.Hour + 59*time.Minute, "2d1h"},
	} {
		if got := compact(tc.d); got != tc.want {
			t.Errorf("compact(%v) = %q; want %q", tc.d, got, tc.want)
		}
	}
}

func TestSI(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1.0k", 1500: "1.5k", 2_400_000: "2.4M", 5_600_000_000: "5.6G", 7e12: "7.0T"} {
		if got := si(n); got != want {
			t.Errorf("si(%d) = %q; want %q", n, got, want)
		}
	}
}

func TestPagePrefetch(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := sampleStatus(now)
	st.Prefetch = nil
	if _, page := renderPage(t, st, now, 5*time.Second); strings.Contains(page, `id="prefetch"`) {
		t.Error("prefetch table shown without entries")
	}
	st.Prefetch = []PrefetchEntry{
		{Name: "api.example.", Type: "A", Resolver: "bind-1", Mode: "window", State: "expired", LastRefresh: now.Add(-4 * time.Second),
			TTLSeconds: 30, RemainingSeconds: 26, NextRun: now.Add(24 * time.Second), Expired: 4, GapMillis: 133.5, MaxGapMillis: 210},
		{Name: "api.example.", Type: "AAAA", Resolver: "dnsmasq-1", Partition: "eu", Mode: "expiry", State: "failing",
			Failures: 3, LastError: "rcode SERVFAIL <b>", NextRun: now.Add(8 * time.Second)},
	}
	_, page := renderPage(t, st, now, 5*time.Second)
	if n := strings.Count(page, `<tr class="prefetch">`); n != 2 {
		t.Fatalf("%d prefetch rows, want 2:\n%s", n, page)
	}
	contains(t, "page", page, `id="prefetch"`, `api.example.`, `4s ago`, `in 24s`, `<td class="num">26</td>`,
		`>eu<`, `expiry`, `failing`, `<span class="bad">3</span>`, `rcode SERVFAIL &lt;b&gt;`, `<span class="muted">never</span>`,
		`<td class="pf-expired">expired</td>`, `<span class="bad">4</span>`, `133.5 (max 210.0)`)
}

// sampleGSLB is two GSLB pools: "web" (all) with a member up, one down
// behind a probe address with an expired certificate, one unknown; "edge"
// (at least 1) with a member up over ICMP and TCP.
func sampleGSLB(now time.Time) []GSLBPool {
	return []GSLBPool{
		{Name: "web", Combine: "all", Up: 1, Total: 3, Members: []GSLBMember{
			{Name: "web-1", Address: "192.0.2.10", Weight: 100, State: "up", Since: now.Add(-3*time.Minute - 12*time.Second),
				Monitors: []GSLBMonitor{{Check: "https-health", Kind: "https", State: "up", Since: now.Add(-3 * time.Minute),
					LastProbe: now.Add(-time.Second), LastResult: "ok", RTTMillis: 12.34, Facts: []Fact{{Name: "cert_days_left", Value: 41}}}}},
			{Name: "web-2", Address: "2001:db8::11", ProbeAddress: "10.0.0.11", Weight: 50, Priority: 1, State: "down",
				Since: now.Add(-2 * time.Hour), Reason: "https-health down: certificate expired",
				Monitors: []GSLBMonitor{{Check: "https-health", Kind: "https", State: "down", Since: now.Add(-2 * time.Hour),
					LastProbe: now.Add(-2 * time.Second), LastResult: "x509: certificate has expired", RTTMillis: 3, Facts: []Fact{{Name: "cert_days_left", Value: -2}}}}},
			{Name: "web-3", Address: "192.0.2.12", ProbeAddress: "192.0.2.12", Weight: 100, State: "unknown",
				Monitors: []GSLBMonitor{{Check: "https-health", Kind: "https", State: "unknown"}}},
		}},
		{Name: "edge", Combine: "at_least", AtLeast: 1, Up: 1, Total: 1, Members: []GSLBMember{
			{Name: "edge-1", Address: "198.51.100.7", Weight: 100, State: "up", Since: now.Add(-time.Hour),
				Monitors: []GSLBMonitor{
					{Check: "ping", Kind: "icmp", State: "up", Since: now.Add(-time.Hour), LastProbe: now.Add(-time.Second),
						LastResult: "ok", RTTMillis: 0.8, Facts: []Fact{{Name: "loss_percent", Value: 12.5}, {Name: "socket", Text: "unprivileged"}}},
					{Check: "tcp-443", Kind: "tcp", State: "down", Since: now.Add(-time.Minute), LastProbe: now.Add(-time.Second),
						LastResult: "connection refused", RTTMillis: 0.2},
				}},
		}},
	}
}

var (
	gslbMemberRow  = regexp.MustCompile(`<tr class="gslb-member state-([a-z]+)" data-pool="([^"]*)" data-member="([^"]*)" data-state="([^"]*)">`)
	gslbMonitorRow = regexp.MustCompile(`<tr class="gslb-monitor state-([a-z]+)" data-pool="([^"]*)" data-member="([^"]*)" data-check="([^"]*)" data-state="([^"]*)">`)
)

func TestPageGSLB(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := sampleStatus(now)
	if _, page := renderPage(t, st, now, 0); strings.Contains(page, "GSLB pools") || strings.Contains(page, `class="gslb-`) {
		t.Error("GSLB section shown without GSLB pools")
	}
	st.GSLB = sampleGSLB(now)
	code, page := renderPage(t, st, now, 0)
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	var got []string
	for _, m := range gslbMemberRow.FindAllStringSubmatch(page, -1) {
		got = append(got, strings.Join(m[1:], " "))
	}
	want := []string{"up web web-1 up", "down web web-2 down", "unknown web web-3 unknown", "up edge edge-1 up"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("GSLB member rows %q; want %q", got, want)
	}
	got = nil
	for _, m := range gslbMonitorRow.FindAllStringSubmatch(page, -1) {
		got = append(got, strings.Join(m[1:], " "))
	}
	want = []string{"up web web-1 https-health up", "down web web-2 https-health down", "unknown web web-3 https-health unknown",
		"up edge edge-1 ping up", "down edge edge-1 tcp-443 down"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("GSLB monitor rows %q; want %q", got, want)
	}
	contains(t, "page", page,
		`<h2 id="gslb">GSLB pools</h2>`,
		`<td><b>web</b></td>`, `<td>all</td>`, `<span class="warn" data-class="warn">1</span> / 3`,
		`<td><b>edge</b></td>`, `<td>at least 1</td>`, `<span class="ok" data-class="ok">1</span> / 1`,
		`<td class="mono brk">10.0.0.11</td>`,
		`<span class="bad">https-health down: certificate expired</span>`,
		`<span class="bad">x509: certificate has expired</span>`,
		`<td class="num">12.3</td>`, `<td class="num">41</td>`, `<td class="num"><span class="bad">-2</span></td>`,
		`<td class="num">12.5</td>`, `<td>unprivileged</td>`,
		`<span class="bad">connection refused</span>`,
		`<td title="`+now.Add(-3*time.Minute-12*time.Second).Local().Format("2006-01-02 15:04:05 MST")+`">3m12s</td>`,
	)
	// web-3's probe address equals its address: not repeated.
	if strings.Count(page, "192.0.2.12") != 1 {
		t.Errorf("web-3's address shown %d times, want once", strings.Count(page, "192.0.2.12"))
	}
	// The resolver pools are still rendered.
	if n := len(memberRow.FindAllString(page, -1)); n != 3 {
		t.Errorf("%d resolver member rows, want 3", n)
	}
}

func TestPageGSLBEscapes(t *testing.T) {
	now := time.Now()
	st := sampleStatus(now)
	st.GSLB = sampleGSLB(now)
	st.GSLB[0].Name = `<b>gslb</b>`
	st.GSLB[0].Members[0].Name = `m" onmouseover="alert(4)`
	st.GSLB[0].Members[1].Reason = `<img src=x onerror="alert(5)">`
	st.GSLB[0].Members[1].Monitors[0].LastResult = `<script>alert(6)</script>`
	st.GSLB[0].Members[1].Monitors[0].Check = `"><i>check</i>`
	st.GSLB[0].Members[1].State = `"><u>state</u>`
	_, page := renderPage(t, st, now, 0)
	for _, raw := range []string{"<b>gslb</b>", `m" onmouseover="alert(4)`, `<img src=x`, `<script>alert(6)`, `<i>check</i>`, `<u>state</u>`} {
		if strings.Contains(page, raw) {
			t.Errorf("page contains %q unescaped", raw)
		}
	}
	contains(t, "page", page, `&lt;b&gt;gslb&lt;/b&gt;`, `data-member="m&#34; onmouseover=&#34;alert(4)"`,
		`&lt;img src=x onerror=&#34;alert(5)&#34;&gt;`, `&lt;script&gt;alert(6)&lt;/script&gt;`,
		`data-check="&#34;&gt;&lt;i&gt;check&lt;/i&gt;"`,
		`<tr class="gslb-member state-other" data-pool="&lt;b&gt;gslb&lt;/b&gt;" data-member="web-2" data-state="&#34;&gt;&lt;u&gt;state&lt;/u&gt;">`)
}

// TestPageGSLBResponder: the responder's line (listening on, serial,
// zones), a red list of the names answering by their last resort with a
// banner, and the errors; none of it without a responder.
func TestPageGSLBResponder(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := sampleStatus(now)
	if _, page := renderPage(t, st, now, 0); strings.Contains(page, "GSLB responder") || strings.Contains(page, "GSLB LAST RESORT") {
		t.Error("GSLB responder shown without one")
	}
	st.GSLBResponder = &GSLBResponder{On: true, Listen: []string{"127.0.0.1:53", "[::1]:53"}, Serial: 2025030101, Zones: []string{"g.test.", "h.test."},
		LastBuild: now.Add(-time.Minute), LastResort: []GSLBLastResort{
			{Name: "www.g.test.", Type: "A", LastResort: "fail-open", Since: now.Add(-5 * time.Minute)},
			{Name: "<api>.g.test.", Type: "AAAA", LastResort: "static", Warming: true, Since: now.Add(-time.Minute)},
		}}
	code, page := renderPage(t, st, now, 0)
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	contains(t, "page", page,
		`<div class="banner crit gslb-last-resort">GSLB LAST RESORT: 2 name(s) answering by their last resort: www.g.test. A, &lt;api&gt;.g.test. AAAA (see`,
		`<h2 id="gslb-responder">GSLB responder</h2>`,
		`<td class="mono" id="gslb-listen">127.0.0.1:53, [::1]:53</td>`,
		`<td class="mono" id="gslb-serial">2025030101</td>`,
		`<td class="mono" id="gslb-zones">g.test., h.test.</td>`,
		`>1m ago</td></tr>`,
		`<li class="bad" data-name="www.g.test." data-type="A" data-last-resort="fail-open"><b>www.g.test. A</b> answers by its last resort: fail-open since`,
		`>5m</span> ago (no pool of its policies has a member up)</li>`,
		`<b>&lt;api&gt;.g.test. AAAA</b> answers by its last resort: static since`,
		`(members still warming)</li>`,
	)

	if strings.Contains(page, `class="front"`) {
		t.Error("encrypted fronts shown without any")
	}

	// The encrypted fronts: each transport's addresses, paths,
	// connections and certificate, an expiry close or past in red.
	st.GSLBResponder.Fronts = []GSLBFront{
		{Transport: "doh", Listen: []string{"127.0.0.1:443"}, DoHPath: "/dns-query", JSONPath: "/resolve", Connections: 3, MaxConnections: 1024,
			CertSubject: "CN=gslb.example", CertNotAfter: now.Add(30 * 24 * time.Hour)},
		{Transport: "dot", Listen: []string{"127.0.0.1:853", "[::1]:853"}, Connections: 0, MaxConnections: 1024,
			CertSubject: "CN=<gslb>", CertNotAfter: now.Add(3 * 24 * time.Hour)},
	}
	_, page = renderPage(t, st, now, 0)
	contains(t, "page (fronts)", page,
		`<tr class="front" data-transport="doh"><th>doh</th><td colspan="7" class="wrap">DNS over HTTPS and the JSON API on <span class="mono">127.0.0.1:443</span> <span class="muted">(/dns-query, JSON /resolve)</span>; 3 of 1024 connections open; certificate <span class="mono">CN=gslb.example</span>`,
		`>expires in 30d</span></td></tr>`,
		`<tr class="front" data-transport="dot"><th>dot</th><td colspan="7" class="wrap">DNS over TLS on <span class="mono">127.0.0.1:853, [::1]:853</span>; 0 of 1024 connections open; certificate <span class="mono">CN=&lt;gslb&gt;</span>`,
		`><span class="err">expires in 3d</span></span></td></tr>`,
	)
	st.GSLBResponder.Fronts[1].CertNotAfter = now.Add(-2 * time.Hour)
	_, page = renderPage(t, st, now, 0)
	contains(t, "page (expired)", page, `<span class="err">EXPIRED 2h ago</span>`)

	// Off, with errors, nothing on its last resort: no banner, no list.
	st.GSLBResponder = &GSLBResponder{ListenError: "bind: permission denied", LastBuildError: "boom"}
	_, page = renderPage(t, st, now, 0)
	contains(t, "page (off)", page,
		`<td class="mono" id="gslb-listen"><span class="err">OFF</span></td>`,
		`<td class="mono" id="gslb-zones"><span class="muted">none</span></td>`,
		`<span class="err">bind: permission denied</span>`,
		`<span class="err">boom</span> (the last answers stay)`,
	)
	if strings.Contains(page, "GSLB LAST RESORT") || strings.Contains(page, `class="last-resort"`) {
		t.Error("last resort banner or list shown with no name on its last resort")
	}
}
