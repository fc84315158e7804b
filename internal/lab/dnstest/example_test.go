package dnstest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"

	"lbdns/internal/lab/dnstest"
)

// ExampleServer starts a server with a 30 s TTL, asks it for the default A
// record, and takes it down and back up on the same port.
func ExampleServer() {
	s := &dnstest.Server{TTL: 30}
	if err := s.Start(); err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	c := &dns.Client{Timeout: 2 * time.Second}
	q := new(dns.Msg)
	q.SetQuestion(s.Name("www"), dns.TypeA)
	r, _, err := c.Exchange(q, s.Addr().String())
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Answer[0].(*dns.A).A, r.Answer[0].Header().Ttl)

	s.Stop()    // the upstream "dies": queries are refused
	s.Restart() // and comes back on the same port
	r, _, err = c.Exchange(q, s.Addr().String())
	fmt.Println(err == nil && r.Rcode == dns.RcodeSuccess, s.Count(s.Name("www")))
	// Output:
	// 192.0.2.1 30
	// true 2
}
