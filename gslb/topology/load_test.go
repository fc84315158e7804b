package topology

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
)

// writeList writes a prefix list of n lines to path: mostly IPv4 /24s,
// some covering /16s, one in ten an IPv6 /48, with comments and blanks.
// It returns a sample of the prefixes written.
func writeList(t testing.TB, path string, n int, seed uint64) []netip.Prefix {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	r := rand.New(rand.NewPCG(seed, seed))
	var sample []netip.Prefix
	fmt.Fprintln(w, "# generated prefix list")
	for i := range n - 1 {
		var p netip.Prefix
		switch {
		case i%10 == 9:
			p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}), 48+r.IntN(2)*16).Masked()
		case i%100 == 0:
			p = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), 0, 0}), 16)
		default:
			p = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), 0}), 24)
		}
		fmt.Fprintln(w, p)
		if i%997 == 0 {
			sample = append(sample, p)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return sample
}

// loadConfig writes a config with [gslb.topology] toml into dir and
// parses it.
func loadConfig(t testing.TB, dir, toml string) *configs.Config {
	t.Helper()
	path := filepath.Join(dir, "lbdnsd.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const gslbPool = `
[check.web]
kind = "tcp"
[check.web.tcp]
port = 80

[[gslb.pool]]
name = "www"
monitors = ["web"]
[[gslb.pool.member]]
name = "a"
address = "192.0.2.1"
`

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cmcc.txt"), []byte("10.0.0.0/8\n2001:db8::/32\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ct.txt"), []byte("10.1.0.0/16\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := loadConfig(t, dir, gslbPool+`
[gslb.topology]
[[gslb.topology.file]]
path = "cmcc.txt"
labels = { carrier = "cmcc", country = "cn" }
[[gslb.topology.file]]
path = "`+filepath.Join(dir, "ct.txt")+`"
labels = { carrier = "ct" }
[[gslb.topology.net]]
prefix = "10.1.2.0/24"
labels = { province = "gd" }
[[gslb.topology.net]]
prefix = "10.0.0.0/8"
labels = { region = "south" }
`)
	m, err := Load(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Levels(); strings.Join(got, ",") != "carrier,country,region,province" {
		t.Errorf("Levels = %v, want the default", got)
	}
	got := m.Locate(netip.MustParseAddr("10.1.2.3"))
	want := map[string]string{"carrier": "ct", "country": "cn", "region": "south", "province": "gd"}
	if fmt.Sprint(got.Labels) != fmt.Sprint(want) || got.Scope != 24 {
		t.Errorf("Locate(10.1.2.3) = %+v, want %v scope 24", got, want)
	}
	if got := m.Locate(netip.MustParseAddr("2001:db8::1")); got.Labels["carrier"] != "cmcc" || got.Scope != 32 {
		t.Errorf("Locate(2001:db8::1) = %+v", got)
	}

	// A bad line names the file and the line.
	if err := os.WriteFile(filepath.Join(dir, "ct.txt"), []byte("10.1.0.0/16\n\n10.1.0.0/33\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(c); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "ct.txt")+":3: ") {
		t.Errorf("Load with a bad line = %v, want the file and line 3", err)
	}
	c.GSLB.Topology.Files[0].Path = "missing.txt"
	if _, err := Load(c); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "missing.txt")) {
		t.Errorf("Load with a missing file = %v, want its path", err)
	}
}

// TestLoad100k loads a generated list of 100,000 prefixes and checks
// answers against a sample.
func TestLoad100k(t *testing.T) {
	dir := t.TempDir()
	sample := writeList(t, filepath.Join(dir, "big.txt"), 100_000, 7)
	c := loadConfig(t, dir, gslbPool+`
[[gslb.topology.file]]
path = "big.txt"
labels = { carrier = "big" }
`)
	start := time.Now()
	m, err := Load(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded 100k prefixes in %v", time.Since(start))
	v4, v6 := m.Len()
	if v4+v6 < 90_000 {
		t.Errorf("Len = %d + %d, want about 100k (few duplicates)", v4, v6)
	}
	for _, p := range sample {
		got := m.Locate(p.Addr())
		if got.Labels["carrier"] != "big" || !got.Prefix.Contains(p.Addr()) || got.Prefix.Bits() < p.Bits() {
			t.Fatalf("Locate(%s) = %+v, want inside %s", p.Addr(), got, p)
		}
	}
}

// BenchmarkLoad1M loads a prefix list of 1,000,000 lines (the file is
// written once, before the timer) and reports the heap the map holds.
func BenchmarkLoad1M(b *testing.B) {
	dir := b.TempDir()
	sample := writeList(b, filepath.Join(dir, "big.txt"), 1_000_000, 7)
	c := loadConfig(b, dir, gslbPool+`
[[gslb.topology.file]]
path = "big.txt"
labels = { carrier = "big" }
`)
	var m *Map
	for b.Loop() {
		var err error
		if m, err = Load(c); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	m = nil
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, _ = Load(c)
	runtime.GC()
	runtime.ReadMemStats(&after)
	v4, v6 := m.Len()
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-held")
	b.ReportMetric(float64(v4+v6), "prefixes")
	if got := m.Locate(sample[len(sample)/2].Addr()); got.Labels["carrier"] != "big" {
		b.Fatalf("Locate after load = %+v", got)
	}
}

// BenchmarkLocate looks up addresses in a map of 1,000,000 prefixes:
// addresses inside a mapped /24 or /48 (no more specific entry: no scope
// search), random IPv4 addresses (mostly unmapped: the scope search over
// the top-level entries), and bart's lookup alone for comparison.
func BenchmarkLocate(b *testing.B) {
	dir := b.TempDir()
	sample := writeList(b, filepath.Join(dir, "big.txt"), 1_000_000, 7)
	c := loadConfig(b, dir, gslbPool+`
[[gslb.topology.file]]
path = "big.txt"
labels = { carrier = "big" }
`)
	m, err := Load(c)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	mapped := make([]netip.Addr, 4096)
	random := make([]netip.Addr, 4096)
	for i := range mapped {
		mapped[i] = sample[r.IntN(len(sample))].Addr().Next()
		random[i] = netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
	}
	run := func(name string, addrs []netip.Addr, f func(netip.Addr)) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				f(addrs[i&4095])
				i++
			}
		})
	}
	run("mapped", mapped, func(a netip.Addr) { m.Locate(a) })
	run("random", random, func(a netip.Addr) { m.Locate(a) })
	run("bart-lookup-random", random, func(a netip.Addr) { m.table.Lookup(a) })
}
