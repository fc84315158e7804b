package main

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Microsecond}, {99, 99 * time.Microsecond}, {100, 100 * time.Microsecond}, {0, time.Microsecond}} {
		if got := percentile(slices.Clone(d), tc.p); got != tc.want {
			t.Errorf("percentile(1..100 us, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("percentile(none) = %v, want 0", got)
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"https://127.0.0.1:8443/dns-query": "127.0.0.1:8443",
		"https://127.0.0.1/dns-query":      "127.0.0.1:443",
		"https://[::1]:8443/dns-query":     "[::1]:8443",
		"https://[::1]/dns-query":          "[::1]:443",
	} {
		if got := hostPort(in); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// reply is a reply to q with the records rrs and, with scope >= 0, the
// query's ECS echoed with that scope.
func reply(t *testing.T, q *dns.Msg, rcode, scope int, rrs ...string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetRcode(q, rcode)
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		m.Answer = append(m.Answer, rr)
	}
	if scope >= 0 {
		e := *q.IsEdns0().Option[0].(*dns.EDNS0_SUBNET)
		e.SourceScope = uint8(scope)
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = []dns.EDNS0{&e}
	}
	return m
}

func TestAnswersCompare(t *testing.T) {
	q := query{kind: kindDyn, index: 3, ecs: true, net: netOf(5)}.msg("bench.test")
	a := answerOf(reply(t, q, dns.RcodeSuccess, 24, "dyn3.bench.test. 30 IN A 127.10.5.2", "dyn3.bench.test. 30 IN A 127.10.5.1"))
	b := answerOf(reply(t, q, dns.RcodeSuccess, 24, "dyn3.bench.test. 30 IN A 127.10.5.1", "dyn3.bench.test. 30 IN A 127.10.5.2"))
	if !a.equal(b) {
		t.Errorf("the same addresses in another order differ: %v, %v", a, b)
	}
	js, err := answerOfJSON([]byte(`{"Status":0,"Answer":[{"name":"dyn3.bench.test.","type":1,"TTL":30,"data":"127.10.5.1"},{"name":"dyn3.bench.test.","type":1,"TTL":30,"data":"127.10.5.2"}],"edns_client_subnet":"1.0.5.0/24"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !js.equal(a) {
		t.Errorf("JSON %v, DNS %v: want equal", js, a)
	}
	for name, other := range map[string]answer{
		"a member less": answerOf(reply(t, q, dns.RcodeSuccess, 24, "dyn3.bench.test. 30 IN A 127.10.5.1")),
		"another scope": answerOf(reply(t, q, dns.RcodeSuccess, 16, "dyn3.bench.test. 30 IN A 127.10.5.1", "dyn3.bench.test. 30 IN A 127.10.5.2")),
		"no ECS":        answerOf(reply(t, q, dns.RcodeSuccess, -1, "dyn3.bench.test. 30 IN A 127.10.5.1", "dyn3.bench.test. 30 IN A 127.10.5.2")),
		"SERVFAIL":      answerOf(reply(t, q, dns.RcodeServerFailure, 24)),
	} {
		if other.equal(a) {
			t.Errorf("%s: %v equal to %v", name, other, a)
		}
	}
	nx, err := answerOfJSON([]byte(`{"Status":3,"Authority":[{"name":"bench.test.","type":6,"TTL":60,"data":"ns1.bench.test. x 1 2 3 4 5"}]}`))
	if err != nil || nx.rcode != dns.RcodeNameError || nx.scope != -1 || len(nx.rrs) != 0 {
		t.Errorf("JSON NXDOMAIN: %v, %v", nx, err)
	}
	if _, err := answerOfJSON([]byte(`{"Status":0,"edns_client_subnet":"1.0.5.0"}`)); err == nil {
		t.Error("edns_client_subnet without a scope: no error")
	}
}

func TestJSONURL(t *testing.T) {
	q := query{kind: kindDyn, aaaa: true, index: 7, ecs: true, net: netOf(258)}.msg("bench.test")
	u, err := url.Parse(jsonURL("https://127.0.0.1:8443/resolve", q))
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	if v.Get("name") != "dyn7.bench.test." || v.Get("type") != "AAAA" || v.Get("edns_client_subnet") != "1.1.2.0/24" {
		t.Errorf("jsonURL = %s", u)
	}
	q = query{kind: kindStatic, index: 1}.msg("bench.test")
	if v := must(url.Parse(jsonURL("https://h/resolve", q))).Query(); v.Has("edns_client_subnet") || v.Get("type") != "A" {
		t.Errorf("jsonURL without ECS = %v", v)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestJudgeWire(t *testing.T) {
	q := query{kind: kindStatic, index: 1}.msg("bench.test")
	wire := must(q.Pack())
	good := reply(t, q, dns.RcodeSuccess, -1, "s1.bench.test. 3600 IN A 198.18.0.2")
	if err := judgeWire(wire, must(good.Pack()), "bench.test", newNetMap(8, 0)); err != nil {
		t.Errorf("right reply judged wrong: %v", err)
	}
	bad := reply(t, q, dns.RcodeSuccess, -1, "s1.bench.test. 3600 IN A 198.18.0.3")
	if err := judgeWire(wire, must(bad.Pack()), "bench.test", newNetMap(8, 0)); err == nil {
		t.Error("wrong reply judged right")
	}
}
