package control

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// heldBackend is a fakeBackend whose Status says it was entered, then
// waits until release is closed.
type heldBackend struct {
	*fakeBackend
	entered chan struct{}
	release chan struct{}
}

func (h *heldBackend) Status(ctx context.Context) (*Status, error) {
	h.entered <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.fakeBackend.Status(ctx)
}

// getResult is the outcome of one GET.
type getResult struct {
	code       int
	retryAfter string
	body       string
	err        error
}

func get(client *http.Client, url string) getResult {
	resp, err := client.Get(url)
	if err != nil {
		return getResult{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return getResult{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b), err: err}
}

// TestStatusServerLimit: with MaxRequests requests held open in the
// server, one more (of any path) is answered 503 at once, with
// Retry-After and a body naming the limit, and counted; once they end, a
// request is served again.
func TestStatusServerLimit(t *testing.T) {
	const limit = 3
	hb := &heldBackend{fakeBackend: &fakeBackend{status: &Status{Version: StatusVersion}},
		entered: make(chan struct{}, 2*limit), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	srv := NewStatusServer(StatusOptions{Backend: hb, Gatherer: reg, Registerer: reg, MaxRequests: limit, Timeout: time.Minute})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	released := false
	defer func() {
		if !released {
			close(hb.release)
		}
		cancel()
		<-done
	}()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	held := make(chan getResult, limit)
	for range limit {
		go func() { held <- get(client, base+"/status") }()
	}
	for range limit {
		<-hb.entered // each held inside the server
	}
	for _, path := range []string{"/status", "/metrics", "/"} {
		one := make(chan getResult, 1)
		go func() { one <- get(client, base+path) }()
		var r getResult
		select {
		case r = <-one:
		case <-hb.entered:
			t.Fatalf("GET %s served with %d requests in progress: no limit", path, limit)
		}
		if r.err != nil || r.code != http.StatusServiceUnavailable || r.retryAfter != "1" ||
			!strings.Contains(r.body, "at most 3 requests at once (daemon.status_max_requests)") {
			t.Errorf("GET %s past the limit: %+v, want 503, Retry-After 1 and the limit named", path, r)
		}
	}
	if n := refusals(t, reg); n != 3 {
		t.Errorf("lbdns_status_requests_refused_total = %v, want 3", n)
	}
	close(hb.release)
	released = true
	for range limit {
		if r := <-held; r.err != nil || r.code != http.StatusOK {
			t.Errorf("held request: %+v, want 200", r)
		}
	}
	if r := get(client, base+"/status"); r.err != nil || r.code != http.StatusOK {
		t.Errorf("after the held requests: %+v, want 200", r)
	}
}

// refusals returns lbdns_status_requests_refused_total as reg has it.
func refusals(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "lbdns_status_requests_refused_total" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("lbdns_status_requests_refused_total not exported")
	return 0
}
