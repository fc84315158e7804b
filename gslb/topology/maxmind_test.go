package topology

import (
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// writeMMDB writes a small City-layout database: networks with a country
// and maybe a subdivision.
func writeMMDB(t *testing.T, path string, nets map[string][2]string) {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoIP2-City", IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, cs := range nets {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"city": mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String("x")}}}
		if cs[0] != "" {
			rec["country"] = mmdbtype.Map{"iso_code": mmdbtype.String(cs[0])}
		}
		if cs[1] != "" {
			rec["subdivisions"] = mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String(cs[1])}, mmdbtype.Map{"iso_code": mmdbtype.String("ZZ")}}
		}
		if err := tree.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMaxMind(t *testing.T) {
	dir := t.TempDir()
	writeMMDB(t, filepath.Join(dir, "geo.mmdb"), map[string][2]string{
		"81.2.69.0/24":    {"GB", "ENG"},
		"10.0.0.0/8":      {"CN", ""},
		"2001:db8::/32":   {"DE", "BY"},
		"198.51.100.0/24": {"", ""}, // no codes: left out
	})
	if err := os.WriteFile(filepath.Join(dir, "ct.txt"), []byte("10.1.0.0/16\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := loadConfig(t, dir, gslbPool+`
[gslb.topology]
maxmind_db = "geo.mmdb"
[[gslb.topology.file]]
path = "ct.txt"
labels = { carrier = "ct", province = "gd" }
`)
	m, err := Load(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr, prefix, labels string
	}{
		{"81.2.69.160", "81.2.69.0/24", "country=gb,province=eng"},
		{"10.2.3.4", "10.0.0.0/8", "country=cn"},
		{"10.1.3.4", "10.1.0.0/16", "carrier=ct,country=cn,province=gd"}, // a file entry inside a database network
		{"::ffff:81.2.69.1", "81.2.69.0/24", "country=gb,province=eng"},
		{"2001:db8:5::1", "2001:db8::/32", "country=de,province=by"},
		{"198.51.100.1", "", ""},
	} {
		got := m.Locate(netip.MustParseAddr(tc.addr))
		var gotPrefix string
		if got.Prefix.IsValid() {
			gotPrefix = got.Prefix.String()
		}
		if gotPrefix != tc.prefix || !maps.Equal(got.Labels, labelsOf(tc.labels)) {
			t.Errorf("Locate(%s) = %+v, want %s %s", tc.addr, got, tc.prefix, tc.labels)
		}
	}

	// Only the levels configured are filled.
	b := NewBuilder([]string{"carrier", "country"})
	if err := b.AddMaxMind(filepath.Join(dir, "geo.mmdb")); err != nil {
		t.Fatal(err)
	}
	if got := b.Build().Locate(netip.MustParseAddr("81.2.69.1")); !maps.Equal(got.Labels, labelsOf("country=gb")) {
		t.Errorf("country only: %+v", got)
	}
	if err := NewBuilder([]string{"carrier"}).AddMaxMind(filepath.Join(dir, "geo.mmdb")); err == nil {
		t.Error("AddMaxMind without the country and province levels: no error")
	}
	if err := NewBuilder(levels).AddMaxMind(filepath.Join(dir, "ct.txt")); err == nil || !strings.Contains(err.Error(), "ct.txt") {
		t.Errorf("AddMaxMind of a prefix list = %v, want an error naming it", err)
	}
}
