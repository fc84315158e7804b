package gslb_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/health"
)

// ExampleNewSnapshot builds the responder's snapshot from a configuration
// and the members' states, then answers from it as the server does.
func ExampleNewSnapshot() {
	cfg, err := configs.Parse([]byte(`
[check.web]
kind = "tcp"
[check.web.tcp]
port = 443

[[gslb.pool]]
name     = "www"
monitors = ["web"]
[[gslb.pool.member]]
name    = "a"
address = "192.0.2.1"
[[gslb.pool.member]]
name    = "b"
address = "192.0.2.2"

[[gslb.zone]]
name = "gslb.example.com"
ns   = ["ns1.example.com."]

[[gslb.name]]
name = "www.gslb.example.com"
[[gslb.name.policy]]
pool = "www"
`), "example.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	q := gslb.Query{Name: "www.gslb.example.com.", Type: dns.TypeA, Source: netip.MustParseAddr("198.51.100.53"), Explain: true}

	// Before the first probe round every member is unknown: the name
	// answers by its last resort (fail open) and says so.
	pools := gslb.Evaluate(cfg, nil, time.Now())
	r := gslb.NewSnapshot(cfg, pools, nil, 1).Answer(q)
	fmt.Println(r.Trace.Answer, r.Trace.LastResort, r.Trace.Warming)

	// Member a up, b down: a answers.
	pools[0].Members[0].State, pools[0].Members[1].State = health.Up, health.Down
	r = gslb.NewSnapshot(cfg, pools, nil, 2).Answer(q)
	fmt.Println(r.Answer[0])
	// Output:
	// [192.0.2.1 192.0.2.2] fail-open true
	// www.gslb.example.com.	30	IN	A	192.0.2.1
}

// ExampleNewSnapshot_service: names that share a [[gslb.service]] answer
// with its policies, each with its own owner and TTL; a caller that
// answers one query at a time passes its own Records, so that the
// answer allocates nothing (its records are good until the next query).
func ExampleNewSnapshot_service() {
	cfg, err := configs.Parse([]byte(`
[check.web]
kind = "tcp"
[check.web.tcp]
port = 443

[[gslb.pool]]
name     = "www"
monitors = ["web"]
[[gslb.pool.member]]
name    = "a"
address = "192.0.2.1"

[[gslb.zone]]
name = "gslb.example.com"
ns   = ["ns1.example.com."]

[[gslb.service]]
name  = "web"
names = ["app.gslb.example.com", "img.gslb.example.com"]
[[gslb.service.policy]]
pool = "www"

[[gslb.name]]
name    = "api.gslb.example.com"
service = "web"
ttl     = 300
`), "example.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	pools := gslb.Evaluate(cfg, nil, time.Now())
	pools[0].Members[0].State = health.Up
	s := gslb.NewSnapshot(cfg, pools, nil, 1)
	var recs gslb.Records
	for _, name := range []string{"app.gslb.example.com.", "img.gslb.example.com.", "api.gslb.example.com."} {
		r := s.Answer(gslb.Query{Name: name, Type: dns.TypeA, Source: netip.MustParseAddr("198.51.100.53"), Records: &recs})
		fmt.Println(r.Answer[0])
	}
	// Output:
	// app.gslb.example.com.	30	IN	A	192.0.2.1
	// img.gslb.example.com.	30	IN	A	192.0.2.1
	// api.gslb.example.com.	300	IN	A	192.0.2.1
}
