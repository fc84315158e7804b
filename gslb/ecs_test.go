package gslb

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"lbdns/health"
)

// ecsDoc is snapDoc with lr-geo: region gd answered by pool gd, the rest
// of country cn by the dead pool (its last resort), no global policy;
// and ind, with ECS, answered by pool gd for every client.
func ecsDoc() string {
	return snapDoc() + nameDoc("lr-geo.g.example.com", "ecs = true", "", "carrier=cmcc province=gd gd", "country=cn dead") +
		nameDoc("ind.g.example.com", "ecs = true", "gd")
}

// askFrom is ask from source src.
func askFrom(s *Snapshot, qname string, t uint16, from, ecs string) Response {
	q := Query{Name: qname, Type: t, Source: src(from), Explain: true}
	if ecs != "" {
		q.ECS = netip.MustParsePrefix(ecs).Masked()
	}
	return s.Answer(q)
}

// TestECSMapped: an IPv4-mapped ECS prefix is located (and hashed) as the
// IPv4 prefix it maps, its length less 96, and the scope is said in the
// option's family: the IPv4 scope plus 96 when the answer depends on the
// client, 0 when it does not. A mapped /96 is an IPv4 /0: by the source.
func TestECSMapped(t *testing.T) {
	s := NewSnapshot(parse(t, ecsDoc()), states(parse(t, ecsDoc()), map[string]health.State{"dead/*": health.Down}), testLocator, 42)
	for _, c := range []struct {
		name, qname, ecs, v4 string
		scope                int
		from                 string // Trace.ClientFrom
	}{
		{"most specific", "geo.g.example.com.", "::ffff:10.1.2.0/120", "10.1.2.0/24", 16 + 96, "ecs"},
		{"carrier", "geo.g.example.com.", "::ffff:10.2.2.0/120", "10.2.2.0/24", 17 + 96, "ecs"},
		{"unmapped network", "geo.g.example.com.", "::ffff:10.200.0.0/120", "10.200.0.0/24", 0 + 96, "ecs"},
		{"hashed", "hash.g.example.com.", "::ffff:10.9.8.0/120", "10.9.8.0/24", 24 + 96, "ecs"},
		{"hashed /128", "hash.g.example.com.", "::ffff:10.9.8.7/128", "10.9.8.7/32", 32 + 96, "ecs"},
		{"independent", "ind.g.example.com.", "::ffff:10.1.2.0/120", "10.1.2.0/24", 0, "ecs"},
		{"mapped /96", "geo.g.example.com.", "::ffff:0.0.0.0/96", "0.0.0.0/0", 0, "source"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ask(s, c.qname, dns.TypeA, c.ecs)
			v4 := ask(s, c.qname, dns.TypeA, c.v4)
			// geo's global pool (all) turns with every answer.
			if got, want := addrs(r), addrs(v4); !slices.Equal(got, want) && (v4.Pool != "all" || len(got) != len(want)) {
				t.Errorf("answer %v, want %v (as for %s)", got, want, c.v4)
			}
			if r.Scope != c.scope {
				t.Errorf("scope %d, want %d (IPv4 scope %d)", r.Scope, c.scope, v4.Scope)
			}
			if r.Trace.Scope != r.Scope || r.Trace.ClientFrom != c.from {
				t.Errorf("trace scope %d from %q, want %d from %q", r.Trace.Scope, r.Trace.ClientFrom, r.Scope, c.from)
			}
			if c.from == "ecs" && r.Trace.Client != netip.MustParsePrefix(c.v4).Addr() {
				t.Errorf("trace client %v, want %v", r.Trace.Client, netip.MustParsePrefix(c.v4).Addr())
			}
		})
	}
	// Without the trace (the wire's path) the same.
	q := Query{Name: "geo.g.example.com.", Type: dns.TypeA, Source: src("192.0.2.200"), ECS: netip.MustParsePrefix("::ffff:10.1.2.0/120")}
	if r := s.Answer(q); r.Scope != 112 || !slices.Equal(addrs(r), []string{"198.51.100.1"}) {
		t.Errorf("untraced: %v scope %d, want 198.51.100.1 scope 112", addrs(r), r.Scope)
	}
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
		if r := s.Answer(q); !slices.Equal(addrs(r), []string{"198.51.100.1"}) {
			t.Errorf("ECS %q untraced: %v, want gd", ecs, addrs(r))
		}
	}
}

// TestLastResortScope: a last resort's answer holds over the location
// that led to it while other locations still get policy answers; scope 0
// only when every client gets the last resort.
func TestLastResortScope(t *testing.T) {
	cfg := parse(t, ecsDoc())
	up := NewSnapshot(cfg, states(cfg, map[string]health.State{"dead/*": health.Down}), testLocator, 42)
	allDown := NewSnapshot(cfg, states(cfg, map[string]health.State{"dead/*": health.Down, "gd/*": health.Down}), testLocator, 42)
	for _, c := range []struct {
		name       string
		s          *Snapshot
		qname, ecs string
		lastResort string
		scope      int
	}{
		{"policy answers gd", up, "lr-geo.g.example.com.", "10.1.2.0/24", "", 16},
		{"bj falls to the last resort", up, "lr-geo.g.example.com.", "10.2.2.0/24", TraceFailOpen, 17},
		{"mapped bj", up, "lr-geo.g.example.com.", "::ffff:10.2.2.0/120", TraceFailOpen, 17 + 96},
		{"no labels", up, "lr-geo.g.example.com.", "10.200.0.0/24", TraceFailOpen, 0},
		{"every pool down", allDown, "lr-geo.g.example.com.", "10.2.2.0/24", TraceFailOpen, 0},
		{"no located policy", up, "fo.g.example.com.", "10.2.2.0/24", TraceFailOpen, 0},
		{"static last resort", up, "st.g.example.com.", "10.2.2.0/24", TraceStatic, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, explain := range []bool{true, false} {
				q := Query{Name: c.qname, Type: dns.TypeA, Source: src("192.0.2.200"), ECS: netip.MustParsePrefix(c.ecs), Explain: explain}
				r := c.s.Answer(q)
				if r.LastResort != c.lastResort || r.Scope != c.scope {
					t.Errorf("explain %v: last resort %q scope %d, want %q scope %d", explain, r.LastResort, r.Scope, c.lastResort, c.scope)
				}
				if explain && r.Trace.Scope != r.Scope {
					t.Errorf("trace scope %d, reply scope %d", r.Trace.Scope, r.Scope)
				}
			}
		})
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
		}
	}
}
