package topology

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Builder collects prefixes with their labels and builds a Map. Sources
// are applied in the order they are added: when the same prefix is added
// more than once its labels merge, a later source winning per level. A
// Builder is not safe for concurrent use.
type Builder struct {
	levels []string
	known  map[string]bool
	raw    []entry
	// sets are the distinct label sets added, interned by their
	// canonical text in ids.
	sets []map[string]string
	ids  map[string]uint32
}

// NewBuilder returns a Builder for a map with the given location levels
// (label keys).
func NewBuilder(levels []string) *Builder {
	b := &Builder{levels: slices.Clone(levels), known: map[string]bool{}, ids: map[string]uint32{}}
	for _, l := range levels {
		b.known[l] = true
	}
	return b
}

// Labels checks labels against the levels and returns its identifier for
// AddID, shared by every prefix added with it.
func (b *Builder) Labels(labels map[string]string) (uint32, error) {
	keys := slices.Sorted(maps.Keys(labels))
	var s strings.Builder
	for _, k := range keys {
		if !b.known[k] {
			return 0, fmt.Errorf("label %q: not a level (levels: %s)", k, strings.Join(b.levels, ", "))
		}
		if labels[k] == "" {
			return 0, fmt.Errorf("label %q: empty value", k)
		}
		s.WriteString(k)
		s.WriteByte(0)
		s.WriteString(labels[k])
		s.WriteByte(0)
	}
	key := s.String()
	if id, ok := b.ids[key]; ok {
		return id, nil
	}
	id := uint32(len(b.sets))
	b.sets = append(b.sets, maps.Clone(labels))
	b.ids[key] = id
	return id, nil
}

// Add adds prefix p with labels.
func (b *Builder) Add(p netip.Prefix, labels map[string]string) error {
	id, err := b.Labels(labels)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return b.AddID(p, id)
}

// AddID adds prefix p with the labels identified by id (from Labels). An
// IPv4-mapped IPv6 prefix of /96 or longer is added as IPv4.
func (b *Builder) AddID(p netip.Prefix, id uint32) error {
	p, err := canonical(p)
	if err != nil {
		return err
	}
	if len(b.raw) >= maxEntries {
		return fmt.Errorf("%s: more than %d prefixes", p, maxEntries)
	}
	if int(id) >= len(b.sets) {
		return fmt.Errorf("%s: unknown label set %d", p, id)
	}
	hi, lo := words(p.Addr())
	// kidStart holds the order of addition until Build.
	b.raw = append(b.raw, entry{hi: hi, lo: lo, bits: uint8(p.Bits()), v6: p.Addr().Is6(), labels: id, kidStart: uint32(len(b.raw))})
	return nil
}

