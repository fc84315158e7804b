package probes

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/testkit/netns"
	"lbdns/testkit/nginx"
)

// nginxCerts are the certificates an nginx of a test presents and trusts.
type nginxCerts struct {
	ca            *testCA
	good, expired testLeaf
	client        testLeaf
}

func newNginxCerts(t testing.TB) nginxCerts {
	now := time.Now()
	day := 24 * time.Hour
	ca := newTestCA(t, "nginx-test")
	return nginxCerts{
		ca:      ca,
		good:    ca.leaf(t, now.Add(-day), now.Add(90*day+time.Hour), "www.example.test"),
		expired: ca.leaf(t, now.Add(-30*day), now.Add(-3*day-time.Hour), "www.example.test"),
		client:  ca.leaf(t, now.Add(-day), now.Add(day), "client.example.test"),
	}
}

// startNginx runs nginx (testkit/nginx) with certs until the test ends,
// listening on every address of addrs at ports (HTTP, HTTPS, expired
// HTTPS), run with command (exec.Command, or a netns Host's Command).
func startNginx(t testing.TB, certs nginxCerts, addrs []netip.Addr, ports [3]uint16, command func(name string, args ...string) *exec.Cmd) *nginx.Server {
	t.Helper()
	return nginx.Start(t, nginx.Options{
		Addrs: addrs, HTTP: ports[0], HTTPS: ports[1], Expired: ports[2], Command: command,
		TLS: &nginx.TLS{CAFile: certs.ca.File, CertFile: certs.good.CertFile, KeyFile: certs.good.KeyFile,
			ExpiredCertFile: certs.expired.CertFile, ExpiredKeyFile: certs.expired.KeyFile},
	})
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort(t testing.TB) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return netip.MustParseAddrPort(l.Addr().String()).Port()
}

// nginxCase is one check against nginx and the verdict nginx's answers
// must give.
type nginxCase struct {
	name   string
	kind   string
	target func(n *nginx.Server) netip.AddrPort
	mod    func(h *configs.HTTPCheck)
	ok     bool
	detail string
}

func nginxCases(certs nginxCerts) []nginxCase {
	plain := func(n *nginx.Server) netip.AddrPort { return n.HTTP }
	tls := func(n *nginx.Server) netip.AddrPort { return n.HTTPS }
	expired := func(n *nginx.Server) netip.AddrPort { return n.Expired }
	withCA := func(mod func(h *configs.HTTPCheck)) func(h *configs.HTTPCheck) {
		return func(h *configs.HTTPCheck) {
			h.CAFile, h.ServerName = certs.ca.File, "www.example.test"
			if mod != nil {
				mod(h)
			}
		}
	}
	return []nginxCase{
		{"200", "http", plain, func(h *configs.HTTPCheck) { h.BodyRegexp = "^nginx ok" }, true, "status 200"},
		{"503", "http", plain, func(h *configs.HTTPCheck) { h.Path = "/down" }, false, "status 503 not accepted (want 200-299)"},
		{"404", "http", plain, func(h *configs.HTTPCheck) { h.Path = "/nothing" }, false, "status 404 not accepted (want 200-299)"},
		{"wrong body", "http", plain, func(h *configs.HTTPCheck) { h.BodyRegexp = "^apache" }, false, "body does not match /^apache/"},
		{"redirect not followed", "http", plain, func(h *configs.HTTPCheck) { h.Path = "/moved" }, false, "status 301 not accepted (want 200-299)"},
		{"redirect followed", "http", plain, func(h *configs.HTTPCheck) { h.Path = "/moved"; h.FollowRedirects = true }, true, "status 200"},
		{"https with the CA", "https", tls, withCA(func(h *configs.HTTPCheck) { h.BodyRegexp = "tls ok" }), true, "status 200"},
		{"https unknown CA", "https", tls, func(h *configs.HTTPCheck) { h.ServerName = "www.example.test" }, false, "x509: certificate signed by unknown authority"},
		{"https wrong SNI", "https", tls, withCA(func(h *configs.HTTPCheck) { h.ServerName = "other.example.test" }), false,
			"certificate is valid for www.example.test, not other.example.test"},
		{"https expired", "https", expired, withCA(nil), false, "certificate expired 3 days ago"},
		{"https client certificate", "https", tls, withCA(func(h *configs.HTTPCheck) {
			h.Path = "/client"
			h.CertFile, h.KeyFile = certs.client.CertFile, certs.client.KeyFile
		}), true, "status 200"},
		{"https no client certificate", "https", tls, withCA(func(h *configs.HTTPCheck) { h.Path = "/client" }), false,
			"status 403 not accepted (want 200-299)"},
	}
}

