package vip

import (
	"errors"
	"net/netip"
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
