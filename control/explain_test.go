package control

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"
)

// fakeGSLB is a GSLBBackend that remembers the requests it got and
// answers with rep, or err.
type fakeGSLB struct {
	mu   sync.Mutex
	reqs []GSLBExplainRequest
	rep  *GSLBExplainReply
	err  error
}

func (f *fakeGSLB) Explain(_ context.Context, req GSLBExplainRequest) (*GSLBExplainReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	return f.rep, f.err
}

func (f *fakeGSLB) last(t *testing.T) GSLBExplainRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the GSLB backend got no request")
	}
	return f.reqs[len(f.reqs)-1]
}

func explainReply() *GSLBExplainReply {
	return &GSLBExplainReply{
		Name: "www.gslb.test.", Type: "A", Serial: 7, Rcode: "NOERROR",
		Answer: []string{"www.gslb.test.\t30\tIN\tA\t192.0.2.1"}, GSLBName: "www.gslb.test.",
		Client: "198.51.100.7", ClientFrom: "ecs", ECS: "198.51.100.0/24",
		Location: GSLBExplainLocation{Labels: map[string]string{"region": "east"}, Prefix: "198.51.100.0/24", Scope: 24},
		Policies: []GSLBExplainPolicy{
			{Match: map[string]string{"region": "west"}},
			{Match: map[string]string{"region": "east"}, Matched: true, Answered: true, Pools: []GSLBExplainPool{{
				Name: "east", Algorithm: "rr", Healthy: 1,
				Members: []GSLBExplainMember{{Name: "e1", Address: "192.0.2.1", State: "up", Weight: 100, Chosen: true}, {Name: "e2", Address: "192.0.2.2", State: "down", Weight: 100}},
			}}},
		},
		Addresses: []string{"192.0.2.1"}, TTL: 30, Scope: 24,
	}
}

