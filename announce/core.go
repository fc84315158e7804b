// Package announce tells the network over BGP which of this host's
// addresses can take traffic: each VIP's /32 or /128 while its serving
// verdict says it serves (with a worse MED while it serves degraded), and
// each GSLB listen address while the responder answers on it: those of
// [gslb.server] listen, and those of the encrypted fronts ([gslb.tls]
// doh_listen and dot_listen, named "doh 192.0.2.10:443" and "dot
// 192.0.2.10:853") while their front listens and the responder answers
// (a front whose socket cannot be bound or whose certificate cannot be
// loaded does not serve); nothing else, ever. An operator's host drain marks every announcement with the
// GRACEFUL_SHUTDOWN community (RFC 8326), then withdraws it after the
// configured delay.
//
// With [fleet] and [bgp] min_announcing, a VIP that stops serving while
// it is not truly dead (hub.Verdict.Partial: a service of it still takes
// traffic) stays announced, with the degraded MED, while fewer than
// min_announcing other hosts of the fleet announce it (the floor); a VIP
// with no destination taking traffic is withdrawn at once whatever the
// fleet, and an operator's drain is always honoured. With drain_on_stop,
// lbdnsd stopping drains like a host drain (drain_on_stop_delay), then
// withdraws.
//
// The decision (Decide) is pure: a function of the configuration, the
// hub's verdicts, the drain intent, the fleet's view of the other hosts'
// announcements, what is announced now and the time. The BGP speaker sits
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
	"lbdns/fleet"
	"lbdns/hub"
	"lbdns/intent"
)

// Kinds of announced prefixes.
const (
	// KindVIP is a VIP's address.
	KindVIP = "vip"
	// KindListener is a GSLB responder listen address: of
	// [gslb.server] listen, or of an encrypted front ([gslb.tls]
	// doh_listen, dot_listen; named "doh ADDR", "dot ADDR").
	KindListener = "listener"
)

// Route is the decision for one prefix this configuration may announce.
type Route struct {
	// Prefix is the /32 or /128 of the address.
	Prefix netip.Prefix
	// Kind is KindVIP or KindListener.
	Kind string
	// Name is the VIP's name or the listen address(es) as configured,
	// a front's with its front before it ("doh 192.0.2.10:443"; several
	// joined with ", " when they share the address).
	Name string
	// Announce says whether the prefix is announced.
	Announce bool
	// Degraded is set on an announced VIP that serves degraded.
	Degraded bool
	// Draining is set on a prefix announced with GRACEFUL_SHUTDOWN.
	Draining bool
	// Held is set on a VIP that does not serve, kept announced (as
	// degraded) by the fleet's announcement floor.
	Held bool
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
	// Fronts are the verdicts of the encrypted fronts' listen addresses
	// (hub.ResponderState.Fronts: "doh ADDR", "dot ADDR").
	Fronts []hub.Verdict
	// Drain is the host drain in force, nil when the host is enabled.
	Drain *intent.HostDrain
	// Stopping is when lbdnsd began to stop with drain_on_stop (zero
	// while it runs): every announced prefix is marked
	// GRACEFUL_SHUTDOWN until drain_on_stop_delay has passed, then
	// withdrawn.
	Stopping time.Time
	// Fleet is the fleet's view of the other hosts' announcements (nil
	// without [fleet]: no floor).
	Fleet *FleetView
	// Announced are the prefixes announced now: the floor keeps a
	// prefix announced, it never announces one anew.
	Announced []netip.Prefix
	// Now is the time of the decision.
	Now time.Time
}

// FleetView is what the fleet says of the other hosts' announcements,
// for the floor.
type FleetView struct {
	// Read is set once the fleet view has been read; before, no other
	// host is known to announce anything.
	Read bool
	// Announcers names, per prefix, the other hosts that count toward
	// the floor (fleet.Announcers).
	Announcers map[netip.Prefix][]string
}

// ViewOf is the FleetView of the fleet view nodes, as read by node self.
func ViewOf(nodes []fleet.Node, self string) FleetView {
	return FleetView{Read: true, Announcers: fleet.Announcers(nodes, self)}
}

// Announcements are the announced routes as a fleet heartbeat says them,
// each with its grade, in prefix order.
func Announcements(routes []Route) []fleet.Announcement {
	var out []fleet.Announcement
	for _, r := range routes {
		if !r.Announce {
			continue
		}
		g := fleet.GradeUp
		switch {
		case r.Draining:
			g = fleet.GradeDraining
		case r.Held:
			g = fleet.GradeHeld
		case r.Degraded:
			g = fleet.GradeDegraded
		}
		out = append(out, fleet.Announcement{Prefix: r.Prefix, Grade: g})
	}
	return out
}

// drain is a drain in force: a host drain or lbdnsd stopping.
type drain struct {
	end  time.Time
	text string // what drains, for reasons
	// delay names the delay and says it ("drain delay 30s").
	delay string
	// who says who drains, for a draining prefix's reason.
	who string
}

// drainOf returns the drain in force of in (nil when none): of the host
// drain and the stop, the one that withdraws first.
func drainOf(in Input) *drain {
	b := in.Config.BGP
	var d *drain
	if in.Drain != nil {
		d = &drain{end: in.Drain.Set.Add(b.DrainDelay.Duration), delay: "drain delay " + b.DrainDelay.String(), who: drainText(in.Drain),
			text: fmt.Sprintf("host drained since %s (%s)", in.Drain.Set.UTC().Format(time.RFC3339), drainText(in.Drain))}
	}
	if !in.Stopping.IsZero() {
		end := in.Stopping.Add(b.DrainOnStopDelay.Duration)
		if d == nil || end.Before(d.end) {
			d = &drain{end: end, delay: "drain_on_stop_delay " + b.DrainOnStopDelay.String(), who: "lbdnsd stopping (drain_on_stop)",
				text: fmt.Sprintf("lbdnsd stopping since %s (drain_on_stop)", in.Stopping.UTC().Format(time.RFC3339))}
		}
	}
	return d
}

