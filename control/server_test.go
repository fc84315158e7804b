package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/testlog"
)

const base = "http://lbdnsd" + APIPrefix

func errorReply(t *testing.T, r reply) ErrorReply {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error reply Content-Type = %q; want application/json", ct)
	}
	var er ErrorReply
	if err := json.Unmarshal([]byte(r.body), &er); err != nil || er.Error == "" {
		t.Fatalf("error body is not an ErrorReply (%v): %s", err, r.body)
	}
	return er
}

func TestServerStatus(t *testing.T) {
	want := &Status{
		Version: StatusVersion,
		Daemon:  Daemon{Config: "/etc/lbdns/lbdns.toml", DryRun: true},
		Pools:   []Pool{{Name: "main", Members: []Member{{Resolver: "bind-1", State: "up"}}}},
	}
	fb := &fakeBackend{status: want}
	srv := startServer(t, ServerOptions{Backend: fb})
	r := do(t, unixHTTP(srv.path), http.MethodGet, base+"/status", nil)
	if r.code != http.StatusOK {
		t.Fatalf("GET /v1/status: %d %s", r.code, r.body)
	}
	var got Status
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("status = %+v; want %+v", got, *want)
	}
}

func TestServerOverrideMalformed(t *testing.T) {
	long := strings.Repeat("x", MaxRequestBody)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"empty body", "", "empty request body"},
		{"blank body", " \n", "empty request body"},
		{"syntax error", `{"action": "drain",}`, "invalid JSON at byte 20"},
		{"truncated", `{"action": "drain"`, "the body ends inside the object"},
		{"unknown field", `{"acton": "drain", "resolver": "bind-1"}`, `unknown field "acton"`},
		{"wrong type", `{"action": 5, "resolver": "bind-1"}`, "action: want a string, not number"},
		{"not an object", `["drain", "bind-1"]`, "want a JSON object, not array"},
		{"trailing object", `{"action": "drain", "resolver": "bind-1"} {}`, "trailing data after the JSON object"},
		{"trailing garbage", `{"action": "drain", "resolver": "bind-1"}x`, "trailing data after the JSON object"},
		{"too large", `{"action": "drain", "resolver": "bind-1", "reason": "` + long + `"}`, "request body larger than 65536 bytes"},
		{"bad action", `{"action": "restart", "resolver": "bind-1"}`, `action: want drain, disable or enable, not "restart"`},
		{"missing action", `{"resolver": "bind-1"}`, "action: missing"},
		{"missing resolver", `{"action": "drain"}`, "resolver: missing"},
		{"blank resolver", `{"action": "drain", "resolver": "  "}`, "resolver: missing"},
		{"pool and vip", `{"action": "drain", "resolver": "bind-1", "pool": "main", "vip": "dns-v4"}`, "pool and vip: give at most one"},
		{"reason with newline", `{"action": "drain", "resolver": "bind-1", "reason": "a\nb"}`, "reason: no control characters"},
		{"reason too long", `{"action": "drain", "resolver": "bind-1", "reason": "` + strings.Repeat("y", MaxReasonLen+1) + `"}`, "reason: 1025 bytes, at most 1024"},
		{"null", `null`, "action: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := &fakeBackend{}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, APIPrefix+"/overrides", strings.NewReader(tc.body))
			NewServer(ServerOptions{Backend: fb}).Handler().ServeHTTP(rec, req)
			r := reply{code: rec.Code, header: rec.Header(), body: rec.Body.String()}
			if r.code != http.StatusBadRequest {
				t.Fatalf("code = %d; want 400 (%s)", r.code, r.body)
			}
			if er := errorReply(t, r); !strings.Contains(er.Error, tc.want) {
				t.Errorf("error = %q; want it to contain %q", er.Error, tc.want)
			}
			if n, _ := fb.mutations(); n != 0 {
				t.Errorf("SetOverride called %d times for a malformed request", n)
			}
		})
	}
}

func TestServerOverrideNamesEveryProblem(t *testing.T) {
	fb := &fakeBackend{}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, APIPrefix+"/overrides", strings.NewReader(`{"pool": "a", "vip": "b"}`))
	NewServer(ServerOptions{Backend: fb}).Handler().ServeHTTP(rec, req)
	er := errorReply(t, reply{code: rec.Code, header: rec.Header(), body: rec.Body.String()})
	contains(t, "error", er.Error, "action: missing", "resolver: missing", "pool and vip: give at most one")
}

