package probes

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// httpCheck returns a check profile of kind "http" or "https" with the
// defaults Load gives, changed by mod.
func httpCheck(kind string, mod func(h *configs.HTTPCheck)) *configs.Check {
	h := &configs.HTTPCheck{
		Method:  configs.DefaultHTTPMethod,
		Path:    configs.DefaultHTTPPath,
		Status:  []string{configs.DefaultHTTPStatus},
		MaxBody: configs.DefaultHTTPMaxBody,
	}
	c := &configs.Check{Name: "web", Kind: kind, Timeout: configs.Duration{Duration: time.Second}}
	if kind == "https" {
		h.CertExpiryWarn.Duration = configs.DefaultCertExpiryWarn
		c.HTTPS = h
	} else {
		c.HTTP = h
	}
	if mod != nil {
		mod(h)
	}
	return c
}

// addrPort returns the address of a test server (http://127.0.0.1:PORT).
func addrPort(t testing.TB, rawURL string) netip.AddrPort {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://")
	ap, err := netip.ParseAddrPort(host)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// runCheck builds the checker of chk for target through the Builder and
// checks once within timeout.
func runCheck(t testing.TB, chk *configs.Check, target netip.AddrPort, timeout time.Duration) Result {
	t.Helper()
	c, err := NewBuilder(Deps{}).Build(chk, target)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Check(ctx)
}

// hangingHandler returns a handler that blocks until the client goes
// away or the returned release function is called.
func hangingHandler() (http.HandlerFunc, func()) {
	release := make(chan struct{})
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}, func() {
			once.Do(func() { close(release) })
		}
}

// sameDetail reports whether got is the detail want, where a "timeout
// after D" may say up to 50ms less than D: the budget runs from the
// context's creation, a moment before the check starts.
func sameDetail(got, want string) bool {
	const p = "timeout after "
	if !strings.HasPrefix(want, p) || !strings.HasPrefix(got, p) {
		return got == want
	}
	g, gerr := time.ParseDuration(strings.TrimPrefix(got, p))
	w, werr := time.ParseDuration(strings.TrimPrefix(want, p))
	return gerr == nil && werr == nil && g <= w && g >= w-50*time.Millisecond
}

// request is what a test server saw of one request.
type request struct {
	method, path, host, probe, ua, accept string
}

