package control

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/testkit/browser"
)

// topBackend is a fakeBackend that answers GET /v1/top.
type topBackend struct {
	fakeBackend
	tmu     sync.Mutex
	kinds   []string
	sources []string
	wins    []time.Duration
}

func (b *topBackend) Top(_ context.Context, source, kind string, window time.Duration) (*TopReply, error) {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	b.kinds, b.sources, b.wins = append(b.kinds, kind), append(b.sources, source), append(b.wins, window)
	if window > time.Minute {
		return nil, Errorf(Malformed, "window %s: at most 1m0s is kept", window)
	}
	return &TopReply{Source: source, Kind: kind, Window: window.String(), Seconds: 10, Queries: 100, Rate: 10,
		Entries: []TopEntry{{Key: "192.0.2.66", Count: 90, Error: 2, Rate: 9, RateError: 0.2, Share: 0.9}}}, nil
}

// TestServerTop: GET /v1/top reaches the backend after validation,
// through the client; bad parameters are refused with 400, a window
// the backend does not keep with its error.
func TestServerTop(t *testing.T) {
	tb := &topBackend{}
	srv := startServer(t, ServerOptions{Backend: tb})
	c := NewClient(srv.path)
	rep, err := c.Top(context.Background(), TopDnstap, "names", 30*time.Second)
	if err != nil || rep.Kind != "names" || rep.Source != TopDnstap || len(rep.Entries) != 1 || rep.Entries[0].Key != "192.0.2.66" {
		t.Fatalf("Top: %+v %v", rep, err)
	}
	if _, err := c.Top(context.Background(), TopResponder, "clients", 0); err != nil {
		t.Fatal(err)
	}
	if len(tb.kinds) != 2 || tb.wins[0] != 30*time.Second || tb.wins[1] != 0 || tb.sources[0] != "dnstap" || tb.sources[1] != "responder" {
		t.Errorf("backend got %v %v %v", tb.kinds, tb.sources, tb.wins)
	}
	_, err = c.Top(context.Background(), TopResponder, "clients", 2*time.Hour)
	var e *Error
	if !errors.As(err, &e) || e.Code != http.StatusBadRequest || !strings.Contains(e.Message, "at most 1m0s") {
		t.Errorf("window beyond: %v", err)
	}
	for query, want := range map[string]string{
		"?kind=talkers":         `kind \"talkers\": want one of`,
		"?window=soon":          `window \"soon\"`,
		"?window=-1s":           `window \"-1s\"`,
		"?kind=clients&limit=3": `unknown parameter \"limit\"`,
		"?source=both":          `source \"both\": want responder or dnstap`,
	} {
		rec := httptest.NewRecorder()
		NewServer(ServerOptions{Backend: tb}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, APIPrefix+"/top"+query, nil))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %d %s, want 400 with %q", query, rec.Code, rec.Body.String(), want)
		}
	}
	if len(tb.kinds) != 3 {
		t.Errorf("invalid requests reached the backend: %v", tb.kinds)
	}
	// A backend that counts nothing.
	rec := httptest.NewRecorder()
	NewServer(ServerOptions{Backend: &fakeBackend{}}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, APIPrefix+"/top", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("no TopBackend: %d %s, want 503", rec.Code, rec.Body.String())
	}
}