// TestHTTPNginx: the checkers agree with Debian's nginx on loopback.
func TestHTTPNginx(t *testing.T) {
	certs := newNginxCerts(t)
	n := startNginx(t, certs, []netip.Addr{netip.MustParseAddr("127.0.0.1")},
		[3]uint16{freePort(t), freePort(t), freePort(t)}, exec.Command)
	for _, tt := range nginxCases(certs) {
		t.Run(tt.name, func(t *testing.T) {
			r := runCheck(t, httpCheck(tt.kind, tt.mod), tt.target(n), 5*time.Second)
			if r.OK != tt.ok || r.Detail != tt.detail {
				t.Errorf("Check = ok %v %q, want ok %v %q", r.OK, r.Detail, tt.ok, tt.detail)
			}
			if tt.kind == "https" && (certDaysOf(r) == nil || (*certDaysOf(r) != 90 && *certDaysOf(r) != -3)) {
				t.Errorf("CertDaysLeft = %v, want 90 (or -3 for the expired one)", certDaysOf(r))
			}
		})
	}
}

// TestHTTPNginxNetns runs nginx on a host in a network namespace, checks
// it over IPv4 and IPv6 with a proxy set in the environment (a real
// remote address, which Go would proxy), then breaks the path for real:
// traffic to its port dropped → fail by timeout; link down → fail; each
// time recovery → pass.
func TestHTTPNginxNetns(t *testing.T) {
	nginx.Binary(t)
	h := netns.New(t, "httpck-nginx")
	certs := newNginxCerts(t)

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "proxied", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"} {
		t.Setenv(v, proxy.URL)
	}

	startNginx(t, certs, []netip.Addr{h.AddrV4(), h.AddrV6()}, [3]uint16{8080, 8443, 9443}, h.Command)

	okCases := []struct {
		kind string
		port uint16
		mod  func(h *configs.HTTPCheck)
	}{
		{"http", 8080, func(h *configs.HTTPCheck) { h.BodyRegexp = "^nginx ok" }},
		{"https", 8443, func(hc *configs.HTTPCheck) { hc.CAFile, hc.ServerName = certs.ca.File, "www.example.test" }},
	}
	check := func(t *testing.T, a netip.Addr, timeout time.Duration) []Result {
		t.Helper()
		var out []Result
		for _, c := range okCases {
			out = append(out, runCheck(t, httpCheck(c.kind, c.mod), netip.AddrPortFrom(a, c.port), timeout))
		}
		return out
	}
	expectOK := func(t *testing.T, when string) {
		t.Helper()
		for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
			for i, r := range check(t, a, 5*time.Second) {
				if !r.OK || r.Detail != "status 200" {
					t.Errorf("%s: %s %v: Check = ok %v %q, want status 200 (not through the proxy)", when, okCases[i].kind, a, r.OK, r.Detail)
				}
			}
		}
	}
	expectOK(t, "up")

	// The expired certificate fails the same way inside the namespace.
	r := runCheck(t, httpCheck("https", func(hc *configs.HTTPCheck) { hc.CAFile, hc.ServerName = certs.ca.File, "www.example.test" }),
		netip.AddrPortFrom(h.AddrV4(), 9443), 5*time.Second)
	if r.OK || r.Detail != "certificate expired 3 days ago" {
		t.Errorf("expired: Check = ok %v %q", r.OK, r.Detail)
	}

	h.Drop("tcp", 8080)
	h.Drop("tcp", 8443)
	for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
		for i, r := range check(t, a, 500*time.Millisecond) {
			if r.OK || !sameDetail(r.Detail, "timeout after 500ms") {
				t.Errorf("dropped: %s %v: Check = ok %v %q, want timeout after 500ms", okCases[i].kind, a, r.OK, r.Detail)
			}
		}
	}
	h.Undrop("tcp", 8080)
	h.Undrop("tcp", 8443)
	expectOK(t, "after undrop")

	h.LinkDown()
	for _, a := range []netip.Addr{h.AddrV4(), h.AddrV6()} {
		for i, r := range check(t, a, 500*time.Millisecond) {
			// With the host's end of the link down, packets go nowhere
			// (the harness's blackhole routes keep them off the default
			// route): the check fails by its deadline, or at once when
			// the kernel gives up on the neighbour.
			if r.OK {
				t.Errorf("link down: %s %v: Check = ok %q, want a failure", okCases[i].kind, a, r.Detail)
			}
			t.Logf("link down: %s %v: %s", okCases[i].kind, a, r.Detail)
		}
	}
	h.LinkUp()
	expectOK(t, "after link up")
}
