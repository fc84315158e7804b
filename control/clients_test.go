package control

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/testkit/browser"
)

// clientsBackend is a fakeBackend that answers client requests.
type clientsBackend struct {
	fakeBackend
	cmu   sync.Mutex
	calls []ClientRequest
}

func (c *clientsBackend) SetClient(_ context.Context, req ClientRequest, _ string) (*ClientReply, error) {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	c.calls = append(c.calls, req)
	return &ClientReply{Message: req.Action + " " + req.Client, Changed: true, Clients: &ClientsStatus{Table: "lbdns", Enforced: true}}, nil
}

// TestServerClients: POST /v1/clients reaches a backend that answers
// client requests, after validation, through the client; a backend
// without them has no such endpoint.
func TestServerClients(t *testing.T) {
	cb := &clientsBackend{}
	srv := startServer(t, ServerOptions{Backend: cb})
	req := ClientRequest{Action: ClientLimit, Client: "198.51.100.0/24", Rate: 20, ForSeconds: 600, Reason: "launch storm"}
	rep, err := NewClient(srv.path).SetClient(context.Background(), req)
	if err != nil || rep.Message != "limit 198.51.100.0/24" || !rep.Changed || !rep.Clients.Enforced {
		t.Fatalf("SetClient: %+v %v", rep, err)
	}
	if len(cb.calls) != 1 || cb.calls[0] != req {
		t.Errorf("backend got %+v", cb.calls)
	}
	for body, want := range map[string]string{
		`{}`:                               "action: missing",
		`{"action": "ban", "client": "x"}`: `action: want block, limit or unblock, not \"ban\"`,
		`{"action": "block"}`:              "client: missing",
		`{"action": "block", "client": "` + strings.Repeat("1", 65) + `"}`: "at most 64",
		`{"action": "unblock", "client": "x", "reason": "y"}`:              "not with unblock",
		`{"action": "block", "client": "x", "for_seconds": -1}`:            "for_seconds: want 0 to",
		`{"action": "block", "client": "x", "for_seconds": 99999999999}`:   "for_seconds: want 0 to",
		`{"action": "block", "client": "x", "reason": "a\nb"}`:             "no control characters",
		`{"action": "block", "client": "x", "bogus": 1}`:                   "bogus",
	} {
		rec := httptest.NewRecorder()
		NewServer(ServerOptions{Backend: cb}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, APIPrefix+"/clients", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %d %s, want 400 with %q", body, rec.Code, rec.Body.String(), want)
		}
	}
	if len(cb.calls) != 1 {
		t.Errorf("invalid requests reached the backend: %+v", cb.calls)
	}
	rec := httptest.NewRecorder()
	NewServer(ServerOptions{Backend: &fakeBackend{}}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, APIPrefix+"/clients", strings.NewReader(`{"action":"block"}`)))
	if rec.Code != http.StatusNotFound {
		t.Errorf("without client requests: %d %s, want 404", rec.Code, rec.Body.String())
	}
}

// TestPageClients: the page shows the client actions, and says when
// they are not enforced.
func TestPageClients(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	st := &Status{Generated: now, Clients: &ClientsStatus{Table: "lbdns", Error: "no permission", MaxEntries: 1024, Entries: []ClientEntry{
		{Client: "203.0.113.7", Action: ClientBlock, Until: now.Add(10 * time.Minute), Reason: "flood", Set: now.Add(-time.Minute), By: "uid 0"},
		{Client: "198.51.100.0/24", Action: ClientLimit, Rate: 50, Until: now.Add(time.Hour), Reason: "launch storm", Set: now.Add(-2 * time.Minute), By: "uid 1000"},
	}}}
	var b strings.Builder
	if err := newPageTemplate().Execute(&b, buildPage(st, now, "lb1", 0)); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`id="clients-not-enforced"`, "NOT ENFORCED: no permission", `data-client="203.0.113.7" data-action="block"`,
		"in 10m", "launch storm", `<td class="num">50</td>`, "2m ago"} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	b.Reset()
	if err := newPageTemplate().Execute(&b, buildPage(&Status{Generated: now, Clients: &ClientsStatus{Table: "lbdns", Enforced: true}}, now, "lb1", 0)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no client blocked or limited") || strings.Contains(b.String(), "NOT ENFORCED") {
		t.Errorf("a page without client actions:\n%s", b.String())
	}
}

// TestPageClientsInBrowser renders the longest status with many client
// actions with long reasons in Debian's Chromium at 1280 px: nothing
// overflows.
func TestPageClientsInBrowser(t *testing.T) {
	browser.Require(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := longestStatus(now)
	st.Clients = &ClientsStatus{Table: "lbdns", Enforced: false, Error: strings.Repeat("clientfw: no permission to change the nftables ruleset ", 3), MaxEntries: 1024}
	for i := range 8 {
		st.Clients.Entries = append(st.Clients.Entries, ClientEntry{Client: fmt.Sprintf("2001:db8:ffff:ffff:%x::/80", 0x1000+i), Action: ClientLimit, Rate: 1000000,
			Until: now.Add(7 * 24 * time.Hour), Reason: strings.Repeat("application misconfigured at its launch ", 4), Set: now.Add(-time.Minute), By: "uid 4294967294"})
	}
	l, _ := pageAt1280(t, st, now)
	for _, want := range []string{"Client actions", "NOT ENFORCED", "2001:db8:ffff:ffff:1007::/80"} {
		if !strings.Contains(l.Text, want) {
			t.Errorf("rendered text lacks %q", want)
		}
	}
}