// TestClientExplain runs Client.Explain against the server: the request
// reaches the GSLB backend whole, the reply comes back whole, and the
// backend's refusals come back with their kind's status.
func TestClientExplain(t *testing.T) {
	fg := &fakeGSLB{rep: explainReply()}
	srv := startServer(t, ServerOptions{Backend: &fakeBackend{}, GSLB: fg})
	c := NewClient(srv.path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := GSLBExplainRequest{Name: "WWW.gslb.test", Type: "A", Client: "192.0.2.53", ECS: "198.51.100.7/24"}
	got, err := c.Explain(ctx, req)
	if err != nil {
		t.Fatalf("Explain: %v", err)
	}
	if !reflect.DeepEqual(got, explainReply()) {
		t.Errorf("Explain = %+v; want %+v", got, explainReply())
	}
	if r := fg.last(t); r != req {
		t.Errorf("backend got %+v; want %+v", r, req)
	}

	// The backend's refusals come back with the status of their kind.
	for _, tc := range []struct {
		kind Kind
		code int
	}{
		{Malformed, http.StatusBadRequest},
		{NotFound, http.StatusNotFound},
		{Unavailable, http.StatusServiceUnavailable},
	} {
		fg.mu.Lock()
		fg.err = Errorf(tc.kind, "nope.test. is in no GSLB zone")
		fg.mu.Unlock()
		_, err = c.Explain(ctx, GSLBExplainRequest{Name: "nope.test"})
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != tc.code || ce.Message != "nope.test. is in no GSLB zone" {
			t.Errorf("Explain refused (kind %d) = %v; want %d with the backend's message", tc.kind, err, tc.code)
		}
	}
}

// TestServerExplainGET takes the request from the query, strictly.
func TestServerExplainGET(t *testing.T) {
	fg := &fakeGSLB{rep: explainReply()}
	srv := startServer(t, ServerOptions{Backend: &fakeBackend{}, GSLB: fg})
	hc := unixHTTP(srv.path)
	q := url.Values{"name": {"www.gslb.test"}, "type": {"AAAA"}, "client": {"10.0.0.1"}, "ecs": {"2001:db8::/56"}}
	r := do(t, hc, http.MethodGet, base+"/gslb/explain?"+q.Encode(), nil)
	if r.code != http.StatusOK {
		t.Fatalf("GET: %d %s", r.code, r.body)
	}
	want := GSLBExplainRequest{Name: "www.gslb.test", Type: "AAAA", Client: "10.0.0.1", ECS: "2001:db8::/56"}
	if got := fg.last(t); got != want {
		t.Errorf("backend got %+v; want %+v", got, want)
	}
	q = url.Values{"name": {"www.gslb.test"}, "via": {"json"}, "peer": {"10.0.0.5"}, "forwarded_for": {"203.0.113.7, 10.0.0.9"},
		"proxy_source": {"10.0.0.5"}, "ip": {"192.0.2.9"}, "ecs": {"192.0.2.0/24"}}
	if r := do(t, hc, http.MethodGet, base+"/gslb/explain?"+q.Encode(), nil); r.code != http.StatusOK {
		t.Fatalf("GET via json: %d %s", r.code, r.body)
	}
	want = GSLBExplainRequest{Name: "www.gslb.test", Via: "json", Peer: "10.0.0.5", ForwardedFor: "203.0.113.7, 10.0.0.9",
		ProxySource: "10.0.0.5", IP: "192.0.2.9", ECS: "192.0.2.0/24"}
	if got := fg.last(t); got != want {
		t.Errorf("backend got %+v; want %+v", got, want)
	}
	for _, tc := range []struct{ query, want string }{
		{"name=a.test&nmae=b", `unknown query parameter "nmae"`},
		{"name=a.test&name=b.test", "name: given 2 times, want once"},
		{"type=A", "name: missing"},
		{"name=a.test&via=quic", `via: want udp, tcp, dot, doh, json, not "quic"`},
		{"name=a.test&forwarded_for=203.0.113.7", "forwarded_for: X-Forwarded-For is a header of doh and json requests, not of udp"},
		{"name=a.test&via=doh&ip=192.0.2.7", "ip: ip= is a parameter of the JSON API (via json), not of doh"},
		{"name=a.test&via=tcp&proxy_source=192.0.2.7", "proxy_source: a PROXY header goes to dot, doh and json, not to tcp"},
		{"name=a.test&via=dot&client=192.0.2.7", "client: the query's source over udp or tcp; over dot give peer"},
	} {
		r := do(t, hc, http.MethodGet, base+"/gslb/explain?"+tc.query, nil)
		if r.code != http.StatusBadRequest {
			t.Errorf("GET ?%s: %d %s; want 400", tc.query, r.code, r.body)
			continue
		}
		contains(t, "GET ?"+tc.query, errorReply(t, r).Error, tc.want)
	}
}

// TestServerExplainMalformed refuses bodies that are not one
// GSLBExplainRequest, before the backend sees them.
func TestServerExplainMalformed(t *testing.T) {
	fg := &fakeGSLB{rep: explainReply()}
	srv := startServer(t, ServerOptions{Backend: &fakeBackend{}, GSLB: fg})
	hc := unixHTTP(srv.path)
	for _, tc := range []struct{ name, body, want string }{
		{"empty", "", "empty request body"},
		{"unknown field", `{"name": "a.test", "qtype": "A"}`, `unknown field "qtype"`},
		{"wrong type", `{"name": 5}`, "name: want a string, not number"},
		{"trailing", `{"name": "a.test"} {}`, "trailing data"},
		{"no name", `{"type": "A"}`, "name: missing"},
	} {
		r := do(t, hc, http.MethodPost, base+"/gslb/explain", []byte(tc.body))
		if r.code != http.StatusBadRequest {
			t.Errorf("%s: %d %s; want 400", tc.name, r.code, r.body)
			continue
		}
		contains(t, tc.name, errorReply(t, r).Error, tc.want)
	}
	fg.mu.Lock()
	n := len(fg.reqs)
	fg.mu.Unlock()
	if n != 0 {
		t.Errorf("the backend got %d malformed requests", n)
	}
	if r := do(t, hc, http.MethodDelete, base+"/gslb/explain", nil); r.code != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, POST" {
		t.Errorf("DELETE: %d, Allow %q; want 405, GET, POST", r.code, r.header.Get("Allow"))
	}
}

// TestServerExplainWithoutResponder answers 503 when the daemon gave the
// server no GSLB backend.
func TestServerExplainWithoutResponder(t *testing.T) {
	srv := startServer(t, ServerOptions{Backend: &fakeBackend{}})
	r := do(t, unixHTTP(srv.path), http.MethodPost, base+"/gslb/explain", []byte(`{"name": "a.test"}`))
	if r.code != http.StatusServiceUnavailable {
		t.Fatalf("POST: %d %s; want 503", r.code, r.body)
	}
	contains(t, "503 reply", errorReply(t, r).Error, "no GSLB responder")
}
