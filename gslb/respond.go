package gslb

import (
	"maps"
	"net/netip"

	"github.com/miekg/dns"

	"lbdns/configs"
)

// Answer answers q from the snapshot (see Answerer). The records of the
// response are shared by every answer of the snapshot: callers must not
// modify them (copy one to change it).
func (s *Snapshot) Answer(q Query) Response {
	n := q.Entry.n
	if q.Entry.s != s {
		n = s.nodes[q.Name]
	}
	var z *zone
	if n != nil {
		if n.zone > 0 {
			z = s.zoneAt[n.zone-1]
		}
	} else {
		z = s.zoneOf(q.Name)
	}
	if z == nil {
		r := Response{Rcode: dns.RcodeRefused}
		if q.Explain {
			r.Trace = &Trace{Client: q.Source, ClientFrom: "source"}
		}
		return r
	}
	switch {
	case n == nil:
		return s.static(q, z, Response{Rcode: dns.RcodeNameError, Authority: z.neg})
	case q.Type == dns.TypeANY:
		return s.anyType(q, z, n)
	case n.whoami:
		return s.whoami(q, z)
	case n.dyn != nil && n.dyn.off && (q.Type == dns.TypeA || q.Type == dns.TypeAAAA):
		return s.emergency(q, z, n.dyn)
	case n.dyn != nil && (q.Type == dns.TypeA || q.Type == dns.TypeAAAA):
		return s.dynamic(q, z, n.dyn)
	}
	if rrs := n.rrsets[q.Type]; len(rrs) > 0 {
		return s.static(q, z, Response{Answer: rrs})
	}
	if rrs := n.rrsets[dns.TypeCNAME]; len(rrs) > 0 {
		return s.static(q, z, Response{Answer: rrs})
	}
	return s.static(q, z, Response{Authority: z.neg})
}

// Entry is a name's node in one snapshot, found by Lookup from the
// question's bytes and passed back with the query (Query.Entry), so that
// a query takes one lookup of its name, and no string is built for it.
type Entry struct {
	s *Snapshot
	n *node
}

// Name is the entry's name, lower-cased and fully qualified (the
// snapshot's own string); "" for the zero Entry.
func (e Entry) Name() string {
	if e.n == nil {
		return ""
	}
	return e.n.name
}

// Lookup returns the entry of name, lower-cased and fully qualified as
// Query.Name, and false when the snapshot has no node of that name (a
// name it answers NXDOMAIN or REFUSED: the query then goes by Name).
func (s *Snapshot) Lookup(name []byte) (Entry, bool) {
	n := s.nodes[string(name)]
	if n == nil {
		return Entry{}, false
	}
	return Entry{s, n}, true
}

// hinfoCPU is the CPU of the synthesized HINFO record that answers a
// question of type ANY (RFC 8482 section 4.2); its OS is empty.
const hinfoCPU = "RFC8482"

// anyType answers a question of type ANY for the name of node n as RFC
// 8482 section 4 lets a server answer it: the name's CNAME when it has
// one, else one synthesized HINFO record ("RFC8482", "") with the
// smallest TTL of the name's records (a dynamic name's TTL counts as
// one, the whoami name's is 0), the same for every client (scope 0). A
// name without records of its own (an empty non-terminal) answers
// NODATA.
func (s *Snapshot) anyType(q Query, z *zone, n *node) Response {
	if rrs := n.rrsets[dns.TypeCNAME]; len(rrs) > 0 {
		return s.static(q, z, Response{Answer: rrs})
	}
	var ttl uint32
	has := n.whoami
	if n.dyn != nil {
		ttl, has = n.dyn.ttl, true
	}
	for _, rrs := range n.rrsets {
		for _, rr := range rrs {
			if t := rr.Header().Ttl; !has || t < ttl {
				ttl = t
			}
			has = true
		}
	}
	if !has {
		return s.static(q, z, Response{Authority: z.neg})
	}
	owner := q.Name
	if n.dyn != nil {
		owner = n.dyn.fqdn
	}
	r := s.static(q, z, Response{Answer: []dns.RR{&dns.HINFO{Hdr: hdr(owner, dns.TypeHINFO, ttl), Cpu: hinfoCPU}}})
	if n.dyn != nil {
		r.Name = n.dyn.fqdn
		if r.Trace != nil {
			r.Trace.Name = n.dyn.fqdn
		}
	}
	return r
}

