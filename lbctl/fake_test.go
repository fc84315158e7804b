package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"lbdns/control"
)

// reply is a canned answer of the fake daemon.
type reply struct {
	code int // 0 means 200
	body any // encoded as JSON; a string is written as is
}

// request is what the fake daemon received.
type request struct {
	route string // "METHOD /path"
	query string
	body  string
}

// fakeDaemon is a control-socket server with canned replies, keyed by
// "METHOD /v1/path". GET /v1/events?follow=1 streams what the test sends
// on stream.
type fakeDaemon struct {
	socket  string
	replies map[string]reply
	// stream carries the events of a follow request; followed receives
	// the follow request's after= value when it starts.
	stream   chan control.Event
	followed chan uint64

	mu       sync.Mutex
	requests []request
}

// startFake serves replies on a Unix socket in a temporary directory
// until the test ends.
func startFake(t *testing.T, replies map[string]reply) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{
		socket:   filepath.Join(t.TempDir(), "lbdns.sock"),
		replies:  replies,
		stream:   make(chan control.Event),
		followed: make(chan uint64, 1),
	}
	ln, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return f
}

// serve records the request and writes its canned reply.
func (f *fakeDaemon) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	route := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.requests = append(f.requests, request{route: route, query: r.URL.RawQuery, body: string(body)})
	f.mu.Unlock()
	if route == "GET /v1/events" && r.URL.Query().Get("follow") == "1" {
		f.follow(w, r)
		return
	}
	rep, ok := f.replies[route]
	if !ok {
		rep = reply{code: http.StatusNotFound, body: control.ErrorReply{Error: "no route " + route}}
	}
	if hang, ok := rep.body.(chan struct{}); ok {
		select { // a daemon that does not answer
		case <-hang:
		case <-r.Context().Done():
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.code != 0 {
		w.WriteHeader(rep.code)
	}
	if s, ok := rep.body.(string); ok {
		io.WriteString(w, s)
		return
	}
	json.NewEncoder(w).Encode(rep.body)
}

// follow streams the events sent on f.stream, one JSON object a line,
// until the client goes away.
func (f *fakeDaemon) follow(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	f.followed <- after
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-f.stream:
			json.NewEncoder(w).Encode(ev)
			w.(http.Flusher).Flush()
		}
	}
}

// received returns the requests received so far.
func (f *fakeDaemon) received() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

// result is the outcome of one lbctl run.
type result struct {
	code           int
	stdout, stderr string
}

// lbctl runs the CLI with args and no environment.
func lbctl(t *testing.T, args ...string) result {
	t.Helper()
	return lbctlEnv(t, t.Context(), noEnv, args...)
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }

// lbctlEnv runs the CLI with ctx, getenv and args.
func lbctlEnv(t *testing.T, ctx context.Context, getenv func(string) string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb, getenv)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// syncBuffer is a bytes.Buffer safe for one writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
