package intent

import (
	"errors"
	"fmt"
	"time"
)

// Actions of a host request (lbctl host drain, enable). The strings are
// the control API's (control.HostDrain and its sibling).
const (
	// ActionHostDrain drains the host: its route announcements are marked
	// with the graceful-shutdown community, then withdrawn.
	ActionHostDrain = "drain"
	// ActionHostEnable ends a host drain (a request only, never stored).
	ActionHostEnable = "enable"
)

// HostDrain is the host drain in force as persisted (lbctl host drain):
// the host's route announcements are marked GRACEFUL_SHUTDOWN (RFC 8326)
// from Set, and withdrawn once the configured drain delay has passed
// since. IPVS is left as it is.
type HostDrain struct {
	// Reason is the operator's text; Set is when the drain began; By
	// names who set it ("uid N").
	Reason string    `json:"reason,omitempty"`
	Set    time.Time `json:"set"`
	By     string    `json:"by,omitempty"`
}

// clone returns a copy of h (nil for nil).
func (h *HostDrain) clone() *HostDrain {
	if h == nil {
		return nil
	}
	c := *h
	return &c
}

// HostRequest is one host request as the control API hands it over.
type HostRequest struct {
	// Action is ActionHostDrain or ActionHostEnable.
	Action string
	// Reason is the operator's text (drain only).
	Reason string
	// By names the requester; At is when the request was made.
	By string
	At time.Time
	// NoRoutes is set when the host announces no route (no [bgp]): a
	// drain is recorded (the fleet view shows it) but withdraws nothing.
	NoRoutes bool
}

// ErrHostAction is the error of a host request whose action is neither
// drain nor enable.
var ErrHostAction = errors.New("intent: host action must be drain or enable")

// ApplyHost applies req to cur. A drain while the host is drained keeps
// the first drain's time (its delay runs from then) and takes the new
// reason; enable while not drained changes nothing. The returned state
// shares nothing with cur.
func ApplyHost(cur State, req HostRequest) (State, Result, error) {
	next := cur.Clone()
	switch req.Action {
	case ActionHostDrain:
		if cur.Host != nil {
			if cur.Host.Reason == req.Reason {
				return cur, Result{Message: "host already drained since " + cur.Host.Set.UTC().Format(time.RFC3339)}, nil
			}
			next.Host.Reason = req.Reason
			return next, Result{Message: "host drained (reason changed; drained since " + cur.Host.Set.UTC().Format(time.RFC3339) + ")", Changed: true}, nil
		}
		next.Host = &HostDrain{Reason: req.Reason, Set: req.At, By: req.By}
		if req.NoRoutes {
			return next, Result{Message: "host drained: recorded, but this host announces no route ([bgp] is off), so nothing is withdrawn", Changed: true}, nil
		}
		return next, Result{Message: "host drained: routes marked GRACEFUL_SHUTDOWN (65535:0), withdrawn after the drain delay", Changed: true}, nil
	case ActionHostEnable:
		if cur.Host == nil {
			return cur, Result{Message: "host not drained: nothing to enable"}, nil
		}
		next.Host = nil
		if req.NoRoutes {
			return next, Result{Message: "host enabled (this host announces no route: [bgp] is off)", Changed: true}, nil
		}
		return next, Result{Message: "host enabled: routes announced again while they serve", Changed: true}, nil
	}
	return cur, Result{}, fmt.Errorf("%w (got %q)", ErrHostAction, req.Action)
}
