package intent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"lbdns/configs"
)

// Actions of a GSLB request (lbctl gslb off, on, ttl). The strings are
// the control API's (control.GSLBOff and its siblings).
const (
	// ActionOff switches intelligent resolution off: the names answer
	// their static set.
	ActionOff = "off"
	// ActionOn removes emergency switches (a request only, never stored).
	ActionOn = "on"
	// ActionTTL raises the TTL of the names' answers (or, with Clear,
	// removes raises).
	ActionTTL = "ttl"
)

// ModeStatic is the one emergency mode: intelligent resolution off, the
// names answer their static set with ECS scope 0.
const ModeStatic = "static"

// MaxTTLRaise is the largest TTL a raise may set, in seconds (one day).
const MaxTTLRaise = 86400

// Emergency is one emergency switch as persisted: intelligent resolution
// off for a name, a zone or every GSLB name.
type Emergency struct {
	// Name (a GSLB name's FQDN, lower case, final dot) or Zone (a zone's
	// apex) limits the switch (at most one is set); both empty means
	// every GSLB name.
	Name string `json:"name,omitempty"`
	Zone string `json:"zone,omitempty"`
	// Mode is ModeStatic.
	Mode string `json:"mode"`
	// Reason is the operator's text; Set is when it was set; By names
	// who set it ("uid N").
	Reason string    `json:"reason,omitempty"`
	Set    time.Time `json:"set"`
	By     string    `json:"by,omitempty"`
}

// TTLRaise is one TTL raise as persisted: the answers of a name, a zone's
// names or every GSLB name carry at least Seconds as their TTL.
type TTLRaise struct {
	// Name or Zone limit the raise as Emergency's do.
	Name string `json:"name,omitempty"`
	Zone string `json:"zone,omitempty"`
	// Seconds is the TTL the answers carry at least (1..MaxTTLRaise).
	Seconds int `json:"seconds"`
	// Reason, Set and By are Emergency's.
	Reason string    `json:"reason,omitempty"`
	Set    time.Time `json:"set"`
	By     string    `json:"by,omitempty"`
}

// GSLBScope describes a GSLB scope for messages: "name N", "zone Z" or
// "all names". Its wording is control.GSLBScope's (a test pins both).
func GSLBScope(name, zone string) string {
	switch {
	case name != "":
		return "name " + name
	case zone != "":
		return "zone " + zone
	}
	return "all names"
}

// ScopeText describes the switch's scope ("name www.example.com.").
func (e Emergency) ScopeText() string { return GSLBScope(e.Name, e.Zone) }

// ScopeText describes the raise's scope.
func (t TTLRaise) ScopeText() string { return GSLBScope(t.Name, t.Zone) }

// covers reports whether the scope (name, zone) holds the name fqdn of
// zone apex.
func covers(name, zone, apex, fqdn string) bool {
	switch {
	case name != "":
		return name == fqdn
	case zone != "":
		return zone == apex
	}
	return true
}

// specificity orders scopes: a name's before a zone's before all.
func specificity(name, zone string) int {
	switch {
	case name != "":
		return 2
	case zone != "":
		return 1
	}
	return 0
}

// EmergencyFor returns the emergency switch in force for the GSLB name
// fqdn of the zone apex (the most specific: its name's, its zone's, then
// the one of every name), or nil.
func (s State) EmergencyFor(apex, fqdn string) *Emergency {
	var best *Emergency
	for i := range s.Emergencies {
		e := &s.Emergencies[i]
		if covers(e.Name, e.Zone, apex, fqdn) && (best == nil || specificity(e.Name, e.Zone) > specificity(best.Name, best.Zone)) {
			best = e
		}
	}
	return best
}

// TTLFor returns the TTL raise in force for the GSLB name fqdn of the zone
// apex (the most specific, as EmergencyFor), or nil.
func (s State) TTLFor(apex, fqdn string) *TTLRaise {
	var best *TTLRaise
	for i := range s.TTLRaises {
		t := &s.TTLRaises[i]
		if covers(t.Name, t.Zone, apex, fqdn) && (best == nil || specificity(t.Name, t.Zone) > specificity(best.Name, best.Zone)) {
			best = t
		}
	}
	return best
}

// GSLBOrphaned reports why a switch or raise of scope (name, zone) no
// longer matches cfg ("" when it still does). An orphaned entry is kept:
// it applies again if the name comes back.
func GSLBOrphaned(cfg *configs.Config, name, zone string) string {
	switch {
	case name != "":
		if !slices.Contains(gslbNames(cfg), name) {
			return "GSLB name " + name + " is not in the configuration"
		}
	case zone != "":
		if !slices.Contains(gslbZones(cfg), zone) {
			return "GSLB zone " + zone + " is not in the configuration"
		}
	case len(cfg.GSLB.Names) == 0:
		return "no GSLB name is in the configuration"
	}
	return ""
}

