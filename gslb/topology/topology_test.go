package topology

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"lbdns/gslb"
)

var levels = []string{"carrier", "country", "region", "province"}

// testMap builds a map of nets (prefix → labels as "level=value,...").
func testMap(t testing.TB, nets ...string) *Map {
	t.Helper()
	b := NewBuilder(levels)
	for i := 0; i < len(nets); i += 2 {
		if err := b.Add(netip.MustParsePrefix(nets[i]), labelsOf(nets[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	return b.Build()
}

func labelsOf(s string) map[string]string {
	m := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestScopeTable is the RFC 7871 section 7.2.1 table of the map: the
// scope is the prefix length over which the answer holds, never
// overlapping a more specific entry, and never the source prefix echoed.
func TestScopeTable(t *testing.T) {
	m := testMap(t,
		"10.0.0.0/8", "country=cn",
		"10.1.0.0/16", "carrier=cmcc,province=gd",
		"10.1.2.0/24", "carrier=ct",
		"192.0.2.0/24", "country=us",
		"2001:db8::/32", "country=de",
		"2001:db8:1::/48", "province=by",
	)
	for _, c := range []struct {
		name, addr, prefix, labels string
		scope                      int
	}{
		{"exact leaf entry", "192.0.2.7", "192.0.2.0/24", "country=us", 24},
		{"most specific of three, labels merged", "10.1.2.9", "10.1.2.0/24", "carrier=ct,country=cn,province=gd", 24},
		{"next to a more specific sibling", "10.1.3.1", "10.1.0.0/16", "carrier=cmcc,country=cn,province=gd", 24},
		{"far from the more specific entry", "10.1.200.1", "10.1.0.0/16", "carrier=cmcc,country=cn,province=gd", 17},
		{"outer entry, child in the other half", "10.200.0.1", "10.0.0.0/8", "country=cn", 9},
		{"outer entry, child close by", "10.0.0.1", "10.0.0.0/8", "country=cn", 16},
		{"no entry, next to one", "11.0.0.1", "", "", 8},
		{"no entry, far from all", "172.16.0.1", "", "", 2},
		{"no entry, private and unmapped", "100.64.0.1", "", "", 2},
		{"IPv6 most specific", "2001:db8:1::5", "2001:db8:1::/48", "country=de,province=by", 48},
		{"IPv6 next to a more specific entry", "2001:db8:2::1", "2001:db8::/32", "country=de", 47},
		{"IPv6 no entry", "2001:db9::1", "", "", 32},
		{"IPv4-mapped IPv6 looked up as IPv4", "::ffff:10.1.2.9", "10.1.2.0/24", "carrier=ct,country=cn,province=gd", 24},
		{"/0 source address (0.0.0.0)", "0.0.0.0", "", "", 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := m.Locate(netip.MustParseAddr(c.addr))
			var want gslb.Location
			if c.prefix != "" {
				want.Prefix = netip.MustParsePrefix(c.prefix)
				want.Labels = labelsOf(c.labels)
			}
			want.Scope = c.scope
			if got.Prefix != want.Prefix || got.Scope != want.Scope || !maps.Equal(got.Labels, want.Labels) {
				t.Errorf("Locate(%s) = %+v, want %+v", c.addr, got, want)
			}
			checkScope(t, prefixes(m), netip.MustParseAddr(c.addr).Unmap(), got)
		})
	}

	// SOURCE PREFIX-LENGTH 0: the client asked for no tailoring.
	for _, p := range []string{"0.0.0.0/0", "::/0"} {
		if got := m.LocatePrefix(netip.MustParsePrefix(p)); got.Scope != 0 || got.Labels != nil || got.Prefix.IsValid() {
			t.Errorf("LocatePrefix(%s) = %+v, want no location, scope 0", p, got)
		}
	}
	// A source prefix is located by its (masked) address; the scope may
	// be longer than the source prefix (RFC 7871 section 7.2.1).
	if got := m.LocatePrefix(netip.MustParsePrefix("10.1.2.0/22")); got.Prefix != netip.MustParsePrefix("10.1.0.0/16") || got.Scope != 23 {
		t.Errorf("LocatePrefix(10.1.2.0/22) = %+v, want 10.1.0.0/16 scope 23", got)
	}

	// No entry of the family at all: no location, over the shortest
	// scope that keeps out the IPv4-mapped range (located as IPv4).
	v4 := testMap(t, "10.0.0.0/8", "country=cn")
	if got := v4.Locate(netip.MustParseAddr("2001:db8::1")); got.Scope != 3 || got.Prefix.IsValid() {
		t.Errorf("IPv6 in an IPv4-only map = %+v, want no location, scope 3 (2000::/3 holds no mapped address)", got)
	}
	if got := (NewBuilder(levels).Build()).Locate(netip.MustParseAddr("192.0.2.1")); got.Scope != 0 {
		t.Errorf("empty map = %+v, want scope 0", got)
	}
	// A default entry (/0) is an entry like any other.
	def := testMap(t, "0.0.0.0/0", "country=zz", "10.0.0.0/8", "country=cn")
	if got := def.Locate(netip.MustParseAddr("11.0.0.1")); got.Prefix != netip.MustParsePrefix("0.0.0.0/0") || got.Scope != 8 || got.Labels["country"] != "zz" {
		t.Errorf("under a default entry = %+v, want 0.0.0.0/0 scope 8", got)
	}
	if got := def.Locate(netip.MustParseAddr("192.0.2.1")); got.Scope != 1 {
		t.Errorf("under a default entry, far = %+v, want scope 1", got)
	}
	if got := m.Locate(netip.Addr{}); got.Scope != 0 || got.Labels != nil {
		t.Errorf("invalid address = %+v", got)
	}
}

// naive is the longest-prefix match by brute force.
func naive(ps []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	var best netip.Prefix
	for _, p := range ps {
		if p.Contains(a) && (!best.IsValid() || p.Bits() > best.Bits()) {
			best = p
		}
	}
	return best, best.IsValid()
}

// checkScope checks got against the contract by brute force over the
// map's prefixes: no entry lies strictly inside addr/Scope (so every
// address in it matches the same entry), and the scope is the shortest
// such at least the matched entry's length.
func checkScope(t *testing.T, ps []netip.Prefix, a netip.Addr, got gslb.Location) {
	t.Helper()
	inside := func(l int) bool {
		s := netip.PrefixFrom(a, l).Masked()
		for _, p := range ps {
			if p.Bits() > l && s.Contains(p.Addr()) && p.Addr().Is4() == a.Is4() {
				return true
			}
		}
		return false
	}
	if inside(got.Scope) {
		t.Errorf("%s: scope /%d holds a more specific entry", a, got.Scope)
	}
	floor := 0
	if got.Prefix.IsValid() {
		floor = got.Prefix.Bits()
	}
	if got.Scope > floor && !inside(got.Scope-1) {
		t.Errorf("%s: scope /%d is not the shortest (/%d holds no more specific entry)", a, got.Scope, got.Scope-1)
	}
}

// TestScopeRandom checks Locate against brute force on random nested maps
// in a small address space, every address of it.
func TestScopeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		b := NewBuilder(levels)
		var ps []netip.Prefix
		for range 1 + r.IntN(12) {
			l := 20 + r.IntN(13)
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(r.IntN(16)), byte(r.IntN(256))}), l).Masked()
			ps = append(ps, p)
			if err := b.Add(p, map[string]string{"region": p.String()}); err != nil {
				t.Fatal(err)
			}
		}
		m := b.Build()
		for x := range 16 * 256 {
			a := netip.AddrFrom4([4]byte{10, 0, byte(x >> 8), byte(x)})
			got := m.Locate(a)
			want, ok := naive(ps, a)
			if ok != got.Prefix.IsValid() || ok && got.Prefix != want || ok && got.Labels["region"] != want.String() {
				t.Fatalf("round %d: Locate(%s) = %+v, want %v", round, a, got, want)
			}
			// Every address of the scope has the same match.
			s := netip.PrefixFrom(a, got.Scope).Masked()
			for _, o := range []netip.Addr{s.Addr(), lastAddr(s)} {
				if w, _ := naive(ps, o); w != want {
					t.Fatalf("round %d: Locate(%s) scope /%d, but %s in it matches %v, not %v", round, a, got.Scope, o, w, want)
				}
			}
			checkScope(t, ps, a, got)
			if l := m.Labels(a); !maps.Equal(l, got.Labels) {
				t.Fatalf("round %d: Labels(%s) = %v, want Locate's %v", round, a, l, got.Labels)
			}
		}
	}
}

