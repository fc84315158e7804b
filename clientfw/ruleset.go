// Package clientfw enforces the client actions of the operator intent
// (lbctl block, limit) in the kernel with nftables, over netlink
// (github.com/google/nftables), before IPVS sees a packet.
//
// lbdnsd owns one table (family inet, [actions] nft_table, "lbdns" by
// default) and touches nothing else of the host's ruleset. The table has
// one chain, hooked in prerouting at priority -300 (raw): after
// defragmentation (-400), so that every packet has its addresses; before
// conntrack (-200), so that a dropped flood leaves no connection-tracking
// entry behind; and long before IPVS, which takes packets in LOCAL_IN
// (after routing) or FORWARD. In it:
//
//	block4, block6            interval sets (flags interval, timeout) of the
//	                          blocked addresses and prefixes: dropped
//	limit4_R, limit6_R        the same for the clients limited to R packets/s
//	meter4_R, meter6_R        dynamic sets keyed by source address, each
//	                          element with a limit: under R/s per source
//	                          address the packet is accepted; over it, or
//	                          when the meter is full, the next rule drops
//	                          every packet of the limited clients (a full
//	                          meter fails closed, never open)
//
// Every element of a block or limit set carries the time left until its
// action's expiry as its kernel timeout, so that the kernel removes it on
// its own even when lbdnsd is not running; its comment records the
// action. The Enforcer reads the table back and, when it differs from the
// intent in force (an element added or removed by hand, an action set,
// changed or ended), replaces it whole in one netlink transaction (the
// meters start afresh); an empty intent leaves no table.
//
// Desired and Same are pure; Enforcer is the netlink edge.
package clientfw

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"lbdns/intent"
)

// Chain is the name of the table's one chain.
const Chain = "prerouting"

// Priority is the chain's priority in the prerouting hook (raw).
const Priority = -300

// MeterTimeout is how long a source address stays in a meter without
// packets.
const MeterTimeout = time.Minute

// MeterSize bounds a meter's source addresses.
const MeterSize = 65535

// Set is one block or limit set of the table.
type Set struct {
	// Name is block4, block6, limit4_R or limit6_R.
	Name string
	// V6 is set for an IPv6 set.
	V6 bool
	// Rate is a limit set's packets per second per source address (0 for
	// a block set).
	Rate int
	// Elems are the set's elements, in address order.
	Elems []Elem
}

// Elem is one element of a set: a prefix (an address is its /32 or
// /128), the time the kernel keeps it, and its comment.
type Elem struct {
	Prefix  netip.Prefix
	Timeout time.Duration
	// Comment is "lbdns ACTION CLIENT until UNIX": what lbdnsd compares.
	Comment string
}

// Ruleset is the table lbdnsd wants: its block and limit sets (the
// meters and rules follow from them), sorted by name.
type Ruleset struct {
	Sets []Set
}

// Empty reports whether r holds no element: the table is then removed.
func (r Ruleset) Empty() bool {
	for _, s := range r.Sets {
		if len(s.Elems) > 0 {
			return false
		}
	}
	return true
}

// Rules is the number of rules of r's chain: one per block set, two per
// limit set (accept under the rate, drop the rest).
func (r Ruleset) Rules() int {
	n := len(r.Sets)
	for _, s := range r.Sets {
		if s.Rate > 0 {
			n++
		}
	}
	return n
}

// Comment is the comment of the element of action c.
func Comment(c intent.ClientAction) string {
	return "lbdns " + c.Action + " " + intent.ClientText(c.Client) + " until " + strconv.FormatInt(c.Until.Unix(), 10)
}

