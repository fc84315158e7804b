package control

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
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