// ZoneOf returns the apex of the most specific zone of cfg holding fqdn
// ("" when none does).
func ZoneOf(cfg *configs.Config, fqdn string) string {
	best := ""
	for _, z := range gslbZones(cfg) {
		if (fqdn == z || z == "." || strings.HasSuffix(fqdn, "."+z)) && len(z) > len(best) {
			best = z
		}
	}
	return best
}

// GSLBRequest is one operator request of lbctl gslb off, on or ttl.
type GSLBRequest struct {
	// Action is ActionOff, ActionOn or ActionTTL.
	Action string
	// Name or Zone limit the request (at most one; any case, the final
	// dot optional); both empty means every GSLB name (for on and ttl
	// --clear: every switch, or every raise).
	Name, Zone string
	// Seconds is the TTL of a raise; Clear makes ActionTTL remove raises.
	Seconds int
	Clear   bool
	// Reason is stored with the entry; required for off and a raise.
	Reason string
	// By names who asks; At is when (stored in UTC).
	By string
	At time.Time
}

// ApplyGSLB validates req against cfg and applies it to cur. Off and a
// TTL raise replace the entry of the same scope; on (and ttl with Clear)
// without a scope removes every switch (every raise), with a scope only
// that scope's, and refuses (Conflict) a scoped request that matches
// nothing while a wider entry still covers the scope. Names and zones are
// checked against cfg (NotFound, with a suggestion); on and a clear also
// accept the scope of an orphaned entry. On error, or when nothing
// changed, next is cur. cur is not modified.
func ApplyGSLB(cur State, req GSLBRequest, cfg *configs.Config) (State, Result, error) {
	req.Name, req.Zone = canonical(req.Name), canonical(req.Zone)
	if err := checkGSLB(cfg, cur, req); err != nil {
		return cur, Result{}, err
	}
	scope := GSLBScope(req.Name, req.Zone)
	at := req.At.UTC()
	next := cur.Clone()
	switch {
	case req.Action == ActionOff:
		e := Emergency{Name: req.Name, Zone: req.Zone, Mode: ModeStatic, Reason: req.Reason, Set: at, By: req.By}
		i := slices.IndexFunc(next.Emergencies, func(p Emergency) bool { return p.Name == e.Name && p.Zone == e.Zone })
		switch {
		case i < 0:
			next.Emergencies = append(next.Emergencies, e)
			return next, Result{Message: "intelligent resolution off for " + scope + ": static answers, ECS scope 0", Changed: true}, nil
		case next.Emergencies[i].Reason == e.Reason:
			return cur, Result{Message: "intelligent resolution is already off for " + scope + "; nothing changed"}, nil
		}
		next.Emergencies[i] = e
		return next, Result{Message: "intelligent resolution still off for " + scope + "; reason updated", Changed: true}, nil
	case req.Action == ActionTTL && !req.Clear:
		t := TTLRaise{Name: req.Name, Zone: req.Zone, Seconds: req.Seconds, Reason: req.Reason, Set: at, By: req.By}
		i := slices.IndexFunc(next.TTLRaises, func(p TTLRaise) bool { return p.Name == t.Name && p.Zone == t.Zone })
		msg := fmt.Sprintf("TTL of %s raised to %ds", scope, t.Seconds)
		switch {
		case i < 0:
			next.TTLRaises = append(next.TTLRaises, t)
			return next, Result{Message: msg, Changed: true}, nil
		case next.TTLRaises[i].Seconds == t.Seconds && next.TTLRaises[i].Reason == t.Reason:
			return cur, Result{Message: fmt.Sprintf("TTL of %s is already raised to %ds; nothing changed", scope, t.Seconds)}, nil
		}
		msg += fmt.Sprintf(" (was %ds)", next.TTLRaises[i].Seconds)
		next.TTLRaises[i] = t
		return next, Result{Message: msg, Changed: true}, nil
	case req.Action == ActionOn:
		var n int
		next.Emergencies, n = removeScoped(next.Emergencies, req.Name, req.Zone, func(e Emergency) (string, string) { return e.Name, e.Zone })
		if n == 0 {
			return nothingTo(cur, req, "intelligent resolution is not off for "+scope+"; nothing changed", "lbctl gslb on")
		}
		return next, Result{Message: "intelligent resolution back on for " + scope + ": dynamic answers" + stillText(next, req), Changed: true}, nil
	}
	var n int
	next.TTLRaises, n = removeScoped(next.TTLRaises, req.Name, req.Zone, func(t TTLRaise) (string, string) { return t.Name, t.Zone })
	if n == 0 {
		return nothingTo(cur, req, "the TTL of "+scope+" is not raised; nothing changed", "lbctl gslb ttl --clear")
	}
	return next, Result{Message: "TTL raise of " + scope + " cleared: configured TTLs again" + stillText(next, req), Changed: true}, nil
}

