package responder

import (
	"cmp"
	"context"
	"maps"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/responder/doh"
)

var _ control.GSLBBackend = (*Responder)(nil)

// Explain answers req from the snapshot in force, through the answer path
// the server's queries take (gslb.Query with Explain set), and returns
// the reply with its trace (lbctl gslb explain). The front req names
// (udp by default) locates the query's source first, by the rule the
// front applies (doh.Trust.Locate with [gslb.tls]); a request the front
// refuses gets a reply that says so, without an answer. A query of req asked
// this way counts as one in the pools' rotation, as a query on the wire
// does. It returns a *control.Error: Malformed for a malformed request,
// NotFound for a name outside every zone or missing (NXDOMAIN),
// Unavailable when the responder is off.
func (r *Responder) Explain(_ context.Context, req control.GSLBExplainRequest) (*control.GSLBExplainReply, error) {
	q, e, err := explainQuery(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	snap, serial, cfg := r.snap, r.serial, r.cfg
	r.mu.Unlock()
	if snap == nil {
		if cfg != nil && len(cfg.GSLB.Server.ListenAddrs) == 0 {
			return nil, control.Errorf(control.Unavailable, "the GSLB responder is off (gslb.server.listen is empty)")
		}
		return nil, control.Errorf(control.Unavailable, "the GSLB responder has no answers yet (starting, or its configuration could not be built: see the daemon's log)")
	}
	at, err := explainFront(req, cfg, &q)
	if err != nil {
		return nil, err
	}
	if !q.ECS.IsValid() {
		e = nil // dropped by the front
	}
	if at.Refused != "" {
		return &control.GSLBExplainReply{Name: q.Name, Type: dns.TypeToString[q.Type], Serial: serial, Via: at.Via,
			LocatedBy: at.LocatedBy, LocatedFrom: at.LocatedFrom, Refused: at.Refused, Status: at.Status,
			Answer: []string{}, Addresses: []string{}, Location: control.GSLBExplainLocation{Labels: map[string]string{}}}, nil
	}
	resp := snap.Answer(q)
	switch resp.Rcode {
	case dns.RcodeRefused:
		return nil, control.Errorf(control.NotFound, "%s is in no GSLB zone%s", q.Name, zonesOf(snap))
	case dns.RcodeNameError:
		return nil, control.Errorf(control.NotFound, "no such name: %s (the responder answers NXDOMAIN)", q.Name)
	}
	rep := explainReply(q, resp, serial)
	rep.Via, rep.LocatedBy, rep.LocatedFrom = at.Via, at.LocatedBy, at.LocatedFrom
	if e != nil {
		rep.Scope = int(e.option(new(dns.EDNS0_SUBNET), resp.Scope).SourceScope) // as the reply's option carries it
	}
	return rep, nil
}

// explainQuery checks req and makes it the query the server would pass
// to the snapshot, with the Client Subnet option it would have parsed
// (nil when req has none).
func explainQuery(req control.GSLBExplainRequest) (gslb.Query, *ecs, error) {
	var probs []string
	name := strings.TrimSpace(req.Name)
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		probs = append(probs, "name: not a domain name: "+req.Name)
	}
	q := gslb.Query{Name: lowerFQDN(name), Type: dns.TypeA, Source: netip.IPv4Unspecified(), Explain: true}
	if req.Type != "" {
		t, ok := dns.StringToType[strings.ToUpper(req.Type)]
		if !ok || t == dns.TypeOPT || t == dns.TypeAXFR || t == dns.TypeIXFR {
			probs = append(probs, "type: want A, AAAA or another query type, not "+req.Type)
		}
		q.Type = t
	}
	probs = append(probs, req.Check()...)
	for _, f := range []struct {
		key, v string
	}{{"client", req.Client}, {"peer", req.Peer}, {"proxy_source", req.ProxySource}, {"ip", req.IP}} {
		if f.v == "" {
			continue
		}
		a, err := netip.ParseAddr(f.v)
		if err != nil || a.Zone() != "" {
			probs = append(probs, f.key+": want an IP address, not "+f.v)
			continue
		}
		if f.key == "client" || f.key == "peer" {
			q.Source = a.Unmap()
		}
	}
	var e *ecs
	if req.ECS != "" {
		p, err := netip.ParsePrefix(req.ECS)
		if err != nil {
			a, aerr := netip.ParseAddr(req.ECS)
			p, err = netip.PrefixFrom(a, a.BitLen()), aerr
		}
		if err != nil || p.Addr().Zone() != "" {
			probs = append(probs, "ecs: want a prefix (198.51.100.0/24) or an address, not "+req.ECS)
		} else {
			// As the wire carries it: an IPv4-mapped prefix stays one
			// of FAMILY 2 (the snapshot locates it as IPv4).
			p = p.Masked()
			e = &ecs{family: 1, source: uint8(p.Bits()), addr: p.Addr(), prefix: p}
			if p.Addr().Is6() {
				e.family = 2
			}
			q.ECS = p
		}
	}
	if len(probs) > 0 {
		return q, nil, control.Errorf(control.Malformed, "%s", strings.Join(probs, "; "))
	}
	return q, e, nil
}