// prefixes returns the prefixes of m.
func prefixes(m *Map) []netip.Prefix {
	var ps []netip.Prefix
	for i := range m.entries {
		ps = append(ps, m.entries[i].prefix())
	}
	return ps
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n |= 1<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func TestLabelsMerge(t *testing.T) {
	b := NewBuilder(levels)
	steps := []struct {
		p, l string
	}{
		{"10.0.0.0/8", "country=cn,region=south"},
		{"10.1.0.0/16", "carrier=cmcc"},
		{"10.1.0.0/16", "carrier=ct,province=gd"}, // same prefix again: later wins per level
		{"::ffff:10.1.1.0/120", "region=east"},    // mapped: 10.1.1.0/24
	}
	for _, s := range steps {
		if err := b.Add(netip.MustParsePrefix(s.p), labelsOf(s.l)); err != nil {
			t.Fatal(err)
		}
	}
	m := b.Build()
	if v4, v6 := m.Len(); v4 != 3 || v6 != 0 {
		t.Errorf("Len = %d, %d, want 3, 0", v4, v6)
	}
	got := m.Locate(netip.MustParseAddr("10.1.1.1"))
	want := labelsOf("country=cn,region=east,carrier=ct,province=gd")
	if !maps.Equal(got.Labels, want) || got.Prefix != netip.MustParsePrefix("10.1.1.0/24") {
		t.Errorf("Locate(10.1.1.1) = %+v, want labels %v", got, want)
	}
	// Entries with the same merged labels share one map.
	m2 := testMap(t, "10.0.0.0/24", "country=cn", "10.0.1.0/24", "country=cn")
	a, c := m2.Locate(netip.MustParseAddr("10.0.0.1")).Labels, m2.Locate(netip.MustParseAddr("10.0.1.1")).Labels
	if fmt.Sprintf("%p", a) != fmt.Sprintf("%p", c) {
		t.Error("equal label sets are not shared")
	}
}

func TestAddErrors(t *testing.T) {
	b := NewBuilder(levels)
	for _, c := range []struct {
		p, l, want string
	}{
		{"10.0.0.0/8", "city=x", `label "city": not a level`},
		{"10.0.0.0/8", "country=", `label "country": empty value`},
		{"10.0.0.1/8", "country=cn", "host bits set (the network is 10.0.0.0/8)"},
		{"::ffff:0:0/95", "country=cn", "IPv4-mapped prefix shorter than /96"},
	} {
		err := b.Add(netip.MustParsePrefix(c.p), labelsOf(c.l))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Add(%s, %s) = %v, want %q", c.p, c.l, err, c.want)
		}
	}
}