func TestHTTPCheck(t *testing.T) {
	slow, release := hangingHandler()
	var (
		mu   sync.Mutex
		last request
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = request{r.Method, r.URL.RequestURI(), r.Host, r.Header.Get("X-Probe"), r.Header.Get("User-Agent"), r.Header.Get("Accept-Encoding")}
		mu.Unlock()
		io.WriteString(w, "service healthy\n")
	})
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 200)+"healthy")
	})
	mux.HandleFunc("/slow", slow)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(release)
	target := addrPort(t, srv.URL)

	tests := []struct {
		name    string
		mod     func(h *configs.HTTPCheck)
		timeout time.Duration
		ok      bool
		detail  string
		saw     *request
	}{
		{name: "200", ok: true, detail: "status 200",
			saw: &request{method: "GET", path: "/", host: target.String(), ua: "lbdns-health-check"}},
		{name: "503", mod: func(h *configs.HTTPCheck) { h.Path = "/down" },
			detail: "status 503 not accepted (want 200-299)"},
		{name: "503 accepted", mod: func(h *configs.HTTPCheck) { h.Path = "/down"; h.Status = []string{"2xx", "503"} },
			ok: true, detail: "status 503"},
		{name: "body matches", mod: func(h *configs.HTTPCheck) { h.BodyRegexp = "health(y|ier)" }, ok: true, detail: "status 200"},
		{name: "wrong body", mod: func(h *configs.HTTPCheck) { h.BodyRegexp = "^ready$" },
			detail: "body does not match /^ready$/"},
		{name: "body past max_body", mod: func(h *configs.HTTPCheck) { h.Path = "/big"; h.BodyRegexp = "healthy"; h.MaxBody = 100 },
			detail: "body does not match /healthy/ in its first 100 bytes"},
		{name: "body within max_body", mod: func(h *configs.HTTPCheck) { h.Path = "/big"; h.BodyRegexp = "healthy"; h.MaxBody = 1000 },
			ok: true, detail: "status 200"},
		{name: "slow past the timeout", mod: func(h *configs.HTTPCheck) { h.Path = "/slow" }, timeout: 300 * time.Millisecond,
			detail: "timeout after 300ms"},
		{name: "redirect not followed", mod: func(h *configs.HTTPCheck) { h.Path = "/moved" },
			detail: "status 301 not accepted (want 200-299)"},
		{name: "redirect accepted as is", mod: func(h *configs.HTTPCheck) { h.Path = "/moved"; h.Status = []string{"301"} },
			ok: true, detail: "status 301"},
		{name: "redirect followed", mod: func(h *configs.HTTPCheck) { h.Path = "/moved"; h.FollowRedirects = true },
			ok: true, detail: "status 200"},
		{name: "redirect loop", mod: func(h *configs.HTTPCheck) { h.Path = "/loop"; h.FollowRedirects = true },
			detail: "stopped after 10 redirects"},
		{name: "method host headers query", mod: func(h *configs.HTTPCheck) {
			h.Method = "HEAD"
			h.Path = "/status?full=1"
			h.Host = "www.example.test"
			h.Headers = map[string]string{"X-Probe": "lbdns", "User-Agent": "custom/1"}
		}, ok: true, detail: "status 200",
			saw: &request{method: "HEAD", path: "/status?full=1", host: "www.example.test", probe: "lbdns", ua: "custom/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			mu.Lock()
			last = request{}
			mu.Unlock()
			r := runCheck(t, httpCheck("http", tt.mod), target, timeout)
			if r.OK != tt.ok || !sameDetail(r.Detail, tt.detail) {
				t.Errorf("Check = ok %v %q, want ok %v %q", r.OK, r.Detail, tt.ok, tt.detail)
			}
			if r.RTT <= 0 || r.RTT > timeout+time.Second {
				t.Errorf("RTT = %v", r.RTT)
			}
			if certDaysOf(r) != nil {
				t.Errorf("CertDaysLeft = %d for plain http", *certDaysOf(r))
			}
			if tt.saw != nil {
				mu.Lock()
				got := last
				mu.Unlock()
				if got != *tt.saw {
					t.Errorf("server saw %+v, want %+v", got, *tt.saw)
				}
			}
		})
	}
}

func TestHTTPCheckConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := netip.MustParseAddrPort(l.Addr().String())
	l.Close()
	for _, kind := range []string{"http", "https"} {
		r := runCheck(t, httpCheck(kind, nil), target, 2*time.Second)
		if r.OK || r.Detail != "connection refused" {
			t.Errorf("%s: Check = ok %v %q, want connection refused", kind, r.OK, r.Detail)
		}
	}
}

