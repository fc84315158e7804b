package vip

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lbdns/configs"
)

func hostAddress(ifname, addr string) HostAddress {
	return HostAddress{Interface: ifname, Addr: netip.MustParseAddr(addr)}
}

// goldenAddresses are the addresses of testdata/vip-addresses-owned.json.
func goldenAddresses() []HostAddress {
	return []HostAddress{
		hostAddress("dummy0", "2001:db8::53"),
		hostAddress("lo", "192.0.2.53"),
		hostAddress("lo", "192.0.2.54"),
	}
}

func TestOwnedAddressesGolden(t *testing.T) {
	golden := filepath.Join("testdata", AddressesFile)
	s, err := LoadOwnedAddresses(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.List(); !slices.Equal(got, goldenAddresses()) {
		t.Errorf("loaded %v, want %v", got, goldenAddresses())
	}
	if s.Unsaved() {
		t.Error("a set just loaded is unsaved")
	}
	// The same set, added in another order, saves the same bytes.
	fresh := NewOwnedAddresses()
	for _, a := range slices.Backward(goldenAddresses()) {
		fresh.Add(a)
	}
	path := filepath.Join(t.TempDir(), AddressesFile)
	if err := fresh.Save(path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want, _ := os.ReadFile(golden)
	if string(got) != string(want) {
		t.Errorf("saved\n%s\nwant\n%s", got, want)
	}
}

func TestOwnedAddressesLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), AddressesFile)
	s, err := LoadOwnedAddresses(path)
	if err != nil || len(s.List()) != 0 || s.Unsaved() {
		t.Fatalf("missing file: %v, %v, unsaved %v; want an empty saved set", s.List(), err, s.Unsaved())
	}
	// Nothing to save: no file is written.
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("an empty, unchanged set wrote its file: %v", err)
	}
	a, b := hostAddress("lo", "192.0.2.1"), hostAddress("lo", "2001:db8::1")
	s.Add(a)
	s.Add(b)
	if !s.Has(a) || s.Has(hostAddress("dummy0", "192.0.2.1")) || !s.Unsaved() {
		t.Fatalf("after adds: has a %v, a on dummy0 %v, unsaved %v", s.Has(a), s.Has(hostAddress("dummy0", "192.0.2.1")), s.Unsaved())
	}
	if err := s.Save(path); err != nil || s.Unsaved() {
		t.Fatalf("Save: %v, unsaved %v", err, s.Unsaved())
	}
	// A change undone leaves nothing to save.
	s.Remove(a)
	s.Add(a)
	if s.Unsaved() {
		t.Error("unsaved after a change that was undone")
	}
	s.Remove(b)
	if !s.Unsaved() || s.Has(b) {
		t.Fatal("remove not noted")
	}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadOwnedAddresses(path)
	if err != nil || !slices.Equal(back.List(), []HostAddress{a}) {
		t.Errorf("reloaded %v, %v; want [%v]", back.List(), err, a)
	}
}