func TestAddList(t *testing.T) {
	b := NewBuilder(levels)
	list := "# carrier list\n\n10.0.0.0/8\n  192.0.2.0/24   # docs\n2001:db8::/32\n198.51.100.7\n"
	if err := b.addList(strings.NewReader(list), "cmcc.txt", labelsOf("carrier=cmcc")); err != nil {
		t.Fatal(err)
	}
	m := b.Build()
	if v4, v6 := m.Len(); v4 != 3 || v6 != 1 {
		t.Errorf("Len = %d, %d, want 3, 1", v4, v6)
	}
	for _, a := range []string{"10.9.9.9", "192.0.2.1", "2001:db8::1", "198.51.100.7"} {
		if got := m.Locate(netip.MustParseAddr(a)); got.Labels["carrier"] != "cmcc" {
			t.Errorf("Locate(%s) = %+v", a, got)
		}
	}
	if got := m.Locate(netip.MustParseAddr("198.51.100.7")); got.Scope != 32 {
		t.Errorf("a bare address is a /32: %+v", got)
	}

	for _, c := range []struct{ list, want string }{
		{"10.0.0.0/8\n# x\nnot-a-prefix\n", `ct.txt:3: "not-a-prefix": not a prefix or an address`},
		{"10.0.0.0/33\n", `ct.txt:1: "10.0.0.0/33": not a prefix`},
		{"\n\n10.0.0.1/8\n", "ct.txt:3: 10.0.0.1/8: host bits set"},
		{"fe80::1%eth0\n", `ct.txt:1: "fe80::1%eth0": an address with a zone`},
	} {
		err := NewBuilder(levels).addList(strings.NewReader(c.list), "ct.txt", labelsOf("carrier=ct"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddList(%q) = %v, want %q", c.list, err, c.want)
		}
	}
	if err := NewBuilder(levels).addList(strings.NewReader("10.0.0.0/8\n"), "x.txt", labelsOf("city=x")); err == nil || !strings.HasPrefix(err.Error(), "x.txt: ") {
		t.Errorf("bad labels: %v, want the list named", err)
	}
}

func TestLocateNoAlloc(t *testing.T) {
	m := testMap(t, "10.0.0.0/8", "country=cn", "10.1.0.0/16", "carrier=cmcc", "2001:db8::/32", "country=de", "2001:db8:1::/48", "region=x")
	for _, a := range []string{"10.1.2.3", "10.2.3.4", "11.0.0.1", "2001:db8:2::1", "::ffff:10.1.2.3"} {
		addr := netip.MustParseAddr(a)
		if n := testing.AllocsPerRun(100, func() { m.Locate(addr) }); n != 0 {
			t.Errorf("Locate(%s): %v allocs, want 0", a, n)
		}
		if l := m.Labels(addr); !maps.Equal(l, m.Locate(addr).Labels) {
			t.Errorf("Labels(%s) = %v, want Locate's %v", a, l, m.Locate(addr).Labels)
		}
	}
}

// TestScopeLarge checks Locate against brute force on maps with long
// lists of entries at one level (the sampled search), IPv4 and IPv6.
func TestScopeLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b := NewBuilder(levels)
	var ps []netip.Prefix
	add := func(p netip.Prefix) {
		ps = append(ps, p)
		if err := b.Add(p, map[string]string{"region": p.String()}); err != nil {
			t.Fatal(err)
		}
	}
	add(netip.MustParsePrefix("10.0.0.0/8"))
	add(netip.MustParsePrefix("2001:db8::/32"))
	for range 3000 {
		add(netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), 0}), 16+r.IntN(9)).Masked())
		add(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}), 20+r.IntN(13)).Masked())
		// IPv6 entries sharing their first 64 bits.
		a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))}
		add(netip.PrefixFrom(netip.AddrFrom16(a), 80).Masked())
	}
	m := b.Build()
	for range 300 {
		for _, a := range []netip.Addr{
			netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}),
			netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}),
			netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256)), 1}),
		} {
			got := m.Locate(a)
			if want, _ := naive(ps, a); got.Prefix != want {
				t.Fatalf("Locate(%s) = %+v, want %v", a, got, want)
			}
			checkScope(t, ps, a, got)
		}
	}
}

