package vip

import (
	"errors"
	"fmt"
	"net/netip"

	"lbdns/configs"
)

// AddressReport is what one SyncAddresses did on the host.
type AddressReport struct {
	// Added are the VIPs whose address it put on their interface (and
	// recorded as owned).
	Added []configs.VIP
	// Removed are the owned addresses no VIP asks for any more that it
	// took off their interface.
	Removed []HostAddress
	// Gone are the owned addresses no VIP asks for any more that were no
	// longer on their interface (taken off by someone else, or the
	// interface is gone): forgotten without a change on the host.
	Gone []HostAddress
}

// SyncAddresses brings the interfaces to what vips ask for, within owned:
// it puts the address of every VIP that names an interface on that
// interface (EnsureAddress) and adds to owned the ones it added, then
// takes off their interfaces the addresses of owned that no VIP asks for
// any more (owned.Stale, RemoveAddress) and forgets them. An address that
// was on its interface before is never added to owned, so it is never
// removed either. The error joins one error per address it could not put
// or take off, each naming the VIP or the address and the interface; the
// others are handled all the same, and an address it could not take off
// stays in owned, to be tried again at the next call.
func SyncAddresses(owned *OwnedAddresses, vips []configs.VIP) (AddressReport, error) {
	return syncAddresses(owned, vips, EnsureAddress, RemoveAddress)
}

// syncAddresses is SyncAddresses over ensure and remove.
func syncAddresses(owned *OwnedAddresses, vips []configs.VIP, ensure, remove func(ifname string, p netip.Prefix) (bool, error)) (AddressReport, error) {
	var rep AddressReport
	added, err := ensureAddresses(vips, ensure)
	rep.Added = added
	for _, v := range added {
		owned.Add(addressOf(v))
	}
	errs := []error{err}
	for _, a := range owned.Stale(vips) {
		removed, err := remove(a.Interface, netip.PrefixFrom(a.Addr, a.Addr.BitLen()))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("vip address %s: %w", a, err))
			continue
		case removed:
			rep.Removed = append(rep.Removed, a)
		default:
			rep.Gone = append(rep.Gone, a)
		}
		owned.Remove(a)
	}
	return rep, errors.Join(errs...)
}

// ensureAddresses puts the address of every VIP that names an interface on
// that interface with ensure, and returns the VIPs whose address it added.
// The error joins one error per VIP it could not serve, each naming the
// VIP and the interface; the other VIPs are served all the same.
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
