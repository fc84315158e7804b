package control

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// topBackend is a fakeBackend that answers GET /v1/top.
type topBackend struct {
	fakeBackend
	tmu   sync.Mutex
	kinds []string
	wins  []time.Duration
}

func (b *topBackend) Top(_ context.Context, kind string, window time.Duration) (*TopReply, error) {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	b.kinds, b.wins = append(b.kinds, kind), append(b.wins, window)
	if window > time.Minute {
		return nil, Errorf(http.StatusBadRequest, "window %s: at most 1m0s is kept", window)
	}
	return &TopReply{Kind: kind, Window: window.String(), Seconds: 10, Queries: 100, Rate: 10,
		Entries: []TopEntry{{Key: "192.0.2.66", Count: 90, Error: 2, Rate: 9, RateError: 0.2, Share: 0.9}}}, nil
}

// TestServerTop: GET /v1/top reaches the backend after validation,
// through the client; bad parameters are refused with 400, a window
// the backend does not keep with its error.
func TestServerTop(t *testing.T) {
	tb := &topBackend{}
	srv := startServer(t, ServerOptions{Backend: tb})
	c := NewClient(srv.path)
	rep, err := c.Top(context.Background(), "names", 30*time.Second)
	if err != nil || rep.Kind != "names" || len(rep.Entries) != 1 || rep.Entries[0].Key != "192.0.2.66" {
		t.Fatalf("Top: %+v %v", rep, err)
	}
	if _, err := c.Top(context.Background(), "clients", 0); err != nil {
		t.Fatal(err)
	}
	if len(tb.kinds) != 2 || tb.wins[0] != 30*time.Second || tb.wins[1] != 0 {
		t.Errorf("backend got %v %v", tb.kinds, tb.wins)
	}
	_, err = c.Top(context.Background(), "clients", 2*time.Hour)
	var e *Error
	if !errors.As(err, &e) || e.Code != http.StatusBadRequest || !strings.Contains(e.Message, "at most 1m0s") {
		t.Errorf("window beyond: %v", err)
	}
	for query, want := range map[string]string{
		"?kind=talkers":         `kind \"talkers\": want one of`,
		"?window=soon":          `window \"soon\"`,
		"?window=-1s":           `window \"-1s\"`,
		"?kind=clients&limit=3": `unknown parameter \"limit\"`,
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
