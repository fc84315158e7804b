package fleet

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// CanaryHost is what a node knows of its own addresses when it chooses
// the canary it advertises (ChooseCanary) and leaves its own addresses
// out of the canaries it probes (OwnCanary).
type CanaryHost struct {
	// Configured is [fleet] canary_address (invalid when unset).
	Configured netip.AddrPort
	// Listen are the GSLB responder's listen addresses.
	Listen []netip.AddrPort
	// Status is the status endpoint's address (invalid when off; the
	// unspecified address when it listens on every address).
	Status netip.AddrPort
	// Shared are addresses other hosts hold too: the VIPs, and the
	// listen addresses announced over BGP (anycast).
	Shared []netip.Addr
	// Interfaces are the addresses of this host's network interfaces.
	Interfaces []netip.Addr
}

// ChooseCanary returns the address the other probers connect to (TCP)
// as this node's canary, and how it was chosen (or, with the invalid
// address, why there is none). In order:
//
//  1. [fleet] canary_address when set;
//  2. the first GSLB listen address that is a specific unicast address
//     not shared (not a VIP, not announced over BGP, not loopback);
//  3. with a GSLB listen address on every address (0.0.0.0:P, [::]:P):
//     this host's first own unicast interface address (not loopback,
//     link-local or multicast, not shared, not a listen address; of
//     the listener's family, or any family for [::]), port P: the
//     responder accepts on it;
//  4. the status endpoint the same way: its address when it is a
//     specific unshared unicast one, or an own interface address with
//     its port when it listens on every address;
//  5. none.
func ChooseCanary(h CanaryHost) (netip.AddrPort, string) {
	if h.Configured.IsValid() {
		return h.Configured, "[fleet] canary_address"
	}
	for _, l := range h.Listen {
		if l.Port() != 0 && h.unicast(l.Addr()) {
			return l, "the GSLB listen address " + l.String()
		}
	}
	for _, l := range h.Listen {
		if a, ok := h.interfaceFor(l); ok {
			return netip.AddrPortFrom(a, l.Port()), fmt.Sprintf("an address of this host's interfaces with the port of the GSLB listen address %s", l)
		}
	}
	if s := h.Status; s.Port() != 0 {
		if h.unicast(s.Addr()) {
			return s, "the status endpoint " + s.String()
		}
		if a, ok := h.interfaceFor(s); ok {
			return netip.AddrPortFrom(a, s.Port()), fmt.Sprintf("an address of this host's interfaces with the port of the status endpoint %s", s)
		}
	}
	return netip.AddrPort{}, "no GSLB listen address or status endpoint is on an address of this host's own (each is shared, loopback, or none is on every address with an own interface address): set [fleet] canary_address"
}

// unicast reports whether a is a specific unicast address of this host
// alone that other hosts can reach.
func (h CanaryHost) unicast(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsMulticast() &&
		a.Zone() == "" && !slices.Contains(h.Shared, a)
}

// interfaceFor returns, for l on every address, the first own unicast
// interface address a connect to l's port reaches the listener on.
func (h CanaryHost) interfaceFor(l netip.AddrPort) (netip.Addr, bool) {
	if l.Port() == 0 || !l.Addr().IsUnspecified() {
		return netip.Addr{}, false
	}
	v4only := l.Addr().Is4()
	var v4 netip.Addr
	for _, a := range h.Interfaces {
		a = a.Unmap()
		if !h.unicast(a) || slices.ContainsFunc(h.Listen, func(x netip.AddrPort) bool { return x.Addr().Unmap() == a }) {
			continue
		}
		switch {
		case a.Is4() && v4only:
			return a, true
		case a.Is4():
			if !v4.IsValid() {
				v4 = a // [::] is dual stack: an IPv4 address if no IPv6 one
			}
		case !v4only:
			return a, true
		}
	}
	return v4, v4.IsValid()
}

