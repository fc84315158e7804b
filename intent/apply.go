package intent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"lbdns/configs"
)

// Request is one operator request for an override (lbctl drain, disable,
// enable).
type Request struct {
	// Action is ActionDrain, ActionDisable or ActionEnable.
	Action string
	// Resolver names the resolver.
	Resolver string
	// Pool and VIP limit the request (at most one); both empty means
	// every pool the resolver is in (for enable: every override of it).
	Pool, VIP string
	// Reason is stored with the override.
	Reason string
	// By names who asks ("uid N"); At is when (stored as the override's
	// Set time, in UTC).
	By string
	At time.Time
}

// View is what Apply needs of the running daemon: the configuration names
// are checked against, and what a change would do to the traffic.
type View interface {
	// Config returns the running configuration.
	Config() *configs.Config
	// Impact compares the plans the current facts give under before and
	// after: lost lists the services ("VIP proto/addr:port") that would
	// be left with no destination taking new queries, added the
	// resolvers ("NAME (ADDR:PORT)") after would newly put into traffic.
	Impact(before, after State) (lost, added []string)
}

// Kind classifies a refusal.
type Kind uint8

// Kinds of refusal; the control API maps them to 400, 404 and 409.
const (
	// BadRequest is a malformed request.
	BadRequest Kind = iota + 1
	// NotFound names something the configuration does not have.
	NotFound
	// Conflict is a well-formed request refused in the current state.
	Conflict
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case BadRequest:
		return "bad request"
	case NotFound:
		return "not found"
	case Conflict:
		return "conflict"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error is a refused request. Msg is the operator's message, as lbctl
// prints it.
type Error struct {
	Kind Kind
	Msg  string
}

// Error returns Msg.
func (e *Error) Error() string { return e.Msg }

func errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// Result says what a request did.
type Result struct {
	// Message is one line for the operator: what changed, or why
	// nothing did.
	Message string
	// Changed is false when the request left the state as it was.
	Changed bool
}

// Apply validates req against the view's configuration and applies it to
// cur. Drain and disable replace an override of the same scope; enable
// without a scope removes every override of the resolver, with a scope
// only that scope's. It refuses (Conflict) a drain or disable that would
// leave a service with no destination taking new queries, or that would
// put a resolver into traffic by making a pool fail open (an override
// only takes traffic away), and a scoped enable that matches nothing
// while a wider override is left. On error, or when nothing changed, next
// is cur. cur is not modified.
func Apply(cur State, req Request, view View) (State, Result, error) {
	o := Override{Resolver: req.Resolver, Pool: req.Pool, VIP: req.VIP, Action: req.Action,
		Reason: req.Reason, Set: req.At.UTC(), By: req.By}
	cfg := view.Config()
	if err := check(cfg, cur.Overrides, o); err != nil {
		return cur, Result{}, err
	}
	list, msg, changed := apply(cur.Overrides, o)
	if !changed {
		if o.Action == ActionEnable {
			if still := covering(cur.Overrides, o.Resolver); len(still) > 0 {
				return cur, Result{}, errorf(Conflict, "%s; it is still %s: run lbctl enable %s without --pool/--vip to clear every override",
					msg, strings.Join(still, ", "), o.Resolver)
			}
		}
		return cur, Result{Message: msg}, nil
	}
	next := cur.Clone()
	next.Overrides = list
	if o.Action != ActionEnable {
		lost, added := view.Impact(cur, next)
		if len(lost) > 0 {
			return cur, Result{}, errorf(Conflict, "refused: %s %s would leave %s with no destination taking new queries; enable or repair another resolver first",
				o.Action, o.Resolver, strings.Join(lost, ", "))
		}
		if len(added) > 0 {
			return cur, Result{}, errorf(Conflict, "refused: %s %s would put its pool below min_healthy, and the pool would fail open and send new queries to %s, which the health checks keep out; repair or enable another resolver first",
				o.Action, o.Resolver, strings.Join(added, ", "))
		}
	}
	return next, Result{Message: msg, Changed: true}, nil
}

// check validates the names of an override request against cfg. Enable is
// also accepted for a name that is gone from the configuration but still
// has overrides (to clear orphans).
func check(cfg *configs.Config, list []Override, o Override) error {
	switch o.Action {
	case ActionDrain, ActionDisable, ActionEnable:
	default:
		return errorf(BadRequest, "action: want drain, disable or enable, not %q", o.Action)
	}
	if o.Resolver == "" {
		return errorf(BadRequest, "resolver: missing")
	}
	if o.Pool != "" && o.VIP != "" {
		return errorf(BadRequest, "pool and vip: give at most one")
	}
	if o.Action == ActionEnable && len(covering(list, o.Resolver)) > 0 {
		return nil // may clear an orphan, or say which override is left
	}
	if cfg.Resolver(o.Resolver) == nil {
		return errorf(NotFound, "unknown resolver %q%s", o.Resolver, configs.Suggest(o.Resolver, resolverNames(cfg)))
	}
	pools := poolsOf(cfg, o.Resolver)
	switch {
	case o.Pool != "":
		if cfg.Pool(o.Pool) == nil {
			return errorf(NotFound, "unknown pool %q", o.Pool)
		}
		if !slices.Contains(pools, o.Pool) {
			return errorf(NotFound, "resolver %s is not a member of pool %s (it is in: %s)", o.Resolver, o.Pool, listOrNone(pools))
		}
	case o.VIP != "":
		v := cfg.VIP(o.VIP)
		if v == nil {
			return errorf(NotFound, "unknown VIP %q", o.VIP)
		}
		if !slices.Contains(pools, v.Pool) {
			return errorf(NotFound, "resolver %s is not in pool %s of VIP %s (it is in: %s)", o.Resolver, v.Pool, o.VIP, listOrNone(pools))
		}
	}
	return nil
}

// apply returns the override list after o, a one-line message, and
// whether anything changed. list is not modified.
func apply(list []Override, o Override) ([]Override, string, bool) {
	if o.Action == ActionEnable {
		var next []Override
		var removed []string
		for _, p := range list {
			if p.Resolver == o.Resolver && (o.Pool == "" && o.VIP == "" || p.SameScope(o)) {
				removed = append(removed, p.Action+" "+p.ScopeText())
				continue
			}
			next = append(next, p)
		}
		if len(removed) == 0 {
			return list, fmt.Sprintf("%s has no override %s; nothing changed", o.Resolver, o.ScopeText()), false
		}
		if still := covering(next, o.Resolver); len(still) > 0 {
			return next, fmt.Sprintf("%s: removed %s; still %s (lbctl enable %s without --pool/--vip clears every override)",
				o.Resolver, strings.Join(removed, ", "), strings.Join(still, ", "), o.Resolver), true
		}
		return next, fmt.Sprintf("%s enabled: removed %s; back under health-driven control", o.Resolver, strings.Join(removed, ", ")), true
	}
	next := slices.Clone(list)
	for i, p := range next {
		if p.SameScope(o) {
			if p.Action == o.Action && p.Reason == o.Reason {
				return list, fmt.Sprintf("%s is already %s %s; nothing changed", o.Resolver, past(o.Action), o.ScopeText()), false
			}
			next[i] = o
			if p.Action == o.Action {
				return next, fmt.Sprintf("%s still %s %s; reason updated", o.Resolver, past(o.Action), o.ScopeText()), true
			}
			return next, fmt.Sprintf("%s %s %s (was %s)", o.Resolver, past(o.Action), o.ScopeText(), past(p.Action)), true
		}
	}
	next = append(next, o)
	return next, fmt.Sprintf("%s %s %s", o.Resolver, past(o.Action), o.ScopeText()), true
}

func poolsOf(cfg *configs.Config, resolver string) []string {
	var out []string
	for i := range cfg.Pools {
		if slices.Contains(cfg.Pools[i].Members, resolver) {
			out = append(out, cfg.Pools[i].Name)
		}
	}
	return out
}

func resolverNames(cfg *configs.Config) []string {
	out := make([]string, 0, len(cfg.Resolvers))
	for i := range cfg.Resolvers {
		out = append(out, cfg.Resolvers[i].Name)
	}
	return out
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "no pool"
	}
	return strings.Join(s, ", ")
}
