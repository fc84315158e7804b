package control

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/testkit/browser"
)

// hostBackend is a fakeBackend that answers host requests.
type hostBackend struct {
	fakeBackend
	hmu   sync.Mutex
	calls []HostRequest
	by    []string
}

func (h *hostBackend) SetHost(_ context.Context, req HostRequest, by string) (*HostReply, error) {
	h.hmu.Lock()
	defer h.hmu.Unlock()
	h.calls, h.by = append(h.calls, req), append(h.by, by)
	return &HostReply{Message: "host " + req.Action, Changed: true}, nil
}

// TestServerHost: POST /v1/host reaches a backend that answers host
// requests, after validation, through the client.
func TestServerHost(t *testing.T) {
	hb := &hostBackend{}
	srv := startServer(t, ServerOptions{Backend: hb})
	c := NewClient(srv.path)
	rep, err := c.SetHost(context.Background(), HostRequest{Action: HostDrain, Reason: "kernel upgrade"})
	if err != nil || rep.Message != "host drain" || !rep.Changed {
		t.Fatalf("SetHost: %+v %v", rep, err)
	}
	if len(hb.calls) != 1 || hb.calls[0] != (HostRequest{Action: HostDrain, Reason: "kernel upgrade"}) || !strings.HasPrefix(hb.by[0], "uid ") {
		t.Errorf("backend got %+v by %v", hb.calls, hb.by)
	}
	for body, want := range map[string]string{
		`{}`:                                    "action: missing",
		`{"action": "pause"}`:                   `action: want drain or enable, not \"pause\"`,
		`{"action": "enable", "reason": "x"}`:   "reason: only with drain",
		`{"action": "drain", "reason": "a\nb"}`: "no control characters",
		`{"action": "drain", "bogus": 1}`:       "bogus",
	} {
		rec := httptest.NewRecorder()
		NewServer(ServerOptions{Backend: hb}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, APIPrefix+"/host", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %d %s, want 400 with %q", body, rec.Code, rec.Body.String(), want)
		}
	}
	if len(hb.calls) != 1 {
		t.Errorf("invalid requests reached the backend: %+v", hb.calls)
	}
}

// TestServerHostAbsent: a backend without host requests has no such
// endpoint.
func TestServerHostAbsent(t *testing.T) {
	rec := httptest.NewRecorder()
	NewServer(ServerOptions{Backend: &fakeBackend{}}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, APIPrefix+"/host", strings.NewReader(`{"action":"drain"}`)))
	if rec.Code != http.StatusNotFound {
		t.Errorf("got %d %s, want 404", rec.Code, rec.Body.String())
	}
}

// TestPageBGP: the page shows the sessions, the prefixes and a drain.
func TestPageBGP(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	since := now.Add(-90 * time.Second)
	st := &Status{Generated: now, BGP: &BGPStatus{RouterID: "198.51.100.1", LocalAS: 65001,
		Peers: []BGPPeer{{Address: "198.51.100.254", AS: 65000, State: "established", Since: &since},
			{Address: "198.51.100.253", AS: 65000, State: "active", LastError: "Hold timer expired", ReasonCode: "md5-mismatch", Reason: "TCP MD5 signature mismatch with the router: it signs with another password (the kernel dropped 3 segments from 198.51.100.253: TCPMD5Failure rose); check [[bgp.peer]] password against the router's"}},
		Prefixes: []BGPPrefix{{Prefix: "192.0.2.53/32", Kind: "vip", Name: "v4", Announced: true, MED: 100, Communities: []string{"65001:100", "65535:0"}, Reason: "draining"},
			{Prefix: "192.0.2.54/32", Kind: "vip", Name: "v5", Reason: "withdrawn: not serving"}},
		Drain: &HostDrainStatus{Reason: "kernel", By: "uid 0", Set: now.Add(-10 * time.Second), WithdrawAt: now.Add(20 * time.Second)}}}
	var b strings.Builder
	if err := newPageTemplate().Execute(&b, buildPage(st, now, "lb1", 0)); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`id="host-drained"`, "HOST DRAINED since 10s ago by uid 0: kernel", "withdrawn in 20s",
		`data-peer="198.51.100.254" data-state="established"`, "1m30s", "Hold timer expired", `data-reason="md5-mismatch"`, "TCP MD5 signature mismatch with the router",
		`data-prefix="192.0.2.53/32" data-announced="true"`, "65001:100 65535:0", `data-prefix="192.0.2.54/32" data-announced="false"`} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	b.Reset()
	if err := newPageTemplate().Execute(&b, buildPage(&Status{Generated: now}, now, "lb1", 0)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "bgp") {
		t.Errorf("a page without [bgp] shows a BGP section")
	}
}

// TestPageBGPInBrowser renders the page with the longest status and a
// BGP section with long reasons in Debian's Chromium at 1280 px: nothing
// overflows, and the sessions, prefixes and drain are on it.
func TestPageBGPInBrowser(t *testing.T) {
	browser.Require(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := longestStatus(now)
	since := now.Add(-26 * time.Hour)
	st.BGP = &BGPStatus{RouterID: "198.51.100.1", LocalAS: 4200000001,
		Peers: []BGPPeer{{Address: "2001:db8:ffff:ffff:ffff:ffff:ffff:fffe", AS: 4200000000, State: "established", Since: &since},
			{Address: "198.51.100.253", AS: 65000, State: "active", LastError: "Hold Timer Expired; last notification: hold timer expired (code 4, subcode 0)",
				ReasonCode: "md5-mismatch", Reason: "TCP MD5 signature mismatch with this router or another one not established (the kernel dropped 12 segments from one of 198.51.100.253, 2001:db8:ffff:ffff:ffff:ffff:ffff:fffd, the counters are per host: TCPMD5Failure/TCPMD5NotFound rose); check [[bgp.peer]] password against the router's"}},
		Drain: &HostDrainStatus{Reason: strings.Repeat("kernel upgrade ", 6), By: "uid 0", Set: now.Add(-10 * time.Second), WithdrawAt: now.Add(20 * time.Second)},
	}
	for i := range 6 {
		st.BGP.Prefixes = append(st.BGP.Prefixes, BGPPrefix{Prefix: fmt.Sprintf("2001:db8:100:200::%x/128", 0x1000+i), Kind: "vip", Name: fmt.Sprintf("dns-v6-east-internal-%02d", i),
			Announced: i%2 == 0, MED: 1000, Communities: []string{"65001:200", "65535:0"}, Degraded: true, Draining: true,
			Reason: "draining: GRACEFUL_SHUTDOWN until 2025-03-01T12:00:20Z (by uid 0: kernel upgrade), then withdrawn; vip dns-v6-east-internal: serving: udp/53 12 of 12 destinations taking traffic, tcp/53 12 of 12 destinations taking traffic (degraded: pool datacenter-east-recursive failing open)"})
	}
	l, url := pageAt1280(t, st, now)
	for _, want := range []string{"HOST DRAINED", "BGP announcements", "2001:db8:ffff:ffff:ffff:ffff:ffff:fffe", "Hold Timer Expired", "TCP MD5 signature mismatch", "2001:db8:100:200::1005/128", "65001:200 65535:0"} {
		if !strings.Contains(l.Text, want) {
			t.Errorf("rendered text lacks %q", want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shot := filepath.Join(browser.ArtifactDir(t), "status-page-bgp-1280.png")
	if err := browser.Screenshot(ctx, url, shot, 1280, 900); err != nil {
		t.Errorf("screenshot: %v", err)
	} else {
		t.Logf("screenshot: %s", shot)
	}
}
