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
	client, ecs, qtype *string
}

// explainFlags registers the flags of gslb explain on fs.
func explainFlags(fs *flag.FlagSet) explainOpts {
	return explainOpts{
		client: fs.String("client", "", "explain: the query's source `IP` (the recursive resolver; default 0.0.0.0)"),
		ecs:    fs.String("ecs", "", "explain: the query's EDNS Client Subnet `PREFIX` (198.51.100.0/24, or an address)"),
		qtype:  fs.String("type", "A", "explain: the query `type` (A, AAAA, or another: TXT for the whoami name)"),
	}
}

// check refuses, as a usage error, the flag values the daemon would
// refuse: a --client that is not an IP address, an --ecs that is neither
// a prefix nor an address, a --type that is no query type.
func (o explainOpts) check() error {
	if *o.client != "" {
		if a, err := netip.ParseAddr(*o.client); err != nil || a.Zone() != "" {
			return usageErrorf("--client %q: want an IP address, such as 198.51.100.7", *o.client)
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
	return nil
}

// run asks the daemon how its GSLB responder answers name and prints
// the answer and its trace: the location matched, every policy tried in
// order with its pools and their members' states, the algorithm's
// choice, the last resort, the ECS scope and the TTL. With -o json: the
// control.GSLBExplainReply, indented.
func (o explainOpts) run(e *env, name string) error {
	ctx, cancel := e.request()
	defer cancel()
	rep, err := e.client().Explain(ctx, control.GSLBExplainRequest{Name: name, Type: *o.qtype, Client: *o.client, ECS: *o.ecs})
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
