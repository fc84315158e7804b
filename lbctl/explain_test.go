package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"lbdns/control"
)

// sampleExplain is an answer of pool east's e1 to a client of region
// east by ECS, after policy region=east.
func sampleExplain() control.GSLBExplainReply {
	return control.GSLBExplainReply{
		Name: "www.gslb.test.", Type: "A", Serial: 7, Rcode: "NOERROR",
		Answer: []string{"www.gslb.test.\t30\tIN\tA\t192.0.2.1"}, GSLBName: "www.gslb.test.",
		Client: "198.51.100.7", ClientFrom: "ecs", ECS: "198.51.100.7/32",
		Location: control.GSLBExplainLocation{Labels: map[string]string{"region": "east", "carrier": "ct"}, Prefix: "198.51.100.0/24", Scope: 24},
		Policies: []control.GSLBExplainPolicy{
			{Match: map[string]string{"carrier": "cm"}},
			{Match: map[string]string{"region": "east"}, Matched: true, Answered: true, Pools: []control.GSLBExplainPool{{
				Name: "east", Algorithm: "rr", Healthy: 1,
				Members: []control.GSLBExplainMember{{Name: "e1", Address: "192.0.2.1", State: "up", Weight: 100, Chosen: true}, {Name: "e2", Address: "192.0.2.2", State: "down", Weight: 100}},
			}, {Name: "west", Algorithm: "rr", Healthy: 1, Members: []control.GSLBExplainMember{{Name: "w1", Address: "192.0.2.9", State: "up", Weight: 100}}}}},
		},
		Addresses: []string{"192.0.2.1"}, TTL: 30, Scope: 24,
	}
}

func TestGSLBExplain(t *testing.T) {
	f := startFake(t, map[string]reply{"POST /v1/gslb/explain": {body: sampleExplain()}})
	r := lbctl(t, "-socket", f.socket, "gslb", "explain", "www.gslb.test", "--ecs", "198.51.100.7", "--client", "192.0.2.53", "--type", "A")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	reqs := f.received()
	if len(reqs) != 1 || reqs[0].route != "POST /v1/gslb/explain" {
		t.Fatalf("requests %+v, want one POST /v1/gslb/explain", reqs)
	}
	var got control.GSLBExplainRequest
	if err := json.Unmarshal([]byte(reqs[0].body), &got); err != nil {
		t.Fatal(err)
	}
	if want := (control.GSLBExplainRequest{Name: "www.gslb.test", Type: "A", Client: "192.0.2.53", ECS: "198.51.100.7", Via: "udp"}); got != want {
		t.Errorf("request %+v, want %+v", got, want)
	}
	for _, want := range []string{
		"question:    www.gslb.test. A (serial 7)",
		"client:      198.51.100.7 (ecs)",
		"location:    carrier=ct+region=east from 198.51.100.0/24 (holds over /24)",
		"1. carrier=cm: no match",
		"2. region=east: matched, ANSWERED",
		"pool east (rr): 1 up",
		"pool west (rr, fallback 1): 1 up",
		"reply:       NOERROR, ttl 30, ECS scope /24",
		"answer:      192.0.2.1",
		"www.gslb.test. 30 IN A 192.0.2.1",
	} {
		if !hasLine(r.stdout, want) {
			t.Errorf("no line %q:\n%s", want, r.stdout)
		}
	}
	rows := table(t, r.stdout, "MEMBER", "ADDRESS", "STATE", "WEIGHT", "CHOSEN")
	if len(rows) < 2 || rows[0]["MEMBER"] != "e1" || rows[0]["CHOSEN"] != "yes" || rows[1]["STATE"] != "down" || rows[1]["CHOSEN"] != "-" {
		t.Errorf("member rows %v:\n%s", rows, r.stdout)
	}

	r = lbctl(t, "-socket", f.socket, "-o", "json", "gslb", "explain", "www.gslb.test")
	if r.code != exitOK {
		t.Fatalf("-o json: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var rep control.GSLBExplainReply
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if want := sampleExplain(); !reflect.DeepEqual(rep, want) {
		t.Errorf("-o json: %+v, want %+v", rep, want)
	}
}

func TestGSLBExplainRefusedAndUsage(t *testing.T) {
	f := startFake(t, map[string]reply{"POST /v1/gslb/explain": {code: http.StatusNotFound, body: control.ErrorReply{Error: "www.example.org. is in no GSLB zone (zones: gslb.test.)"}}})
	r := lbctl(t, "-socket", f.socket, "gslb", "explain", "www.example.org")
	if r.code != exitRefused || !strings.Contains(r.stderr, "www.example.org. is in no GSLB zone") {
		t.Errorf("unknown name: exit %d, stderr %q; want %d with the daemon's message", r.code, r.stderr, exitRefused)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gslb", "explain"}, "missing NAME"},
		{[]string{"gslb", "explain", "a.test", "b.test"}, `unexpected argument "b.test"`},
		{[]string{"gslb", "explain", "a.test", "--pool", "p"}, "--pool is not for gslb explain"},
		{[]string{"gslb", "members", "--ecs", "10.0.0.0/8"}, "--ecs is not for gslb members"},
		{[]string{"gslb"}, "missing subcommand (members, status, explain, off, on, ttl)"},
		{[]string{"gslb", "explain", "a.test", "--forwarded-for", "203.0.113.7"}, "--forwarded-for with --via udp: X-Forwarded-For is a header of doh and json requests"},
		{[]string{"gslb", "explain", "a.test", "--via", "dot", "--forwarded-for", "203.0.113.7"}, "--forwarded-for with --via dot"},
		{[]string{"gslb", "explain", "a.test", "--via", "quic"}, `--via "quic": want udp, tcp, dot, doh or json`},
		{[]string{"gslb", "explain", "a.test", "--via", "tcp", "--proxy-source", "198.51.100.4"}, "--proxy-source with --via tcp"},
		{[]string{"gslb", "explain", "a.test", "--via", "doh", "--ip", "192.0.2.7"}, "--ip with --via doh: ip= is a parameter of the JSON API (--via json)"},
		{[]string{"gslb", "explain", "a.test", "--via", "doh", "--client", "192.0.2.7"}, "--client with --via doh"},
		{[]string{"gslb", "explain", "a.test", "--client", "192.0.2.7", "--peer", "192.0.2.8"}, "--client and --peer both name the query's source over udp: give one"},
		{[]string{"gslb", "explain", "a.test", "--via", "json", "--peer", "10.0.0"}, `--peer "10.0.0": want an IP address`},
		{[]string{"gslb", "explain", "a.test", "--via", "json", "--ip", "nope"}, `--ip "nope": want an IP address`},
		{[]string{"gslb", "members", "--via", "doh"}, "--via is not for gslb members"},
		{[]string{"gslb", "off", "--peer", "10.0.0.1", "--reason", "x"}, "--peer is not for gslb off"},
	} {
		r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, exitUsage, tc.want)
		}
	}
	if n := len(f.received()); n != 1 {
		t.Errorf("%d requests, want 1 (usage errors send none)", n)
	}
}