// removeScoped removes the entries of scope (name, zone) from list (every
// entry when both are empty) and returns how many it removed.
func removeScoped[T any](list []T, name, zone string, scopeOf func(T) (string, string)) ([]T, int) {
	if name == "" && zone == "" {
		return nil, len(list)
	}
	out := slices.DeleteFunc(list, func(e T) bool {
		n, z := scopeOf(e)
		return n == name && z == zone
	})
	return out, len(list) - len(out)
}

// wider lists the entries of st of req's kind still covering req's
// scope ("zone example.com.", "all names").
func wider(st State, req GSLBRequest) []string {
	var out []string
	add := func(name, zone string) {
		if name == req.Name && zone == req.Zone {
			return
		}
		if name == "" && (zone == "" || req.Name != "" && (zone == "." || strings.HasSuffix(req.Name, "."+zone))) {
			out = append(out, GSLBScope(name, zone))
		}
	}
	if req.Action == ActionOn {
		for _, e := range st.Emergencies {
			add(e.Name, e.Zone)
		}
	} else {
		for _, t := range st.TTLRaises {
			add(t.Name, t.Zone)
		}
	}
	return out
}

// nothingTo answers an on or a clear that removed nothing: a Conflict
// when a wider entry still covers the scope, else msg and no change.
func nothingTo(cur State, req GSLBRequest, msg, cmd string) (State, Result, error) {
	if w := wider(cur, req); len(w) > 0 {
		return cur, Result{}, errorf(Conflict, "%s; it is still covered by the entry of %s: run %s with that scope, or without --name/--zone to clear every entry",
			strings.TrimSuffix(msg, "; nothing changed"), strings.Join(w, ", "), cmd)
	}
	return cur, Result{Message: msg}, nil
}

// stillText says which wider entries still cover the scope after a
// scoped on or clear ("" when none).
func stillText(next State, req GSLBRequest) string {
	if w := wider(next, req); len(w) > 0 {
		return "; still covered by the entry of " + strings.Join(w, ", ")
	}
	return ""
}

// checkGSLB validates a GSLB request against cfg.
func checkGSLB(cfg *configs.Config, cur State, req GSLBRequest) error {
	switch req.Action {
	case ActionOff, ActionOn, ActionTTL:
	default:
		return errorf(BadRequest, "action: want off, on or ttl, not %q", req.Action)
	}
	if req.Name != "" && req.Zone != "" {
		return errorf(BadRequest, "name and zone: give at most one")
	}
	setting := req.Action == ActionOff || req.Action == ActionTTL && !req.Clear
	if req.Action == ActionTTL && !req.Clear && (req.Seconds < 1 || req.Seconds > MaxTTLRaise) {
		return errorf(BadRequest, "seconds: want 1 to %d, not %d", MaxTTLRaise, req.Seconds)
	}
	if req.Action != ActionTTL && (req.Seconds != 0 || req.Clear) {
		return errorf(BadRequest, "seconds and clear: only with ttl")
	}
	if setting && strings.TrimSpace(req.Reason) == "" {
		return errorf(BadRequest, "reason: required for gslb %s (operators reading the status must know why)", req.Action)
	}
	if !setting && hasScope(cur, req) {
		return nil // may clear an orphan
	}
	switch {
	case req.Name != "":
		if !slices.Contains(gslbNames(cfg), req.Name) {
			return errorf(NotFound, "unknown GSLB name %q%s", req.Name, configs.Suggest(req.Name, gslbNames(cfg)))
		}
	case req.Zone != "":
		if !slices.Contains(gslbZones(cfg), req.Zone) {
			return errorf(NotFound, "unknown GSLB zone %q%s", req.Zone, configs.Suggest(req.Zone, gslbZones(cfg)))
		}
	case setting && len(cfg.GSLB.Names) == 0:
		return errorf(NotFound, "no GSLB name is configured ([[gslb.name]])")
	}
	return nil
}

// hasScope reports whether cur has an entry of req's kind and scope.
func hasScope(cur State, req GSLBRequest) bool {
	if req.Action == ActionOn {
		return slices.ContainsFunc(cur.Emergencies, func(e Emergency) bool { return e.Name == req.Name && e.Zone == req.Zone })
	}
	return slices.ContainsFunc(cur.TTLRaises, func(t TTLRaise) bool { return t.Name == req.Name && t.Zone == req.Zone })
}

// canonical is a name lower case with its final dot ("" stays "").
func canonical(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s != "" && !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

func gslbNames(cfg *configs.Config) []string {
	out := make([]string, 0, len(cfg.GSLB.Names))
	for i := range cfg.GSLB.Names {
		n := &cfg.GSLB.Names[i]
		fq := n.FQDN
		if fq == "" {
			fq = canonical(n.Name)
		}
		out = append(out, fq)
	}
	return out
}

func gslbZones(cfg *configs.Config) []string {
	out := make([]string, 0, len(cfg.GSLB.Zones))
	for i := range cfg.GSLB.Zones {
		z := &cfg.GSLB.Zones[i]
		apex := z.Apex
		if apex == "" {
			apex = canonical(z.Name)
		}
		out = append(out, apex)
	}
	return out
}
