// Package nginx runs Debian's nginx for tests: in the foreground, one
// process (master_process off), in a temporary directory, until the test
// ends, on loopback (exec.Command) or inside a network namespace (a
// netns Host's Command).
//
// It serves, on its HTTP port:
//
//	/        → 200 "nginx ok"
//	/down    → 503 "down for maintenance"
//	/moved   → 301 to /
//	/health  → 200 "healthy", or 503 "maintenance" while SetHealthy(false)
//
// and, when TLS is given, on its HTTPS port the test's certificate
// (/ → 200 "nginx tls ok", /client → 200 with a client certificate of the
// test's CA, 403 without) and on its expired port the expired certificate
// (/ → 200).
package nginx

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TLS are the PEM files the HTTPS servers present and trust.
type TLS struct {
	// CAFile is the CA that client certificates must chain to.
	CAFile string
	// CertFile and KeyFile are the good server certificate and its key.
	CertFile, KeyFile string
	// ExpiredCertFile and ExpiredKeyFile are an expired certificate and
	// its key.
	ExpiredCertFile, ExpiredKeyFile string
}

// Options say where nginx listens and how it is run.
type Options struct {
	// Addrs are the addresses it listens on (at least one); readiness is
	// dialed at Addrs[0] from the caller's namespace.
	Addrs []netip.Addr
	// HTTP is the plain HTTP port; HTTPS and Expired the TLS ports, used
	// only when TLS is set.
	HTTP, HTTPS, Expired uint16
	// TLS, when set, adds the HTTPS servers.
	TLS *TLS
	// Command builds the command (exec.Command, or a netns Host's
	// Command); nil is exec.Command.
	Command func(name string, args ...string) *exec.Cmd
}

// Server is a running nginx.
type Server struct {
	// HTTP, HTTPS and Expired are where it serves at Addrs[0] (HTTPS and
	// Expired are zero without TLS).
	HTTP, HTTPS, Expired netip.AddrPort
	dir                  string
}

// Binary returns the path of nginx, or skips t when it is not installed
// (fails it when LBDNS_REQUIRE_VENDORS=1 or CI=true: CI installs it with
// scripts/install-test-deps.sh).
func Binary(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("LBDNS_REQUIRE_VENDORS") == "1" || os.Getenv("CI") == "true" {
		t.Fatal("nginx not installed (scripts/install-test-deps.sh installs nginx-light)")
	}
	t.Skip("nginx not installed; skipping (scripts/install-test-deps.sh installs nginx-light)")
	return ""
}

const confTemplate = `master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path {dir}/body;
	proxy_temp_path {dir}/proxy;
	fastcgi_temp_path {dir}/fastcgi;
	uwsgi_temp_path {dir}/uwsgi;
	scgi_temp_path {dir}/scgi;
	default_type text/plain;
	server {
		{http}
		location = / { return 200 "nginx ok\n"; }
		location = /down { return 503 "down for maintenance\n"; }
		location = /moved { return 301 /; }
		location = /health {
			if (-f {dir}/maintenance) { return 503 "maintenance\n"; }
			return 200 "healthy\n";
		}
	}
{tls}}
`

const tlsTemplate = `	server {
		{https}
		server_name www.example.test;
		ssl_certificate {cert};
		ssl_certificate_key {key};
		ssl_client_certificate {ca};
		ssl_verify_client optional;
		location = / { return 200 "nginx tls ok\n"; }
		location = /client {
			if ($ssl_client_verify != SUCCESS) { return 403 "no client certificate\n"; }
			return 200 "client ok\n";
		}
	}
	server {
		{expired}
		ssl_certificate {expiredcert};
		ssl_certificate_key {expiredkey};
		location / { return 200 "expired\n"; }
	}
`

// Start writes nginx's configuration and runs it as o says until the test
// ends; it returns when nginx accepts connections at Addrs[0] on its last
// port (dialed from this namespace).
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binary(t)
	if len(o.Addrs) == 0 {
		t.Fatal("nginx.Start: no address")
	}
	command := o.Command
	if command == nil {
		command = exec.Command
	}
	dir := t.TempDir()
	listen := func(port uint16, ssl string) string {
		var b strings.Builder
		for _, a := range o.Addrs {
			b.WriteString("listen " + netip.AddrPortFrom(a, port).String() + ssl + ";\n\t\t")
		}
		return b.String()
	}
	s := &Server{dir: dir, HTTP: netip.AddrPortFrom(o.Addrs[0], o.HTTP)}
	ready := s.HTTP
	tlsConf := ""
	if o.TLS != nil {
		s.HTTPS = netip.AddrPortFrom(o.Addrs[0], o.HTTPS)
		s.Expired = netip.AddrPortFrom(o.Addrs[0], o.Expired)
		ready = s.Expired
		tlsConf = strings.NewReplacer(
			"{https}", listen(o.HTTPS, " ssl"),
			"{expired}", listen(o.Expired, " ssl"),
			"{cert}", o.TLS.CertFile,
			"{key}", o.TLS.KeyFile,
			"{ca}", o.TLS.CAFile,
			"{expiredcert}", o.TLS.ExpiredCertFile,
			"{expiredkey}", o.TLS.ExpiredKeyFile,
		).Replace(tlsTemplate)
	}
	conf := strings.NewReplacer(
		"{dir}", dir,
		"{http}", listen(o.HTTP, ""),
		"{tls}", tlsConf,
	).Replace(confTemplate)
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", file, "-g", "daemon off;")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return out.String() + string(b)
	}
	for range 200 {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("nginx exited: %v\n%s", err, logs())
		default:
		}
		c, err := net.DialTimeout("tcp", ready.String(), 100*time.Millisecond)
		if err == nil {
			c.Close()
			return s
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("nginx does not accept connections at %s after 200 tries\n%s", ready, logs())
	return s
}

// SetHealthy makes /health answer 200 (true) or 503 (false) from the next
// request on, without restarting nginx.
func (s *Server) SetHealthy(t testing.TB, healthy bool) {
	t.Helper()
	flag := filepath.Join(s.dir, "maintenance")
	if healthy {
		if err := os.Remove(flag); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
