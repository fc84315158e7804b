package control

import (
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
// newest first, at most PageEvents of them, failures marked; without an
// event log it has no events section.
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
	if i, j := strings.Index(page, `data-seq="25"`), strings.Index(page, `data-seq="16"`); i < 0 || j < 0 || i > j {
		t.Errorf("events not newest first (seq 25 at %d, 16 at %d)", i, j)
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
