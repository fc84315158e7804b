package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// cutServer is a control socket whose daemon reads each request whole,
// then closes the connection without a reply: the request may have been
// applied.
type cutServer struct {
	socket string
	mu     sync.Mutex
	got    []string // "METHOD PATH body" of each request read
}

func startCutServer(t *testing.T) *cutServer {
	t.Helper()
	s := &cutServer{socket: filepath.Join(t.TempDir(), "cut.sock")}
	ln, err := net.Listen("unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil {
				body, _ := io.ReadAll(req.Body)
				s.mu.Lock()
				s.got = append(s.got, req.Method+" "+req.URL.Path+" "+string(body))
				s.mu.Unlock()
			}
			c.Close()
		}
	})
	return s
}

func (s *cutServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// TestCutAfterRequestIsUnknown: a change whose connection is cut after
// the daemon read it exits 4 and says its outcome is unknown and how to
// check, never "refused"; a read-only command cut the same way is a
// daemon that did not answer (3).
func TestCutAfterRequestIsUnknown(t *testing.T) {
	s := startCutServer(t)
	for _, args := range [][]string{
		{"drain", "bind-1", "--reason", "disk full"},
		{"enable", "bind-1"},
		{"reload"},
		{"gslb", "off", "--reason", "incident"},
	} {
		r := lbctl(t, append([]string{"-socket", s.socket}, args...)...)
		if r.code != exitUnknown {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, r.code, exitUnknown, r.stderr)
		}
		for _, want := range []string{"was sent to lbdnsd at " + s.socket, "whether it was applied is unknown", "lbctl status", "lbctl events"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, r.stderr)
			}
		}
		if strings.Contains(strings.ToLower(r.stderr), "refused") {
			t.Errorf("%v: stderr says refused:\n%s", args, r.stderr)
		}
	}
	got := s.requests()
	if len(got) != 4 || !strings.HasPrefix(got[0], "POST /v1/overrides ") || !strings.Contains(got[0], "disk full") {
		t.Errorf("the daemon read %q, want the 4 requests whole", got)
	}
	for _, args := range [][]string{{"status"}, {"gslb", "explain", "www.example.test"}} {
		r := lbctl(t, append([]string{"-socket", s.socket}, args...)...)
		if r.code != exitUnreachable || !strings.Contains(r.stderr, "closed the connection without a reply") {
			t.Errorf("%v: exit %d, want %d and the connection closed; stderr:\n%s", args, r.code, exitUnreachable, r.stderr)
		}
	}
}

// TestTimedOutChangeIsUnknown: a change the daemon took but did not answer
// within -timeout exits 4 too; its outcome is just as unknown.
func TestTimedOutChangeIsUnknown(t *testing.T) {
	f := startFake(t, map[string]reply{"POST /v1/overrides": {body: make(chan struct{})}})
	r := lbctl(t, "-socket", f.socket, "-timeout", "200ms", "drain", "bind-1")
	if r.code != exitUnknown || !strings.Contains(r.stderr, "no reply within 200ms") || !strings.Contains(r.stderr, "whether it was applied is unknown") {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUnknown, r.stderr)
	}
}