// Desired is the ruleset of the client actions in force at now: each
// action in block4/6 or limit4/6_RATE by its family, with the time left
// until its Until (rounded up to a millisecond) as its timeout. The two
// block sets are always there; a limit set is there for each rate in use.
func Desired(actions []intent.ClientAction, now time.Time) Ruleset {
	sets := map[string]*Set{"block4": {Name: "block4"}, "block6": {Name: "block6", V6: true}}
	for _, c := range actions {
		left := c.Until.Sub(now)
		if left <= 0 {
			continue
		}
		if left%time.Millisecond != 0 {
			left = left.Truncate(time.Millisecond) + time.Millisecond
		}
		v6 := c.Client.Addr().Is6()
		name := SetName(c.Action, c.Rate, v6)
		s := sets[name]
		if s == nil {
			s = &Set{Name: name, V6: v6, Rate: c.Rate}
			sets[name] = s
		}
		s.Elems = append(s.Elems, Elem{Prefix: c.Client, Timeout: left, Comment: Comment(c)})
	}
	var out Ruleset
	for _, s := range sets {
		slices.SortFunc(s.Elems, func(a, b Elem) int { return a.Prefix.Addr().Compare(b.Prefix.Addr()) })
		out.Sets = append(out.Sets, *s)
	}
	slices.SortFunc(out.Sets, func(a, b Set) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// SetName is the set of an action: block4, block6, limit4_RATE or
// limit6_RATE.
func SetName(action string, rate int, v6 bool) string {
	fam := "4"
	if v6 {
		fam = "6"
	}
	if action == intent.ActionBlock {
		return "block" + fam
	}
	return "limit" + fam + "_" + strconv.Itoa(rate)
}

// MeterName is the meter of a limit set ("limit4_50" → "meter4_50").
func MeterName(limitSet string) string { return "meter" + strings.TrimPrefix(limitSet, "limit") }

// Actual is the table as read from the kernel.
type Actual struct {
	// Present is false when the table does not exist.
	Present bool
	// Sets are its block and limit sets, with their elements' prefixes
	// and comments (the timeouts left out); Meters the names of its
	// meters.
	Sets   []Set
	Meters []string
	// Rules is the number of rules in its chain (-1 without the chain).
	Rules int
}

// Same reports whether the kernel's table a is the ruleset r (by set,
// element prefix and comment: an element's timeout runs down in the
// kernel and is not compared), and if not, why.
func Same(r Ruleset, a Actual) (bool, string) {
	if r.Empty() {
		if a.Present {
			return false, "no client action in force, but the table is there"
		}
		return true, ""
	}
	if !a.Present {
		return false, "the table is missing"
	}
	if a.Rules != r.Rules() {
		return false, fmt.Sprintf("the chain has %d rules, want %d", a.Rules, r.Rules())
	}
	if len(a.Sets) != len(r.Sets) {
		return false, fmt.Sprintf("the table has %d sets, want %d", len(a.Sets), len(r.Sets))
	}
	got := slices.Clone(a.Sets)
	slices.SortFunc(got, func(x, y Set) int { return strings.Compare(x.Name, y.Name) })
	for i, s := range r.Sets {
		g := got[i]
		if g.Name != s.Name {
			return false, "set " + g.Name + " is not wanted (want " + s.Name + ")"
		}
		if s.Rate > 0 && !slices.Contains(a.Meters, MeterName(s.Name)) {
			return false, "meter " + MeterName(s.Name) + " is missing"
		}
		ge := slices.Clone(g.Elems)
		slices.SortFunc(ge, func(x, y Elem) int { return x.Prefix.Addr().Compare(y.Prefix.Addr()) })
		if len(ge) != len(s.Elems) {
			return false, fmt.Sprintf("set %s has %d elements, want %d", s.Name, len(ge), len(s.Elems))
		}
		for j, e := range s.Elems {
			if ge[j].Prefix != e.Prefix || ge[j].Comment != e.Comment {
				return false, fmt.Sprintf("set %s holds %s (%q), want %s (%q)", s.Name, ge[j].Prefix, ge[j].Comment, e.Prefix, e.Comment)
			}
		}
	}
	return true, ""
}
