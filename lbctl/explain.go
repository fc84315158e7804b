package main

import (
	"flag"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"lbdns/control"
)

// explainOpts are the flags of lbctl gslb explain.
type explainOpts struct {
	client, ecs, qtype              *string
	via, peer, forwarded, proxy, ip *string
}

// explainFlags registers the flags of gslb explain on fs.
func explainFlags(fs *flag.FlagSet) explainOpts {
	return explainOpts{
		client:    fs.String("client", "", "explain: the query's source `IP` over udp or tcp (the recursive resolver; default 0.0.0.0)"),
		ecs:       fs.String("ecs", "", "explain: the query's EDNS Client Subnet `PREFIX` (198.51.100.0/24, or an address; over json: edns_client_subnet=)"),
		qtype:     fs.String("type", "A", "explain: the query `type` (A, AAAA, or another: TXT for the whoami name)"),
		via:       fs.String("via", "udp", "explain: the `front` the query comes over: udp, tcp, dot, doh or json (the JSON API)"),
		peer:      fs.String("peer", "", "explain: the connection's source `IP` (over udp and tcp the same as --client; default 0.0.0.0)"),
		forwarded: fs.String("forwarded-for", "", "explain: the request's X-Forwarded-For header `LIST` (doh, json)"),
		proxy:     fs.String("proxy-source", "", "explain: the source `IP` a PROXY v2 header gives (dot, doh, json)"),
		ip:        fs.String("ip", "", "explain: the JSON API's ip= `IP` (json)"),
	}
}

// request is the explain request of name the flags make.
func (o explainOpts) request(name string) control.GSLBExplainRequest {
	return control.GSLBExplainRequest{Name: name, Type: *o.qtype, Client: *o.client, ECS: *o.ecs, Via: *o.via,
		Peer: *o.peer, ForwardedFor: *o.forwarded, ProxySource: *o.proxy, IP: *o.ip}
}

// check refuses, as a usage error, the flag values the daemon would
// refuse: a --client, --peer, --proxy-source or --ip that is not an IP
// address, an --ecs that is neither a prefix nor an address, a --type
// that is no query type, a --via that is no front, and flags the front
// does not take (--forwarded-for over udp, say).
func (o explainOpts) check() error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"client", o.client}, {"peer", o.peer}, {"proxy-source", o.proxy}, {"ip", o.ip}} {
		if *f.v == "" {
			continue
		}
		if a, err := netip.ParseAddr(*f.v); err != nil || a.Zone() != "" {
			return usageErrorf("--%s %q: want an IP address, such as 198.51.100.7", f.name, *f.v)
		}
	}
	if *o.ecs != "" {
		p, err := netip.ParsePrefix(*o.ecs)
		if err != nil {
			var a netip.Addr
			a, err = netip.ParseAddr(*o.ecs)
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if err != nil || p.Addr().Zone() != "" {
			return usageErrorf("--ecs %q: want a prefix (198.51.100.0/24) or an address", *o.ecs)
		}
	}
	if t, ok := dns.StringToType[strings.ToUpper(*o.qtype)]; !ok || t == dns.TypeOPT || t == dns.TypeAXFR || t == dns.TypeIXFR {
		return usageErrorf("--type %q: want A, AAAA or another query type", *o.qtype)
	}
	via := *o.via
	stream := via == control.ViaUDP || via == control.ViaTCP
	switch {
	case !slices.Contains(control.Vias(), via):
		return usageErrorf("--via %q: want udp, tcp, dot, doh or json", via)
	case *o.forwarded != "" && via != control.ViaDoH && via != control.ViaJSON:
		return usageErrorf("--forwarded-for with --via %s: X-Forwarded-For is a header of doh and json requests", via)
	case *o.proxy != "" && stream:
		return usageErrorf("--proxy-source with --via %s: a PROXY header goes to dot, doh and json", via)
	case *o.ip != "" && via != control.ViaJSON:
		return usageErrorf("--ip with --via %s: ip= is a parameter of the JSON API (--via json)", via)
	case *o.client != "" && !stream:
		return usageErrorf("--client with --via %s: --client is the query's source over udp or tcp; give --peer, the connection's source", via)
	case *o.client != "" && *o.peer != "" && *o.client != *o.peer:
		return usageErrorf("--client and --peer both name the query's source over %s: give one", via)
	}
	if probs := o.request("x").Check(); len(probs) > 0 { // the daemon's own check: nothing above missed
		return usageErrorf("%s", strings.Join(probs, "; "))
	}
	return nil
}