// TestHTTPCheckNoProxy: a proxy named in the environment is never used.
// Go never proxies loopback targets anyway, so the test also asserts the
// transport has no Proxy function at all.
func TestHTTPCheckNoProxy(t *testing.T) {
	var proxied sync.WaitGroup
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		http.Error(w, "proxied", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "direct")
	}))
	t.Cleanup(srv.Close)
	for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"} {
		t.Setenv(v, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	chk := httpCheck("http", func(h *configs.HTTPCheck) { h.BodyRegexp = "^direct$" })
	r := runCheck(t, chk, addrPort(t, srv.URL), 5*time.Second)
	if !r.OK {
		t.Errorf("Check = %q, want OK straight from the server", r.Detail)
	}
	for _, kind := range []string{"http", "https"} {
		c, err := buildHTTPChecker(httpCheck(kind, nil), addrPort(t, srv.URL), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.client.Transport.(*probeTransport); !ok {
			t.Errorf("%s: transport %T, want the probeTransport (no proxy, keep-alives off)", kind, c.client.Transport)
		}
	}
}

// tlsServer starts an HTTPS server on 127.0.0.1 presenting cert; with
// clientCAs set it requires a client certificate they signed.
func tlsServer(t testing.TB, cert tls.Certificate, clientCAs *testCA) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure and healthy\n")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCAs != nil {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = clientCAs.pool()
	}
	// Handshake failures are the point of some tests: keep them out of
	// the test log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPSCheck(t *testing.T) {
	now := time.Now()
	day := 24 * time.Hour
	ca := newTestCA(t, "lbdns-test")
	other := newTestCA(t, "someone-else")
	const name = "www.example.test"
	good := ca.leaf(t, now.Add(-day), now.Add(90*day+time.Hour), name)
	expired := ca.leaf(t, now.Add(-30*day), now.Add(-3*day-time.Hour), name)
	soon := ca.leaf(t, now.Add(-day), now.Add(5*day+time.Hour), name)
	client := ca.leaf(t, now.Add(-day), now.Add(day), "client.example.test")
	strangerClient := other.leaf(t, now.Add(-day), now.Add(day), "client.example.test")

	goodSrv := tlsServer(t, good.TLS, nil)
	expiredSrv := tlsServer(t, expired.TLS, nil)
	soonSrv := tlsServer(t, soon.TLS, nil)
	mtlsSrv := tlsServer(t, good.TLS, ca)
	slow, release := hangingHandler()
	slowSrv := httptest.NewUnstartedServer(slow)
	slowSrv.TLS = &tls.Config{Certificates: []tls.Certificate{good.TLS}}
	slowSrv.StartTLS()
	t.Cleanup(slowSrv.Close)
	t.Cleanup(release)
	// A listener that accepts and never speaks: the TLS handshake hangs.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mute.Close() })

	withCA := func(mod func(h *configs.HTTPCheck)) func(h *configs.HTTPCheck) {
		return func(h *configs.HTTPCheck) {
			h.CAFile = ca.File
			h.ServerName = name
			if mod != nil {
				mod(h)
			}
		}
	}
	ip := func(s *httptest.Server) netip.AddrPort { return addrPort(t, s.URL) }
	tests := []struct {
		name    string
		target  netip.AddrPort
		mod     func(h *configs.HTTPCheck)
		timeout time.Duration
		ok      bool
		detail  string
		days    int // -1000: no days expected
	}{
		{"self-signed CA given", ip(goodSrv), withCA(nil), 0, true, "status 200", 90},
		{"server name from host", ip(goodSrv), func(h *configs.HTTPCheck) { h.CAFile = ca.File; h.Host = name + ":8443" }, 0, true, "status 200", 90},
		{"address verified against IP SANs", ip(goodSrv), func(h *configs.HTTPCheck) { h.CAFile = ca.File }, 0, true, "status 200", 90},
		{"unknown CA", ip(goodSrv), func(h *configs.HTTPCheck) { h.ServerName = name }, 0, false,
			"x509: certificate signed by unknown authority", 90},
		{"another CA given", ip(goodSrv), func(h *configs.HTTPCheck) { h.CAFile = other.File; h.ServerName = name }, 0, false,
			"x509: certificate signed by unknown authority", 90},
		{"wrong SNI", ip(goodSrv), withCA(func(h *configs.HTTPCheck) { h.ServerName = "other.example.test" }), 0, false,
			"certificate is valid for www.example.test, not other.example.test", 90},
		{"expired certificate", ip(expiredSrv), withCA(nil), 0, false, "certificate expired 3 days ago", -3},
		{"expired but insecure", ip(expiredSrv), func(h *configs.HTTPCheck) { h.InsecureSkipVerify = true }, 0, true,
			"status 200; certificate expired 3 days ago (not verified: insecure_skip_verify)", -3},
		{"unknown CA but insecure", ip(goodSrv), func(h *configs.HTTPCheck) { h.InsecureSkipVerify = true }, 0, true, "status 200", 90},
		{"expires soon: warning", ip(soonSrv), withCA(nil), 0, true, "status 200; certificate expires in 5 days (warning at 14)", 5},
		{"expires soon: below the threshold", ip(soonSrv), withCA(func(h *configs.HTTPCheck) { h.CertExpiryWarn.Duration = 4 * day }), 0, true, "status 200", 5},
		{"client certificate", ip(mtlsSrv), withCA(func(h *configs.HTTPCheck) { h.CertFile, h.KeyFile = client.CertFile, client.KeyFile }), 0, true, "status 200", 90},
		{"slow past the timeout", ip(slowSrv), withCA(nil), 300 * time.Millisecond, false, "timeout after 300ms", 90},
		{"handshake past the timeout", netip.MustParseAddrPort(mute.Addr().String()), withCA(nil), 300 * time.Millisecond, false, "timeout after 300ms", -1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			r := runCheck(t, httpCheck("https", tt.mod), tt.target, timeout)
			if r.OK != tt.ok || !sameDetail(r.Detail, tt.detail) {
				t.Errorf("Check = ok %v %q, want ok %v %q", r.OK, r.Detail, tt.ok, tt.detail)
			}
			switch {
			case tt.days == -1000 && certDaysOf(r) != nil:
				t.Errorf("CertDaysLeft = %d, want none", *certDaysOf(r))
			case tt.days != -1000 && certDaysOf(r) == nil:
				t.Errorf("CertDaysLeft = nil, want %d", tt.days)
			case tt.days != -1000 && *certDaysOf(r) != tt.days:
				t.Errorf("CertDaysLeft = %d, want %d", *certDaysOf(r), tt.days)
			}
		})
	}

	// A server that wants a client certificate refuses the check without
	// one, or with one from a CA it does not trust, and the detail says so.
	for _, mod := range []func(h *configs.HTTPCheck){
		withCA(nil),
		withCA(func(h *configs.HTTPCheck) { h.CertFile, h.KeyFile = strangerClient.CertFile, strangerClient.KeyFile }),
	} {
		r := runCheck(t, httpCheck("https", mod), ip(mtlsSrv), 5*time.Second)
		if r.OK || !strings.Contains(r.Detail, "tls: ") {
			t.Errorf("client certificate missing or untrusted: Check = ok %v %q, want a TLS failure", r.OK, r.Detail)
		}
	}
}

