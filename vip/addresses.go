package vip

import (
	"errors"
	"fmt"
	"net/netip"

	"lbdns/configs"
)

// EnsureAddresses puts the address of every VIP that names an interface on
// that interface (EnsureAddress), and returns the VIPs whose address it
// added. The error joins one error per VIP it could not serve, each naming
// the VIP and the interface; the other VIPs are served all the same.
func EnsureAddresses(vips []configs.VIP) (added []configs.VIP, err error) {
	return ensureAddresses(vips, EnsureAddress)
}

// ensureAddresses is EnsureAddresses over ensure.
func ensureAddresses(vips []configs.VIP, ensure func(ifname string, p netip.Prefix) (bool, error)) ([]configs.VIP, error) {
	var added []configs.VIP
	var errs []error
	for _, v := range vips {
		if v.Interface == "" {
			continue
		}
		ok, err := ensure(v.Interface, netip.PrefixFrom(v.Addr, v.Addr.BitLen()))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("vip %s: interface %s: %w", v.Name, v.Interface, err))
		case ok:
			added = append(added, v)
		}
	}
	return added, errors.Join(errs...)
}
