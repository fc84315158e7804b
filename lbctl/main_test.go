package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lbdns/control"
	"lbdns/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// okStatus is a minimal status reply.
func okStatus() map[string]reply {
	return map[string]reply{"GET /v1/status": {body: control.Status{Version: control.StatusVersion}}}
}

func TestUnreachableNamesSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "missing.sock")
	for _, args := range [][]string{
		{"status"},
		{"drain", "bind-1", "--reason", "x"},
		{"enable", "bind-1"},
		{"events"},
		{"events", "-f"},
		{"reload"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			r := lbctl(t, append([]string{"-socket", socket}, args...)...)
			if r.code != exitUnreachable {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUnreachable, r.stderr)
			}
			if !strings.Contains(r.stderr, socket) || !strings.Contains(r.stderr, "no such socket") {
				t.Errorf("stderr does not name the socket and say \"no such socket\":\n%s", r.stderr)
			}
		})
	}
}

func TestSocketFromEnvironment(t *testing.T) {
	f := startFake(t, okStatus())
	env := func(k string) string {
		if k == "LBDNS_SOCKET" {
			return f.socket
		}
		return ""
	}
	if r := lbctlEnv(t, t.Context(), env, "status"); r.code != exitOK {
		t.Fatalf("status with $LBDNS_SOCKET: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	// -socket wins over the environment.
	missing := filepath.Join(t.TempDir(), "other.sock")
	r := lbctlEnv(t, t.Context(), env, "-socket", missing, "status")
	if r.code != exitUnreachable || !strings.Contains(r.stderr, missing) {
		t.Fatalf("-socket %s: exit %d, stderr:\n%s", missing, r.code, r.stderr)
	}
	if n := len(f.received()); n != 1 {
		t.Errorf("daemon got %d requests, want 1", n)
	}
}

func TestUsageErrors(t *testing.T) {
	f := startFake(t, map[string]reply{
		"GET /v1/status":     {body: control.Status{}},
		"POST /v1/overrides": {body: control.OverrideReply{Message: "done"}},
		"GET /v1/events":     {body: control.EventsReply{}},
		"POST /v1/reload":    {body: control.ReloadReply{Summary: "ok"}},
	})
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no command", nil, "no command"},
		{"unknown command", []string{"stauts"}, `unknown command "stauts"`},
		{"unknown global flag", []string{"-x", "status"}, "-x"},
		{"bad format", []string{"-o", "yaml", "status"}, "table"},
		{"bad format after command", []string{"status", "-o", "yaml"}, "table"},
		{"zero timeout", []string{"-timeout", "0s", "status"}, "-timeout"},
		{"unknown command flag", []string{"status", "--verbose"}, "verbose"},
		{"status extra argument", []string{"status", "now"}, `unexpected argument "now"`},
		{"drain missing resolver", []string{"drain"}, "missing RESOLVER"},
		{"drain extra argument", []string{"drain", "bind-1", "bind-2"}, `unexpected argument "bind-2"`},
		{"pool and vip", []string{"drain", "bind-1", "--pool", "main", "--vip", "dns-v4"}, "not both"},
		{"pool and vip before", []string{"disable", "--vip", "dns-v4", "--pool", "main", "bind-1"}, "not both"},
		{"flag without value", []string{"drain", "bind-1", "--reason"}, "reason"},
		{"events negative n", []string{"events", "-n", "-1"}, "-n"},
		{"events argument", []string{"events", "all"}, "unexpected argument"},
		{"reload argument", []string{"reload", "now"}, "unexpected argument"},
		{"check-config missing file", []string{"check-config"}, "missing FILE"},
		{"help unknown command", []string{"help", "nope"}, `unknown command "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not contain %q:\n%s", tc.want, r.stderr)
			}
			if !strings.Contains(r.stderr, "Usage: lbctl") {
				t.Errorf("no usage on stderr:\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
		})
	}
	if got := f.received(); len(got) != 0 {
		t.Errorf("usage errors reached the daemon: %+v", got)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		r := lbctl(t, args...)
		if r.code != exitOK {
			t.Fatalf("%q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		for _, c := range commands() {
			if !strings.Contains(r.stdout, "\n  "+c.name) {
				t.Errorf("%q: usage does not list %s:\n%s", args, c.name, r.stdout)
			}
		}
	}
	for _, args := range [][]string{{"help", "drain"}, {"drain", "-h"}, {"drain", "bind-1", "--help"}} {
		r := lbctl(t, args...)
		if r.code != exitOK {
			t.Fatalf("%q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		for _, want := range []string{"lbctl [global flags] drain RESOLVER", "  --pool ", "  --vip ", "  --reason "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q: drain usage lacks %q:\n%s", args, want, r.stdout)
			}
		}
	}
}

func TestRefusedExits1(t *testing.T) {
	f := startFake(t, map[string]reply{
		"POST /v1/overrides": {code: http.StatusNotFound, body: control.ErrorReply{Error: `no resolver named "ghost"`}},
	})
	r := lbctl(t, "-socket", f.socket, "drain", "ghost")
	if r.code != exitRefused {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitRefused, r.stderr)
	}
	if want := "lbctl: no resolver named \"ghost\"\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}

	r = lbctl(t, "-socket", f.socket, "drain", "ghost", "-o", "json")
	if r.code != exitRefused {
		t.Fatalf("json: exit %d, want %d; stderr:\n%s", r.code, exitRefused, r.stderr)
	}
	var er control.ErrorReply
	decodeJSON(t, r.stdout, &er)
	if er.Error != `no resolver named "ghost"` {
		t.Errorf("json error reply %+v", er)
	}
}

func TestBadReplyExits1(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/status": {body: "this is not json"}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitRefused || !strings.Contains(r.stderr, "bad reply") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestTimeoutExits3(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/status": {body: make(chan struct{})}})
	r := lbctl(t, "-socket", f.socket, "-timeout", "200ms", "status")
	if r.code != exitUnreachable {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUnreachable, r.stderr)
	}
	if !strings.Contains(r.stderr, f.socket) || !strings.Contains(r.stderr, "did not answer within 200ms") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

func TestInterruptedExits1(t *testing.T) {
	f := startFake(t, okStatus())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := lbctlEnv(t, ctx, noEnv, "-socket", f.socket, "status")
	if r.code != exitRefused || !strings.Contains(r.stderr, "interrupted") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestUnreachableStaleSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	r := lbctl(t, "-socket", socket, "status")
	if r.code != exitUnreachable || !strings.Contains(r.stderr, socket) || !strings.Contains(r.stderr, "connection refused") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestUnreachablePermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root is not refused by socket permissions")
	}
	f := startFake(t, okStatus())
	if err := os.Chmod(f.socket, 0); err != nil {
		t.Fatal(err)
	}
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitUnreachable || !strings.Contains(r.stderr, f.socket) || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
