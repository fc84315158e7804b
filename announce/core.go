// Package announce tells the network over BGP which of this host's
// addresses can take traffic: each VIP's /32 or /128 while its serving
// verdict says it serves (with a worse MED while it serves degraded), and
// each GSLB listen address while the responder answers on it; nothing
// else, ever. An operator's host drain marks every announcement with the
// GRACEFUL_SHUTDOWN community (RFC 8326), then withdraws it after the
// configured delay.
//
// The decision (Decide) is pure: a function of the configuration, the
// hub's verdicts, the drain intent and the time. The BGP speaker sits
// behind the small Speaker interface (GoBGP in NewGoBGP); the Announcer
// follows the hub, decides, and hands the speaker the exact set of paths
// to announce.
package announce

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"lbdns/configs"
	"lbdns/hub"
	"lbdns/intent"
)

// Kinds of announced prefixes.
const (
	// KindVIP is a VIP's address.
	KindVIP = "vip"
	// KindListener is a GSLB responder listen address.
	KindListener = "listener"
)

// Route is the decision for one prefix this configuration may announce.
type Route struct {
	// Prefix is the /32 or /128 of the address.
	Prefix netip.Prefix
	// Kind is KindVIP or KindListener.
	Kind string
	// Name is the VIP's name or the listen address(es) as configured
	// (several joined with ", " when they share the address).
	Name string
	// Announce says whether the prefix is announced.
	Announce bool
	// Degraded is set on an announced VIP that serves degraded.
	Degraded bool
	// Draining is set on a prefix announced with GRACEFUL_SHUTDOWN.
	Draining bool
	// MED and Communities are the path's (announced prefixes only).
	MED         uint32
	Communities []configs.Community
	// Reason says why, in one line an operator reads.
	Reason string
}

// Path is what a Speaker announces for one prefix.
type Path struct {
	Prefix      netip.Prefix
	MED         uint32
	Communities []configs.Community
}

// Equal reports whether p and q announce the same.
func (p Path) Equal(q Path) bool {
	return p.Prefix == q.Prefix && p.MED == q.MED && slices.Equal(p.Communities, q.Communities)
}

// Input is what Decide decides from.
type Input struct {
	// Config is the configuration in force: its [bgp] gives the MEDs,
	// communities and drain delay, its VIPs and GSLB listen addresses
	// the only prefixes that may be announced.
	Config *configs.Config
	// VIPs are the VIPs' serving verdicts (hub.Hub.VIPs).
	VIPs []hub.Verdict
	// Listeners are the GSLB listen addresses' verdicts
	// (hub.ResponderState.Listeners).
	Listeners []hub.Verdict
	// Drain is the host drain in force, nil when the host is enabled.
	Drain *intent.HostDrain
	// Now is the time of the decision.
	Now time.Time
}

// claim is one VIP or listen address of the configuration at an address.
type claim struct {
	kind, name string
	verdict    *hub.Verdict
}

