package control

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
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