// explainReply is resp to q, with its trace, as the control API says it.
func explainReply(q gslb.Query, resp gslb.Response, serial uint32) *control.GSLBExplainReply {
	rep := &control.GSLBExplainReply{
		Name: q.Name, Type: dns.TypeToString[q.Type], Serial: serial, Rcode: rcodeLabel(resp.Rcode),
		Answer: rrStrings(resp.Answer), Authority: rrStrings(resp.Authority),
		Client: q.Source.String(), ClientFrom: "source", Addresses: []string{},
		Location: control.GSLBExplainLocation{Labels: map[string]string{}},
	}
	if q.ECS.IsValid() {
		rep.ECS = q.ECS.String()
	}
	tr := resp.Trace
	if tr == nil {
		return rep
	}
	rep.GSLBName, rep.ClientFrom = tr.Name, tr.ClientFrom
	if tr.Client.IsValid() {
		rep.Client = tr.Client.String()
	}
	if tr.Location.Labels != nil {
		rep.Location.Labels = maps.Clone(tr.Location.Labels)
	}
	if tr.Location.Prefix.IsValid() {
		rep.Location.Prefix = tr.Location.Prefix.String()
	}
	rep.Location.Scope = tr.Location.Scope
	for _, p := range tr.Policies {
		ep := control.GSLBExplainPolicy{Match: maps.Clone(p.Match), Matched: p.Matched, Answered: p.Answered}
		if ep.Match == nil {
			ep.Match = map[string]string{}
		}
		for _, pt := range p.Pools {
			pool := control.GSLBExplainPool{Name: pt.Name, Algorithm: pt.Algorithm, Healthy: pt.Healthy, Members: []control.GSLBExplainMember{}}
			for _, m := range pt.Members {
				pool.Members = append(pool.Members, control.GSLBExplainMember{Name: m.Name, Address: m.Addr.String(), State: m.State, Weight: m.Weight, Chosen: m.Chosen})
			}
			ep.Pools = append(ep.Pools, pool)
		}
		rep.Policies = append(rep.Policies, ep)
	}
	rep.LastResort, rep.Warming, rep.Static = tr.LastResort, tr.Warming, tr.Static
	for _, a := range tr.Answer {
		rep.Addresses = append(rep.Addresses, a.String())
	}
	rep.TTL = tr.TTL
	return rep
}

// rrStrings is rrs in presentation format.
func rrStrings(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}

// zonesOf names the zones of a for an error message.
func zonesOf(a gslb.Answerer) string {
	z, ok := a.(Zoned)
	if !ok || len(z.Zones()) == 0 {
		return ""
	}
	return " (zones: " + strings.Join(z.Zones(), ", ") + ")"
}

// located is where the front of an explain request locates its client.
type located struct {
	Via, LocatedBy, LocatedFrom string
	Refused                     string
	Status                      int
}

// explainFront applies the rule of req's front (doh.Trust.Locate, with
// cfg's [gslb.tls]) to q, checked by explainQuery, as that front would
// before it asks the snapshot: q.Source becomes the client located, a
// Client Subnet the front drops is dropped. It returns a *control.Error
// of kind Unavailable for a front that does not listen.
func explainFront(req control.GSLBExplainRequest, cfg *configs.Config, q *gslb.Query) (located, error) {
	via := cmp.Or(req.Via, control.ViaUDP)
	at := located{Via: via}
	if via == control.ViaUDP || via == control.ViaTCP {
		at.LocatedBy, at.LocatedFrom = "source address "+q.Source.String()+" (the "+via+" query's)", "source"
		return at, nil
	}
	t := cfg.GSLB.TLS
	switch {
	case via == control.ViaDoT && len(t.DoTAddrs) == 0:
		return at, control.Errorf(control.Unavailable, "the GSLB responder has no DoT front (gslb.tls dot_listen is empty)")
	case via != control.ViaDoT && len(t.DoHAddrs) == 0:
		return at, control.Errorf(control.Unavailable, "the GSLB responder has no DoH front (gslb.tls doh_listen is empty)")
	case via == control.ViaJSON && t.JSONPath == "":
		return at, control.Errorf(control.Unavailable, "the GSLB responder has no JSON API (gslb.tls json_path is empty)")
	}
	in := doh.Request{Via: via, Peer: q.Source, ECS: q.ECS.IsValid()}
	if req.ProxySource != "" {
		in.ProxySource = netip.MustParseAddr(req.ProxySource) // checked by explainQuery
	}
	if req.IP != "" {
		in.IP = netip.MustParseAddr(req.IP)
	}
	if req.ForwardedFor != "" {
		in.ForwardedFor = []string{req.ForwardedFor}
	}
	l := TrustOf(t).Locate(t.ProxyProtocol, in)
	at.LocatedBy, at.LocatedFrom = l.Why, l.From
	if l.Refused != "" {
		at.Refused, at.Status = l.Refused, l.Status
		return at, nil
	}
	q.Source = l.Client
	if !l.ECS {
		q.ECS = netip.Prefix{}
	}
	return at, nil
}