func TestServerOverridePassesRequestAndPeer(t *testing.T) {
	var logs testlog.Buffer
	fb := &fakeBackend{overrideReply: &OverrideReply{
		Message: "bind-1 drained in pool main", Changed: true,
		Overrides: []Override{{Resolver: "bind-1", Pool: "main", Action: ActionDrain, Reason: "upgrade", By: "uid 0"}},
	}}
	srv := startServer(t, ServerOptions{Backend: fb, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	body := `{"action": "drain", "resolver": "bind-1", "pool": "main", "reason": "upgrade"}`
	r := do(t, unixHTTP(srv.path), http.MethodPost, base+"/overrides", []byte(body))
	if r.code != http.StatusOK {
		t.Fatalf("POST /v1/overrides: %d %s", r.code, r.body)
	}
	var rep OverrideReply
	if err := json.Unmarshal([]byte(r.body), &rep); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&rep, fb.overrideReply) {
		t.Errorf("reply = %+v; want %+v", rep, *fb.overrideReply)
	}
	call := fb.lastOverride(t)
	wantReq := OverrideRequest{Action: ActionDrain, Resolver: "bind-1", Pool: "main", Reason: "upgrade"}
	if call.req != wantReq {
		t.Errorf("backend got %+v; want %+v", call.req, wantReq)
	}
	if want := fmt.Sprintf("uid %d", os.Geteuid()); call.by != want {
		t.Errorf("by = %q; want %q (from SO_PEERCRED)", call.by, want)
	}
	line := logs.String()
	contains(t, "log", line, `msg="override request"`, fmt.Sprintf("peer=\"uid %d pid %d\"", os.Geteuid(), os.Getpid()),
		"action=drain", "resolver=bind-1", `scope="pool main"`, "reason=upgrade", `result="bind-1 drained in pool main"`)
}

func TestServerLogsRefusedOverride(t *testing.T) {
	var logs testlog.Buffer
	fb := &fakeBackend{overrideErr: Errorf(NotFound, "no resolver named bind-9")}
	h := NewServer(ServerOptions{Backend: fb, Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, APIPrefix+"/overrides", strings.NewReader(`{"action":"disable","resolver":"bind-9","vip":"dns-v6"}`)))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("code = %d; want 404", rec.Code)
	}
	contains(t, "log", logs.String(), `msg="override request"`, "action=disable", `scope="vip dns-v6"`, `result="refused: no resolver named bind-9"`)
}

