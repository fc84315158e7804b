package gslb

import (
	"testing"

	"github.com/miekg/dns"
)

// TestAnyType: a question of type ANY is answered as RFC 8482 section
// 4.2 says: one HINFO "RFC8482" "" with the name's TTL (the smallest of
// its records'), the CNAME of an alias, NODATA for an empty
// non-terminal, NXDOMAIN for a missing name.
func TestAnyType(t *testing.T) {
	s := snap(t, nil)
	for _, c := range []struct {
		qname string
		rcode int
		want  string // the answer record, "" for none
	}{
		{"geo.g.example.com.", dns.RcodeSuccess, "geo.g.example.com.\t30\tIN\tHINFO\t\"RFC8482\" \"\""},
		{"all.g.example.com.", dns.RcodeSuccess, "all.g.example.com.\t5\tIN\tHINFO\t\"RFC8482\" \"\""},
		{"www.g.example.com.", dns.RcodeSuccess, "www.g.example.com.\t300\tIN\tHINFO\t\"RFC8482\" \"\""},
		{"txt.g.example.com.", dns.RcodeSuccess, "txt.g.example.com.\t10\tIN\tHINFO\t\"RFC8482\" \"\""},
		{"g.example.com.", dns.RcodeSuccess, "g.example.com.\t300\tIN\tHINFO\t\"RFC8482\" \"\""},
		{"whoami.g.example.com.", dns.RcodeSuccess, "whoami.g.example.com.\t0\tIN\tHINFO\t\"RFC8482\" \"\""},
		{"alias.g.example.com.", dns.RcodeSuccess, "alias.g.example.com.\t300\tIN\tCNAME\twww.g.example.com."},
		{"sub.g.example.com.", dns.RcodeSuccess, ""},
		{"nope.g.example.com.", dns.RcodeNameError, ""},
	} {
		for _, ecs := range []string{"", "10.1.2.0/24"} {
			r := ask(s, c.qname, dns.TypeANY, ecs)
			got := ""
			if len(r.Answer) > 0 {
				got = r.Answer[0].String()
			}
			if r.Rcode != c.rcode || got != c.want || len(r.Answer) > 1 || r.Scope != 0 {
				t.Errorf("ANY %s (ECS %q): rcode %d answer %v scope %d, want rcode %d %q scope 0", c.qname, ecs, r.Rcode, r.Answer, r.Scope, c.rcode, c.want)
			}
			if c.want == "" && (len(r.Authority) != 1 || r.Authority[0].Header().Rrtype != dns.TypeSOA) {
				t.Errorf("ANY %s: authority %v, want the SOA", c.qname, r.Authority)
			}
			q := Query{Name: c.qname, Type: dns.TypeANY, Source: src("192.0.2.200")}
			if r := s.Answer(q); !r.Reuse.OK || r.Reuse.Source {
				t.Errorf("ANY %s: reuse %+v, want reusable for any source", c.qname, r.Reuse)
			}
		}
	}
}
