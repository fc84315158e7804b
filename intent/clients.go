package intent

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"lbdns/configs"
)

// Actions of a client request (lbctl block, limit, unblock). The strings
// are the control API's (control.ClientBlock and its siblings).
const (
	// ActionBlock drops every packet from the client before IPVS.
	ActionBlock = "block"
	// ActionLimit drops a source address's packets above a rate.
	ActionLimit = "limit"
	// ActionUnblock removes a client action (a request only, never
	// stored).
	ActionUnblock = "unblock"
)

// Limits of client actions.
const (
	// MaxClientFor is the longest a client action may last.
	MaxClientFor = 7 * 24 * time.Hour
	// MinClientBits4 and MinClientBits6 are the shortest prefixes a
	// client action may name: a wider one would cut whole networks off.
	MinClientBits4 = 16
	MinClientBits6 = 48
	// MaxClientRate is the highest rate of a limit, in packets per second.
	MaxClientRate = configs.MaxActionsLimitQPS
)

// ClientAction is one client action as persisted: packets from Client
// (an address's /32 or /128, or a prefix) are dropped (block) or
// limited to Rate packets per second per source address (limit) until
// Until, when the action ends on its own.
type ClientAction struct {
	// Client is the address or prefix, masked, never IPv4-mapped.
	Client netip.Prefix `json:"client"`
	// Action is ActionBlock or ActionLimit.
	Action string `json:"action"`
	// Rate is a limit's packets per second per source address (0 for a
	// block).
	Rate int `json:"rate,omitempty"`
	// Until is when the action ends.
	Until time.Time `json:"until"`
	// Reason is the operator's text; Set is when the action was set; By
	// names who set it ("uid N").
	Reason string    `json:"reason"`
	Set    time.Time `json:"set"`
	By     string    `json:"by,omitempty"`
}

