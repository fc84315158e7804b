//go:build linux

package vip

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/jsimonetti/rtnetlink/v2"
)

// EnsureAddress puts the host address of p (a /32 or /128) on interface
// ifname unless that address is already there, whatever its prefix length.
// It reports whether it added it. It is idempotent.
func EnsureAddress(ifname string, p netip.Prefix) (added bool, err error) {
	addr, err := hostAddr(p)
	if err != nil {
		return false, err
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return false, fmt.Errorf("vip: address %s on %s: %w", addr, ifname, err)
	}
	conn, err := rtnetlink.Dial(nil)
	if err != nil {
		return false, fmt.Errorf("vip: address %s on %s: dial rtnetlink: %w", addr, ifname, err)
	}
	defer conn.Close()
	have, err := hasAddress(conn, uint32(ifi.Index), addr)
	if err != nil || have {
		return false, err
	}
	err = conn.Address.New(addressMessage(uint32(ifi.Index), addr))
	if errors.Is(err, os.ErrExist) {
		return false, nil // added by someone else meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("vip: add address %s to %s: %w", addr, ifname, err)
	}
	return true, nil
}

// RemoveAddress takes the host address of p off interface ifname if it is
// there, and reports whether it removed it. An interface that does not
// exist holds no address: that is no error.
func RemoveAddress(ifname string, p netip.Prefix) (removed bool, err error) {
	addr, err := hostAddr(p)
	if err != nil {
		return false, err
	}
	index, ok, err := lookupInterface(ifname)
	if err != nil {
		return false, fmt.Errorf("vip: address %s on %s: %w", addr, ifname, err)
	}
	if !ok {
		return false, nil
	}
	conn, err := rtnetlink.Dial(nil)
	if err != nil {
		return false, fmt.Errorf("vip: address %s on %s: dial rtnetlink: %w", addr, ifname, err)
	}
	defer conn.Close()
	msgs, err := conn.Address.List()
	if err != nil {
		return false, fmt.Errorf("vip: list addresses: %w", err)
	}
	for _, m := range msgs {
		if m.Index != index || !sameAddr(m, addr) {
			continue
		}
		err := conn.Address.Delete(&m)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("vip: remove address %s from %s: %w", addr, ifname, err)
		}
		return true, nil
	}
	return false, nil
}

// lookupInterface returns the index of interface ifname; ok is false when
// the host has no such interface.
func lookupInterface(ifname string) (index uint32, ok bool, err error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, false, fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifi := range ifs {
		if ifi.Name == ifname {
			return uint32(ifi.Index), true, nil
		}
	}
	return 0, false, nil
}

// hasAddress reports whether interface index holds addr.
func hasAddress(conn *rtnetlink.Conn, index uint32, addr netip.Addr) (bool, error) {
	msgs, err := conn.Address.List()
	if err != nil {
		return false, fmt.Errorf("vip: list addresses: %w", err)
	}
	for _, m := range msgs {
		if m.Index == index && sameAddr(m, addr) {
			return true, nil
		}
	}
	return false, nil
}

// sameAddr reports whether an address message is for addr.
func sameAddr(m rtnetlink.AddressMessage, addr netip.Addr) bool {
	if m.Attributes == nil {
		return false
	}
	for _, ip := range []net.IP{m.Attributes.Local, m.Attributes.Address} {
		if a, ok := netip.AddrFromSlice(ip); ok && a.Unmap() == addr {
			return true
		}
	}
	return false
}

// addressMessage is the request that adds addr as a host address.
func addressMessage(index uint32, addr netip.Addr) *rtnetlink.AddressMessage {
	fam, bits := uint8(syscall.AF_INET), uint8(32)
	if addr.Is6() {
		fam, bits = syscall.AF_INET6, 128
	}
	ip := net.IP(addr.AsSlice())
	return &rtnetlink.AddressMessage{
		Family:       fam,
		PrefixLength: bits,
		Scope:        syscall.RT_SCOPE_UNIVERSE,
		Index:        index,
		Attributes:   &rtnetlink.AddressAttributes{Address: ip, Local: ip},
	}
}
