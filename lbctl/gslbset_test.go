package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

func TestGSLBSetRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want control.GSLBRequest
	}{
		{"off one name", []string{"gslb", "off", "--name", "www.g.test", "--reason", "melting"},
			control.GSLBRequest{Action: "off", Name: "www.g.test", Reason: "melting"}},
		{"off all", []string{"gslb", "off", "-reason=wrong answers"}, control.GSLBRequest{Action: "off", Reason: "wrong answers"}},
		{"on a zone", []string{"gslb", "on", "--zone", "g.test"}, control.GSLBRequest{Action: "on", Zone: "g.test"}},
		{"ttl", []string{"gslb", "ttl", "600", "--zone", "g.test", "--reason", "load"},
			control.GSLBRequest{Action: "ttl", Zone: "g.test", Seconds: 600, Reason: "load"}},
		{"ttl clear", []string{"gslb", "ttl", "--clear", "--name", "www.g.test"}, control.GSLBRequest{Action: "ttl", Name: "www.g.test", Clear: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, map[string]reply{"POST /v1/gslb": {body: control.GSLBReply{Message: "done " + tc.name, Changed: true}}})
			r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
			if r.code != exitOK || r.stdout != "done "+tc.name+"\n" {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			reqs := f.received()
			if len(reqs) != 1 || reqs[0].route != "POST /v1/gslb" {
				t.Fatalf("requests %+v", reqs)
			}
			var got control.GSLBRequest
			decodeJSON(t, reqs[0].body, &got)
			if got != tc.want {
				t.Errorf("request %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGSLBSetErrors(t *testing.T) {
	f := startFake(t, map[string]reply{"POST /v1/gslb": {code: http.StatusNotFound, body: control.ErrorReply{Error: `unknown GSLB name "ww.g.test." (did you mean "www.g.test."?)`}}})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gslb", "off", "--name", "a", "--zone", "b"}, "give --name or --zone, not both"},
		{[]string{"gslb", "ttl"}, "gslb ttl wants SECONDS"},
		{[]string{"gslb", "ttl", "soon"}, `SECONDS must be a number of seconds from 1 to 86400, not "soon"`},
		{[]string{"gslb", "ttl", "60", "--clear"}, "takes no SECONDS"},
		{[]string{"gslb", "on", "--clear"}, "--clear goes with gslb ttl"},
		{[]string{"gslb", "off", "now"}, `unexpected argument "now"`},
		{[]string{"gslb", "off", "--name", "www.g.test"}, "--reason is required"},
		{[]string{"gslb", "ttl", "600", "--zone", "g.test"}, "--reason is required"},
	} {
		r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr:\n%s", tc.args, r.code, r.stderr)
		}
	}
	if got := f.received(); len(got) != 0 {
		t.Errorf("usage errors reached the daemon: %+v", got)
	}
	r := lbctl(t, "-socket", f.socket, "gslb", "off", "--name", "ww.g.test", "--reason", "x")
	if r.code != exitRefused || !strings.Contains(r.stderr, `did you mean "www.g.test."`) {
		t.Errorf("unknown name: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestGSLBBanner(t *testing.T) {
	set := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	st := control.Status{Version: control.StatusVersion, Generated: set.Add(10 * time.Minute), GSLBIntent: []control.GSLBIntent{
		{Kind: "off", Name: "www.g.test.", Scope: "name www.g.test.", Mode: "static", Reason: "melting", Set: set, By: "uid 0", Names: []string{"www.g.test."}},
		{Kind: "ttl", Zone: "g.test.", Scope: "zone g.test.", Seconds: 600, Reason: "load", Set: set, By: "uid 0", Names: []string{"www.g.test.", "api.g.test."}},
	}}
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "!! GSLB EMERGENCY: intelligent resolution OFF for name www.g.test.: static answers, ECS scope 0 (lbctl gslb on restores)\n"+
		"!! GSLB TTL RAISED: zone g.test. to 600s (lbctl gslb ttl --clear restores)\n") {
		t.Errorf("status: exit %d\n%s", r.code, r.stdout)
	}
	r = lbctl(t, "-socket", f.socket, "gslb", "status")
	for _, want := range []string{"!! GSLB EMERGENCY", "KIND", "off   name www.g.test.", "melting", "10m", "uid 0", "www.g.test.,api.g.test."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("gslb status lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestGSLBResponderShown: lbctl status has one loud line when a name
// answers by its last resort; lbctl gslb status has the responder's line
// and one loud line per such name.
func TestGSLBResponderShown(t *testing.T) {
	now := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	st := control.Status{Version: control.StatusVersion, Generated: now, GSLBResponder: &control.GSLBResponder{
		On: true, Listen: []string{"127.0.0.1:5353", "[::1]:5353"}, Serial: 2026113001, Zones: []string{"g.test.", "h.test."},
		LastBuild: now.Add(-time.Minute),
		LastResort: []control.GSLBLastResort{
			{Name: "www.g.test.", Type: "A", LastResort: "fail-open", Since: now.Add(-5 * time.Minute)},
			{Name: "api.g.test.", Type: "AAAA", LastResort: "static", Warming: true, Since: now.Add(-time.Minute)},
		}}}
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "!! GSLB LAST RESORT: www.g.test. A fail-open, api.g.test. AAAA static (warming) answering by their last resort (lbctl gslb status)\n") {
		t.Errorf("status: exit %d\n%s", r.code, r.stdout)
	}
	r = lbctl(t, "-socket", f.socket, "gslb", "status")
	for _, want := range []string{
		"gslb responder: listening on 127.0.0.1:5353, [::1]:5353; serial 2026113001; zones g.test., h.test.; built 1m0s ago\n",
		"!! LAST RESORT: www.g.test. A answers fail-open since 5m0s ago (no pool of its policies has a member up)\n",
		"!! LAST RESORT: api.g.test. AAAA answers static since 1m0s ago (members still warming)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("gslb status lacks %q:\n%s", want, r.stdout)
		}
	}

	if strings.Contains(r.stdout, "gslb doh") || strings.Contains(r.stdout, "gslb dot") {
		t.Errorf("gslb status shows fronts without any:\n%s", r.stdout)
	}

	// The encrypted fronts: a line each, a loud one for a certificate
	// close to its expiry or past it.
	st.GSLBResponder.Fronts = []control.GSLBFront{
		{Transport: "doh", Listen: []string{"127.0.0.1:443"}, DoHPath: "/dns-query", JSONPath: "/resolve", Connections: 3, MaxConnections: 1024,
			CertSubject: "CN=gslb.example", CertNotAfter: now.Add(30 * 24 * time.Hour)},
		{Transport: "dot", Listen: []string{"127.0.0.1:853", "[::1]:853"}, MaxConnections: 512,
			CertSubject: "CN=gslb.example", CertNotAfter: now.Add(3*24*time.Hour + 5*time.Hour)},
	}
	f = startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r = lbctl(t, "-socket", f.socket, "gslb", "status")
	for _, want := range []string{
		"gslb doh: listening on 127.0.0.1:443 (/dns-query, json /resolve); 3/1024 connections; certificate CN=gslb.example expires in 30d0h\n",
		"gslb dot: listening on 127.0.0.1:853, [::1]:853; 0/512 connections; certificate CN=gslb.example expires in 3d5h\n!! GSLB DOT CERTIFICATE EXPIRES in 3d5h: CN=gslb.example\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("gslb status (fronts) lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "GSLB DOH CERTIFICATE") {
		t.Errorf("a certificate 30 days from its expiry said loudly:\n%s", r.stdout)
	}
	st.GSLBResponder.Fronts[0].CertNotAfter = now.Add(-2 * time.Hour)
	f = startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r = lbctl(t, "-socket", f.socket, "gslb", "status")
	if want := "certificate CN=gslb.example EXPIRED 2h0m ago\n!! GSLB DOH CERTIFICATE EXPIRED 2h0m ago: CN=gslb.example\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("gslb status (expired) lacks %q:\n%s", want, r.stdout)
	}

	// Off, with a build error, nothing on its last resort: no banner in
	// lbctl status, the responder off and the error in gslb status.
	st.GSLBResponder = &control.GSLBResponder{ListenError: "listen udp 127.0.0.1:53: bind: permission denied", LastBuildError: "boom",
		Zones: []string{"g.test."}}
	f = startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	if r = lbctl(t, "-socket", f.socket, "status"); strings.Contains(r.stdout, "LAST RESORT") {
		t.Errorf("status with nothing on its last resort:\n%s", r.stdout)
	}
	r = lbctl(t, "-socket", f.socket, "gslb", "status")
	for _, want := range []string{
		"gslb responder: OFF; serial 0; zones g.test.; never built\n",
		"!! GSLB RESPONDER CANNOT LISTEN: listen udp 127.0.0.1:53: bind: permission denied\n",
		"!! GSLB SNAPSHOT BUILD FAILED (the last answers stay): boom\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("gslb status (off) lacks %q:\n%s", want, r.stdout)
		}
	}
}