// zoneOf returns the most specific zone holding qname, or nil.
func (s *Snapshot) zoneOf(qname string) *zone {
	for off, end := 0, false; !end; off, end = dns.NextLabel(qname, off) {
		if z := s.zones[qname[off:]]; z != nil {
			return z
		}
	}
	return s.zones["."]
}

// static finishes a response from zone data: scope 0, and the trace.
func (s *Snapshot) static(q Query, z *zone, r Response) Response {
	if q.Explain {
		r.Trace = &Trace{Client: q.Source, ClientFrom: "source", Answer: addrsOf(r.Answer)}
		if len(r.Answer) > 0 {
			r.Trace.TTL = r.Answer[0].Header().Ttl
		} else if len(r.Authority) > 0 {
			r.Trace.TTL = r.Authority[0].Header().Ttl
		}
	}
	return r
}

// whoami answers the whoami name: TXT with the resolver's address and
// the ECS prefix, A or AAAA with the resolver's address.
func (s *Snapshot) whoami(q Query, z *zone) Response {
	var r Response
	ecs := "none"
	if q.ECS.IsValid() {
		ecs = q.ECS.String()
		r.Scope = q.ECS.Bits()
	}
	src := q.Source.Unmap()
	switch {
	case q.Type == dns.TypeTXT:
		r.Answer = []dns.RR{&dns.TXT{Hdr: hdr(q.Name, dns.TypeTXT, 0), Txt: []string{"resolver=" + src.String() + " ecs=" + ecs}}}
	case q.Type == dns.TypeA && src.Is4(), q.Type == dns.TypeAAAA && src.Is6():
		r.Answer = []dns.RR{addrRR(q.Name, src, 0)}
	default:
		r.Authority = z.neg
	}
	if q.Explain {
		r.Trace = &Trace{Client: q.Source, ClientFrom: "source", Answer: addrsOf(r.Answer), Scope: r.Scope}
	}
	return r
}

