package control

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPageEvents: the page shows the newest events of the event log,
// oldest first (the newest at the bottom, as lbctl events prints them),
// at most PageEvents of them, failures marked; without an event log it
// has no events section.
func TestPageEvents(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	log := NewEventLog(100, func() time.Time { return now })
	for i := range 25 {
		log.Append(Event{Time: now.Add(time.Duration(i-25) * time.Second), Kind: EventState, Subject: fmt.Sprintf("bind-%d/recursive", i),
			Message: fmt.Sprintf("up to down: timeout <%d>", i), Error: i == 24})
	}
	render := func(opts StatusOptions) string {
		opts.Backend, opts.Now = &fakeBackend{status: sampleStatus(now)}, func() time.Time { return now }
		rec := httptest.NewRecorder()
		NewStatusServer(opts).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		return rec.Body.String()
	}
	page := render(StatusOptions{Events: log, PageEvents: 10})
	contains(t, "page", page, `<h2 id="events">Recent events`, `timeout &lt;24&gt;`,
		`<tr class="event event-error" data-seq="25" data-kind="`+EventState+`">`)
	if n := strings.Count(page, `<tr class="event`); n != 10 {
		t.Errorf("%d event rows, want 10", n)
	}
	if i, j := strings.Index(page, `data-seq="16"`), strings.Index(page, `data-seq="25"`); i < 0 || j < 0 || i > j {
		t.Errorf("events not oldest first (seq 16 at %d, 25 at %d)", i, j)
	}
	if strings.Contains(page, `data-seq="15"`) {
		t.Error("an eleventh event is shown")
	}
	if page := render(StatusOptions{}); strings.Contains(page, `id="events"`) {
		t.Error("a page without an event log has an events section")
	}
	if page := render(StatusOptions{Events: NewEventLog(10, nil)}); !strings.Contains(page, "no events yet") {
		t.Error("an empty event log does not say so")
	}
}

// TestPageLegendAndVersion: the page explains its colours and its footer
// names the daemon's version.
func TestPageLegendAndVersion(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := sampleStatus(now)
	st.Daemon.Version = "v1.2.0 rev 0123456789ab"
	_, page := renderPage(t, st, now, time.Second)
	contains(t, "page", page, `<div id="legend"><b>Legend:</b>`, `<span class="swatch sw-up">up</span>healthy`,
		`<span class="swatch sw-down">down</span>failing`, `lbdnsd <span id="daemon-version">v1.2.0 rev 0123456789ab</span>`)
}

// TestEventKindsListsEveryKind: EventKinds has every Event* kind constant
// of api.go (lbctl events sizes its KIND column by them).
func TestEventKindsListsEveryKind(t *testing.T) {
	b, err := os.ReadFile("api.go")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^\s+Event[A-Za-z]+\s+= "([a-z-]+)"`).FindAllStringSubmatch(string(b), -1) {
		want = append(want, m[1])
	}
	if got := EventKinds(); !slices.Equal(got, want) || len(want) < 10 {
		t.Errorf("EventKinds() = %q, the constants are %q", got, want)
	}
}

// quickstartEvents returns the journal of a healthy dry-run quick start
// (testdata/quickstart-events.json): the start line, nine back ends up at
// their first checks, the pool's verdict, twelve IPVS operations computed
// in the dry run.
func quickstartEvents(t *testing.T) *EventLog {
	t.Helper()
	b, err := os.ReadFile("testdata/quickstart-events.json")
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatal(err)
	}
	log := NewEventLog(100, nil)
	for _, ev := range evs {
		log.Append(ev)
	}
	return log
}

// renderEvents renders the page at path with the event log evs.
func renderEvents(t *testing.T, evs *EventLog, path string) string {
	t.Helper()
	now := time.Date(2026, 12, 3, 11, 5, 0, 0, time.UTC)
	opts := StatusOptions{Backend: &fakeBackend{status: sampleStatus(now)}, Now: func() time.Time { return now }, Events: evs}
	rec := httptest.NewRecorder()
	NewStatusServer(opts).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, rec.Code)
	}
	return unlabelled(t, rec.Body.String())
}

// eventSection is the page's events section, from its heading to the
// legend.
func eventSection(t *testing.T, page string) string {
	t.Helper()
	i, j := strings.Index(page, `<h2 id="events">`), strings.Index(page, `<div id="legend">`)
	if i < 0 || j < i {
		t.Fatalf("no events section:\n%s", page)
	}
	return page[i:j]
}

// topRows returns the data-seq and the class of the events table's rows,
// leaving out those inside a folded row.
func topRows(section string) (rows [][2]string) {
	re := regexp.MustCompile(`<tr class="([^"]*)" data-seq="(\d+)"`)
	for _, m := range re.FindAllStringSubmatch(section, -1) {
		if m[1] != "ev-routine" {
			rows = append(rows, [2]string{m[2], m[1]})
		}
	}
	return rows
}