// OwnCanary reports whether canary c ("ADDR:PORT") is this node itself:
// its own advertised canary (chosen), its canary_address, one of its
// GSLB listen addresses or its status endpoint, an address of its
// interfaces, or the unspecified address. A loopback address is its
// own only where it listens on it (the exact address, or a port it
// listens on every address with): several nodes of a lab may run on
// one host.
func OwnCanary(h CanaryHost, chosen netip.AddrPort, c netip.AddrPort) bool {
	c = netip.AddrPortFrom(c.Addr().Unmap(), c.Port())
	same := func(x netip.AddrPort) bool {
		return x.IsValid() && netip.AddrPortFrom(x.Addr().Unmap(), x.Port()) == c
	}
	if same(chosen) || same(h.Configured) || same(h.Status) || slices.ContainsFunc(h.Listen, same) || c.Addr().IsUnspecified() {
		return true
	}
	a := c.Addr()
	if !a.IsLoopback() && slices.ContainsFunc(h.Interfaces, func(x netip.Addr) bool { return x.Unmap() == a }) {
		return true
	}
	if a.IsLoopback() {
		wild := func(x netip.AddrPort) bool {
			return x.Addr().IsUnspecified() && x.Port() == c.Port() && (x.Addr().Is6() || a.Is4())
		}
		return wild(h.Status) || slices.ContainsFunc(h.Listen, wild)
	}
	return false
}

// Canaries splits candidates ("ADDR:PORT": the configured canaries and
// the other nodes' advertised ones) into those this node probes, sorted
// and without repeats, and its own (OwnCanary), left out: a node never
// probes itself as a canary. A candidate that does not parse is left
// out of both.
func Canaries(h CanaryHost, chosen netip.AddrPort, candidates []string) (probe, own []string) {
	for _, c := range candidates {
		ap, err := netip.ParseAddrPort(c)
		if err != nil {
			continue
		}
		if OwnCanary(h, chosen, ap) {
			own = append(own, ap.String())
		} else {
			probe = append(probe, ap.String())
		}
	}
	slices.Sort(probe)
	slices.Sort(own)
	return slices.Compact(probe), slices.Compact(own)
}

// MinCanaries is the fewest canaries with which a prober tells its own
// cut from a canary's failure: with none it is never cut off (CutOff),
// with one, that one failing withdraws it.
const MinCanaries = 2

// CanaryWarnings returns what is wrong with the canaries of the fleet
// view nodes, one sentence each, in a stable order: several nodes
// advertising one canary address (a shared, anycast address: each of
// them finds it its own and none probes it), a node advertising none,
// and a node that says it probes fewer than MinCanaries canaries
// (Heartbeat.Canaries; a node that does not say is not judged).
func CanaryWarnings(nodes []Node) []string {
	var out []string
	by := map[string][]string{}
	var none []string
	for _, n := range nodes {
		if n.Canary == "" {
			none = append(none, n.Name)
			continue
		}
		by[n.Canary] = append(by[n.Canary], n.Name)
	}
	addrs := make([]string, 0, len(by))
	for a := range by {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, a := range addrs {
		if ns := by[a]; len(ns) > 1 {
			slices.Sort(ns)
			out = append(out, fmt.Sprintf("nodes %s advertise the same canary %s (a shared or anycast address): none of them probes it, each finds it its own; set [fleet] canary_address to each node's unicast address",
				strings.Join(ns, ", "), a))
		}
	}
	if len(none) > 0 {
		slices.Sort(none)
		verb, them := "advertises", "it"
		if len(none) > 1 {
			verb, them = "advertise", "them"
		}
		out = append(out, fmt.Sprintf("%s %s no canary: the other nodes cannot use %s as a canary; set [fleet] canary_address", strings.Join(none, ", "), verb, them))
	}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range sorted {
		if n.Canaries == nil || *n.Canaries >= MinCanaries {
			continue
		}
		out = append(out, FewCanaries(n.Name, *n.Canaries))
	}
	return out
}

// FewCanaries says that node name probes only n canaries (fewer than
// MinCanaries).
func FewCanaries(name string, n int) string {
	if n == 0 {
		return fmt.Sprintf("%s probes no canary beyond itself: it cannot tell it is cut off from the members, and votes them down if it is; configure [fleet] canaries or give the nodes unicast canary addresses", name)
	}
	return fmt.Sprintf("%s probes only %d canary beyond itself: it cannot tell its own cut from that canary's failure (it withdraws its votes whenever that one fails); %d or more are needed", name, n, MinCanaries)
}
