package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

// decodeJSON decodes s into v strictly (unknown fields are errors).
func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, s)
	}
}

func TestOverrideRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want control.OverrideRequest
	}{
		{"flags after resolver", []string{"drain", "bind-1", "--reason", "disk full"},
			control.OverrideRequest{Action: "drain", Resolver: "bind-1", Reason: "disk full"}},
		{"pool scope, flags around", []string{"disable", "--pool", "main", "bind-1", "-reason=upgrade"},
			control.OverrideRequest{Action: "disable", Resolver: "bind-1", Pool: "main", Reason: "upgrade"}},
		{"vip scope", []string{"drain", "unbound-1", "-vip", "dns-v6"},
			control.OverrideRequest{Action: "drain", Resolver: "unbound-1", VIP: "dns-v6"}},
		{"enable", []string{"enable", "bind-1", "--pool", "main"},
			control.OverrideRequest{Action: "enable", Resolver: "bind-1", Pool: "main"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := "message for " + tc.name
			f := startFake(t, map[string]reply{"POST /v1/overrides": {body: control.OverrideReply{Message: msg, Changed: true}}})
			r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			if r.stdout != msg+"\n" {
				t.Errorf("stdout %q, want the reply's message %q", r.stdout, msg+"\n")
			}
			reqs := f.received()
			if len(reqs) != 1 || reqs[0].route != "POST /v1/overrides" {
				t.Fatalf("requests %+v, want one POST /v1/overrides", reqs)
			}
			var got control.OverrideRequest
			decodeJSON(t, reqs[0].body, &got)
			if got != tc.want {
				t.Errorf("request body %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOverrideJSON(t *testing.T) {
	want := control.OverrideReply{
		Message: "bind-1 drained in pool main (VIPs dns-v4)",
		Changed: true,
		Overrides: []control.Override{{
			Resolver: "bind-1", Pool: "main", Action: "drain", Reason: "disk full",
			Set: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), By: "uid 0",
		}},
	}
	f := startFake(t, map[string]reply{"POST /v1/overrides": {body: want}})
	for _, args := range [][]string{
		{"-o", "json", "drain", "bind-1", "--pool", "main"},
		{"drain", "bind-1", "-o", "json", "--pool", "main"},
	} {
		r := lbctl(t, append([]string{"-socket", f.socket}, args...)...)
		if r.code != exitOK {
			t.Fatalf("%q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		var got control.OverrideReply
		decodeJSON(t, r.stdout, &got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: reply %+v, want %+v", args, got, want)
		}
	}
}