func TestServerBackendErrors(t *testing.T) {
	problems := []Problem{
		{File: "/etc/lbdns.toml", Line: 7, Key: "pools.main.min_healthy", Value: "-1", Message: "must be ≥ 0", Text: "/etc/lbdns.toml:7: pools.main.min_healthy = -1: must be ≥ 0"},
		{File: "/etc/lbdns.toml", Line: 9, Key: "vips.x.address", Value: "nope", Message: "not an IP address", Text: "/etc/lbdns.toml:9: vips.x.address = \"nope\": not an IP address"},
	}
	for _, tc := range []struct {
		name         string
		fb           *fakeBackend
		method, path string
		body         string
		code         int
		msg          string
		problems     []Problem
	}{
		{"unknown resolver", &fakeBackend{overrideErr: Errorf(NotFound, "no resolver named bind-9")},
			http.MethodPost, "/overrides", `{"action":"drain","resolver":"bind-9"}`, 404, "no resolver named bind-9", nil},
		{"ambiguous", &fakeBackend{overrideErr: Errorf(Conflict, "bind-1 is in pools a and b: give --pool")},
			http.MethodPost, "/overrides", `{"action":"drain","resolver":"bind-1"}`, 409, "give --pool", nil},
		{"plain error is 500", &fakeBackend{overrideErr: errors.New("state file: disk full")},
			http.MethodPost, "/overrides", `{"action":"drain","resolver":"bind-1"}`, 500, "state file: disk full", nil},
		{"reload rejected", &fakeBackend{reloadErr: &Error{Kind: InvalidConfig, Code: 422, Message: "configuration rejected: 2 problems", Problems: problems}},
			http.MethodPost, "/reload", `{}`, 422, "configuration rejected", problems},
		{"not ready", &fakeBackend{statusErr: Errorf(Unavailable, "starting")},
			http.MethodGet, "/status", "", 503, "starting", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			NewServer(ServerOptions{Backend: tc.fb}).Handler().ServeHTTP(rec, httptest.NewRequest(tc.method, APIPrefix+tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.code {
				t.Fatalf("code = %d; want %d (%s)", rec.Code, tc.code, rec.Body)
			}
			er := errorReply(t, reply{code: rec.Code, header: rec.Header(), body: rec.Body.String()})
			if !strings.Contains(er.Error, tc.msg) {
				t.Errorf("error = %q; want %q in it", er.Error, tc.msg)
			}
			if !reflect.DeepEqual(er.Problems, tc.problems) {
				t.Errorf("problems = %+v; want %+v", er.Problems, tc.problems)
			}
		})
	}
}

func TestServerReloadBody(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
		want string
	}{
		{"", true, ""},
		{"{}", true, ""},
		{" {}\n", true, ""},
		{`{"force": true}`, false, `unknown field "force"`},
		{`[]`, false, "want a JSON object, not array"},
		{`{} {}`, false, "trailing data"},
		{`{`, false, "ends inside"},
	} {
		t.Run(fmt.Sprintf("%q", tc.body), func(t *testing.T) {
			fb := &fakeBackend{reloadReply: &ReloadReply{Summary: "2 pools, 6 resolvers, 2 VIPs"}}
			rec := httptest.NewRecorder()
			NewServer(ServerOptions{Backend: fb}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, APIPrefix+"/reload", strings.NewReader(tc.body)))
			_, reloads := fb.mutations()
			if tc.ok {
				var rep ReloadReply
				if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &rep) != nil || rep != *fb.reloadReply {
					t.Fatalf("code %d body %s; want 200 with the backend's reply", rec.Code, rec.Body)
				}
				if reloads != 1 {
					t.Errorf("Reload called %d times; want 1", reloads)
				}
				return
			}
			if rec.Code != 400 {
				t.Fatalf("code = %d; want 400", rec.Code)
			}
			if er := errorReply(t, reply{code: rec.Code, header: rec.Header(), body: rec.Body.String()}); !strings.Contains(er.Error, tc.want) {
				t.Errorf("error = %q; want %q in it", er.Error, tc.want)
			}
			if reloads != 0 {
				t.Errorf("Reload called for a malformed request")
			}
		})
	}
}

func TestServerMethodsAndPaths(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{http.MethodGet, "/overrides", 405, "POST"},
		{http.MethodDelete, "/overrides", 405, "POST"},
		{http.MethodPost, "/status", 405, "GET"},
		{http.MethodGet, "/reload", 405, "POST"},
		{http.MethodPut, "/events", 405, "GET"},
		{http.MethodGet, "/nope", 404, ""},
		{http.MethodGet, "/status/", 404, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			fb := &fakeBackend{}
			rec := httptest.NewRecorder()
			NewServer(ServerOptions{Backend: fb}).Handler().ServeHTTP(rec, httptest.NewRequest(tc.method, APIPrefix+tc.path, strings.NewReader("{}")))
			if rec.Code != tc.code {
				t.Fatalf("code = %d; want %d", rec.Code, tc.code)
			}
			if got := rec.Header().Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q; want %q", got, tc.allow)
			}
			errorReply(t, reply{code: rec.Code, header: rec.Header(), body: rec.Body.String()})
			if o, r := fb.mutations(); o+r != 0 || fb.statusCalls != 0 {
				t.Errorf("backend called for a refused request")
			}
		})
	}
	rec := httptest.NewRecorder()
	NewServer(ServerOptions{Backend: &fakeBackend{}}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != 404 {
		t.Errorf("GET / = %d; want 404", rec.Code)
	}
}

