package control

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/testlog"
)

func TestServerGSLBPassesRequestAndPeer(t *testing.T) {
	var logs testlog.Buffer
	fb := &fakeBackend{}
	srv := startServer(t, ServerOptions{Backend: fb, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	r := do(t, unixHTTP(srv.path), http.MethodPost, base+"/gslb", []byte(`{"action": "ttl", "zone": "g.test", "seconds": 600, "reason": "melting"}`))
	if r.code != http.StatusOK {
		t.Fatalf("POST /v1/gslb: %d %s", r.code, r.body)
	}
	fb.mu.Lock()
	calls := fb.gslb
	fb.mu.Unlock()
	want := GSLBRequest{Action: GSLBTTL, Zone: "g.test", Seconds: 600, Reason: "melting"}
	if len(calls) != 1 || calls[0].req != want || calls[0].by != fmt.Sprintf("uid %d", os.Geteuid()) {
		t.Fatalf("backend calls %+v; want %+v by uid", calls, want)
	}
	contains(t, "log", logs.String(), `msg="gslb request"`, "action=ttl", `scope="zone g.test"`, "seconds=600", "reason=melting", `result="ttl zone g.test"`)
}

func TestServerGSLBMalformed(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{}`, "action: missing"},
		{`{"action": "of"}`, `action: want off, on or ttl, not "of"`},
		{`{"action": "off", "name": "a", "zone": "b"}`, "name and zone: give at most one"},
		{`{"action": "off", "seconds": 5}`, "seconds and clear: only with ttl"},
		{`{"action": "ttl", "seconds": 5, "clear": true}`, "seconds and clear: give one"},
		{`{"action": "off", "reason": "a\nb"}`, "reason: no control characters"},
		{`{"action": "off", "nme": "x"}`, "nme"},
	} {
		fb := &fakeBackend{}
		rec := httptest.NewRecorder()
		NewServer(ServerOptions{Backend: fb}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, APIPrefix+"/gslb", strings.NewReader(tc.body)))
		er := errorReply(t, reply{code: rec.Code, header: rec.Header(), body: rec.Body.String()})
		if rec.Code != http.StatusBadRequest || !strings.Contains(er.Error, tc.want) {
			t.Errorf("%s: %d %q; want 400 containing %q", tc.body, rec.Code, er.Error, tc.want)
		}
		if len(fb.gslb) != 0 {
			t.Errorf("%s: backend called for a malformed request", tc.body)
		}
	}
}

func TestPageGSLBEmergencyBanner(t *testing.T) {
	now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	st := &Status{Version: StatusVersion, Generated: now, Daemon: Daemon{Warm: true}, GSLBIntent: []GSLBIntent{
		{Kind: GSLBOff, Zone: "g.test.", Scope: "zone g.test.", Mode: "static", Reason: "wrong <answers>", Set: now.Add(-5 * time.Minute), By: "uid 0", Names: []string{"www.g.test."}},
		{Kind: GSLBTTL, Name: "www.g.test.", Scope: "name www.g.test.", Seconds: 600, Reason: "load", Set: now.Add(-time.Minute), By: "uid 0", Names: []string{"www.g.test."}},
		{Kind: GSLBOff, Name: "gone.g.test.", Scope: "name gone.g.test.", Mode: "static", Set: now, Orphaned: true, Names: []string{}},
	}}
	code, body := renderPage(t, st, now, 0)
	if code != http.StatusOK {
		t.Fatalf("code %d", code)
	}
	contains(t, "page", body,
		`<div class="banner warn gslb-off">GSLB EMERGENCY: intelligent resolution OFF for zone g.test. — static answers, ECS scope 0 (set 5m ago by uid 0: wrong &lt;answers&gt;)</div>`,
		`<div class="banner warn gslb-ttl">GSLB TTL RAISED to 600s for name www.g.test.`,
		`<table id="gslb-intent">`, "ORPHANED")
	if strings.Count(body, "gslb-off") != 1 {
		t.Errorf("an orphaned switch has a banner:\n%s", body)
	}
}
