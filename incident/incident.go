// Package incident summarises a daemon's status for the person on call:
// each thing that is not as configured, worst first, in one line — what
// it is, how bad (how much capacity is left, what clients get instead),
// since when, the first thing to check or do, and the runbook section of
// the alert that covers it. It is a pure function of a control.Status:
// the status page, lbctl status and /status show what it returns.
package incident

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"lbdns/control"
)

// The severities of an incident, worst first.
const (
	// Critical: clients get wrong or no answers, or will at the next
	// failure (a pool below its minimum, a VIP not serving, names on
	// their last resort).
	Critical = "critical"
	// Major: capacity is down by half or more, or a safety net is off
	// (etcd unreachable, a flood alarm, client actions not enforced).
	Major = "major"
	// Minor: capacity is down by less than half, or an operator's
	// action is in force.
	Minor = "minor"
	// Info: nothing is wrong, but the daemon is not doing everything
	// it would (a dry run, the warm-up).
	Info = "info"
)

// sinceOrder orders the oldest first, an unknown start after every known
// one.
func sinceOrder(a, b time.Time) int {
	switch {
	case a.IsZero() || b.IsZero():
		return cmp.Compare(btoi(a.IsZero()), btoi(b.IsZero()))
	}
	return a.Compare(b)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rank orders severities, worst first.
func rank(s string) int {
	switch s {
	case Critical:
		return 0
	case Major:
		return 1
	case Minor:
		return 2
	}
	return 3
}

// runbook is the RUNBOOK.md section of the alert named alert.
func runbook(alert string) string { return "RUNBOOK.md#" + strings.ToLower(alert) }

// Summarize returns what is not as configured in st, worst first (then
// the oldest first, those whose start is unknown last); empty (not nil) when everything is.
func Summarize(st *control.Status) []control.Incident {
	out := []control.Incident{}
	add := func(in control.Incident) { out = append(out, in) }
	d := st.Daemon
	if d.LastReloadError != "" {
		add(control.Incident{Severity: Major, What: "configuration",
			Summary: "the last reload failed; the configuration loaded " + stamp(d.LastReload) + " stays in force: " + d.LastReloadError,
			Action:  "lbdnsd -check-config FILE names the key and line; fix it and lbctl reload",
			Runbook: runbook("LbdnsConfigReloadFailed")})
	}
	for i := range st.VIPs {
		v := &st.VIPs[i]
		if v.Serving != nil && !*v.Serving && !d.DryRun { // a dry run serves nothing: said once below
			add(control.Incident{Severity: Critical, What: "VIP " + v.Name,
				Summary: fmt.Sprintf("VIP %s (%s) is not serving: %s", v.Name, v.Address, v.ServingReason),
				Effect:  "queries to " + v.Address + " get no answer from this host" + announceNote(st),
				Action:  "lbctl status (pool " + v.Pool + ": each resolver's state and why it is out)",
				Runbook: runbook("LbdnsVIPNotServing")})
		}
	}
	for i := range st.Pools {
		if in, ok := pool(&st.Pools[i]); ok {
			add(in)
		}
	}
	for i := range st.GSLB {
		if in, ok := gslbPool(&st.GSLB[i], st.GSLB); ok {
			add(in)
		}
	}
	if r := st.GSLBResponder; r != nil {
		responder(r, add)
	}
	for _, g := range st.GSLBIntent {
		switch g.Kind {
		case "off":
			add(control.Incident{Severity: Major, What: "GSLB emergency switch",
				Summary: "intelligent resolution is OFF for " + g.Scope + " (static answers, ECS scope 0), by " + cmp.Or(g.By, "an operator") + reasonOf(g.Reason),
				Since:   g.Set, Effect: "clients get the static answers whatever their location or the members' health",
				Action:  "lbctl gslb on" + scopeArg(g) + " when the cause is fixed",
				Runbook: runbook("LbdnsGSLBEmergencyLeftOn")})
		case "ttl":
			add(control.Incident{Severity: Minor, What: "GSLB TTL raise",
				Summary: fmt.Sprintf("the TTL of %s is raised to %d s, by %s%s", g.Scope, g.Seconds, cmp.Or(g.By, "an operator"), reasonOf(g.Reason)),
				Since:   g.Set, Effect: "resolvers keep the answers longer: member changes reach clients later",
				Action:  "lbctl gslb ttl --clear" + scopeArg(g) + " --reason TEXT when it is no longer needed",
				Runbook: runbook("LbdnsGSLBEmergencyLeftOn")})
		}
	}
	if f := st.Fleet; f != nil && !f.Reachable {
		add(control.Incident{Severity: Major, What: "fleet etcd",
			Summary: "etcd is unreachable" + errOf(f.Error) + "; the intent applied last (revision " + fmt.Sprint(f.IntentRevision) + ", from " + f.IntentSource + ") stays in force",
			Since:   f.Since, Effect: "every intent change (drain, switch, block) is refused until etcd is back; answers go on",
			Action:  "lbctl fleet status; check the etcd members and this host's path to them",
			Runbook: runbook("LbdnsFleetEtcdUnreachable")})
	}
	if b := st.BGP; b != nil {
		bgp(b, add)
	}
	if f := st.Flood; f != nil {
		for _, a := range f.Alarms {
			add(control.Incident{Severity: Major, What: "flood",
				Summary: "flood alarm: " + a.Reason, Since: a.Since,
				Effect:  "answers go on; the alarm names the clients and names behind it",
				Action:  "lbctl top; lbctl limit CLIENT --rate N or lbctl block CLIENT when a client is the cause",
				Runbook: runbook("LbdnsFloodRateRise")})
		}
	}
	if c := st.Clients; c != nil && !c.Enforced && len(c.Entries) > 0 {
		add(control.Incident{Severity: Major, What: "client actions",
			Summary: fmt.Sprintf("%d client block(s) or limit(s) NOT ENFORCED by the kernel%s", len(c.Entries), errOf(c.Error)),
			Effect:  "the blocked and limited clients are answered as any other",
			Action:  "journalctl -u lbdnsd for the nftables error; lbdnsd needs CAP_NET_ADMIN",
			Runbook: runbook("LbdnsClientActionsNotEnforced")})
	}
	for _, o := range st.Overrides {
		add(control.Incident{Severity: Minor, What: "override",
			Summary: fmt.Sprintf("%s %s by %s%s", o.Action, o.Resolver, cmp.Or(o.By, "an operator"), reasonOf(o.Reason)),
			Since:   o.Set, Action: "lbctl enable " + o.Resolver + " when it is done",
			Runbook: runbook("LbdnsOverrideLeftOn")})
	}
	if d.DryRun {
		add(control.Incident{Severity: Info, What: "dry run",
			Summary: "DRY RUN: the IPVS table is computed, NOT applied; no VIP serves",
			Action:  "start lbdnsd without -dry-run to serve"})
	} else if !d.Warm {
		add(control.Incident{Severity: Info, What: "warm-up",
			Summary: "warming up: waiting for a first verdict on every back end; the IPVS table is not touched yet",
			Since:   d.Started})
	}
	slices.SortStableFunc(out, func(a, b control.Incident) int {
		return cmp.Or(cmp.Compare(rank(a.Severity), rank(b.Severity)), sinceOrder(a.Since, b.Since))
	})
	return out
}

// pool is the incident of a resolver pool with members out, graded by
// the share of its enabled members still healthy.
func pool(p *control.Pool) (control.Incident, bool) {
	if p.Enabled == 0 || p.Healthy >= p.Enabled {
		return control.Incident{}, false
	}
	in := control.Incident{What: "pool " + p.Name, Since: outSince(p)}
	capacity := fmt.Sprintf("%d of %d resolvers healthy (%d enabled, min healthy %d)", p.Healthy, p.Total, p.Enabled, p.MinHealthy)
	in.Summary = "pool " + p.Name + ": " + capacity
	in.Effect = fmt.Sprintf("its VIPs are served by %s", plural(p.Healthy, "resolver"))
	in.Runbook = runbook("LbdnsBackendDownLong")
	switch {
	case p.FailOpen || p.Healthy < p.MinHealthy:
		in.Severity = Critical
		in.Summary = "pool " + p.Name + " BELOW MINIMUM: " + capacity
		in.Effect = "fails open: traffic stays on its last good members, failing ones included"
		in.Runbook = runbook("LbdnsPoolFailingOpen")
	case 2*p.Healthy <= p.Enabled:
		in.Severity = Major
	default:
		in.Severity = Minor
	}
	switch p.Diagnosis {
	case "vendor-wide-failure":
		in.Runbook = runbook("LbdnsVendorWideFailure")
	case "upstream-failure":
		in.Runbook = runbook("LbdnsUpstreamFailure")
	}
	if p.Detail != "" {
		in.Summary += "; " + p.Detail
	}
	in.Action = "lbctl status (pool " + p.Name + ": each resolver's last probe result and why it is out)"
	return in, true
}

// outSince is when the pool's first member still out went out.
func outSince(p *control.Pool) time.Time {
	var t time.Time
	for _, m := range p.Members {
		if m.State == "up" || m.Override == control.ActionDisable || m.Since.IsZero() {
			continue
		}
		if t.IsZero() || m.Since.Before(t) {
			t = m.Since
		}
	}
	return t
}

// gslbPool is the incident of a GSLB pool with members down (all is
// every GSLB pool, for its fallback's state).
func gslbPool(p *control.GSLBPool, all []control.GSLBPool) (control.Incident, bool) {
	if p.Total == 0 || p.Up >= p.Total {
		return control.Incident{}, false
	}
	in := control.Incident{What: "GSLB pool " + p.Name}
	var down []string
	for _, m := range p.Members {
		if m.State == "up" {
			continue
		}
		r := m.Name + " " + m.State
		if m.Reason != "" {
			r += " (" + m.Reason + ")"
		}
		down = append(down, r)
		if !m.Since.IsZero() && (in.Since.IsZero() || m.Since.Before(in.Since)) {
			in.Since = m.Since
		}
	}
	capacity := fmt.Sprintf("%d of %d members up (needs %d)", p.Up, p.Total, max(p.AtLeast, 1))
	in.Summary = "GSLB pool " + p.Name + ": " + capacity
	in.Effect = "its clients are answered with the " + plural(p.Up, "member") + " up"
	in.Runbook = runbook("LbdnsGSLBMemberDown")
	switch {
	case p.Up < max(p.AtLeast, 1):
		in.Severity = Critical
		in.Summary = "GSLB pool " + p.Name + " DOWN: " + capacity
		in.Effect = downEffect(p, all)
		in.Runbook = runbook("LbdnsGSLBPoolDown")
	case 2*p.Up <= p.Total:
		in.Severity = Major
	default:
		in.Severity = Minor
	}
	in.Summary += ": " + strings.Join(down, "; ")
	in.Action = "lbctl gslb status (each member's monitors and last result)"
	return in, true
}

// downEffect says what the clients of GSLB pool p, down, get: its
// fallback's members while that is up, else their names' next policy or
// last resort.
func downEffect(p *control.GSLBPool, all []control.GSLBPool) string {
	seen := map[string]bool{p.Name: true}
	for f := p.Fallback; f != "" && !seen[f]; {
		seen[f] = true
		i := slices.IndexFunc(all, func(q control.GSLBPool) bool { return q.Name == f })
		if i < 0 {
			break
		}
		if q := &all[i]; q.Up >= max(q.AtLeast, 1) {
			return "its clients are answered from pool " + q.Name + " (the fallback, " + fmt.Sprintf("%d of %d up", q.Up, q.Total) + ")"
		}
		f = all[i].Fallback
	}
	return "its clients are answered by their names' next policy, or by their last resort when none is left"
}

// responder adds the GSLB responder's incidents.
func responder(r *control.GSLBResponder, add func(control.Incident)) {
	if r.ListenError != "" {
		add(control.Incident{Severity: Critical, What: "GSLB responder",
			Summary: "the GSLB responder cannot listen: " + r.ListenError,
			Effect:  "no GSLB name is answered by this host",
			Action:  "check [gslb.server] listen and what holds the port (ss -lunp)",
			Runbook: runbook("LbdnsGSLBListenerNotServing")})
	}
	for _, l := range r.Listeners {
		if !l.Serving {
			add(control.Incident{Severity: Critical, What: "GSLB listener " + l.Listen,
				Summary: "GSLB listener " + l.Listen + " not serving: " + l.Reason,
				Effect:  "queries to " + l.Listen + " get no answer from this host",
				Action:  "lbctl gslb status",
				Runbook: runbook("LbdnsGSLBListenerNotServing")})
		}
	}
	if r.LastBuildError != "" {
		add(control.Incident{Severity: Major, What: "GSLB answers",
			Summary: "the GSLB answers cannot be rebuilt: " + r.LastBuildError,
			Effect:  "the answers built " + stamp(r.LastBuild) + " stay in force: member changes since are not followed",
			Action:  "lbctl gslb status; journalctl -u lbdnsd",
			Runbook: runbook("LbdnsGSLBBuildFailing")})
	}
	var names []string
	var since time.Time
	for _, l := range r.LastResort {
		if l.Warming {
			continue
		}
		names = append(names, l.Name+" "+l.Type+" → "+l.LastResort)
		if !l.Since.IsZero() && (since.IsZero() || l.Since.Before(since)) {
			since = l.Since
		}
	}
	if len(names) > 0 {
		add(control.Incident{Severity: Critical, What: "GSLB last resort",
			Summary: plural(len(names), "name") + " answered by their last resort: " + strings.Join(names, ", "),
			Since:   since,
			Effect:  "those clients get the last-resort answer, whatever their location, until a pool of theirs is up",
			Action:  "lbctl gslb status (which pools are down, and why)",
			Runbook: runbook("LbdnsGSLBLastResort")})
	}
}

// bgp adds the route announcer's incidents.
func bgp(b *control.BGPStatus, add func(control.Incident)) {
	for _, p := range b.Peers {
		if p.State != "established" {
			add(control.Incident{Severity: Major, What: "BGP peer " + p.Address,
				Summary: fmt.Sprintf("BGP session to %s (AS %d) is %s%s", p.Address, p.AS, p.State, errOf(cmp.Or(p.Reason, p.LastError))),
				Effect:  "the router does not hear this host's routes over this session",
				Action:  "lbctl bgp status; check the router's side of the session",
				Runbook: runbook("LbdnsBGPSessionDown")})
		}
	}
	if d := b.Drain; d != nil {
		add(control.Incident{Severity: Minor, What: "host drain",
			Summary: "this host is DRAINED by " + cmp.Or(d.By, "an operator") + reasonOf(d.Reason),
			Since:   d.Set, Effect: "its routes are withdrawn or on their way out: clients go to the other hosts",
			Action:  "lbctl host enable when the work is done",
			Runbook: runbook("LbdnsBGPHostDrainedLong")})
	}
}

// announceNote says, in a fleet with BGP, that the route follows.
func announceNote(st *control.Status) string {
	if st.BGP != nil {
		return " (its route is withdrawn: clients go to the other hosts)"
	}
	return ""
}

// stamp is t in UTC to the second, for a summary line.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "earlier"
	}
	return "at " + t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func reasonOf(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

func errOf(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ")"
}

// scopeArg is the lbctl gslb on or ttl argument of an intent entry
// (none for every name).
func scopeArg(g control.GSLBIntent) string {
	switch {
	case g.Name != "":
		return " --name " + g.Name
	case g.Zone != "":
		return " --zone " + g.Zone
	}
	return ""
}

// plural is "n thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