func TestServerRefusesOtherUsers(t *testing.T) {
	fb := &fakeBackend{}
	h := NewServer(ServerOptions{Backend: fb}).Handler()
	euid := uint32(os.Geteuid())
	for _, tc := range []struct {
		name string
		p    peer
		code int
	}{
		{"another user", peer{Known: true, UID: euid + 1000, PID: 1}, 403},
		{"root", peer{Known: true, UID: 0, PID: 1}, 200},
		{"the daemon's user", peer{Known: true, UID: euid, PID: 1}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := fb.mutations()
			req := httptest.NewRequest(http.MethodPost, APIPrefix+"/overrides", strings.NewReader(`{"action":"drain","resolver":"bind-1"}`))
			req = req.WithContext(context.WithValue(req.Context(), peerKey{}, tc.p))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("code = %d; want %d (%s)", rec.Code, tc.code, rec.Body)
			}
			after, _ := fb.mutations()
			if called := after > before; called != (tc.code == 200) {
				t.Errorf("SetOverride called = %v; want %v", called, tc.code == 200)
			}
			if tc.code == 200 {
				if by := fb.lastOverride(t).by; by != fmt.Sprintf("uid %d", tc.p.UID) {
					t.Errorf("by = %q", by)
				}
			}
		})
	}
}

func TestServerTimeout(t *testing.T) {
	fb := &fakeBackend{block: true}
	srv := startServer(t, ServerOptions{Backend: fb, Timeout: 200 * time.Millisecond})
	start := time.Now()
	r := do(t, unixHTTP(srv.path), http.MethodGet, base+"/status", nil)
	if r.code != http.StatusServiceUnavailable {
		t.Fatalf("code = %d; want 503 (%s)", r.code, r.body)
	}
	contains(t, "error", errorReply(t, r).Error, "timed out after 200ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestServerEventsQuery(t *testing.T) {
	ev := NewEventLog(10, nil)
	for i := range 4 {
		ev.Append(Event{Kind: EventState, Subject: fmt.Sprintf("bind-%d", i+1)})
	}
	h := NewServer(ServerOptions{Backend: &fakeBackend{}, Events: ev}).Handler()
	for _, tc := range []struct {
		query string
		code  int
		seqs  []uint64
		want  string
	}{
		{"", 200, []uint64{1, 2, 3, 4}, ""},
		{"?after=0", 200, []uint64{1, 2, 3, 4}, ""},
		{"?after=2", 200, []uint64{3, 4}, ""},
		{"?after=4", 200, []uint64{}, ""},
		{"?after=2&follow=0", 200, []uint64{3, 4}, ""},
		{"?after=abc", 400, nil, `after: want a sequence number (0, 1, 2, ...), not "abc"`},
		{"?after=-1", 400, nil, `not "-1"`},
		{"?follow=yes", 400, nil, `follow: want 1 or 0, not "yes"`},
		{"?since=3", 400, nil, `unknown query parameter "since"`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, APIPrefix+"/events"+tc.query, nil))
			if rec.Code != tc.code {
				t.Fatalf("code = %d; want %d (%s)", rec.Code, tc.code, rec.Body)
			}
			if tc.code != 200 {
				contains(t, "error", errorReply(t, reply{code: rec.Code, header: rec.Header(), body: rec.Body.String()}).Error, tc.want)
				return
			}
			var rep EventsReply
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if !equalSeqs(seqs(rep.Events), tc.seqs) || rep.Events == nil || rep.Next != 4 {
				t.Errorf("events %v next %d; want %v next 4", seqs(rep.Events), rep.Next, tc.seqs)
			}
		})
	}
}