// run asks the daemon how its GSLB responder answers name and prints
// the answer and its trace: the front and where it located the client
// (or why it refuses the request), the location matched, every policy tried in
// order with its pools and their members' states, the algorithm's
// choice, the last resort, the ECS scope and the TTL. With -o json: the
// control.GSLBExplainReply, indented.
func (o explainOpts) run(e *env, name string) error {
	ctx, cancel := e.request()
	defer cancel()
	rep, err := e.client().Explain(ctx, o.request(name))
	if err != nil {
		return err
	}
	if e.json() {
		return e.writeJSON(rep)
	}
	sw := &statusWriter{ew: &errWriter{w: e.stdout}}
	sw.explain(rep)
	return sw.ew.err
}

// explain writes an explain reply for people.
func (sw *statusWriter) explain(r *control.GSLBExplainReply) {
	sw.printf("question:    %s %s (serial %d)\n", r.Name, r.Type, r.Serial)
	if r.Via != "" {
		sw.printf("via:         %s\n", r.Via)
	}
	if r.Refused != "" {
		status := "the connection fails"
		if r.Status != 0 {
			status = fmt.Sprintf("HTTP %d", r.Status)
		}
		sw.printf("refused:     %s (%s; no answer)\n", r.Refused, status)
		return
	}
	if r.LocatedBy != "" {
		sw.printf("located by:  %s\n", r.LocatedBy)
	}
	if r.GSLBName != "" {
		sw.printf("gslb name:   %s\n", r.GSLBName)
	} else {
		sw.printf("gslb name:   - (zone data)\n")
	}
	client := r.Client + " (" + r.ClientFrom + ")"
	if r.ECS != "" && r.ClientFrom != "ecs" {
		client += ", ECS " + r.ECS + " not used: the name does not take ECS"
	}
	sw.printf("client:      %s\n", client)
	loc := "no map entry"
	if len(r.Location.Labels) > 0 || r.Location.Prefix != "" {
		loc = dash(labels(r.Location.Labels)) + " from " + dash(r.Location.Prefix)
	}
	sw.printf("location:    %s (holds over /%d)\n", loc, r.Location.Scope)
	if len(r.Policies) > 0 {
		sw.printf("policies, most specific first:\n")
		for i, p := range r.Policies {
			verdict := "no match"
			switch {
			case p.Answered:
				verdict = "matched, ANSWERED"
			case p.Matched:
				verdict = "matched, no member up"
			}
			sw.printf("  %d. %s: %s\n", i+1, policyMatch(p.Match), verdict)
			for j, pool := range p.Pools {
				role := ""
				if j > 0 {
					role = fmt.Sprintf(", fallback %d", j) // the policy's fallback chain, in order
				}
				sw.printf("     pool %s (%s%s): %d up\n", pool.Name, pool.Algorithm, role, pool.Healthy)
				tw := sw.table()
				fmt.Fprintf(tw, "       MEMBER\tADDRESS\tSTATE\tWEIGHT\tCHOSEN\n")
				for _, m := range pool.Members {
					chosen := "-"
					if m.Chosen {
						chosen = "yes"
					}
					fmt.Fprintf(tw, "       %s\t%s\t%s\t%d\t%s\n", m.Name, m.Address, m.State, m.Weight, chosen)
				}
				tw.Flush()
			}
		}
	}
	if r.LastResort != "" {
		why := "no policy had a member up"
		if r.Warming {
			why = "members still without a verdict (first probe round)"
		}
		sw.printf("last resort: %s (%s)\n", r.LastResort, why)
	}
	if r.Static {
		sw.printf("static:      the name answered its static set\n")
	}
	scope := "- (no ECS in the query)"
	if r.ECS != "" {
		scope = fmt.Sprintf("/%d", r.Scope)
	}
	sw.printf("reply:       %s, ttl %d, ECS scope %s\n", r.Rcode, r.TTL, scope)
	sw.printf("answer:      %s\n", dash(strings.Join(r.Addresses, ", ")))
	for _, rr := range r.Answer {
		sw.printf("  %s\n", strings.ReplaceAll(rr, "\t", " "))
	}
	for _, rr := range r.Authority {
		sw.printf("  authority: %s\n", strings.ReplaceAll(rr, "\t", " "))
	}
}

// labels is a label set as "level=value+level=value", by level.
func labels(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, "+")
}

// policyMatch is a policy's match for people: its labels, or "global".
func policyMatch(m map[string]string) string {
	if len(m) == 0 {
		return "global"
	}
	return labels(m)
}
