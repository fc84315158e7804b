package probes

import (
	"context"
	"testing"

	"github.com/miekg/dns"

	"lbdns/configs"
)

// BenchmarkDNSProbe measures one whole probe (socket, query, reply,
// judgement) against a loopback server.
func BenchmarkDNSProbe(b *testing.B) {
	for _, bc := range []struct {
		name string
		chk  *configs.Check
		udp  handler
		tcp  handler
	}{
		{"udp/fixed", fixedCheck(), good, nil},
		{"udp/zone", zoneCheck(), rcodeHandler(dns.RcodeNameError), nil},
		{"udp/expect_regexp", withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.ExpectRegexp = `192\.0\.2\.1$` }), good, nil},
		{"tcp/fixed", withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Transport = "tcp" }), nil, good},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := startServer(b, bc.udp, bc.tcp)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := DNS(ctx, srv.Addr, bc.chk); !res.OK {
					b.Fatalf("probe failed: %+v", res)
				}
			}
		})
	}
}

// BenchmarkCheckReply measures the judgement of one reply alone.
func BenchmarkCheckReply(b *testing.B) {
	q := fuzzQuery()
	wire, err := good(q).Pack()
	if err != nil {
		b.Fatal(err)
	}
	j, err := newJudge(&configs.DNSCheck{QName: "example.test.", Expect: "192.0.2.1"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if v, d := checkReply(q, wire, &j); v != verdictOK {
			b.Fatal(d)
		}
	}
}