func TestServerFollowStream(t *testing.T) {
	ev := NewEventLog(10, nil)
	ev.Append(Event{Kind: EventDaemon, Message: "started"})
	ev.Append(Event{Kind: EventState, Subject: "bind-1/recursive", Message: "up"})
	var logs testlog.Buffer
	srv := startServer(t, ServerOptions{Backend: &fakeBackend{}, Events: ev, Timeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	req, err := http.NewRequest(http.MethodGet, base+"/events?after=1&follow=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := unixHTTP(srv.path)
	c.Timeout = 0 // the stream outlives any request timeout
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type = %q", ct)
	}
	dec := json.NewDecoder(resp.Body)
	next := func() Event {
		t.Helper()
		var e Event
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("read event: %v", err)
		}
		return e
	}
	if e := next(); e.Seq != 2 || e.Subject != "bind-1/recursive" {
		t.Fatalf("first event = %+v; want seq 2", e)
	}
	// Longer than the server's request timeout and the connection
	// deadlines (a second later): the stream has none.
	time.Sleep(300*time.Millisecond + time.Second + 300*time.Millisecond)
	ev.Append(Event{Kind: EventOverride, Subject: "bind-1", Message: "drained"})
	if e := next(); e.Seq != 3 || e.Message != "drained" {
		t.Fatalf("second event = %+v; want seq 3", e)
	}
	if err := srv.stop(); err != nil {
		t.Errorf("Serve = %v; want nil after a stop", err)
	}
	if logs.Count(shutdownForced) != 0 {
		t.Errorf("the stream did not end by itself when the server stopped; it was cut after %v", shutdownGrace)
	}
	var e Event
	if err := dec.Decode(&e); err == nil {
		t.Errorf("stream went on after the server stopped: %+v", e)
	}
}

// TestServerFollowMissed: a follower that asks for events the ring no
// longer keeps is told how many it missed, in a line of kind "missed"
// before the kept ones; GET /v1/events says it in its missed field.
func TestServerFollowMissed(t *testing.T) {
	ev := NewEventLog(3, nil)
	for i := range 8 {
		ev.Append(Event{Kind: EventPool, Subject: fmt.Sprint("p", i)})
	}
	srv := startServer(t, ServerOptions{Backend: &fakeBackend{}, Events: ev})
	c := unixHTTP(srv.path)

	resp, err := c.Get(base + "/events?after=2")
	if err != nil {
		t.Fatal(err)
	}
	var rep EventsReply
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || rep.Missed != 3 || len(rep.Events) != 3 || rep.Events[0].Seq != 6 {
		t.Fatalf("GET after=2: %+v %v; want events 6-8 and 3 missed", rep, err)
	}

	c.Timeout = 0
	resp, err = c.Get(base + "/events?after=2&follow=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var first, kept Event
	if err := dec.Decode(&first); err != nil || first.Kind != EventMissed || first.Seq != 0 || !strings.Contains(first.Message, "3 events were dropped") {
		t.Fatalf("first line = %+v %v; want the missed line", first, err)
	}
	if err := dec.Decode(&kept); err != nil || kept.Seq != 6 {
		t.Fatalf("second line = %+v %v; want seq 6", kept, err)
	}
	if err := srv.stop(); err != nil {
		t.Errorf("Serve = %v", err)
	}
}

// TestServerClientDeadline: a request whose client's deadline
// (DeadlineHeader) passed before the server took it is refused as
// unavailable and never reaches the backend (a daemon stopped while
// lbctl gave up applies nothing later); one within its deadline does;
// a deadline that does not parse is a malformed request. The client
// sends its context's deadline.
func TestServerClientDeadline(t *testing.T) {
	fb := &fakeBackend{overrideReply: &OverrideReply{Message: "ok", Changed: true}}
	srv := startServer(t, ServerOptions{Backend: fb})
	body := `{"action": "drain", "resolver": "bind-1", "reason": "x"}`
	post := func(deadline string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, base+"/overrides", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(DeadlineHeader, deadline)
		resp, err := unixHTTP(srv.path).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post(time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a passed deadline: %d, want 503", resp.StatusCode)
	}
	if resp := post("soon"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a deadline that does not parse: %d, want 400", resp.StatusCode)
	}
	fb.mu.Lock()
	n := len(fb.overrides)
	fb.mu.Unlock()
	if n != 0 {
		t.Fatalf("the backend took %d refused requests", n)
	}
	if resp := post(time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)); resp.StatusCode != http.StatusOK {
		t.Errorf("a deadline a minute away: %d, want 200", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := NewClient(srv.path).SetOverride(ctx, OverrideRequest{Action: ActionDrain, Resolver: "bind-1", Reason: "x"}); err != nil {
		t.Fatalf("the client within its deadline: %v", err)
	}
	fb.mu.Lock()
	n = len(fb.overrides)
	fb.mu.Unlock()
	if n != 2 {
		t.Errorf("the backend took %d requests, want the 2 within their deadline", n)
	}
}