// ClientText is p as operators write it: an address without its /32 or
// /128, else the prefix.
func ClientText(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// Text describes the action: "block 192.0.2.7 until 2026-12-01T14:30:00Z",
// "limit 192.0.2.0/24 to 50/s until ...".
func (c ClientAction) Text() string {
	what := c.Action + " " + ClientText(c.Client)
	if c.Action == ActionLimit {
		what += fmt.Sprintf(" to %d/s", c.Rate)
	}
	return what + " until " + c.Until.UTC().Format(time.RFC3339)
}

// InForce reports whether the action is in force at now.
func (c ClientAction) InForce(now time.Time) bool { return now.Before(c.Until) }

// ClientsAt returns the client actions in force at now (a new slice).
func (s State) ClientsAt(now time.Time) []ClientAction {
	var out []ClientAction
	for _, c := range s.Clients {
		if c.InForce(now) {
			out = append(out, c)
		}
	}
	return out
}

// Expire returns s without the client actions that ended at or before
// now, and those actions; s is not modified.
func (s State) Expire(now time.Time) (State, []ClientAction) {
	var gone []ClientAction
	for _, c := range s.Clients {
		if !c.InForce(now) {
			gone = append(gone, c)
		}
	}
	if len(gone) == 0 {
		return s, nil
	}
	next := s.Clone()
	next.Clients = s.ClientsAt(now)
	return next, gone
}

// NextExpiry returns when the next client action of s ends (false when
// there is none).
func (s State) NextExpiry() (time.Time, bool) {
	var first time.Time
	for _, c := range s.Clients {
		if first.IsZero() || c.Until.Before(first) {
			first = c.Until
		}
	}
	return first, !first.IsZero()
}

// Protected is a network no client action may touch, and what it is
// ("resolver unbound-1", "actions.allow").
type Protected struct {
	Net  netip.Prefix
	What string
	// Whole is set for a configured client network (a GSLB topology
	// net): an action may name clients inside it, but not cover it
	// whole.
	Whole bool
}

// ClientPolicy is what a client request is checked against.
type ClientPolicy struct {
	// MaxEntries is the most actions in force at once.
	MaxEntries int
	// DefaultRate is a limit's rate when the request gives none.
	DefaultRate int
	// Protected are the networks no action may touch.
	Protected []Protected
	// Shared are the prefixes whose clients may be NAT gateways or shared
	// resolvers: a block there must be forced.
	Shared []netip.Prefix
}

// ClientPolicyOf is the policy of cfg: [actions], and as protected every
// back end, VIP, GSLB listen address and member, BGP router and etcd
// endpoint of the configuration, the networks of actions.allow, and the
// GSLB topology's inline nets (as whole networks).
func ClientPolicyOf(cfg *configs.Config) ClientPolicy {
	a := cfg.Actions
	pol := ClientPolicy{MaxEntries: a.MaxEntries, DefaultRate: a.DefaultLimitQPS, Shared: a.SharedNets}
	if pol.MaxEntries <= 0 {
		pol.MaxEntries = configs.DefaultActionsMaxEntries
	}
	if pol.DefaultRate <= 0 {
		pol.DefaultRate = configs.DefaultActionsLimitQPS
	}
	addr := func(ad netip.Addr, what string) {
		if ad.IsValid() {
			ad = ad.Unmap()
			pol.Protected = append(pol.Protected, Protected{Net: netip.PrefixFrom(ad, ad.BitLen()), What: what})
		}
	}
	for i := range cfg.Resolvers {
		addr(cfg.Resolvers[i].AddrPort.Addr(), "resolver "+cfg.Resolvers[i].Name)
	}
	for i := range cfg.VIPs {
		addr(cfg.VIPs[i].Addr, "VIP "+cfg.VIPs[i].Name)
	}
	for _, ap := range cfg.GSLB.Server.ListenAddrs {
		addr(ap.Addr(), "GSLB listen address "+ap.String())
	}
	for i := range cfg.GSLB.Pools {
		p := &cfg.GSLB.Pools[i]
		for j := range p.Members {
			addr(p.Members[j].Addr, "GSLB member "+p.Name+"/"+p.Members[j].Name)
			if p.Members[j].ProbeAddr != p.Members[j].Addr {
				addr(p.Members[j].ProbeAddr, "GSLB member "+p.Name+"/"+p.Members[j].Name+" (probe address)")
			}
		}
	}
	if cfg.BGP.Enabled {
		addr(cfg.BGP.RouterAddr, "BGP router id")
		for _, p := range cfg.BGP.Peers {
			addr(p.Addr, "BGP peer")
		}
	}
	if cfg.Fleet != nil {
		for _, e := range cfg.Fleet.Endpoints {
			host := strings.TrimPrefix(e, "https://")
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if ad, err := netip.ParseAddr(host); err == nil {
				addr(ad, "etcd endpoint "+e)
			}
		}
	}
	for i, n := range a.AllowNets {
		pol.Protected = append(pol.Protected, Protected{Net: n, What: fmt.Sprintf("actions.allow[%d] (%s)", i, ClientText(n))})
	}
	for _, n := range cfg.GSLB.Topology.Nets {
		if n.Net.IsValid() {
			pol.Protected = append(pol.Protected, Protected{Net: n.Net, What: "GSLB topology net " + n.Net.String(), Whole: true})
		}
	}
	return pol
}

// ClientRequest is one operator request of lbctl block, limit or
// unblock.
type ClientRequest struct {
	// Action is ActionBlock, ActionLimit or ActionUnblock.
	Action string
	// Client is the address or prefix, as the operator wrote it.
	Client string
	// Rate is a limit's packets per second per source address (0: the
	// policy's default).
	Rate int
	// For is how long a block or limit lasts (1s..MaxClientFor).
	For time.Duration
	// Force allows a block in a shared prefix.
	Force bool
	// Reason is stored with the action; required for block and limit.
	Reason string
	// By names who asks; At is when (stored in UTC).
	By string
	At time.Time
}

// ApplyClient validates req against pol and applies it to cur. Block and
// limit replace the action of the same client (its kind, rate, expiry
// and reason); unblock removes it. Actions that ended by req.At are
// dropped on the way. Refused: a malformed request (BadRequest); a
// client that covers or falls in a protected network, a block in a
// shared prefix without Force, a client that overlaps another action's,
// more than MaxEntries actions, and an unblock of a client inside
// another action's prefix (Conflict). On error, or when nothing changed,
// next is cur. cur is not modified.
func ApplyClient(cur State, req ClientRequest, pol ClientPolicy) (State, Result, error) {
	p, err := checkClient(req, pol)
	if err != nil {
		return cur, Result{}, err
	}
	at := req.At.UTC()
	live := cur.ClientsAt(at)
	i := slices.IndexFunc(live, func(c ClientAction) bool { return c.Client == p })
	text := ClientText(p)
	if req.Action == ActionUnblock {
		if i < 0 {
			if j := slices.IndexFunc(live, func(c ClientAction) bool { return c.Client.Overlaps(p) }); j >= 0 {
				return cur, Result{}, errorf(Conflict, "%s has no action of its own; it is covered by %s: unblock %s instead",
					text, live[j].Text(), ClientText(live[j].Client))
			}
			return cur, Result{Message: text + " has no block or limit; nothing changed"}, nil
		}
		was := live[i]
		next := cur.Clone()
		next.Clients = slices.Delete(live, i, i+1)
		return next, Result{Message: "removed " + was.Action + " of " + text + ": its packets are no longer dropped", Changed: true}, nil
	}
	if j := slices.IndexFunc(live, func(c ClientAction) bool { return c.Client != p && c.Client.Overlaps(p) }); j >= 0 {
		return cur, Result{}, errorf(Conflict, "refused: %s overlaps %s (%s); unblock that first or name a client that does not overlap",
			text, ClientText(live[j].Client), live[j].Text())
	}
	c := ClientAction{Client: p, Action: req.Action, Until: at.Add(req.For), Reason: req.Reason, Set: at, By: req.By}
	if c.Action == ActionLimit {
		c.Rate = req.Rate
		if c.Rate == 0 {
			c.Rate = pol.DefaultRate
		}
	}
	msg := c.Text()
	if c.Action == ActionBlock {
		msg = "blocked " + text + ": its packets are dropped before IPVS until " + c.Until.Format(time.RFC3339)
	} else {
		msg = fmt.Sprintf("limited %s to %d packets/s per source address until %s", text, c.Rate, c.Until.Format(time.RFC3339))
	}
	next := cur.Clone()
	if i >= 0 {
		msg += " (was " + live[i].Text() + ")"
		live[i] = c
	} else {
		if len(live) >= pol.MaxEntries {
			return cur, Result{}, errorf(Conflict, "refused: %d client actions are in force, the most actions.max_entries allows; unblock one first", len(live))
		}
		live = append(live, c)
	}
	next.Clients = live
	return next, Result{Message: msg, Changed: true}, nil
}

// checkClient validates a client request against pol and returns its
// client.
func checkClient(req ClientRequest, pol ClientPolicy) (netip.Prefix, error) {
	switch req.Action {
	case ActionBlock, ActionLimit, ActionUnblock:
	default:
		return netip.Prefix{}, errorf(BadRequest, "action: want block, limit or unblock, not %q", req.Action)
	}
	if strings.TrimSpace(req.Client) == "" {
		return netip.Prefix{}, errorf(BadRequest, "client: missing")
	}
	p, err := configs.ParseClient(strings.TrimSpace(req.Client))
	if err != nil {
		return netip.Prefix{}, errorf(BadRequest, "client %q: %v", req.Client, err)
	}
	if req.Action == ActionUnblock {
		if req.Rate != 0 || req.For != 0 || req.Force {
			return netip.Prefix{}, errorf(BadRequest, "rate, for and force: not with unblock")
		}
		return p, nil
	}
	switch {
	case p.Addr().Is4() && p.Bits() < MinClientBits4, p.Addr().Is6() && p.Bits() < MinClientBits6:
		return netip.Prefix{}, errorf(BadRequest, "client %s: a prefix shorter than /%d (IPv4) or /%d (IPv6) would cut whole networks off",
			p, MinClientBits4, MinClientBits6)
	case req.For <= 0:
		return netip.Prefix{}, errorf(BadRequest, "for: required, how long the %s lasts (such as 10m)", req.Action)
	case req.For < time.Second || req.For > MaxClientFor:
		return netip.Prefix{}, errorf(BadRequest, "for: want 1s to %s, not %s", MaxClientFor, req.For)
	case strings.TrimSpace(req.Reason) == "":
		return netip.Prefix{}, errorf(BadRequest, "reason: required for %s (operators reading the status must know why)", req.Action)
	case req.Action == ActionBlock && req.Rate != 0:
		return netip.Prefix{}, errorf(BadRequest, "rate: only with limit")
	case req.Action == ActionLimit && (req.Rate < 0 || req.Rate > MaxClientRate):
		return netip.Prefix{}, errorf(BadRequest, "rate: want 1 to %d packets per second, not %d", MaxClientRate, req.Rate)
	case req.Action == ActionLimit && req.Force:
		return netip.Prefix{}, errorf(BadRequest, "force: only with block")
	}
	for _, pr := range pol.Protected {
		if pr.Whole {
			if p.Bits() <= pr.Net.Bits() && p.Contains(pr.Net.Addr()) {
				return netip.Prefix{}, errorf(Conflict, "refused: %s covers the whole of %s, a configured network; name its clients instead", ClientText(p), pr.What)
			}
			continue
		}
		if p.Overlaps(pr.Net) {
			return netip.Prefix{}, errorf(Conflict, "refused: %s touches %s, which client actions never cover", ClientText(p), pr.What)
		}
	}
	if req.Action == ActionBlock && !req.Force {
		for _, s := range pol.Shared {
			if p.Overlaps(s) {
				return netip.Prefix{}, errorf(Conflict, "refused: %s is in %s (actions.shared: NAT gateways or shared resolvers may be there); limit it instead, or block --force",
					ClientText(p), ClientText(s))
			}
		}
	}
	return p, nil
}

// parseClients checks the client actions of a stored document.
func parseClients(st State) error {
	for i, c := range st.Clients {
		switch {
		case !c.Client.IsValid():
			return fmt.Errorf("clients[%d]: client missing", i)
		case c.Client.Masked() != c.Client || c.Client.Addr().Is4In6() || c.Client.Addr().Zone() != "":
			return fmt.Errorf("clients[%d]: client %s is not canonical (no host bits, not IPv4-mapped)", i, c.Client)
		case c.Action != ActionBlock && c.Action != ActionLimit:
			return fmt.Errorf("clients[%d]: action %q is not block or limit", i, c.Action)
		case c.Action == ActionBlock && c.Rate != 0:
			return fmt.Errorf("clients[%d]: a block with a rate", i)
		case c.Action == ActionLimit && (c.Rate < 1 || c.Rate > MaxClientRate):
			return fmt.Errorf("clients[%d]: rate %d is not 1 to %d", i, c.Rate, MaxClientRate)
		case c.Until.IsZero():
			return fmt.Errorf("clients[%d]: until missing", i)
		}
		for _, p := range st.Clients[:i] {
			if p.Client.Overlaps(c.Client) {
				return fmt.Errorf("clients[%d]: %s overlaps %s", i, ClientText(c.Client), ClientText(p.Client))
			}
		}
	}
	return nil
}
