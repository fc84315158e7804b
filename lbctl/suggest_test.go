package main

import (
	"strings"
	"testing"

	"lbdns/control"
)

// TestDidYouMean: a mistyped command, gslb subcommand or flag gets one
// suggestion and a short usage, never the whole usage.
func TestDidYouMean(t *testing.T) {
	f := startFake(t, okStatus())
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"command", []string{"stauts"}, `unknown command "stauts" (did you mean "status"?)`},
		{"command far from any", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"command flag", []string{"drain", "bind-1", "--reson", "x"}, `flag provided but not defined: -reson (did you mean "-reason"?)`},
		{"global flag", []string{"-sockt", "x", "status"}, `flag provided but not defined: -sockt (did you mean "-socket"?)`},
		{"gslb subcommand", []string{"gslb", "explian", "www.g.test"}, `unknown gslb subcommand "explian" (did you mean "explain"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not contain %q:\n%s", tc.want, r.stderr)
			}
			if n := strings.Count(r.stderr, "\n"); n > 12 {
				t.Errorf("stderr has %d lines, want a short usage:\n%s", n, r.stderr)
			}
		})
	}
	if got := f.received(); len(got) != 0 {
		t.Errorf("usage errors reached the daemon: %+v", got)
	}
}

// TestGlobalFlagsAfterCommand: -socket, -timeout and -o work after the
// command and its arguments too.
func TestGlobalFlagsAfterCommand(t *testing.T) {
	f := startFake(t, map[string]reply{
		"GET /v1/status":     {body: control.Status{Version: control.StatusVersion}},
		"POST /v1/overrides": {body: control.OverrideReply{Message: "done"}},
	})
	for _, args := range [][]string{
		{"status", "-socket", f.socket},
		{"status", "--socket=" + f.socket, "-timeout", "5s"},
		{"drain", "bind-1", "--reason", "x", "-socket", f.socket},
		{"gslb", "members", "-socket", f.socket},
	} {
		r := lbctl(t, args...)
		if r.code != exitOK {
			t.Errorf("%q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
	}
	if n := len(f.received()); n != 4 {
		t.Errorf("daemon got %d requests, want 4", n)
	}
}

// TestVersion: -version prints the build's version and exits 0 without
// talking to the daemon.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"--version"}, {"version"}} {
		r := lbctl(t, append([]string{"-socket", "/nonexistent.sock"}, args...)...)
		if r.code != exitOK {
			t.Fatalf("%q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "lbctl ") || !strings.Contains(r.stdout, " rev ") {
			t.Errorf("%q: stdout %q, want \"lbctl VERSION rev REVISION\"", args, r.stdout)
		}
	}
}

// TestStatusShowsDaemonVersion: lbctl status names the daemon's build.
func TestStatusShowsDaemonVersion(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/status": {body: control.Status{Version: control.StatusVersion,
		Daemon: control.Daemon{Config: "/etc/lbdns/lbdns.toml", Version: "v1.2.0 rev 0123456789ab"}}}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK || !strings.Contains(r.stdout, ", version v1.2.0 rev 0123456789ab\n") {
		t.Errorf("exit %d, stdout:\n%s", r.code, r.stdout)
	}
}
