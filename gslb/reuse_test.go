package gslb

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"lbdns/intent"
)

// TestReuse holds Response.Reuse to its word: an answer that says it
// comes again is the one the snapshot gives again to the same question,
// from any source unless Source is set, at every position of its rotor
// that is the same modulo Period; the answer moved that rotor, and no
// other counter, by one. Answers that turn with shared counters or are
// drawn at random say they do not come again.
func TestReuse(t *testing.T) {
	s := snap(t, nil)
	off, _ := offSnap(t, intent.State{Emergencies: []intent.Emergency{{Name: "rr.g.example.com.", Mode: intent.ModeStatic}}})
	reusable := map[string]bool{
		"rr": true, "wrr": true, "hash": true, "hashsrc": true, "prio": true, "all": true, "all2": true,
		"geo": true, "geo-noecs": true, "www": true, "alias": true, "txt": true, "nx": true, "whoami": true,
		"random": false, "fo": false, "st": false, "sf": false, "fo-geo": false,
	}
	sources := []netip.Addr{src("192.0.2.200"), src("10.1.2.3"), src("10.3.4.5"), src("2001:db8::7")}
	ecss := []string{"", "10.1.0.0/24", "10.2.5.0/24", "10.3.0.0/16", "0.0.0.0/0", "2001:db8::/56"}
	counters := func(own []uint64, r Response) []uint64 {
		c := slices.Clone(own)
		if r.Reuse.Rotor > 0 {
			c[r.Reuse.Rotor-1]++
		}
		return c
	}
	for label, want := range reusable {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT} {
			for si, source := range sources {
				for _, e := range ecss {
					q := Query{Name: label + ".g.example.com.", Type: qt, Source: source}
					if e != "" {
						q.ECS = netip.MustParsePrefix(e).Masked()
					}
					what := fmt.Sprintf("%s %s from %s ecs %q", label, dns.TypeToString[qt], source, e)
					own := make([]uint64, s.Rotations())
					for i := range own {
						own[i] = uint64(i*7 + si)
					}
					q.Rotation = slices.Clone(own)
					r := s.Answer(q)
					// A last resort never (fail-open and static turn
					// with the name's shared counter).
					if ok := want && r.LastResort == ""; r.Reuse.OK != ok && (qt != dns.TypeTXT || want) && len(r.Answer) > 0 {
						t.Errorf("%s: Reuse %+v (last resort %q), want OK %v", what, r.Reuse, r.LastResort, ok)
					}
					if !r.Reuse.OK {
						continue
					}
					if got := q.Rotation; !slices.Equal(got, counters(own, r)) {
						t.Errorf("%s: counters %v after, want %v (rotor %d moved by one alone)", what, got, counters(own, r), r.Reuse.Rotor)
					}
					if r.Reuse.Rotor > 0 && (r.Reuse.Period < 1 || r.Reuse.Rotor > len(own)) {
						t.Fatalf("%s: Reuse %+v out of range", what, r.Reuse)
					}
					// Asked again: from another source when the answer
					// holds for any, a period or two later.
					for k := range uint64(3) {
						again := q
						if !r.Reuse.Source {
							again.Source = sources[(si+1+int(k))%len(sources)]
						}
						again.Rotation = slices.Clone(own)
						if r.Reuse.Rotor > 0 {
							again.Rotation[r.Reuse.Rotor-1] += k * uint64(r.Reuse.Period)
						}
						r2 := s.Answer(again)
						if r2.Rcode != r.Rcode || !slices.Equal(rrText(r2.Answer), rrText(r.Answer)) || !slices.Equal(rrText(r2.Authority), rrText(r.Authority)) ||
							r2.Scope != r.Scope || r2.Name != r.Name || r2.Policy != r.Policy || r2.Pool != r.Pool || r2.Reuse != r.Reuse {
							t.Errorf("%s: asked again from %s at +%d periods: %d %v scope %d %q/%q %+v, first %d %v scope %d %q/%q %+v", what, again.Source, k,
								r2.Rcode, addrs(r2), r2.Scope, r2.Policy, r2.Pool, r2.Reuse, r.Rcode, addrs(r), r.Scope, r.Policy, r.Pool, r.Reuse)
						}
					}
				}
			}
		}
	}
	// A traced answer, an emergency set and the shared counters: never.
	for _, c := range []struct {
		s    *Snapshot
		q    Query
		what string
	}{
		{s, Query{Name: "rr.g.example.com.", Type: dns.TypeA, Source: sources[0], Explain: true}, "traced"},
		{s, Query{Name: "nx.g.example.com.", Type: dns.TypeA, Source: sources[0], Explain: true}, "traced NXDOMAIN"},
		{s, Query{Name: "rr.g.example.com.", Type: dns.TypeA, Source: sources[0]}, "shared rotation"},
		{off, Query{Name: "rr.g.example.com.", Type: dns.TypeA, Source: sources[0], Rotation: make([]uint64, off.Rotations())}, "emergency"},
	} {
		if r := c.s.Answer(c.q); r.Reuse.OK || len(r.Answer)+len(r.Authority) == 0 {
			t.Errorf("%s: Reuse %+v (%d answers), want not OK", c.what, r.Reuse, len(r.Answer))
		}
	}
	// Outside the zones: REFUSED for all.
	if r := s.Answer(Query{Name: "example.org.", Type: dns.TypeA, Source: sources[0]}); !r.Reuse.OK || r.Reuse.Source || r.Reuse.Rotor != 0 {
		t.Errorf("REFUSED: Reuse %+v", r.Reuse)
	}
}

// rrText is the records' text (whoami makes new ones every answer).
func rrText(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}
