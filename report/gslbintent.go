package report

import (
	"errors"
	"fmt"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/intent"
)

// GSLBIntent is the status view of the GSLB emergency switches and TTL
// raises of st (switches first, each in the order set), with the names
// of cfg each applies to now, and orphaned entries marked; nil when there
// is none.
func GSLBIntent(cfg *configs.Config, st intent.State) []control.GSLBIntent {
	var out []control.GSLBIntent
	for _, e := range st.Emergencies {
		out = append(out, control.GSLBIntent{Kind: intent.ActionOff, Name: e.Name, Zone: e.Zone, Scope: e.ScopeText(), Mode: e.Mode,
			Reason: e.Reason, Set: e.Set, By: e.By, Names: namesUnder(cfg, e.Name, e.Zone), Orphaned: orphaned(cfg, e.Name, e.Zone)})
	}
	for _, t := range st.TTLRaises {
		out = append(out, control.GSLBIntent{Kind: intent.ActionTTL, Name: t.Name, Zone: t.Zone, Scope: t.ScopeText(), Seconds: t.Seconds,
			Reason: t.Reason, Set: t.Set, By: t.By, Names: namesUnder(cfg, t.Name, t.Zone), Orphaned: orphaned(cfg, t.Name, t.Zone)})
	}
	return out
}

func orphaned(cfg *configs.Config, name, zone string) bool {
	return cfg != nil && intent.GSLBOrphaned(cfg, name, zone) != ""
}

// namesUnder lists the GSLB names of cfg the scope (name, zone) covers.
func namesUnder(cfg *configs.Config, name, zone string) []string {
	out := []string{}
	if cfg == nil {
		return out
	}
	for i := range cfg.GSLB.Names {
		fq := cfg.GSLB.Names[i].FQDN
		if name != "" && fq == name || name == "" && (zone == "" || intent.ZoneOf(cfg, fq) == zone) {
			out = append(out, fq)
		}
	}
	return out
}

// GSLB tells a GSLB emergency request that changed the intent (req as
// asked by by, res as intent.ApplyGSLB answered it) in the event log: the
// event the responder rebuilds on, and the audit (who, why). Like
// Override, it writes no log line: the control server logs the request.
func (j *Journal) GSLB(req control.GSLBRequest, by string, res intent.Result) {
	j.event(control.Event{Kind: control.EventGSLB, Subject: control.GSLBScope(req.Name, req.Zone), Message: said(res, req.Reason, by)})
}

// IntentOrphans tells every override (Orphans) and every GSLB switch or
// raise of st that cfg no longer matches: each is kept, and applies again
// if its name comes back.
func (j *Journal) IntentOrphans(cfg *configs.Config, st intent.State) {
	j.Orphans(cfg, st.Overrides)
	for _, e := range GSLBIntent(cfg, st) {
		if !e.Orphaned {
			continue
		}
		why := intent.GSLBOrphaned(cfg, e.Name, e.Zone)
		j.log.Warn("orphaned GSLB "+kindText(e.Kind)+" kept (it applies again if the name comes back; lbctl gslb on / gslb ttl --clear removes it)",
			"scope", e.Scope, "why", why, "reason", e.Reason)
		j.event(control.Event{Kind: control.EventGSLB, Subject: e.Scope, Error: true,
			Message: fmt.Sprintf("orphaned GSLB %s kept: %s: %s", kindText(e.Kind), e.Scope, why)})
	}
}

// kindText names a GSLBIntent kind in messages.
func kindText(kind string) string {
	if kind == intent.ActionOff {
		return "emergency switch"
	}
	return "TTL raise"
}

// IntentError maps intent's refusals (*intent.Error) to the control API's
// kinds: Malformed, NotFound, Conflict; other errors pass through.
func IntentError(err error) error {
	var ie *intent.Error
	if !errors.As(err, &ie) {
		return err
	}
	kind := control.Malformed
	switch ie.Kind {
	case intent.NotFound:
		kind = control.NotFound
	case intent.Conflict:
		kind = control.Conflict
	}
	return control.Errorf(kind, "%s", ie.Msg)
}