// TestHTTPSCheckClock: days left and expiry are judged by the injected
// clock, the same one that verifies the chain.
func TestHTTPSCheckClock(t *testing.T) {
	now := time.Now()
	day := 24 * time.Hour
	ca := newTestCA(t, "clock")
	leaf := ca.leaf(t, now.Add(-day), now.Add(20*day), "www.example.test")
	srv := tlsServer(t, leaf.TLS, nil)
	na, nb := leaf.TLS.Leaf.NotAfter, leaf.TLS.Leaf.NotBefore
	for _, tt := range []struct {
		at     time.Time
		ok     bool
		detail string
		days   int
	}{
		{na.Add(-19*day - time.Hour), true, "status 200", 19},
		{na.Add(-9*day - time.Hour), true, "status 200; certificate expires in 9 days (warning at 14)", 9},
		{na.Add(-time.Hour), true, "status 200; certificate expires in 0 days (warning at 14)", 0},
		{na.Add(time.Hour), false, "certificate expired less than a day ago", -1},
		{na.Add(day + time.Hour), false, "certificate expired 1 day ago", -1},
		{na.Add(9*day + time.Hour), false, "certificate expired 9 days ago", -9},
		{nb.Add(-day), false, "certificate not valid before " + nb.UTC().Format(time.RFC3339), 22},
	} {
		chk := httpCheck("https", func(h *configs.HTTPCheck) { h.CAFile = ca.File; h.ServerName = "www.example.test" })
		c, err := buildHTTPChecker(chk, addrPort(t, srv.URL), func() time.Time { return tt.at })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r := c.Check(ctx)
		cancel()
		if r.OK != tt.ok || r.Detail != tt.detail || certDaysOf(r) == nil || *certDaysOf(r) != tt.days {
			days := "nil"
			if certDaysOf(r) != nil {
				days = strconv.Itoa(*certDaysOf(r))
			}
			t.Errorf("at NotAfter%+v: Check = ok %v %q days %s, want ok %v %q days %d", tt.at.Sub(na), r.OK, r.Detail, days, tt.ok, tt.detail, tt.days)
		}
	}
}

// writeTemp writes text to a new file in a directory of t and returns
// its name.
func writeTemp(t testing.TB, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestHTTPBuildErrors(t *testing.T) {
	target := netip.MustParseAddrPort("127.0.0.1:443")
	ca := newTestCA(t, "build")
	tests := []struct {
		name string
		chk  *configs.Check
		want string
	}{
		{"missing ca_file", httpCheck("https", func(h *configs.HTTPCheck) { h.CAFile = "/nonexistent/ca.pem" }), "ca_file"},
		{"ca_file without PEM", httpCheck("https", func(h *configs.HTTPCheck) { h.CAFile = writeTemp(t, "not pem") }), "no PEM certificate"},
		{"client key missing", httpCheck("https", func(h *configs.HTTPCheck) { h.CertFile = ca.File; h.KeyFile = "/nonexistent/key.pem" }), "client certificate"},
		{"bad status", httpCheck("http", func(h *configs.HTTPCheck) { h.Status = []string{"2xx", "abc"} }), `status "abc"`},
		{"bad regexp", httpCheck("http", func(h *configs.HTTPCheck) { h.BodyRegexp = "a[" }), "body_regexp"},
		{"no settings", &configs.Check{Name: "web", Kind: "https"}, "no [check.web.https] settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewBuilder(Deps{}).Build(tt.chk, target)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), `probes: check "web": `) {
				t.Errorf("Build error = %v, want one about %q", err, tt.want)
			}
		})
	}
}

