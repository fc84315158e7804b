package vip

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"lbdns/configs"
)

func TestEnsureAddresses(t *testing.T) {
	vips := []configs.VIP{
		{Name: "no-iface", Addr: netip.MustParseAddr("192.0.2.1")},
		{Name: "new", Interface: "lo", Addr: netip.MustParseAddr("192.0.2.2")},
		{Name: "there", Interface: "lo", Addr: netip.MustParseAddr("2001:db8::3")},
		{Name: "broken", Interface: "nope0", Addr: netip.MustParseAddr("192.0.2.4")},
	}
	var asked []string
	ensure := func(ifname string, p netip.Prefix) (bool, error) {
		asked = append(asked, ifname+" "+p.String())
		switch p.Addr().String() {
		case "192.0.2.2":
			return true, nil
		case "192.0.2.4":
			return false, errors.New("no such interface")
		}
		return false, nil
	}
	added, err := ensureAddresses(vips, ensure)
	if want := "lo 192.0.2.2/32,lo 2001:db8::3/128,nope0 192.0.2.4/32"; strings.Join(asked, ",") != want {
		t.Errorf("asked %q, want %q", strings.Join(asked, ","), want)
	}
	if len(added) != 1 || added[0].Name != "new" {
		t.Errorf("added = %+v, want only VIP new", added)
	}
	if err == nil || err.Error() != "vip broken: interface nope0: no such interface" {
		t.Errorf("err = %v, want the broken VIP's error", err)
	}
	if added, err := ensureAddresses(vips[:3], ensure); err != nil || len(added) != 1 {
		t.Errorf("without the broken VIP: added %+v, err %v", added, err)
	}
}

// fakeHost is a host's interfaces and their addresses, for ensure and
// remove.
type fakeHost struct {
	addrs map[HostAddress]bool
	// broken interfaces fail every call.
	broken map[string]bool
	calls  []string
}

func (h *fakeHost) ensure(ifname string, p netip.Prefix) (bool, error) {
	h.calls = append(h.calls, "ensure "+p.Addr().String()+" on "+ifname)
	if h.broken[ifname] {
		return false, errors.New("broken")
	}
	a := HostAddress{Interface: ifname, Addr: p.Addr()}
	if h.addrs[a] {
		return false, nil
	}
	h.addrs[a] = true
	return true, nil
}

func (h *fakeHost) remove(ifname string, p netip.Prefix) (bool, error) {
	h.calls = append(h.calls, "remove "+p.Addr().String()+" on "+ifname)
	if h.broken[ifname] {
		return false, errors.New("broken")
	}
	a := HostAddress{Interface: ifname, Addr: p.Addr()}
	if !h.addrs[a] {
		return false, nil
	}
	delete(h.addrs, a)
	return true, nil
}

func (h *fakeHost) list() []HostAddress {
	return slices.SortedFunc(func(yield func(HostAddress) bool) {
		for a := range h.addrs {
			if !yield(a) {
				return
			}
		}
	}, HostAddress.Compare)
}