// dynamic answers A or AAAA for a dynamic name: policies most specific
// first, each pool and its fallback chain, then the last resort.
func (s *Snapshot) dynamic(q Query, z *zone, n *name) Response {
	f := 0
	if q.Type == dns.TypeAAAA {
		f = 1
	}
	nf := &n.fam[f]
	var tr *Trace
	if q.Explain {
		tr = &Trace{Name: n.fqdn, Client: q.Source, ClientFrom: "source", TTL: n.ttl}
	}
	if !nf.any {
		// No member of the family: NODATA.
		r := Response{Authority: z.neg, Trace: tr}
		if tr != nil {
			tr.TTL = z.neg[0].Header().Ttl
		}
		return r
	}
	client, bits, ecs, mapped := q.Source, q.Source.BitLen(), false, false
	if n.ecs && q.ECS.IsValid() {
		client, bits, ecs = q.ECS.Addr(), q.ECS.Bits(), true
		if client.Is4In6() {
			// An IPv4-mapped prefix is an IPv4 one: located, hashed
			// and scoped as IPv4, the scope then said in the option's
			// family (plus 96).
			client, bits, mapped = client.Unmap(), max(bits-96, 0), true
		}
		if bits == 0 {
			// SOURCE PREFIX-LENGTH 0 (or a mapped /96): the client
			// asks not to be located by its subnet. Answered as a
			// query without ECS, by the source address, scope 0.
			client, bits, ecs, mapped = q.Source, q.Source.BitLen(), false, false
		} else if tr != nil {
			tr.ClientFrom = "ecs"
		}
	}
	if tr != nil {
		tr.Client = client
	}
	var loc Location
	if n.located || tr != nil {
		if !ecs && tr == nil && s.labels != nil {
			loc.Labels = s.labels.Labels(client)
		} else {
			loc = s.loc.Locate(client)
		}
		if tr != nil {
			tr.Location = loc
		}
	}
	located := false // a policy with a match was consulted
	policies := n.policies
	if tr == nil && len(loc.Labels) == 0 {
		// Only policies without a match can answer a client without
		// labels: start at the first (the trace lists them all).
		policies, located = policies[n.unlocated:], n.locatedBefore
	}
	own := q.Rotation
	if len(own) != s.rotations {
		own = nil
	}
	keyed := false
	var key uint64
	for _, p := range policies {
		var pt *PolicyTrace
		if tr != nil {
			tr.Policies = append(tr.Policies, PolicyTrace{Match: maps.Clone(p.match)})
			pt = &tr.Policies[len(tr.Policies)-1]
		}
		if len(p.match) > 0 {
			located = true
			if !p.matches(loc.Labels) {
				continue
			}
		}
		if pt != nil {
			pt.Matched = true
		}
		for _, fp := range p.chain[f] {
			if !keyed && (fp.algorithm == configs.AlgorithmHash || fp.algorithm == configs.AlgorithmRendezvous) {
				key, keyed = addrKey(client, bits), true
			}
			rrs, dependsOnKey := fp.pick(key, own)
			if pt != nil {
				pt.Pools = append(pt.Pools, poolTrace(fp, rrs))
			}
			if len(rrs) == 0 {
				continue
			}
			r := Response{Answer: q.Records.fill(rrs, n.fqdn, n.ttl), Name: n.fqdn, Policy: p.label, Pool: fp.name, Raised: n.raised}
			if ecs {
				if located {
					r.Scope = loc.Scope
				}
				if dependsOnKey {
					r.Scope = max(r.Scope, bits)
				}
				if mapped && (located || dependsOnKey) {
					r.Scope += 96
				}
			}
			if tr != nil {
				pt.Answered = true
				tr.Answer, tr.Scope = addrsOf(rrs), r.Scope
				r.Trace = tr
			}
			return r
		}
	}
	r := s.lastResort(n, f, z, tr, q.Records)
	if ecs && located && nf.up {
		// Other locations may still get policy answers: the last
		// resort holds only over the location that led to it.
		r.Scope = loc.Scope
		if mapped {
			r.Scope += 96
		}
		if tr != nil {
			tr.Scope = r.Scope
		}
	}
	return r
}

// emergency answers A or AAAA for a name whose intelligent resolution is
// off: its precomputed emergency set in rotation, scope 0, no policy or
// topology work.
func (s *Snapshot) emergency(q Query, z *zone, n *name) Response {
	f := 0
	if q.Type == dns.TypeAAAA {
		f = 1
	}
	nf := &n.fam[f]
	r := Response{Name: n.fqdn, Policy: PolicyEmergency, Answer: q.Records.fill(nf.emergency.take(n.counter[f].Add(1)-1, s.max), n.fqdn, n.ttl), Raised: n.raised}
	if len(r.Answer) == 0 {
		r.Authority = z.neg
	}
	if q.Explain {
		r.Trace = &Trace{Name: n.fqdn, Client: q.Source, ClientFrom: "source", Static: true, Answer: addrsOf(r.Answer), TTL: n.ttl}
		if len(r.Answer) == 0 {
			r.Trace.TTL = z.neg[0].Header().Ttl
		}
	}
	return r
}

// PolicyEmergency is Response.Policy for the answers of a name whose
// intelligent resolution is off (lbctl gslb off).
const PolicyEmergency = "emergency"