// TestHTTPDefaultPorts: a target without a port gets 80 or 443.
func TestHTTPDefaultPorts(t *testing.T) {
	for kind, want := range map[string]string{"http": "http://192.0.2.1:80/", "https": "https://192.0.2.1:443/"} {
		c, err := buildHTTPChecker(httpCheck(kind, nil), netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), 0), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if c.url != want {
			t.Errorf("%s: url = %q, want %q", kind, c.url, want)
		}
	}
	c, err := buildHTTPChecker(httpCheck("http", func(h *configs.HTTPCheck) { h.Path = "/a?b=c" }), netip.MustParseAddrPort("[2001:db8::1]:8080"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if c.url != "http://[2001:db8::1]:8080/a?b=c" {
		t.Errorf("IPv6 url = %q", c.url)
	}
}

// TestHTTPSMuteServerReleased: a TLS handshake with a server that never
// answers ends with the check (the transport dials detached from the
// request): the connection is closed by the deadline, not left open.
func TestHTTPSMuteServerReleased(t *testing.T) {
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	r := runCheck(t, httpCheck("https", nil), netip.MustParseAddrPort(mute.Addr().String()), 200*time.Millisecond)
	if r.OK || !sameDetail(r.Detail, "timeout after 200ms") {
		t.Fatalf("Check = ok %v %q, want timeout after 200ms", r.OK, r.Detail)
	}
	conn, err := mute.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// The ClientHello, then the end of the connection.
	_, err = io.Copy(io.Discard, conn)
	if err != nil {
		t.Errorf("the check's connection is still open after it returned: %v", err)
	}
}

// TestHTTPCheckOneConnectionPerCheck: each check asks for the connection
// to be closed (Connection: close) and closes it itself when done, also
// when the server would keep it and streams a body without end.
func TestHTTPCheckOneConnectionPerCheck(t *testing.T) {
	closed := make(chan struct{}, 10)
	var (
		mu      sync.Mutex
		asked   []bool
		release = make(chan struct{})
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Close)
		mu.Unlock()
		if r.URL.Path != "/stream" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Del("Connection")
		for {
			if _, err := io.WriteString(w, strings.Repeat("x", 1024)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			default:
			}
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	for _, path := range []string{"/", "/stream"} {
		chk := httpCheck("http", func(h *configs.HTTPCheck) { h.Path = path; h.MaxBody = 4096 })
		start := time.Now()
		r := runCheck(t, chk, addrPort(t, srv.URL), 5*time.Second)
		if !r.OK || r.Detail != "status 200" {
			t.Errorf("%s: Check = ok %v %q, want ok status 200", path, r.OK, r.Detail)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: Check took %v: it waited for the body's end", path, d)
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the check's connection is still open after it returned", path)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || !asked[0] || !asked[1] {
		t.Errorf("Connection: close asked = %v, want [true true]", asked)
	}
}

// TestHTTPCheckHeaderLimit: a response head past 64 KiB fails the check.
func TestHTTPCheckHeaderLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("x", 70<<10))
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	r := runCheck(t, httpCheck("http", nil), addrPort(t, srv.URL), 5*time.Second)
	if r.OK || !strings.Contains(r.Detail, "exceeded 65536 bytes") {
		t.Errorf("Check = ok %v %q, want a failure: headers exceeded 65536 bytes", r.OK, r.Detail)
	}
}

// BenchmarkHTTPCheck measures one http check (GET /, status 200) against
// a loopback server, with the deadline the monitor gives it.
func BenchmarkHTTPCheck(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	b.Cleanup(srv.Close)
	c, err := NewBuilder(Deps{}).Build(httpCheck("http", nil), addrPort(b, srv.URL))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if r := c.Check(ctx); !r.OK {
			b.Fatalf("Check = %q", r.Detail)
		}
		cancel()
	}
}

// certDaysOf returns r's certificate days left fact, nil when it has none.
func certDaysOf(r Result) *int {
	f, ok := check.Lookup(r.Facts, CertDaysLeftFact)
	if !ok {
		return nil
	}
	d := int(f.Value)
	return &d
}
