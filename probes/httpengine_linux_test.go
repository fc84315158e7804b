package probes

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// connServer serves each connection with serve, on 127.0.0.1.
func connServer(t *testing.T, serve func(net.Conn)) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return &httptest.Server{URL: "http://" + l.Addr().String()}
}

// readRequest reads a request's head from c.
func readRequest(c net.Conn) {
	buf := make([]byte, 4096)
	got := ""
	for !strings.Contains(got, "\r\n\r\n") {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		got += string(buf[:n])
	}
}

// TestHTTPStartCheck: a plain-HTTP check without follow_redirects starts
// in the engine (StartCheck) and says what the net/http path says; https
// and follow_redirects keep the net/http path only.
func TestHTTPStartCheck(t *testing.T) {
	slowBody := make(chan struct{})
	t.Cleanup(func() { close(slowBody) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down":
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		case "/chunked":
			for _, s := range []string{"all ", "is ", "healthy"} {
				io.WriteString(w, s)
				w.(http.Flusher).Flush()
			}
		case "/slow-body":
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "half")
			w.(http.Flusher).Flush()
			select {
			case <-slowBody:
			case <-r.Context().Done():
			}
		default:
			io.WriteString(w, "service healthy\n")
		}
	}))
	t.Cleanup(srv.Close)
	// Answers and closes at once: data and the end in one edge.
	oneShot := connServer(t, func(c net.Conn) {
		readRequest(c)
		io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nhealthy")
	})
	hangUp := connServer(t, func(c net.Conn) { readRequest(c) })
	b := NewBuilder(Deps{})
	for _, tt := range []struct {
		name   string
		srv    *httptest.Server
		mod    func(h *configs.HTTPCheck)
		ok     bool
		detail string
	}{
		{"200", srv, nil, true, "status 200"},
		{"503", srv, func(h *configs.HTTPCheck) { h.Path = "/down" }, false, "status 503 not accepted (want 200-299)"},
		{"chunked body", srv, func(h *configs.HTTPCheck) { h.Path = "/chunked"; h.BodyRegexp = "^all is healthy$" }, true, "status 200"},
		{"wrong body", srv, func(h *configs.HTTPCheck) { h.BodyRegexp = "^ready$" }, false, "body does not match /^ready$/"},
		{"slow body", srv, func(h *configs.HTTPCheck) { h.Path = "/slow-body" }, false, "read body: timeout after 300ms"},
		{"answer and close", oneShot, func(h *configs.HTTPCheck) { h.BodyRegexp = "healthy$" }, true, "status 200"},
		{"closed before reply", hangUp, nil, false, "connection closed before reply"},
	} {
		c, err := b.Build(httpCheck("http", tt.mod), addrPort(t, tt.srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		r := startCheck(t, c, 300*time.Millisecond)
		if r.OK != tt.ok || !sameDetail(r.Detail, tt.detail) || r.RTT <= 0 {
			t.Errorf("%s: StartCheck = ok %v %q rtt %v, want ok %v %q", tt.name, r.OK, r.Detail, r.RTT, tt.ok, tt.detail)
		}
	}
	refused := closedPort(t, "tcp")
	c, err := b.Build(httpCheck("http", nil), refused)
	if err != nil {
		t.Fatal(err)
	}
	if r := startCheck(t, c, time.Second); r.OK || r.Detail != "connection refused" {
		t.Errorf("refused: StartCheck = ok %v %q, want connection refused", r.OK, r.Detail)
	}
	for _, chk := range []*configs.Check{
		httpCheck("https", nil),
		httpCheck("http", func(h *configs.HTTPCheck) { h.FollowRedirects = true }),
	} {
		c, err := b.Build(chk, addrPort(t, srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.(asyncChecker); ok {
			t.Errorf("%s follow %v: checker has StartCheck, want only Check", chk.Kind, chk.HTTP != nil && chk.HTTP.FollowRedirects)
		}
	}
	// Many at once, through one engine.
	c, err = b.Build(httpCheck("http", func(h *configs.HTTPCheck) { h.BodyRegexp = "healthy" }), addrPort(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	startMany(t, c, 200)
}

// BenchmarkHTTPStartCheck measures one http check through the engine
// (GET /, status 200) against a loopback server.
func BenchmarkHTTPStartCheck(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	b.Cleanup(srv.Close)
	c, err := NewBuilder(Deps{}).Build(httpCheck("http", nil), addrPort(b, srv.URL))
	if err != nil {
		b.Fatal(err)
	}
	a := c.(asyncChecker)
	ch := make(chan Result, 1)
	done := func(r check.Result) { ch <- r }
	b.ReportAllocs()
	for b.Loop() {
		a.StartCheck(time.Now().Add(time.Second), done)
		if r := <-ch; !r.OK {
			b.Fatalf("Check = %q", r.Detail)
		}
	}
}

// TestHTTPJudgesLikeHTTPS: the same response bytes, served over plain TCP
// to the engine's http check and over TLS to an https check, get the same
// verdict and detail: both are read by net/http's parser.
func TestHTTPJudgesLikeHTTPS(t *testing.T) {
	now := time.Now()
	ca := newTestCA(t, "lbdns-judge")
	leaf := ca.leaf(t, now.Add(-time.Hour), now.Add(90*24*time.Hour))
	for _, tt := range []struct {
		name, raw string
		ok        bool
	}{
		{"plain", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nokk", false},
		{"folded header", "HTTP/1.1 200 OK\r\nX-Long: one\r\n two\r\nContent-Length: 2\r\n\r\nok", true},
		{"chunked with a trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n", true},
		{"header without colon", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", false},
	} {
		serve := func(c net.Conn) {
			readRequest(c)
			io.WriteString(c, tt.raw)
		}
		plain := connServer(t, serve)
		l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf.TLS}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					serve(c)
				}()
			}
		}()
		b := NewBuilder(Deps{})
		hc, err := b.Build(httpCheck("http", func(h *configs.HTTPCheck) { h.BodyRegexp = "^ok$" }), addrPort(t, plain.URL))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := b.Build(httpCheck("https", func(h *configs.HTTPCheck) { h.BodyRegexp = "^ok$"; h.CAFile = ca.File }),
			netip.MustParseAddrPort(l.Addr().String()))
		if err != nil {
			t.Fatal(err)
		}
		hr := startCheck(t, hc, time.Second)
		sr := sc.Check(t.Context())
		if hr.OK != tt.ok || sr.OK != tt.ok || hr.Detail != sr.Detail {
			t.Errorf("%s: http ok %v %q, https ok %v %q; want both ok %v, one detail", tt.name, hr.OK, hr.Detail, sr.OK, sr.Detail, tt.ok)
		}
	}
}