// TestSortEntriesInPlace: IPv4 entries sorted in place (permute) come in
// the order of the copy the sort makes with IPv6 among them: address,
// length, then order of addition; shuffled lists of every size.
func TestSortEntriesInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, 3, 10, 1000, 5000} {
		raw := make([]entry, n)
		for i := range raw {
			bits := uint8(8 + rng.IntN(25))
			hi := uint64(rng.Uint32()&^(1<<(32-bits)-1)) << 32
			if rng.IntN(5) == 0 && i > 0 {
				hi, bits = raw[rng.IntN(i)].hi, raw[rng.IntN(i)].bits // the same prefix again
			}
			raw[i] = entry{hi: hi, bits: bits, labels: uint32(i), kidStart: uint32(i)}
		}
		want := slices.Clone(raw)
		slices.SortStableFunc(want, func(x, y entry) int { return cmp.Or(cmp.Compare(x.hi, y.hi), cmp.Compare(x.bits, y.bits)) })
		got := sortEntries(slices.Clone(raw))
		if !slices.Equal(got, want) {
			t.Fatalf("%d entries: sorted in place differs from the stable sort", n)
		}
	}
}

// addList adds every prefix of a prefix list read from r, each with
// labels: one prefix (or address) per line, '#' starts a comment, blank
// lines are skipped. An error names the list (name) and the line.
func (b *Builder) addList(r io.Reader, name string, labels map[string]string) error {
	id, err := b.Labels(labels)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	es, err := parseList(data, name, id)
	if err != nil {
		return err
	}
	return b.addEntries(es, name)
}

