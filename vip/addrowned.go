package vip

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"lbdns/configs"
	"lbdns/internal/atomicfile"
)

// AddressesFile is the usual name of the file an OwnedAddresses is kept
// in, in the daemon's state directory.
const AddressesFile = "vip-addresses-owned.json"

// HostAddress is one host address (/32 or /128) on one interface.
type HostAddress struct {
	Interface string
	Addr      netip.Addr
}

// String is "ADDR on INTERFACE".
func (a HostAddress) String() string { return a.Addr.String() + " on " + a.Interface }

// Compare orders addresses by interface, then address.
func (a HostAddress) Compare(b HostAddress) int {
	return cmp.Or(cmp.Compare(a.Interface, b.Interface), a.Addr.Compare(b.Addr))
}

// addressOf is the host address a VIP with an interface asks for.
func addressOf(v configs.VIP) HostAddress {
	return HostAddress{Interface: v.Interface, Addr: v.Addr.Unmap()}
}

// addressesState is the file format:
// {"version": 1, "addresses": [{"interface": "lo", "address": "192.0.2.1"}, ...]}.
type addressesState struct {
	Version   int            `json:"version"`
	Addresses []addressEntry `json:"addresses"`
}

type addressEntry struct {
	Interface string `json:"interface"`
	Address   string `json:"address"` // parsed after decoding, so that a bad one is named by its entry
}

// OwnedAddresses is the set of VIP addresses a daemon put on interfaces
// itself, kept in a file so that the address of a VIP removed from the
// configuration (also while the daemon was down) is taken off its
// interface, and an address that was there before the daemon (an
// operator's) never is: only an address EnsureAddress reports as added
// enters the set. It is not safe for concurrent use.
type OwnedAddresses struct {
	set map[HostAddress]bool
	// saved is the sorted list the file holds, as last loaded or saved.
	saved []HostAddress
}

// NewOwnedAddresses returns an empty set, with nothing saved.
func NewOwnedAddresses() *OwnedAddresses {
	return &OwnedAddresses{set: map[HostAddress]bool{}}
}

// LoadOwnedAddresses reads the set saved at path, as LoadOwned reads its
// file (readOwnedFile): a missing file gives an empty set (first start);
// a file that cannot be read or parsed whole (any entry without an
// interface or a valid address, a key the format does not have, a version
// other than 1) gives an empty set and the error: the set then holds none
// of the file's addresses, so none of them is removed. An address listed
// twice is listed once. Nothing is guessed from a damaged record; the
// worst outcome is an address left on its interface.
func LoadOwnedAddresses(path string) (*OwnedAddresses, error) {
	s := NewOwnedAddresses()
	var st addressesState
	if found, err := readOwnedFile(path, "owned addresses", &st, func() int { return st.Version }); !found || err != nil {
		return s, err
	}
	got := map[HostAddress]bool{}
	for i, e := range st.Addresses {
		a, err := netip.ParseAddr(e.Address)
		if e.Interface == "" || err != nil || a.Zone() != "" {
			return s, fmt.Errorf("vip: owned addresses %s: entry %d: want an interface and an address without zone, got %q and %q", path, i, e.Interface, e.Address)
		}
		got[HostAddress{Interface: e.Interface, Addr: a.Unmap()}] = true
	}
	s.set = got
	s.saved = s.List()
	return s, nil
}

// Add adds a to the set.
func (s *OwnedAddresses) Add(a HostAddress) { s.set[a] = true }

// Remove takes a out of the set.
func (s *OwnedAddresses) Remove(a HostAddress) { delete(s.set, a) }

// Has reports whether a is in the set.
func (s *OwnedAddresses) Has(a HostAddress) bool { return s.set[a] }

// List returns the addresses of the set in Compare order.
func (s *OwnedAddresses) List() []HostAddress {
	out := make([]HostAddress, 0, len(s.set))
	for a := range s.set {
		out = append(out, a)
	}
	slices.SortFunc(out, HostAddress.Compare)
	return out
}

// Stale returns, in Compare order, the addresses of the set that no VIP of
// vips asks for (same interface, same address): those of VIPs removed from
// the configuration, or whose address or interface changed. They are the
// addresses to take off their interfaces.
func (s *OwnedAddresses) Stale(vips []configs.VIP) []HostAddress {
	want := map[HostAddress]bool{}
	for _, v := range vips {
		if v.Interface != "" {
			want[addressOf(v)] = true
		}
	}
	var out []HostAddress
	for _, a := range s.List() {
		if !want[a] {
			out = append(out, a)
		}
	}
	return out
}

// Unsaved reports whether the set differs from what its file holds (as
// last loaded or saved).
func (s *OwnedAddresses) Unsaved() bool { return !slices.Equal(s.List(), s.saved) }

// Save writes the set to path atomically (internal/atomicfile) when it is
// Unsaved. On an error the set stays Unsaved, so the next Save tries
// again, except for an *atomicfile.DirSyncError: the file is then in
// place, only its durability is in doubt.
func (s *OwnedAddresses) Save(path string) error {
	if !s.Unsaved() {
		return nil
	}
	list := s.List()
	st := addressesState{Version: ownedFileVersion, Addresses: make([]addressEntry, 0, len(list))}
	for _, a := range list {
		st.Addresses = append(st.Addresses, addressEntry{Interface: a.Interface, Address: a.Addr.String()})
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("vip: owned addresses: encode: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n')); err != nil {
		var ds *atomicfile.DirSyncError
		if errors.As(err, &ds) {
			s.saved = list
		}
		return fmt.Errorf("vip: owned addresses: save: %w", err)
	}
	s.saved = list
	return nil
}
