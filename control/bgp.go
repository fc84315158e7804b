package control

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Host actions (lbctl host drain, enable). The strings are
// intent.ActionHostDrain's and its sibling's.
const (
	// HostDrain marks every route announcement with the graceful-shutdown
	// community, then withdraws it after the configured delay.
	HostDrain = "drain"
	// HostEnable ends a host drain.
	HostEnable = "enable"
)

// HostRequest is the body of POST /v1/host.
type HostRequest struct {
	// Action is HostDrain or HostEnable.
	Action string `json:"action"`
	// Reason is the operator's text (drain only).
	Reason string `json:"reason,omitempty"`
}

// HostReply answers a HostRequest.
type HostReply struct {
	// Message says what changed, or why nothing did.
	Message string `json:"message"`
	// Changed is false when the request left the intent as it was.
	Changed bool `json:"changed"`
	// Drain is the host drain in force after the request (nil: enabled).
	Drain *HostDrainStatus `json:"drain,omitempty"`
}

// HostDrainStatus is a host drain in force.
type HostDrainStatus struct {
	// Reason, Set and By are the operator's.
	Reason string    `json:"reason,omitempty"`
	Set    time.Time `json:"set"`
	By     string    `json:"by,omitempty"`
	// WithdrawAt is when the routes are withdrawn (Set plus the drain
	// delay); before, they are announced with GRACEFUL_SHUTDOWN. Zero
	// when the host announces no route (no [bgp]).
	WithdrawAt time.Time `json:"withdraw_at"`
}

// BGPStatus is the route announcer in /status (absent without [bgp]).
type BGPStatus struct {
	// RouterID and LocalAS are the speaker's.
	RouterID string `json:"router_id"`
	LocalAS  uint32 `json:"local_as"`
	// Peers are the sessions, in configuration order.
	Peers []BGPPeer `json:"peers"`
	// Prefixes are every prefix the configuration may announce, in
	// prefix order, announced or not, and why.
	Prefixes []BGPPrefix `json:"prefixes"`
	// Drain is the host drain in force (nil: the host is enabled).
	Drain *HostDrainStatus `json:"drain,omitempty"`
	// Error is the speaker's last error ("" when its last call worked).
	Error string `json:"error,omitempty"`
}

// BGPPeer is one BGP session.
type BGPPeer struct {
	// Address and AS are the router's.
	Address string `json:"address"`
	AS      uint32 `json:"as"`
	// State is idle, connect, active, opensent, openconfirm or
	// established.
	State string `json:"state"`
	// Since is when the session was established (absent when it is not);
	// UptimeSeconds is how long ago.
	Since         *time.Time `json:"since,omitempty"`
	UptimeSeconds float64    `json:"uptime_seconds"`
	// LastError is why the session last went down.
	LastError string `json:"last_error,omitempty"`
	// Reason says why a session that is not established does not come
	// up, as far as this host can tell from its kernel ("" when nothing
	// is known); ReasonCode names it: md5-mismatch (the kernel dropped
	// the router's segments for their TCP MD5 signature),
	// no-reply-password (our connection attempts get no reply while a
	// password is set) or no-reply.
	Reason     string `json:"reason,omitempty"`
	ReasonCode string `json:"reason_code,omitempty"`
}

// BGPPrefix is one prefix the configuration may announce.
type BGPPrefix struct {
	// Prefix is the /32 or /128.
	Prefix string `json:"prefix"`
	// Kind is "vip" or "listener"; Name the VIP's name or the listen
	// address.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Announced says whether it is announced now.
	Announced bool `json:"announced"`
	// MED and Communities are what it is announced with.
	MED         uint32   `json:"med,omitempty"`
	Communities []string `json:"communities,omitempty"`
	// Degraded: announced with the degraded MED; Draining: announced with
	// GRACEFUL_SHUTDOWN before its withdrawal; Held: a VIP that does not
	// serve, kept announced by the fleet's floor ([bgp] min_announcing).
	Degraded bool `json:"degraded,omitempty"`
	Draining bool `json:"draining,omitempty"`
	Held     bool `json:"held,omitempty"`
	// Reason says why.
	Reason string `json:"reason"`
}

// HostBackend answers host requests; a Backend that implements it gets
// POST /v1/host (others answer 404).
type HostBackend interface {
	// SetHost applies a host request. by names the requester.
	SetHost(ctx context.Context, req HostRequest, by string) (*HostReply, error)
}

// hostRoutes adds the host endpoint to rt when s's backend answers it.
func (s *Server) hostRoutes(rt *routes) {
	hb, ok := route[HostBackend](s.parts, s.backend)
	if !ok {
		return
	}
	rt.handle(http.MethodPost, APIPrefix+"/host", s.bounded(func(w http.ResponseWriter, r *http.Request) {
		serveChange(s, w, r, validateHost, hb.SetHost,
			func(rep *HostReply) string { return rep.Message },
			"host request", func(req HostRequest) []any { return []any{"action", req.Action, "reason", req.Reason} })
	}))
}

// validateHost checks a HostRequest: the action and the reason.
func validateHost(req HostRequest) error {
	var probs []string
	switch req.Action {
	case HostDrain:
	case HostEnable:
		if req.Reason != "" {
			probs = append(probs, "reason: only with drain")
		}
	case "":
		probs = append(probs, "action: missing (want drain or enable)")
	default:
		probs = append(probs, fmt.Sprintf("action: want drain or enable, not %q", req.Action))
	}
	return badRequest(append(probs, reasonProblems(req.Reason)...))
}

// SetHost asks the daemon to drain the host (its route announcements) or
// to enable it again.
func (c *Client) SetHost(ctx context.Context, req HostRequest) (*HostReply, error) {
	var rep HostReply
	return &rep, c.do(ctx, http.MethodPost, "/host", req, &rep)
}

// bgpView is the BGP section of the status page.
type bgpView struct {
	RouterID string
	LocalAS  uint32
	Peers    []bgpPeerView
	Prefixes []BGPPrefix
	// Drain is the host drain in force (nil when enabled); Withdrawn is
	// set once its delay is over.
	Drain              *HostDrainStatus
	DrainSet, Withdraw timeCell
	Withdrawn          bool
	Error              string
}

// bgpPeerView is one session on the page.
type bgpPeerView struct {
	BGPPeer
	Established bool
	Up          timeCell
}

// buildBGP is b's view at now (nil without [bgp]).
func buildBGP(b *BGPStatus, now time.Time) *bgpView {
	if b == nil {
		return nil
	}
	v := &bgpView{RouterID: b.RouterID, LocalAS: b.LocalAS, Prefixes: b.Prefixes, Drain: b.Drain, Error: b.Error}
	for _, p := range b.Peers {
		pv := bgpPeerView{BGPPeer: p, Established: p.State == "established"}
		if p.Since != nil {
			pv.Up = cell(*p.Since, now)
		} else {
			pv.Up = timeCell{Zero: true}
		}
		v.Peers = append(v.Peers, pv)
	}
	if d := b.Drain; d != nil {
		v.DrainSet, v.Withdraw, v.Withdrawn = cell(d.Set, now), cell(d.WithdrawAt, now), !now.Before(d.WithdrawAt)
	}
	return v
}