func TestOwnedAddressesSaveFailureRetries(t *testing.T) {
	path := filepath.Join(t.TempDir(), AddressesFile)
	// A directory in the file's place makes the rename fail.
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	s := NewOwnedAddresses()
	s.Add(hostAddress("lo", "192.0.2.1"))
	if err := s.Save(path); err == nil || !strings.HasPrefix(err.Error(), "vip: owned addresses: save: ") {
		t.Fatalf("Save over a directory: %v", err)
	}
	if !s.Unsaved() {
		t.Fatal("a failed save counts as saved")
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(path); err != nil || s.Unsaved() {
		t.Fatalf("retry: %v, unsaved %v", err, s.Unsaved())
	}
}

// A record that cannot be parsed whole gives an empty set: none of its
// addresses, not even the good ones, is taken for owned.
func TestLoadOwnedAddressesBad(t *testing.T) {
	dir := t.TempDir()
	good := `{"interface": "lo", "address": "192.0.2.1"}`
	for _, tc := range []struct{ name, body, want string }{
		{"not json", "{", "unexpected EOF"},
		{"truncated", `{"version": 1, "addresses": [` + good, "unexpected EOF"},
		{"bad address", `{"version": 1, "addresses": [` + good + `, {"interface": "lo", "address": "192.0.2.300"}]}`, "192.0.2.300"},
		{"no interface", `{"version": 1, "addresses": [` + good + `, {"address": "192.0.2.2"}]}`, "entry 1"},
		{"no address", `{"version": 1, "addresses": [` + good + `, {"interface": "lo"}]}`, "entry 1"},
		{"zone", `{"version": 1, "addresses": [{"interface": "lo", "address": "fe80::1%lo"}]}`, "entry 0"},
		{"unknown key", `{"version": 1, "addresses": [{"interface": "lo", "address": "192.0.2.1", "vip": "x"}]}`, `unknown field "vip"`},
		{"other version", `{"version": 2, "addresses": [` + good + `]}`, "version 2, want 1"},
		{"no version", `{"addresses": [` + good + `]}`, "version 0, want 1"},
		{"two records", `{"version": 1, "addresses": []} {"version": 1, "addresses": []}`, "data after the record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := LoadOwnedAddresses(path)
			if err == nil || !strings.HasPrefix(err.Error(), "vip: owned addresses "+path+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s and %q", err, path, tc.want)
			}
			if s == nil || len(s.List()) != 0 {
				t.Errorf("set %v, want an empty one", s)
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		s, err := LoadOwnedAddresses(dir) // a directory
		if err == nil || s == nil || len(s.List()) != 0 {
			t.Errorf("got %v, %v", s, err)
		}
	})
}

// Stale is the decision: an owned address goes when no VIP asks for that
// address on that interface.
func TestOwnedAddressesStale(t *testing.T) {
	vipOn := func(name, ifname, addr string) configs.VIP {
		return configs.VIP{Name: name, Interface: ifname, Addr: netip.MustParseAddr(addr)}
	}
	owned := []HostAddress{
		hostAddress("lo", "192.0.2.1"),
		hostAddress("lo", "192.0.2.2"),
		hostAddress("dummy0", "2001:db8::3"),
	}
	for _, tc := range []struct {
		name string
		vips []configs.VIP
		want []HostAddress
	}{
		{"all configured", []configs.VIP{vipOn("a", "lo", "192.0.2.1"), vipOn("b", "lo", "192.0.2.2"), vipOn("c", "dummy0", "2001:db8::3")}, nil},
		{"no VIPs", nil, owned},
		{"VIP removed", []configs.VIP{vipOn("a", "lo", "192.0.2.1"), vipOn("c", "dummy0", "2001:db8::3")}, []HostAddress{owned[1]}},
		{"address changed", []configs.VIP{vipOn("a", "lo", "192.0.2.9"), vipOn("b", "lo", "192.0.2.2"), vipOn("c", "dummy0", "2001:db8::3")}, []HostAddress{owned[0]}},
		{"interface changed", []configs.VIP{vipOn("a", "lo", "192.0.2.1"), vipOn("b", "lo", "192.0.2.2"), vipOn("c", "lo", "2001:db8::3")}, []HostAddress{owned[2]}},
		{"interface unset", []configs.VIP{vipOn("a", "lo", "192.0.2.1"), vipOn("b", "", "192.0.2.2"), vipOn("c", "dummy0", "2001:db8::3")}, []HostAddress{owned[1]}},
		{"two VIPs on one address", []configs.VIP{vipOn("a", "lo", "192.0.2.1"), vipOn("a2", "lo", "192.0.2.1")}, owned[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewOwnedAddresses()
			for _, a := range owned {
				s.Add(a)
			}
			got := s.Stale(tc.vips)
			want := slices.SortedFunc(slices.Values(tc.want), HostAddress.Compare)
			if !slices.Equal(got, want) {
				t.Errorf("Stale = %v, want %v", got, want)
			}
			if len(s.List()) != len(owned) {
				t.Errorf("Stale changed the set: %v", s.List())
			}
		})
	}
}