// claim is one VIP or listen address of the configuration at an address.
type claim struct {
	kind, name string
	verdict    *hub.Verdict
}

// Decide returns a Route for every address of in.Config's VIPs and GSLB
// listen addresses, the fronts' included (an unspecified listen address such as 0.0.0.0 is
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
// since the drain began, and are withdrawn after; while lbdnsd stops
// with drain_on_stop, the same with drain_on_stop_delay (the earlier
// withdrawal of the two wins).
//
// The floor: with in.Fleet and min_announcing above 0, a prefix
// announced now (in.Announced) whose every VIP that does not serve is
// Partial (not truly dead) and whose listen addresses all answer is held:
// announced with med_degraded and communities_degraded while fewer than
// min_announcing other hosts count toward it (FleetView.Announcers). A
// drain withdraws a held prefix like any other.
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
	frontVerdicts := map[string]*hub.Verdict{}
	for i := range in.Fronts {
		frontVerdicts[in.Fronts[i].Name] = &in.Fronts[i]
	}
	t := cfg.GSLB.TLS
	for _, f := range []struct {
		front string
		names []string
		addrs []netip.AddrPort
	}{{"doh", t.DoHListen, t.DoHAddrs}, {"dot", t.DoTListen, t.DoTAddrs}} {
		for i, ap := range f.addrs {
			a := ap.Addr().Unmap()
			if !announceable(a) {
				continue
			}
			name := ap.String()
			if i < len(f.names) {
				name = f.names[i]
			}
			c := claim{kind: KindListener, name: f.front + " " + name}
			if vd := frontVerdicts[c.name]; vd != nil && vd.Addr.Unmap() == a {
				c.verdict = vd
			}
			claims[a] = append(claims[a], c)
		}
	}
	b := cfg.BGP
	if !b.Enabled {
		in.VIPs, in.Listeners, in.Fronts = nil, nil, nil // nothing is announced without [bgp]
	}
	var next time.Time
	dr := drainOf(in)
	out := make([]Route, 0, len(claims))
	for addr, cs := range claims {
		r := Route{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Kind: cs[0].kind}
		names := make([]string, 0, len(cs))
		serving := true
		holdable := true // every claim that does not serve is a VIP not truly dead
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
				serving, holdable = false, false
				why = append(why, c.kind+" "+c.name+": no serving verdict yet")
			case !c.verdict.Serving:
				serving = false
				holdable = holdable && c.kind == KindVIP && c.verdict.Partial
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
		var floor string
		if !serving && holdable && b.Enabled {
			floor, r.Held = holdFloor(in, r.Prefix)
		}
		switch {
		case !serving && !r.Held:
			r.Degraded = false
			r.Reason = "withdrawn: " + reason
			if floor != "" {
				r.Reason += "; " + floor
			}
		case dr != nil && !in.Now.Before(dr.end):
			r.Degraded, r.Held = false, false
			r.Reason = fmt.Sprintf("withdrawn: %s, %s over", dr.text, dr.delay)
		default:
			r.Announce = true
			r.Degraded = r.Degraded || r.Held
			r.MED, r.Communities = uint32(b.MEDUp), slices.Clone(b.Up)
			if r.Degraded {
				r.MED, r.Communities = uint32(b.MEDDegraded), slices.Clone(b.Degraded)
			}
			r.Reason = "announced: " + reason
			if r.Held {
				r.Reason = "held: " + floor + "; " + reason
			}
			if dr != nil {
				r.Draining = true
				r.Communities = append(r.Communities, configs.GracefulShutdown)
				r.Reason = fmt.Sprintf("draining: GRACEFUL_SHUTDOWN until %s (%s), then withdrawn; %s", dr.end.UTC().Format(time.RFC3339), dr.who, reason)
				next = dr.end
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

// holdFloor reports whether the fleet's floor holds prefix p, announced
// now, that would be withdrawn, and says why in either case ("" when no
// floor applies).
func holdFloor(in Input, p netip.Prefix) (string, bool) {
	floor := in.Config.BGP.MinAnnouncing
	if floor <= 0 || in.Fleet == nil {
		return "", false
	}
	others := in.Fleet.Announcers[p]
	count := fmt.Sprintf("%d other host(s) announce it (%s), min_announcing %d", len(others), listOrNone(others), floor)
	if !in.Fleet.Read {
		count = fmt.Sprintf("no fleet view read yet, no other host known to announce it, min_announcing %d", floor)
	}
	switch {
	case len(others) >= floor:
		return count, false
	case !slices.Contains(in.Announced, p):
		return count + "; not announced now: the floor keeps a route, it never announces one anew", false
	}
	return "the fleet's floor keeps it: " + count, true
}

// listOrNone joins names, or says none.
func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
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

// cmpPrefix orders IPv4 before IPv6, then by address.
func cmpPrefix(a, b netip.Prefix) int {
	if c := cmp.Compare(a.Addr().BitLen(), b.Addr().BitLen()); c != 0 {
		return c
	}
	return a.Addr().Compare(b.Addr())
}