// TestPageEventsQuickstart: in a healthy dry-run quick start the page
// shows the pool's verdict as the first event, highlighted, and folds the
// routine work around it into one row per run (the start-up with the
// first checks, then the twelve IPVS operations), which expand to every
// event; ?all=1 lists every event, ?kind= keeps some kinds, an unknown
// kind is said and ignored.
func TestPageEventsQuickstart(t *testing.T) {
	log := quickstartEvents(t)
	sec := eventSection(t, renderEvents(t, log, "/"))
	want := [][2]string{{"10", "routine"}, {"11", "event verdict-up"}, {"23", "routine"}}
	if got := topRows(sec); !slices.Equal(got, want) {
		t.Errorf("rows (seq, class) %v, want %v:\n%s", got, want, sec)
	}
	at := func(sec, ms int) string {
		return time.Date(2026, 12, 3, 11, 2, sec, ms*1e6, time.UTC).Local().Format("15:04:05")
	}
	contains(t, "events section", sec, "oldest first, the newest at the bottom",
		`<summary>1 start-up line, 9 back ends up at their first checks `+at(0, 0)+`–`+at(0, 460)+`</summary>`,
		`<summary>12 IPVS operations (dry run) `+at(3, 50)+`–`+at(3, 710)+`</summary>`,
		`<tr class="event verdict-up" data-seq="11" data-kind="pool">`,
		`<tr class="ev-routine" data-seq="12" data-kind="ipvs">`, `create-dest tcp/192.0.2.53:53 -&gt; 127.0.0.1:5305`,
		`<b>for people</b>`, `<a href="?all=1#events">everything</a>`, `<a href="?kind=pool#events">pool</a>`)

	all := eventSection(t, renderEvents(t, log, "/?all=1"))
	rows := topRows(all)
	if len(rows) != 20 || rows[0][0] != "4" || rows[19][0] != "23" || strings.Contains(all, "<details>") {
		t.Errorf("?all=1: rows %v, want events 4 to 23 one by one:\n%s", rows, all)
	}
	contains(t, "?all=1", all, "every event, routine work included", `<b>everything</b>`)

	pool := eventSection(t, renderEvents(t, log, "/?kind=pool,nosuch"))
	if got := topRows(pool); !slices.Equal(got, [][2]string{{"11", "event verdict-up"}}) {
		t.Errorf("?kind=pool: rows %v, want the verdict alone:\n%s", got, pool)
	}
	contains(t, "?kind=pool,nosuch", pool, `ignored: &#34;nosuch&#34; (no such event kind)`, "kinds pool", `<b>pool</b>`)
	if sec := eventSection(t, renderEvents(t, log, "/?kind=reload")); !strings.Contains(sec, "no events of these kinds") {
		t.Errorf("?kind=reload: no line saying there are none:\n%s", sec)
	}

	// A pool going down is red, a member going down too.
	log.Append(Event{Kind: EventState, Subject: "unbound/recursive", Message: "up -> down: timeout", Error: true, Verdict: VerdictDown})
	log.Append(Event{Kind: EventPool, Subject: "local", Message: "pool local: healthy -> below-minimum", Error: true, Verdict: VerdictDown})
	sec = eventSection(t, renderEvents(t, log, "/"))
	contains(t, "events after a failure", sec, `<tr class="event event-error verdict-down" data-seq="24" data-kind="state">`,
		`<tr class="event event-error verdict-down" data-seq="25" data-kind="pool">`)
}
