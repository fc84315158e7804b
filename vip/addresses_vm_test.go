//go:build ipvsvm

package vip_test

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lbdns/configs"
	"lbdns/testkit/ipvsvm"
	"lbdns/vip"
)

// hostHas reports whether interface ifname holds host address addr, as
// ip (an independent tool) lists it.
func hostHas(t *testing.T, ifname, addr string) bool {
	t.Helper()
	a := netip.MustParseAddr(addr)
	out := ipvsvm.Run(t, "ip", "addr", "show", "dev", ifname)
	return strings.Contains(out, " "+netip.PrefixFrom(a, a.BitLen()).String()+" ")
}

// TestVMSyncAddresses runs SyncAddresses against the kernel's interfaces,
// lo and a dummy, through a restart (the record saved and loaded again):
// the addresses it added are recorded and taken off when their VIP goes,
// changes its address or its interface, or when the interface itself is
// gone; an operator's address on lo, even one a VIP had asked for, is
// never recorded nor touched.
func TestVMSyncAddresses(t *testing.T) {
	ipvsvm.Require(t)
	const dummy = "lbdnsva0"
	ipvsvm.Sh(t, "ip link add "+dummy+" type dummy && ip link set "+dummy+" up && ip addr add 10.250.0.9/32 dev lo")
	t.Cleanup(func() {
		ipvsvm.Sh(t, "ip link del "+dummy+" 2>/dev/null; for a in 10.250.0.1/32 10.250.0.9/32 10.250.0.11/32 fd50::2/128; do ip addr del $a dev lo 2>/dev/null; done; true")
	})
	vipOn := func(name, ifname, addr string) configs.VIP {
		return configs.VIP{Name: name, Interface: ifname, Addr: netip.MustParseAddr(addr)}
	}
	ha := func(ifname, addr string) vip.HostAddress {
		return vip.HostAddress{Interface: ifname, Addr: netip.MustParseAddr(addr)}
	}
	sync := func(owned *vip.OwnedAddresses, vips ...configs.VIP) vip.AddressReport {
		t.Helper()
		rep, err := vip.SyncAddresses(owned, vips)
		if err != nil {
			t.Fatalf("SyncAddresses: %v", err)
		}
		return rep
	}
	wantHost := func(what string, want map[string]bool) {
		t.Helper()
		for k, on := range want {
			ifname, addr, _ := strings.Cut(k, " ")
			if got := hostHas(t, ifname, addr); got != on {
				t.Errorf("%s: %s on %s: %v, want %v\n%s", what, addr, ifname, got, on, ipvsvm.Run(t, "ip", "addr", "show"))
			}
		}
	}
	wantOwned := func(what string, owned *vip.OwnedAddresses, want ...vip.HostAddress) {
		t.Helper()
		slices.SortFunc(want, vip.HostAddress.Compare)
		if got := owned.List(); !slices.Equal(got, want) {
			t.Errorf("%s: owned %v, want %v", what, got, want)
		}
	}
	path := filepath.Join(t.TempDir(), vip.AddressesFile)

	a, b := vipOn("a", "lo", "10.250.0.1"), vipOn("b", dummy, "fd50::2")
	op := vipOn("op", "lo", "10.250.0.9") // the operator's address
	owned := vip.NewOwnedAddresses()
	rep := sync(owned, a, b, op)
	if len(rep.Added) != 2 || rep.Added[0].Name != "a" || rep.Added[1].Name != "b" {
		t.Errorf("added %v, want VIPs a and b", rep.Added)
	}
	wantOwned("start", owned, ha("lo", "10.250.0.1"), ha(dummy, "fd50::2"))
	wantHost("start", map[string]bool{"lo 10.250.0.1": true, dummy + " fd50::2": true, "lo 10.250.0.9": true})
	if err := owned.Save(path); err != nil {
		t.Fatal(err)
	}

	// A restart: the record is read back, VIP a and the operator's VIP
	// are gone from the configuration, b moved to lo.
	owned, err := vip.LoadOwnedAddresses(path)
	if err != nil {
		t.Fatal(err)
	}
	b2 := vipOn("b", "lo", "fd50::2")
	rep = sync(owned, b2)
	if want := []vip.HostAddress{ha(dummy, "fd50::2"), ha("lo", "10.250.0.1")}; !slices.Equal(rep.Removed, want) || len(rep.Gone) != 0 {
		t.Errorf("removed %v, gone %v; want removed %v", rep.Removed, rep.Gone, want)
	}
	wantOwned("after the restart", owned, ha("lo", "fd50::2"))
	wantHost("after the restart", map[string]bool{"lo 10.250.0.1": false, dummy + " fd50::2": false, "lo fd50::2": true, "lo 10.250.0.9": true})

	// An address change, on a dummy that is then deleted with its
	// address: the record of it is forgotten without an error.
	c := vipOn("c", dummy, "10.250.0.3")
	sync(owned, b2, c)
	c2 := vipOn("c", "lo", "10.250.0.11")
	rep = sync(owned, b2, c2)
	if want := []vip.HostAddress{ha(dummy, "10.250.0.3")}; !slices.Equal(rep.Removed, want) {
		t.Errorf("address change: removed %v, want %v", rep.Removed, want)
	}
	wantHost("address change", map[string]bool{dummy + " 10.250.0.3": false, "lo 10.250.0.11": true})
	d := vipOn("d", dummy, "10.250.0.4")
	sync(owned, b2, c2, d)
	ipvsvm.Run(t, "ip", "link", "del", dummy)
	rep = sync(owned, b2, c2)
	if want := []vip.HostAddress{ha(dummy, "10.250.0.4")}; !slices.Equal(rep.Gone, want) || len(rep.Removed) != 0 {
		t.Errorf("interface gone: gone %v, removed %v; want gone %v", rep.Gone, rep.Removed, want)
	}

	// No VIP left: only the operator's address stays on lo.
	sync(owned)
	wantOwned("none left", owned)
	wantHost("none left", map[string]bool{"lo fd50::2": false, "lo 10.250.0.11": false, "lo 10.250.0.9": true})
}
