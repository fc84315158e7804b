package resolvers

import "lbdns/intent"

// RuleFrom turns one operator override into the pool policy's rule.
func RuleFrom(o intent.Override) Rule {
	r := Rule{Resolver: o.Resolver, Pool: o.Pool, VIP: o.VIP}
	switch o.Action {
	case intent.ActionDrain:
		r.Override = Drain
	case intent.ActionDisable:
		r.Override = Disable
	}
	return r
}

// RulesFrom turns the operator overrides into the pool policy's rules, in
// the same order.
func RulesFrom(ovs []intent.Override) []Rule {
	out := make([]Rule, 0, len(ovs))
	for _, o := range ovs {
		out = append(out, RuleFrom(o))
	}
	return out
}
