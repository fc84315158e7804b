package gslb

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// askFrom is ask from source src.
func askFrom(s *Snapshot, qname string, t uint16, from, ecs string) Response {
	q := Query{Name: qname, Type: t, Source: src(from), Explain: true}
	if ecs != "" {
		q.ECS = netip.MustParsePrefix(ecs).Masked()
	}
	return s.Answer(q)
}

// TestECSSourceZero: an ECS option with SOURCE PREFIX-LENGTH 0 asks that
// the client not be located by its subnet; the query is answered as one
// without ECS, by its source address, with scope 0.
func TestECSSourceZero(t *testing.T) {
	s := snap(t, nil)
	for _, ecs := range []string{"0.0.0.0/0", "::/0", ""} {
		r := askFrom(s, "geo.g.example.com.", dns.TypeA, "10.1.9.9", ecs)
		if got := addrs(r); !slices.Equal(got, []string{"198.51.100.1"}) || r.Scope != 0 {
			t.Errorf("ECS %q from 10.1.9.9 (region gd): %v scope %d, want 198.51.100.1 (gd by the source) scope 0", ecs, got, r.Scope)
		}
		if r.Trace.ClientFrom != "source" || r.Trace.Client != src("10.1.9.9") {
			t.Errorf("ECS %q: trace client %v from %q, want 10.1.9.9 from source", ecs, r.Trace.Client, r.Trace.ClientFrom)
		}
		q := Query{Name: "geo.g.example.com.", Type: dns.TypeA, Source: src("10.1.9.9")}
		if ecs != "" {
			q.ECS = netip.MustParsePrefix(ecs)
		}
		if r := s.Answer(q); !r.Reuse.Source || !slices.Equal(addrs(r), []string{"198.51.100.1"}) {
			t.Errorf("ECS %q untraced: %v reuse %+v, want gd, reused for the same source only", ecs, addrs(r), r.Reuse)
		}
	}
}

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