// Decide returns a Route for every address of in.Config's VIPs and GSLB
// listen addresses (an unspecified listen address such as 0.0.0.0 is
// never announced, so it has none), in prefix order, and the time at
// which the decision changes by time alone (the end of a drain's delay;
// zero when none). A verdict whose address is not one of the
// configuration's is ignored: no input can make Decide announce a prefix
// that is not a VIP or listen address of its own configuration.
//
// A prefix is announced while every VIP and listen address at its address
// serves; a degraded VIP gets med_degraded and communities_degraded, the
// others med_up and communities_up. While the host is drained, announced
// prefixes also carry GRACEFUL_SHUTDOWN until drain_delay has passed
// since the drain began, and are withdrawn after.
func Decide(in Input) ([]Route, time.Time) {
	cfg := in.Config
	if cfg == nil {
		return nil, time.Time{}
	}
	claims := map[netip.Addr][]claim{}
	vipVerdicts := map[string]*hub.Verdict{}
	for i := range in.VIPs {
		vipVerdicts[in.VIPs[i].Name] = &in.VIPs[i]
	}
	for _, v := range cfg.VIPs {
		if !v.Addr.IsValid() {
			continue
		}
		c := claim{kind: KindVIP, name: v.Name}
		if vd := vipVerdicts[v.Name]; vd != nil && vd.Addr == v.Addr {
			c.verdict = vd
		}
		claims[v.Addr] = append(claims[v.Addr], c)
	}
	listenVerdicts := map[string]*hub.Verdict{}
	for i := range in.Listeners {
		listenVerdicts[in.Listeners[i].Name] = &in.Listeners[i]
	}
	for i, ap := range cfg.GSLB.Server.ListenAddrs {
		a := ap.Addr().Unmap()
		if !announceable(a) {
			continue
		}
		name := ap.String()
		if i < len(cfg.GSLB.Server.Listen) {
			name = cfg.GSLB.Server.Listen[i]
		}
		c := claim{kind: KindListener, name: name}
		if vd := listenVerdicts[name]; vd != nil && vd.Addr.Unmap() == a {
			c.verdict = vd
		}
		claims[a] = append(claims[a], c)
	}
	b := cfg.BGP
	if !b.Enabled {
		in.VIPs, in.Listeners = nil, nil // nothing is announced without [bgp]
	}
	var drainEnd, next time.Time
	if in.Drain != nil {
		drainEnd = in.Drain.Set.Add(b.DrainDelay.Duration)
	}
	out := make([]Route, 0, len(claims))
	for addr, cs := range claims {
		r := Route{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Kind: cs[0].kind}
		names := make([]string, 0, len(cs))
		serving := true
		var why []string
		for _, c := range cs {
			names = append(names, c.name)
			if c.kind != r.Kind {
				r.Kind = KindVIP // a VIP's address listened on by the responder too
			}
			switch {
			case !b.Enabled:
				serving = false
				why = append(why, "no [bgp] in the configuration")
			case c.verdict == nil:
				serving = false
				why = append(why, c.kind+" "+c.name+": no serving verdict yet")
			case !c.verdict.Serving:
				serving = false
				why = append(why, c.kind+" "+c.name+": "+c.verdict.Reason)
			default:
				if c.verdict.Degraded {
					r.Degraded = true
				}
				why = append(why, c.kind+" "+c.name+": "+c.verdict.Reason)
			}
		}
		r.Name = strings.Join(names, ", ")
		reason := strings.Join(why, "; ")
		switch {
		case !serving:
			r.Degraded = false
			r.Reason = "withdrawn: " + reason
		case in.Drain != nil && !in.Now.Before(drainEnd):
			r.Degraded = false
			r.Reason = fmt.Sprintf("withdrawn: host drained since %s (%s), drain delay %s over", in.Drain.Set.UTC().Format(time.RFC3339), drainText(in.Drain), fmtDelay(b.DrainDelay.Duration))
		default:
			r.Announce = true
			r.MED, r.Communities = uint32(b.MEDUp), slices.Clone(b.Up)
			if r.Degraded {
				r.MED, r.Communities = uint32(b.MEDDegraded), slices.Clone(b.Degraded)
			}
			r.Reason = "announced: " + reason
			if in.Drain != nil {
				r.Draining = true
				r.Communities = append(r.Communities, configs.GracefulShutdown)
				r.Reason = fmt.Sprintf("draining: GRACEFUL_SHUTDOWN until %s (%s), then withdrawn; %s", drainEnd.UTC().Format(time.RFC3339), drainText(in.Drain), reason)
				next = drainEnd
			}
		}
		if r.Announce && !hasPeerOf(b.Peers, addr) {
			fam := "IPv4"
			if addr.Is6() {
				fam = "IPv6"
			}
			r.Reason += " (no " + fam + " peer is configured: no router learns it)"
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y Route) int { return cmpPrefix(x.Prefix, y.Prefix) })
	return out, next
}

// Paths returns the paths of the announced routes, in their order.
func Paths(routes []Route) []Path {
	var out []Path
	for _, r := range routes {
		if r.Announce {
			out = append(out, Path{Prefix: r.Prefix, MED: r.MED, Communities: r.Communities})
		}
	}
	return out
}

// hasPeerOf reports whether a peer of a's family is configured (a
// prefix goes to the peers of its family only).
func hasPeerOf(peers []configs.BGPPeer, a netip.Addr) bool {
	return slices.ContainsFunc(peers, func(p configs.BGPPeer) bool { return p.Addr.Is4() == a.Is4() })
}

// announceable reports whether a listen address may be announced: not
// unspecified, loopback, link-local or multicast.
func announceable(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsMulticast()
}

// drainText says who drained and why.
func drainText(d *intent.HostDrain) string {
	s := "by " + cmp.Or(d.By, "unknown")
	if d.Reason != "" {
		s += ": " + d.Reason
	}
	return s
}

// fmtDelay formats a delay for reasons.
func fmtDelay(d time.Duration) string { return d.String() }

// cmpPrefix orders IPv4 before IPv6, then by address.
func cmpPrefix(a, b netip.Prefix) int {
	if c := cmp.Compare(a.Addr().BitLen(), b.Addr().BitLen()); c != 0 {
		return c
	}
	return a.Addr().Compare(b.Addr())
}