// lastResort answers family f of name n by its last resort, scope 0
// (dynamic sets the location's scope when the answer depends on it), its
// records in recs.
func (s *Snapshot) lastResort(n *name, f int, z *zone, tr *Trace, recs *Records) Response {
	nf := &n.fam[f]
	r := Response{Name: n.fqdn, LastResort: traceLastResort(n.lastResort), Raised: n.raised}
	if tr != nil {
		tr.Warming = nf.warming
		tr.LastResort = r.LastResort
		r.Trace = tr
	}
	switch n.lastResort {
	case configs.LastResortServfail:
		r.Rcode = dns.RcodeServerFailure
		return r
	case configs.LastResortStatic:
		r.Answer = recs.fill(nf.static.take(n.counter[f].Add(1)-1, s.max), n.fqdn, n.ttl)
		if tr != nil {
			tr.Static = true
		}
	default:
		r.Answer = recs.fill(nf.failOpen.take(n.counter[f].Add(1)-1, s.max), n.fqdn, n.ttl)
	}
	if len(r.Answer) == 0 {
		r.Authority = z.neg
	}
	if tr != nil {
		tr.Answer = addrsOf(r.Answer)
	}
	return r
}

// poolTrace is the trace of pool fp having answered rrs.
func poolTrace(fp *famPool, rrs []dns.RR) PoolTrace {
	chosen := map[netip.Addr]bool{}
	for _, a := range addrsOf(rrs) {
		chosen[a] = true
	}
	pt := PoolTrace{Name: fp.name, Algorithm: fp.algorithm, Healthy: len(fp.up)}
	for _, m := range fp.members {
		pt.Members = append(pt.Members, MemberTrace{Name: m.name, Addr: m.addr, State: m.state.String(), Weight: m.weight, Chosen: chosen[m.addr]})
	}
	return pt
}

// addrsOf lists the addresses of the A and AAAA records of rrs.
func addrsOf(rrs []dns.RR) []netip.Addr {
	var out []netip.Addr
	for _, rr := range rrs {
		switch v := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(v.A)
			out = append(out, a.Unmap())
		case *dns.AAAA:
			a, _ := netip.AddrFromSlice(v.AAAA)
			out = append(out, a)
		}
	}
	return out
}

// Records is storage for the records of answers, for a caller that
// answers one query at a time (a UDP reader, a TCP connection): with
// Query.Records set, a dynamic name's records are written there, and
// Response.Answer points into it until the next query that passes it.
// Its zero value is ready to use.
type Records struct {
	a    []dns.A
	aaaa []dns.AAAA
	rrs  []dns.RR
}

// fill returns the records tmpl (a dynamic name's: shared by the names
// of an answer set, without owner or TTL) with owner and ttl: in rec
// when it is not nil (no allocation once it has grown), else in new
// storage. The slice is capped so that appending to it copies.
func (rec *Records) fill(tmpl []dns.RR, owner string, ttl uint32) []dns.RR {
	if len(tmpl) == 0 {
		return nil
	}
	if rec == nil {
		rec = new(Records)
	}
	na := 0
	for _, rr := range tmpl {
		if _, ok := rr.(*dns.A); ok {
			na++
		}
	}
	// Room for all first: the pointers handed out stay valid.
	if cap(rec.a) < na {
		rec.a = make([]dns.A, 0, max(na, 8))
	}
	if cap(rec.aaaa) < len(tmpl)-na {
		rec.aaaa = make([]dns.AAAA, 0, max(len(tmpl)-na, 8))
	}
	if cap(rec.rrs) < len(tmpl) {
		rec.rrs = make([]dns.RR, 0, max(len(tmpl), 8))
	}
	rec.a, rec.aaaa, rec.rrs = rec.a[:0], rec.aaaa[:0], rec.rrs[:0]
	for _, rr := range tmpl {
		switch v := rr.(type) {
		case *dns.A:
			rec.a = append(rec.a, *v)
			c := &rec.a[len(rec.a)-1]
			c.Hdr.Name, c.Hdr.Ttl = owner, ttl
			rec.rrs = append(rec.rrs, c)
		case *dns.AAAA:
			rec.aaaa = append(rec.aaaa, *v)
			c := &rec.aaaa[len(rec.aaaa)-1]
			c.Hdr.Name, c.Hdr.Ttl = owner, ttl
			rec.rrs = append(rec.rrs, c)
		}
	}
	return rec.rrs[:len(rec.rrs):len(rec.rrs)]
}
