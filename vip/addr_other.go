//go:build !linux

package vip

import (
	"errors"
	"net/netip"
)

// errNoAddresses is returned off Linux.
var errNoAddresses = errors.New("vip: managing interface addresses needs linux")

// EnsureAddress puts the host address of p on interface ifname; it works
// only on Linux.
func EnsureAddress(ifname string, p netip.Prefix) (added bool, err error) {
	if _, err := hostAddr(p); err != nil {
		return false, err
	}
	return false, errNoAddresses
}

// RemoveAddress takes the host address of p off interface ifname; it works
// only on Linux.
func RemoveAddress(ifname string, p netip.Prefix) (removed bool, err error) {
	if _, err := hostAddr(p); err != nil {
		return false, err
	}
	return false, errNoAddresses
}
