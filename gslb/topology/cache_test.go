package topology

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCache checks that a Cache reuses the last map exactly when the
// sources are unchanged: a changed file (even with the same size and
// modification time), changed labels or inline nets, or a file that
// cannot be read make it load again.
func TestCache(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(list, []byte("10.0.0.0/8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := gslbPool + `
[gslb.topology]
[[gslb.topology.file]]
path = "a.txt"
labels = { carrier = "a" }
`
	c := loadConfig(t, dir, doc)
	k := NewCache()
	m1, reused, err := k.Load(c)
	if err != nil || reused {
		t.Fatalf("first Load = %v, reused %v", err, reused)
	}
	m2, reused, err := k.Load(loadConfig(t, dir, doc))
	if err != nil || !reused || m2 != m1 {
		t.Fatalf("unchanged: Load = %p (%v), reused %v, want the last map %p", m2, err, reused, m1)
	}

	// Same size, same modification time, other content.
	fi, err := os.Stat(list)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(list, []byte("11.0.0.0/8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(list, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	m3, reused, err := k.Load(c)
	if err != nil || reused || m3 == m1 {
		t.Fatalf("changed content: Load = %v, reused %v", err, reused)
	}
	if got := m3.Locate(netip.MustParseAddr("11.1.1.1")); got.Labels["carrier"] != "a" {
		t.Errorf("changed content: Locate(11.1.1.1) = %+v, want carrier a", got)
	}

	// Only the modification time.
	if err := os.Chtimes(list, time.Now(), fi.ModTime().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m, reused, err := k.Load(c); err != nil || reused || m == m3 {
		t.Fatalf("touched: Load = %v, reused %v, want a new map", err, reused)
	}

	// Other labels for the same file; an inline net more.
	for _, d := range []string{
		strings.Replace(doc, `carrier = "a"`, `carrier = "b"`, 1),
		doc + "[[gslb.topology.net]]\nprefix = \"192.0.2.0/24\"\nlabels = { region = \"x\" }\n",
	} {
		if _, reused, err := k.Load(loadConfig(t, dir, d)); err != nil || reused {
			t.Errorf("changed config: Load = %v, reused %v, want a new map", err, reused)
		}
	}

	// A file gone: the error of Load, and the next good load loads.
	if err := os.Remove(list); err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.Load(c); err == nil || !strings.Contains(err.Error(), list) {
		t.Errorf("missing file: Load = %v, want its path", err)
	}
}

// TestParseV4 checks the allocation-free IPv4 parser against ParsePrefix:
// what it accepts, ParsePrefix gives the same; what it leaves,
// ParsePrefix decides.
func TestParseV4(t *testing.T) {
	for _, s := range []string{
		"0.0.0.0/0", "10.0.0.0/8", "192.0.2.7", "255.255.255.255/32", "1.2.3.0/24", "10.0.0.1/8",
		"1.2.3.4/33", "256.1.1.1", "01.2.3.4", "1.2.3.4/08", "1.2.3", "1.2.3.4.5", "1.2.3.4/", "/24", "1..2.3",
		"1.2.3.4/2a", "1.2.3.4 /24", "1.2.3.1000", "::ffff:1.2.3.4", "2001:db8::/32", "1.2.3.4%eth0", "",
	} {
		p, ok := parseV4([]byte(s))
		want, err := ParsePrefix(s)
		if ok && (err == nil && p != want || err != nil && !strings.Contains(err.Error(), "host bits set")) {
			t.Errorf("parseV4(%q) = %v, ParsePrefix = %v, %v", s, p, want, err)
		}
		if !ok && s == "10.0.0.0/8" {
			t.Errorf("parseV4(%q) left the common case", s)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := parseList([]byte("# x\n10.0.0.0/8\n  192.0.2.0/24 # y\n\n"), "x", 0); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("parseList: %v allocs, want 1 (the entries)", n)
	}
}

// TestRadixSort checks radixSort against slices.Sort.
func TestRadixSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 10, 5000, 100_000} {
		keys := make([]uint64, n)
		for i := range keys {
			switch i % 3 {
			case 0:
				keys[i] = r.Uint64()
			case 1:
				keys[i] = r.Uint64() & 0xffff_ffff_0000_0000
			default:
				keys[i] = r.Uint64() & 0xffff
			}
		}
		want := slices.Sorted(slices.Values(keys))
		radixSort(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("radixSort of %d keys: not sorted", n)
		}
		radixSort(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("radixSort of %d sorted keys: changed them", n)
		}
	}
}
