// Package topology is the GSLB responder's map of the network: a
// longest-prefix-match table (github.com/gaissmai/bart) from IPv4 and IPv6
// prefixes to location labels (carrier, country, region, province: the
// levels are configurable), built from prefix-list files, inline nets and
// optionally a MaxMind-format database. A Map implements gslb.Locator: it
// answers the labels of an address, the most specific entry that matched
// and the ECS scope over which that answer holds (RFC 7871 section 7.2.1).
// A Map is read-only once built and safe for concurrent use.
package topology

import (
	"math/bits"
	"net/netip"
	"slices"

	"github.com/gaissmai/bart"

	"lbdns/gslb"
)

// Map is a built topology: prefixes with their merged location labels.
// Build one with a Builder or Load.
type Map struct {
	levels []string
	table  bart.Table[uint32]
	// entries are the map's prefixes in address order (IPv4 first);
	// table holds indexes into it.
	entries []entry
	// kids holds, for each entry, the indexes of its immediate children
	// (entries inside it with no entry between), in address order:
	// entries[i]'s are kids[kidStart:kidEnd]. root4 and root6 are the
	// ranges of the top-level entries of each family. kidHi holds the
	// kids' first address words, for a binary search that stays in
	// cache.
	kids  []uint32
	kidHi []uint64
	// sampleHi is every sampleEvery-th word of kidHi: the first steps
	// of a search in a long list stay in a small array.
	sampleHi     []uint64
	root4, root6 [2]uint32
	// labels are the merged label sets, shared by the entries.
	labels []map[string]string
	n4, n6 int
}

// Map is the responder's Locator.
var _ gslb.Locator = (*Map)(nil)

// entry is one prefix of the map. The address is kept as two words
// (IPv4 in the top 32 bits of hi) so that comparing and finding common
// leading bits are a few instructions.
type entry struct {
	hi, lo           uint64
	bits             uint8
	v6               bool
	labels           uint32
	kidStart, kidEnd uint32
}

// Levels returns the map's location levels as configured (do not
// modify).
func (m *Map) Levels() []string { return m.levels }

// Len returns the number of IPv4 and IPv6 prefixes in the map.
func (m *Map) Len() (v4, v6 int) { return m.n4, m.n6 }

// Locate returns the location of addr (see gslb.Location): the labels of
// every entry covering addr merged (a more specific entry's label wins
// per level), the most specific entry, and the scope: the shortest prefix
// length L, at least the matched entry's, such that addr/L holds no more
// specific entry, so that every address of addr/L has the same location.
// When no entry covers addr the scope is the shortest L such that addr/L
// holds no entry at all (0 when the map has none of addr's family): the
// "no location" answer holds for all of it and never for a mapped
// network. IPv4-mapped IPv6 addresses are looked up as IPv4; a zone is
// ignored. The returned Labels map is shared: do not modify it.
func (m *Map) Locate(addr netip.Addr) gslb.Location {
	addr = addr.Unmap()
	if addr.Zone() != "" {
		addr = addr.WithZone("")
	}
	if !addr.IsValid() {
		return gslb.Location{}
	}
	hi, lo := words(addr)
	var loc gslb.Location
	kids := m.root4
	if addr.Is6() {
		kids = m.root6
	}
	if i, ok := m.table.Lookup(addr); ok {
		e := &m.entries[i]
		loc.Labels = m.labels[e.labels]
		loc.Prefix = e.prefix()
		loc.Scope = int(e.bits)
		kids = [2]uint32{e.kidStart, e.kidEnd}
	}
	// No entry inside the matched one (or, with no match, anywhere)
	// contains addr, so addr/L holds one exactly when L is at most the
	// bits addr shares with it; the nearest in address order share most.
	if c := m.nearest(hi, lo, kids); c >= loc.Scope {
		loc.Scope = c + 1
	}
	// An IPv6 scope must not cover the IPv4-mapped range, where the
	// addresses are located as IPv4 (RFC 7871 section 7.2.1: the answer
	// must hold for every address of the scope).
	if addr.Is6() && m.n4 > 0 {
		if c := commonMapped(hi, lo); c >= loc.Scope {
			loc.Scope = c + 1
		}
	}
	return loc
}

// mappedHi and mappedLo are ::ffff:0:0, the start of the IPv4-mapped
// range ::ffff:0:0/96, as two words.
const (
	mappedHi uint64 = 0
	mappedLo uint64 = 0xffff << 32
)

// commonMapped returns the leading bits the IPv6 address (hi, lo)
// shares with ::ffff:0:0, at most 95 (an address inside the mapped
// range is looked up as IPv4 and never comes here).
func commonMapped(hi, lo uint64) int {
	if x := hi ^ mappedHi; x != 0 {
		return bits.LeadingZeros64(x)
	}
	return min(64+bits.LeadingZeros64(lo^mappedLo), 95)
}