// floodStatus is a flood status with an alarm raised, its top talkers
// of long keys (IPv6 addresses, names of 250 octets).
func floodStatus(now time.Time, long bool) *FloodStatus {
	name, client := "boom.app.gslb.example.", "203.0.113.66"
	if long {
		name = strings.Repeat("abcdefghij", 24) + ".example."
		client = "2001:db8:ffff:ffff:ffff:ffff:ffff:fffe"
	}
	top := []TopReply{
		{Source: TopResponder, Kind: "clients", Rate: 5400, Entries: []TopEntry{{Key: client, Rate: 5000, RateError: 1.5, Share: 0.926}, {Key: "192.0.2.10", Rate: 20, RateError: 1.5, Share: 0.004}}},
		{Source: TopResponder, Kind: "names", Rate: 5400, Entries: []TopEntry{{Key: name, Rate: 5010, RateError: 1.5, Share: 0.928}}},
	}
	resolvers := []TopReply{
		{Source: TopDnstap, Kind: "clients", Rate: 300, Entries: []TopEntry{{Key: "198.51.100.20", Rate: 40, RateError: 1, Share: 0.13}}},
		{Source: TopDnstap, Kind: "names", Rate: 300, Entries: []TopEntry{{Key: "www.example.", Rate: 90, RateError: 1, Share: 0.3}}},
	}
	return &FloodStatus{On: true, Window: "10s", Top: append(top, resolvers...), Alarms: []FloodAlarm{
		{ID: "responder", Source: TopResponder, Reason: "rise", Since: now.Add(-12 * time.Second), Rate: 5400, Baseline: 400, Floor: 1000, Top: top},
		{ID: "share responder clients " + client, Source: TopResponder, Reason: "share", Kind: "clients", Key: client, Share: 0.926, Since: now.Add(-9 * time.Second), Rate: 5400, Floor: 1000, Top: top},
	}}
}

// TestPageFlood: the page shows each alarm raised in a banner naming the
// top clients and names, and the top talkers with their errors; none of
// it when queries are not counted.
func TestPageFlood(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st := &Status{Generated: now, Flood: floodStatus(now, false)}
	var b strings.Builder
	if err := newPageTemplate().Execute(&b, buildPage(st, now, "lb1", 0)); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		`data-alarm="responder">FLOOD ALARM since 12s ago: responder at 5400/s over a baseline of 400/s — top clients of the responder&#39;s queries 203.0.113.66 5000/s, 192.0.2.10 20/s; names boom.app.gslb.example. 5010/s`,
		`FLOOD ALARM since 9s ago: client 203.0.113.66 takes 93% of the responder&#39;s 5400 queries/s`,
		`id="top-talkers"`, `data-source="responder" data-kind="clients"`, `<td class="mono brk">203.0.113.66</td><td class="num">5000.0</td><td class="num">−1.5</td><td class="num">92.6%</td>`,
		`data-source="responder" data-kind="names"`, `data-source="dnstap" data-kind="clients"`, `<th>dnstap clients (300 q/s in all)</th>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	b.Reset()
	if err := newPageTemplate().Execute(&b, buildPage(&Status{Generated: now}, now, "lb1", 0)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `id="top-talkers"`) || strings.Contains(b.String(), "FLOOD ALARM") {
		t.Errorf("a page without flood counting shows it")
	}
}

// TestPageFloodInBrowser renders the longest status with flood alarms
// and top talkers of the longest keys in Debian's Chromium at 1280 px:
// nothing overflows, the alarms and the talkers are on it.
func TestPageFloodInBrowser(t *testing.T) {
	browser.Require(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := longestStatus(now)
	st.Flood = floodStatus(now, true)
	inBrowser(t, st, now, "status-page-flood-1280.png", "FLOOD ALARM", "Top talkers", "2001:db8:ffff:ffff:ffff:ffff:ffff:fffe", "abcdefghij")
}

// inBrowser renders the page of st at now in Debian's Chromium at
// 1280 px (pageAt1280: nothing may overflow): the rendered text must hold
// every one of wants; a screenshot is saved as shot among the test's
// artifacts.
func inBrowser(t *testing.T, st *Status, now time.Time, shot string, wants ...string) {
	t.Helper()
	l, url := pageAt1280(t, st, now)
	for _, want := range wants {
		if !strings.Contains(l.Text, want) {
			t.Errorf("rendered text lacks %q", want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(browser.ArtifactDir(t), shot)
	if err := browser.Screenshot(ctx, url, path, 1280, 900); err != nil {
		t.Errorf("screenshot: %v", err)
	} else {
		t.Logf("screenshot: %s", path)
	}
}
