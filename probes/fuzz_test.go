package probes

import (
	"encoding/binary"
	"testing"

	"github.com/miekg/dns"

	"lbdns/configs"
)

// fuzzQuery is the fixed query every fuzzed reply is judged against.
func fuzzQuery() *dns.Msg {
	q := new(dns.Msg)
	q.Id = 0x1234
	q.RecursionDesired = true
	q.Question = []dns.Question{{Name: "example.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET}}
	return q
}

// fuzzChecks exercise every branch of checkReply after the header.
func fuzzChecks() []*configs.DNSCheck {
	return []*configs.DNSCheck{
		{QName: "example.test."},
		{Zone: "test."},
		{QName: "example.test.", Rcodes: []string{"NOERROR", "SERVFAIL"}, Expect: "192.0.2.1"},
		{QName: "example.test.", Expect: "2001:db8::1", ExpectRegexp: `IN\s+A\s`},
	}
}

func FuzzCheckReply(f *testing.F) {
	q := fuzzQuery()
	for _, rcode := range []int{dns.RcodeSuccess, dns.RcodeServerFailure} {
		r := good(q)
		r.Rcode = rcode
		wire, err := r.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire)
	}
	f.Add([]byte{0x12, 0x34, 0x80})
	f.Fuzz(func(t *testing.T, reply []byte) {
		for _, chk := range fuzzChecks() {
			v, detail := checkReplyOf(q, reply, chk)
			if detail == "" {
				t.Fatalf("verdict %d with empty detail", v)
			}
			if v == verdictFail {
				continue
			}
			// Anything but a failure must at least be a response to q.
			if len(reply) < 12 || binary.BigEndian.Uint16(reply) != q.Id || reply[2]&0x80 == 0 {
				t.Fatalf("verdict %d (%s) for a reply that is not a response to the query", v, detail)
			}
			if v == verdictOK {
				r := new(dns.Msg)
				if err := r.Unpack(reply); err != nil {
					t.Fatalf("verdict OK for a reply that does not unpack: %v", err)
				}
				if r.Truncated {
					t.Fatal("verdict OK for a truncated reply")
				}
			}
		}
	})
}