// Labels returns the labels of addr: Locate(addr).Labels, without the
// work of its scope (an answer that carries no ECS scope needs none).
func (m *Map) Labels(addr netip.Addr) map[string]string {
	addr = addr.Unmap()
	if addr.Zone() != "" {
		addr = addr.WithZone("")
	}
	if !addr.IsValid() {
		return nil
	}
	if i, ok := m.table.Lookup(addr); ok {
		return m.labels[m.entries[i].labels]
	}
	return nil
}

// LocatePrefix locates an ECS source prefix: Locate of its address, or,
// for a SOURCE PREFIX-LENGTH of 0 (the client asked for no tailoring),
// no location with scope 0.
func (m *Map) LocatePrefix(p netip.Prefix) gslb.Location {
	if !p.IsValid() || p.Bits() == 0 {
		return gslb.Location{}
	}
	return m.Locate(p.Masked().Addr())
}

// nearest returns the most leading bits (hi, lo) shares with any of the
// entries kids[start:end] (sorted by address, none containing the
// address), or -1 when there are none.
func (m *Map) nearest(hi, lo uint64, kids [2]uint32) int {
	start, end := int(kids[0]), int(kids[1])
	if start == end {
		return -1
	}
	// First kid above the address: by the first word, then (IPv6 kids
	// in the same /64) by the second.
	l := m.lowerBound(start, end, hi)
	if l < end && m.kidHi[l] == hi {
		r := end
		for l < r {
			h := int(uint(l+r) >> 1)
			if e := &m.entries[m.kids[h]]; e.hi == hi && e.lo < lo {
				l = h + 1
			} else {
				r = h
			}
		}
	}
	best := -1
	if l > start {
		best = m.common(hi, lo, l-1)
	}
	if l < end {
		best = max(best, m.common(hi, lo, l))
	}
	return best
}

// sampleEvery is the stride of Map.sampleHi.
const sampleEvery = 64

// lowerBound returns the first index in [start, end) whose kidHi is at
// least hi, or end.
func (m *Map) lowerBound(start, end int, hi uint64) int {
	if end-start > 2*sampleEvery {
		// Samples inside the range: s0*sampleEvery .. s1*sampleEvery.
		s0, s1 := (start+sampleEvery-1)/sampleEvery, (end-1)/sampleEvery
		k, _ := slices.BinarySearch(m.sampleHi[s0:s1+1], hi)
		k += s0
		if k > s0 {
			start = (k-1)*sampleEvery + 1
		}
		if k <= s1 {
			end = k * sampleEvery
		}
	}
	i, _ := slices.BinarySearch(m.kidHi[start:end], hi)
	return start + i
}

// common returns the leading bits (hi, lo) shares with the address of
// kid k; an IPv4 kid's address is all in kidHi.
func (m *Map) common(hi, lo uint64, k int) int {
	if x := hi ^ m.kidHi[k]; x != 0 {
		return bits.LeadingZeros64(x)
	}
	return common(hi, lo, &m.entries[m.kids[k]])
}

// common returns the leading bits (hi, lo) shares with e's address, at
// most the family's width.
func common(hi, lo uint64, e *entry) int {
	if x := hi ^ e.hi; x != 0 {
		return bits.LeadingZeros64(x)
	}
	if !e.v6 {
		return 32
	}
	return 64 + bits.LeadingZeros64(lo^e.lo)
}

// words returns addr (IPv4 or IPv6, unmapped) as two words.
func words(addr netip.Addr) (hi, lo uint64) {
	if addr.Is4() {
		a := addr.As4()
		return uint64(a[0])<<56 | uint64(a[1])<<48 | uint64(a[2])<<40 | uint64(a[3])<<32, 0
	}
	a := addr.As16()
	for i := range 8 {
		hi = hi<<8 | uint64(a[i])
		lo = lo<<8 | uint64(a[8+i])
	}
	return hi, lo
}

// prefix returns e as a netip.Prefix.
func (e *entry) prefix() netip.Prefix {
	if !e.v6 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(e.hi >> 56), byte(e.hi >> 48), byte(e.hi >> 40), byte(e.hi >> 32)}), int(e.bits))
	}
	var a [16]byte
	for i := range 8 {
		a[i] = byte(e.hi >> (56 - 8*i))
		a[8+i] = byte(e.lo >> (56 - 8*i))
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), int(e.bits))
}

// contains reports whether e contains o (same family, at least as long).
func (e *entry) contains(o *entry) bool {
	if e.v6 != o.v6 || o.bits < e.bits {
		return false
	}
	return common(e.hi, e.lo, o) >= int(e.bits)
}