// TestSyncAddresses walks one host through the paths of issue 25: a
// VIP's address added and recorded, an operator's address never recorded
// nor removed, a VIP removed, its address changed, its interface changed,
// a failed removal kept for the next try, and an owned address already
// gone forgotten.
func TestSyncAddresses(t *testing.T) {
	vipOn := func(name, ifname, addr string) configs.VIP {
		return configs.VIP{Name: name, Interface: ifname, Addr: netip.MustParseAddr(addr)}
	}
	operator := hostAddress("lo", "192.0.2.9")
	h := &fakeHost{addrs: map[HostAddress]bool{operator: true}, broken: map[string]bool{}}
	owned := NewOwnedAddresses()
	sync := func(vips ...configs.VIP) AddressReport {
		t.Helper()
		h.calls = nil
		rep, err := syncAddresses(owned, vips, h.ensure, h.remove)
		if err != nil {
			t.Fatalf("syncAddresses: %v", err)
		}
		return rep
	}
	names := func(vs []configs.VIP) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}
	check := func(what string, rep AddressReport, added []string, removed, gone, wantOwned, wantHost []HostAddress) {
		t.Helper()
		if got := names(rep.Added); !slices.Equal(got, added) {
			t.Errorf("%s: added %v, want %v", what, got, added)
		}
		if !slices.Equal(rep.Removed, removed) {
			t.Errorf("%s: removed %v, want %v", what, rep.Removed, removed)
		}
		if !slices.Equal(rep.Gone, gone) {
			t.Errorf("%s: gone %v, want %v", what, rep.Gone, gone)
		}
		slices.SortFunc(wantOwned, HostAddress.Compare)
		slices.SortFunc(wantHost, HostAddress.Compare)
		if got := owned.List(); !slices.Equal(got, wantOwned) {
			t.Errorf("%s: owned %v, want %v", what, got, wantOwned)
		}
		if got := h.list(); !slices.Equal(got, wantHost) {
			t.Errorf("%s: host has %v, want %v", what, got, wantHost)
		}
	}
	a, b, c := vipOn("a", "lo", "192.0.2.1"), vipOn("b", "lo", "192.0.2.2"), vipOn("c", "dummy0", "2001:db8::3")
	opVIP := vipOn("op", "lo", "192.0.2.9") // a VIP on the operator's address
	la, lb, dc := addressOf(a), addressOf(b), addressOf(c)

	rep := sync(a, b, c, opVIP, vipOn("no-iface", "", "192.0.2.5"))
	check("start", rep, []string{"a", "b", "c"}, nil, nil, []HostAddress{dc, la, lb}, []HostAddress{dc, la, lb, operator})
	rep = sync(a, b, c, opVIP)
	check("resync", rep, nil, nil, nil, []HostAddress{dc, la, lb}, []HostAddress{dc, la, lb, operator})

	// VIP b and the operator's VIP removed: b's address goes, the
	// operator's stays.
	rep = sync(a, c)
	check("VIPs removed", rep, nil, []HostAddress{lb}, nil, []HostAddress{dc, la}, []HostAddress{dc, la, operator})

	// a's address changed: the new one comes, the old one goes.
	a2 := vipOn("a", "lo", "192.0.2.11")
	rep = sync(a2, c)
	check("address changed", rep, []string{"a"}, []HostAddress{la}, nil, []HostAddress{dc, addressOf(a2)}, []HostAddress{dc, addressOf(a2), operator})
	if want := []string{"ensure 192.0.2.11 on lo", "ensure 2001:db8::3 on dummy0", "remove 192.0.2.1 on lo"}; !slices.Equal(h.calls, want) {
		t.Errorf("calls %q, want %q (the new address before the old one goes)", h.calls, want)
	}

	// c moved from dummy0 to lo, while dummy0 fails: the removal is
	// kept for the next call, and the error names the address.
	c2 := vipOn("c", "lo", "2001:db8::3")
	h.broken["dummy0"] = true
	h.calls = nil
	rep, err := syncAddresses(owned, []configs.VIP{a2, c2}, h.ensure, h.remove)
	if err == nil || err.Error() != "vip address 2001:db8::3 on dummy0: broken" {
		t.Errorf("failed removal: err %v", err)
	}
	lc2 := addressOf(c2)
	check("interface changed, removal failed", rep, []string{"c"}, nil, nil, []HostAddress{dc, lc2, addressOf(a2)}, []HostAddress{dc, lc2, addressOf(a2), operator})
	h.broken["dummy0"] = false
	rep = sync(a2, c2)
	check("interface changed, removal retried", rep, nil, []HostAddress{dc}, nil, []HostAddress{lc2, addressOf(a2)}, []HostAddress{lc2, addressOf(a2), operator})

	// Someone else took a's address off meanwhile: it is forgotten when
	// a goes, with nothing to remove.
	delete(h.addrs, addressOf(a2))
	rep = sync(c2)
	check("already gone", rep, nil, nil, []HostAddress{addressOf(a2)}, []HostAddress{lc2}, []HostAddress{lc2, operator})

	// No VIP left: only the operator's address stays.
	rep = sync()
	check("none left", rep, nil, []HostAddress{lc2}, nil, []HostAddress{}, []HostAddress{operator})
}