// TestGSLBExplainVia: the front's inputs reach the daemon as the
// request's fields; where the front located the client is a line of its
// own, and a request the front refuses says so, without an answer.
func TestGSLBExplainVia(t *testing.T) {
	rep := sampleExplain()
	rep.Via, rep.LocatedFrom = "json", "x-forwarded-for"
	rep.LocatedBy = "X-Forwarded-For 203.0.113.7 (peer 10.0.0.5 is a trusted proxy)"
	f := startFake(t, map[string]reply{"POST /v1/gslb/explain": {body: rep}})
	r := lbctl(t, "-socket", f.socket, "gslb", "explain", "www.gslb.test", "--via", "json", "--peer", "10.0.0.5",
		"--forwarded-for", "203.0.113.7, 10.0.0.9", "--proxy-source", "10.0.0.5", "--ip", "192.0.2.9")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var got control.GSLBExplainRequest
	if err := json.Unmarshal([]byte(f.received()[0].body), &got); err != nil {
		t.Fatal(err)
	}
	if want := (control.GSLBExplainRequest{Name: "www.gslb.test", Type: "A", Via: "json", Peer: "10.0.0.5",
		ForwardedFor: "203.0.113.7, 10.0.0.9", ProxySource: "10.0.0.5", IP: "192.0.2.9"}); got != want {
		t.Errorf("request %+v, want %+v", got, want)
	}
	for _, want := range []string{
		"via:         json",
		"located by:  X-Forwarded-For 203.0.113.7 (peer 10.0.0.5 is a trusted proxy)",
		"answer:      192.0.2.1",
	} {
		if !hasLine(r.stdout, want) {
			t.Errorf("no line %q:\n%s", want, r.stdout)
		}
	}

	refused := control.GSLBExplainReply{Name: "www.gslb.test.", Type: "A", Serial: 7, Via: "json", LocatedFrom: "connection",
		LocatedBy: "connection 192.0.2.1", Refused: "ip= refused: allow_client_ip is off", Status: 403}
	f = startFake(t, map[string]reply{"POST /v1/gslb/explain": {body: refused}})
	r = lbctl(t, "-socket", f.socket, "gslb", "explain", "www.gslb.test", "--via", "json", "--ip", "192.0.2.9")
	if r.code != exitOK {
		t.Fatalf("refused: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if want := "refused:     ip= refused: allow_client_ip is off (HTTP 403; no answer)"; !hasLine(r.stdout, want) {
		t.Errorf("no line %q:\n%s", want, r.stdout)
	}
	if strings.Contains(r.stdout, "answer:") || strings.Contains(r.stdout, "located by:") {
		t.Errorf("a refused request explained as answered:\n%s", r.stdout)
	}
}
