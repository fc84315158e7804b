package probes

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/miekg/dns"

	"lbdns/configs"
)

// TestDNSReadsWholeDatagram checks that a UDP reply is read whole whatever
// its size, so that an oversized reply (more than 512 bytes without EDNS0)
// is judged on its content, not cut short and called malformed, by DNS
// and by DNSProber's batch engine.
func TestDNSReadsWholeDatagram(t *testing.T) {
	for _, n := range []int{0, 1, 300, 3000} {
		t.Run(fmt.Sprintf("%d answers", n), func(t *testing.T) {
			h := func(req *dns.Msg) *dns.Msg {
				r := new(dns.Msg)
				r.SetReply(req)
				r.Compress = true
				for i := range n {
					r.Answer = append(r.Answer, &dns.A{
						Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
						A:   net.IPv4(192, 0, 2, byte(i)),
					})
				}
				if n > 0 {
					// Put the expected address last, past any short buffer.
					r.Answer[n-1].(*dns.A).A = net.IPv4(192, 0, 2, 1)
				}
				return r
			}
			srv := startServer(t, h, nil)
			chk := withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Expect = "192.0.2.1" })
			p := NewDNSProber()
			defer p.Close()
			for i, probe := range append([]Func{DNS}, batchProbes(p)...) {
				res := probe(context.Background(), srv.Addr, chk)
				want := fmt.Sprintf("NOERROR, answers %d", n)
				if n == 0 {
					want = "expected address 192.0.2.1 not in answer"
				}
				if res.OK != (n > 0) || res.Detail != want {
					t.Fatalf("probe %d: got %+v, want OK %v %q", i, res, n > 0, want)
				}
			}
		})
	}
}
