package main

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"lbdns/control"
)

func TestReload(t *testing.T) {
	f := startFake(t, map[string]reply{"POST /v1/reload": {body: control.ReloadReply{Summary: "2 vips, 1 pool, 3 resolvers"}}})
	r := lbctl(t, "-socket", f.socket, "reload")
	if r.code != exitOK || r.stdout != "config reloaded: 2 vips, 1 pool, 3 resolvers\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if reqs := f.received(); len(reqs) != 1 || reqs[0].route != "POST /v1/reload" {
		t.Errorf("requests %+v, want one POST /v1/reload", reqs)
	}
}

func TestReloadRejected(t *testing.T) {
	problems := []control.Problem{
		{File: "lbdns.toml", Line: 3, Key: "vip[0].address", Value: "192.0.2.300", Message: "not an IP address",
			Text: `lbdns.toml:3: vip[0].address: value "192.0.2.300": not an IP address`},
		{File: "lbdns.toml", Line: 9, Key: "pool[0].check", Value: "missing", Message: "no [check.missing] profile",
			Text: `lbdns.toml:9: pool[0].check: value "missing": no [check.missing] profile`},
		{File: "lbdns.toml", Line: 14, Key: "resolver[0].Weight", Message: "unknown key",
			Text: `lbdns.toml:14: resolver[0].Weight: unknown key`},
	}
	er := control.ErrorReply{Error: "invalid configuration: 3 problems", Problems: problems}
	f := startFake(t, map[string]reply{"POST /v1/reload": {code: http.StatusUnprocessableEntity, body: er}})

	r := lbctl(t, "-socket", f.socket, "reload")
	if r.code != exitRefused {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitRefused, r.stderr)
	}
	want := []string{"reload rejected; running config unchanged:"}
	for _, p := range problems {
		want = append(want, p.Text)
	}
	if got := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("stderr lines\n%q\nwant\n%q", got, want)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty: %q", r.stdout)
	}

	r = lbctl(t, "-socket", f.socket, "-o", "json", "reload")
	if r.code != exitRefused {
		t.Fatalf("json: exit %d, want %d; stderr:\n%s", r.code, exitRefused, r.stderr)
	}
	var got control.ErrorReply
	decodeJSON(t, r.stdout, &got)
	if !reflect.DeepEqual(got, er) {
		t.Errorf("json reply %+v, want %+v", got, er)
	}
}

func TestReloadNotReady(t *testing.T) {
	f := startFake(t, map[string]reply{"POST /v1/reload": {code: http.StatusServiceUnavailable, body: control.ErrorReply{Error: "daemon is stopping"}}})
	r := lbctl(t, "-socket", f.socket, "reload")
	if r.code != exitRefused || r.stderr != "lbctl: daemon is stopping\n" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