// TestScopeNeverCoversMapped: with IPv4 entries in the map, no IPv6
// address's scope covers the IPv4-mapped range ::ffff:0:0/96 (whose
// addresses are located as IPv4), for random IPv6 addresses near it and
// far from it, with and without IPv6 entries; without IPv4 entries the
// scope is not lengthened.
func TestScopeNeverCoversMapped(t *testing.T) {
	mapped := netip.MustParsePrefix("::ffff:0:0/96")
	r := rand.New(rand.NewPCG(3, 4))
	random := func() netip.Addr {
		var b [16]byte
		switch r.IntN(3) {
		case 0: // near the mapped range: a run of zeros, then noise
			for i := 8 + r.IntN(8); i < 16; i++ {
				b[i] = byte(r.IntN(256))
			}
		case 1: // ::fffe:x:y, ::ffff minus a bit, and the like
			b[10], b[11] = 0xff, byte(0xfe+r.IntN(2))&0xfe
			for i := 12; i < 16; i++ {
				b[i] = byte(r.IntN(256))
			}
		default:
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
		}
		return netip.AddrFrom16(b)
	}
	for _, tc := range []struct {
		name string
		nets []string
		v4   bool
	}{
		{"IPv4 entries only", []string{"10.1.0.0/16", "region=a", "192.0.2.0/24", "region=b"}, true},
		{"IPv4 and IPv6 entries", []string{"10.1.0.0/16", "region=a", "2001:db8::/32", "region=c", "100::/64", "region=d"}, true},
		{"IPv6 entries only", []string{"2001:db8::/32", "region=c"}, false},
	} {
		m := testMap(t, tc.nets...)
		for range 20000 {
			a := random()
			if a.Is4In6() {
				continue
			}
			loc := m.Locate(a)
			s := netip.PrefixFrom(a, loc.Scope).Masked()
			if tc.v4 && s.Overlaps(mapped) {
				t.Fatalf("%s: Locate(%s) scope /%d: %s covers %s, located as IPv4", tc.name, a, loc.Scope, s, mapped)
			}
		}
		if !tc.v4 {
			if loc := m.Locate(netip.MustParseAddr("::1")); loc.Scope != 3 {
				t.Errorf("%s: Locate(::1) scope /%d, want /3 (the nearest IPv6 entry, no IPv4 to keep out)", tc.name, loc.Scope)
			}
		}
	}
	m := testMap(t, "10.1.0.0/16", "region=a")
	for _, tc := range []struct {
		addr  string
		scope int
	}{{"::1", 81}, {"::fffe:0:1", 96}, {"100::1", 8}, {"2001:db8::1", 3}} {
		if loc := m.Locate(netip.MustParseAddr(tc.addr)); loc.Scope != tc.scope {
			t.Errorf("Locate(%s) scope /%d, want /%d", tc.addr, loc.Scope, tc.scope)
		}
	}
}

// parseList is parseInto into entries of their own.
func parseList(data []byte, name string, id uint32) ([]entry, error) {
	out := make([]entry, bytes.Count(data, []byte{'\n'})+1)
	k, err := parseInto(out, data, name, id)
	if err != nil {
		return nil, err
	}
	return out[:k], nil
}

// addEntries adds the entries of a parsed list (name) in their order.
func (b *Builder) addEntries(es []entry, name string) error {
	if len(b.raw)+len(es) > maxEntries {
		return fmt.Errorf("%s: more than %d prefixes", name, maxEntries)
	}
	b.raw = slices.Grow(b.raw, len(es))
	for _, e := range es {
		// kidStart holds the order of addition until Build.
		e.kidStart = uint32(len(b.raw))
		b.raw = append(b.raw, e)
	}
	return nil
}
