// Package intent holds what operators said, apart from what the health
// checks found: today the resolver overrides of lbctl drain, disable and
// enable; the emergency switches and TTL raises of the GSLB responder
// (lbctl gslb off, on, ttl); the host drain; the client actions (lbctl
// block, limit, unblock), each ending on its own at its expiry. It
// validates a request against the running configuration,
// merges it into the state in force, refuses what would do harm (with the
// messages operators read), and persists the state through a Store (a
// local file now, a shared store for a fleet later).
//
// Apart from its stores, the package is pure: the plan a change would give
// is asked of the caller through View, and nothing here logs.
package intent

import (
	"slices"
	"time"

	"lbdns/configs"
)

// Actions of an override. The strings are the control API's
// (control.ActionDrain and its siblings) and the file's.
const (
	// ActionDrain keeps the resolver's open flows but sends it no new
	// queries.
	ActionDrain = "drain"
	// ActionDisable takes the resolver out of traffic.
	ActionDisable = "disable"
	// ActionEnable removes overrides (a request only, never stored).
	ActionEnable = "enable"
)

// Override is one operator override as persisted. Its JSON shape is the
// overrides file's since version 1.
type Override struct {
	// Resolver names the resolver.
	Resolver string `json:"resolver"`
	// Pool and VIP limit the override (at most one is set); both empty
	// means every pool the resolver is a member of.
	Pool string `json:"pool,omitempty"`
	VIP  string `json:"vip,omitempty"`
	// Action is ActionDrain or ActionDisable.
	Action string `json:"action"`
	// Reason is the operator's text.
	Reason string `json:"reason,omitempty"`
	// Set is when the override was set.
	Set time.Time `json:"set"`
	// By names who set it ("uid N").
	By string `json:"by,omitempty"`
}

// State is everything operators said. Each kind of intent is one field;
// a kind added after the overrides (the emergency switches, the TTL
// raises) is a new field marked omitempty, so a file without it keeps its
// bytes and its version.
type State struct {
	// Overrides are the resolver overrides in force, in the order they
	// were first set.
	Overrides []Override `json:"overrides"`
	// Emergencies are the GSLB emergency switches in force (lbctl gslb
	// off), in the order they were first set.
	Emergencies []Emergency `json:"emergencies,omitempty"`
	// TTLRaises are the GSLB TTL raises in force (lbctl gslb ttl).
	TTLRaises []TTLRaise `json:"ttl_raises,omitempty"`
	// Host is the host drain in force (lbctl host drain), nil when the
	// host is enabled.
	Host *HostDrain `json:"host_drain,omitempty"`
	// Clients are the client actions (lbctl block, limit), in the
	// order they were first set; each ends on its own at its Until.
	Clients []ClientAction `json:"clients,omitempty"`
}

// Clone returns a copy of s that shares no slice with it.
func (s State) Clone() State {
	return State{Overrides: slices.Clone(s.Overrides), Emergencies: slices.Clone(s.Emergencies), TTLRaises: slices.Clone(s.TTLRaises), Host: s.Host.clone(),
		Clients: slices.Clone(s.Clients)}
}

// SameScope reports whether o and p override the same resolver in the
// same scope (one replaces the other).
func (o Override) SameScope(p Override) bool {
	return o.Resolver == p.Resolver && o.Pool == p.Pool && o.VIP == p.VIP
}

// ScopeText describes the override's scope for messages: "in all pools",
// "in pool main", "in vip v4".
func (o Override) ScopeText() string { return "in " + Scope(o.Pool, o.VIP) }

// Scope describes an override's scope: "pool P", "vip V" or "all pools".
// Its wording is control.Scope's (control imports no project package, so
// the wording is written twice; a test pins both).
func Scope(pool, vip string) string {
	switch {
	case pool != "":
		return "pool " + pool
	case vip != "":
		return "vip " + vip
	}
	return "all pools"
}

// Orphaned reports why o no longer matches the configuration ("" when it
// still does): its resolver, pool or VIP was removed, or the resolver is
// no longer a member of the pool it is scoped to. An orphaned override is
// kept: it applies again if the name comes back.
func Orphaned(cfg *configs.Config, o Override) string {
	if cfg.Resolver(o.Resolver) == nil {
		return "resolver " + o.Resolver + " is not in the configuration"
	}
	pool := o.Pool
	if o.VIP != "" {
		v := cfg.VIP(o.VIP)
		if v == nil {
			return "VIP " + o.VIP + " is not in the configuration"
		}
		pool = v.Pool
	}
	if pool != "" {
		p := cfg.Pool(pool)
		if p == nil {
			return "pool " + pool + " is not in the configuration"
		}
		if !slices.Contains(p.Members, o.Resolver) {
			return "resolver " + o.Resolver + " is not a member of pool " + pool
		}
	}
	return ""
}

// covering describes the overrides of resolver ("disabled in all pools").
func covering(list []Override, resolver string) []string {
	var out []string
	for _, o := range list {
		if o.Resolver == resolver {
			out = append(out, past(o.Action)+" "+o.ScopeText())
		}
	}
	return out
}

// past is an action's past participle ("drained").
func past(action string) string {
	switch action {
	case ActionDrain:
		return "drained"
	case ActionDisable:
		return "disabled"
	}
	return action + "d"
}