// canonical checks p and returns it as the map holds it.
func canonical(p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return p, errors.New("not a prefix")
	}
	a := p.Addr()
	if a.Is4In6() {
		if p.Bits() < 96 {
			return p, fmt.Errorf("%s: an IPv4-mapped prefix shorter than /96 covers more than IPv4; write it as IPv4", p)
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if p.Masked() != p {
		return p, fmt.Errorf("%s: host bits set (the network is %s)", p, p.Masked())
	}
	return p, nil
}

// ParsePrefix parses one prefix as written in a prefix list or an inline
// net: a CIDR prefix with no host bits set, IPv4 or IPv6, or a bare
// address (a /32 or /128). IPv4-mapped IPv6 prefixes are turned into
// IPv4.
func ParsePrefix(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.IndexByte(s, '/') < 0 {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, fmt.Errorf("%q: not a prefix or an address", s)
		}
		if a.Zone() != "" {
			return p, fmt.Errorf("%q: an address with a zone cannot be used", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	} else {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, fmt.Errorf("%q: not a prefix (want ADDRESS/LENGTH such as 192.0.2.0/24)", s)
		}
	}
	return canonical(p)
}

// Build returns the Map of everything added. The Builder must not be
// used afterwards.
func (b *Builder) Build() *Map {
	raw := b.raw
	b.raw = nil
	raw = sortEntries(raw)
	m := &Map{levels: b.levels}
	ents := raw[:0]
	merged := map[[2]uint32]uint32{} // (set, over set) -> merged set
	merge := func(base, over uint32) uint32 {
		if base == over {
			return base
		}
		if id, ok := merged[[2]uint32{base, over}]; ok {
			return id
		}
		l := maps.Clone(b.sets[base])
		maps.Copy(l, b.sets[over])
		id, _ := b.Labels(l) // keys come from checked sets
		merged[[2]uint32{base, over}] = id
		return id
	}
	for _, e := range raw {
		if n := len(ents); n > 0 && ents[n-1].hi == e.hi && ents[n-1].lo == e.lo && ents[n-1].bits == e.bits && ents[n-1].v6 == e.v6 {
			ents[n-1].labels = merge(ents[n-1].labels, e.labels)
			continue
		}
		ents = append(ents, e)
	}
	ents = slices.Clip(ents)
	// The lookup table is filled beside the sweep below, which writes
	// only the fields prefix does not read (labels, kidStart, kidEnd).
	inserted := make(chan struct{})
	go func() {
		defer close(inserted)
		for i := range ents {
			m.table.Insert(ents[i].prefix(), uint32(i))
		}
	}()

	// Parents by a sweep over the nested order; labels merged down.
	// The top-level entries of each family have a pseudo parent.
	n := uint32(len(ents))
	root4, root6 := n, n+1
	parent := make([]uint32, n)
	counts := make([]uint32, n+2)
	var stack []uint32
	for i := range ents {
		e := &ents[i]
		for len(stack) > 0 && !ents[stack[len(stack)-1]].contains(e) {
			stack = stack[:len(stack)-1]
		}
		switch {
		case len(stack) > 0:
			p := stack[len(stack)-1]
			parent[i] = p
			e.labels = merge(ents[p].labels, e.labels)
		case e.v6:
			parent[i] = root6
		default:
			parent[i] = root4
		}
		counts[parent[i]]++
		stack = append(stack, uint32(i))
		if e.v6 {
			m.n6++
		} else {
			m.n4++
		}
	}
	// Children lists laid out: IPv4 top level, IPv6 top level, then
	// each entry's.
	m.root4 = [2]uint32{0, counts[root4]}
	m.root6 = [2]uint32{counts[root4], counts[root4] + counts[root6]}
	next := m.root6[1]
	for i := range ents {
		ents[i].kidStart, ents[i].kidEnd = next, next
		next += counts[i]
	}
	m.kids = make([]uint32, next)
	m.kidHi = make([]uint64, next)
	for i, p := range parent {
		var at *uint32
		switch p {
		case root4:
			at = &m.root4[0]
		case root6:
			at = &m.root6[0]
		default:
			at = &ents[p].kidEnd
		}
		m.kids[*at] = uint32(i)
		m.kidHi[*at] = ents[i].hi
		*at++
	}
	m.root4[0], m.root6[0] = 0, counts[root4]
	m.sampleHi = make([]uint64, 0, len(m.kidHi)/sampleEvery+1)
	for i := 0; i < len(m.kidHi); i += sampleEvery {
		m.sampleHi = append(m.sampleHi, m.kidHi[i])
	}
	m.entries = ents
	<-inserted
	m.labels = b.sets
	b.sets, b.ids = nil, nil
	return m
}

// maxEntries is the most prefixes a Map holds (the order of addition
// must fit in seqBits).
const (
	seqBits    = 26
	maxEntries = 1 << seqBits
)

// sortEntries returns raw in address order (IPv4 first), a prefix before
// the longer ones at its address, a prefix added twice in the order of
// addition. IPv4 sorts as one word per entry: address, length, order.
func sortEntries(raw []entry) []entry {
	keys := make([]uint64, 0, len(raw))
	var v6 []entry
	for i := range raw {
		if e := &raw[i]; e.v6 {
			v6 = append(v6, *e)
		} else {
			keys = append(keys, e.hi|uint64(e.bits)<<seqBits|uint64(i))
		}
	}
	radixSort(keys)
	if len(v6) == 0 {
		permute(raw, keys)
		return raw
	}
	out := make([]entry, 0, len(raw))
	for _, k := range keys {
		out = append(out, raw[k&(maxEntries-1)])
	}
	slices.SortFunc(v6, func(x, y entry) int {
		return cmp.Or(cmp.Compare(x.hi, y.hi), cmp.Compare(x.lo, y.lo), cmp.Compare(x.bits, y.bits), cmp.Compare(x.kidStart, y.kidStart))
	})
	return append(out, v6...)
}

// permute puts raw (IPv4 entries only) in the order of the sorted keys
// (the low seqBits of keys[p] are the index in raw of the entry that
// goes to position p), in place, cycle by cycle: no second array of
// entries (40 MB for 1,000,000 prefixes).
func permute(raw []entry, keys []uint64) {
	done := make([]uint64, (len(keys)+63)/64)
	for start := range keys {
		if done[start/64]&(1<<(start%64)) != 0 {
			continue
		}
		tmp := raw[start]
		for p := start; ; {
			done[p/64] |= 1 << (p % 64)
			q := int(keys[p] & (maxEntries - 1))
			if q == start {
				raw[p] = tmp
				break
			}
			raw[p] = raw[q]
			p = q
		}
	}
}

// radixSort sorts keys: already sorted, as it is; else least significant
// 16 bits first, a pass left out where every key has the same digit.
func radixSort(keys []uint64) {
	if slices.IsSorted(keys) {
		return
	}
	if len(keys) < 1024 {
		slices.Sort(keys)
		return
	}
	buf := make([]uint64, len(keys))
	count := make([]int, 1<<16)
	src, dst := keys, buf
	for shift := 0; shift < 64; shift += 16 {
		clear(count)
		for _, k := range src {
			count[k>>shift&0xffff]++
		}
		if count[src[0]>>shift&0xffff] == len(src) {
			continue
		}
		at := 0
		for d, n := range count {
			count[d] = at
			at += n
		}
		for _, k := range src {
			d := k >> shift & 0xffff
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}
