package vip

import (
	"fmt"
	"net/netip"
)

// hostAddr checks that p is a valid host prefix (/32 or /128, or a bare
// address's prefix) and returns its address.
func hostAddr(p netip.Prefix) (netip.Addr, error) {
	if !p.IsValid() {
		return netip.Addr{}, fmt.Errorf("vip: invalid address prefix %s", p)
	}
	a := p.Addr().Unmap()
	if p.Bits() != a.BitLen() && !(p.Addr().Is4In6() && p.Bits() == 128) {
		return netip.Addr{}, fmt.Errorf("vip: address prefix %s is not a host prefix (/32 or /128)", p)
	}
	return a, nil
}
