package vip

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"lbdns/internal/atomicfile"
)

// OwnedFile is the usual name of the file an OwnedSet is kept in, in the
// daemon's state directory.
const OwnedFile = "ipvs-owned.json"

// ownedState is the file format: {"version": 1, "services": ["udp/ADDR:PORT", ...]}.
type ownedState struct {
	Version  int      `json:"version"`
	Services []string `json:"services"`
}

// OwnedSet is the set of IPVS services a daemon owns, kept in a file so
// that a service of a VIP removed from the configuration while the daemon
// was down is still recognised as its own, and deleted, after a restart.
// It is not safe for concurrent use.
type OwnedSet struct {
	keys map[ServiceKey]bool
	// saved is the sorted list of services the file holds, as last loaded
	// or saved; changed is set when keys changed since.
	saved   []string
	changed bool
}

// NewOwnedSet returns an empty set, with nothing saved.
func NewOwnedSet() *OwnedSet {
	return &OwnedSet{keys: map[ServiceKey]bool{}}
}

// LoadOwned reads the set saved at path, as LoadOwnedAddresses reads its
// record (readOwnedFile): a missing file gives an empty set (first
// start); a file that cannot be read or parsed whole (any entry that is
// not a service, a key the format does not have, a version other than 1)
// gives an empty set and the error: none of the file's services, not even
// the good ones, is taken for owned. A service listed twice is listed
// once. The set is usable in every case: the worst outcome of a lost
// entry is an orphaned service left in the kernel, never a deleted one.
func LoadOwned(path string) (*OwnedSet, error) {
	s := NewOwnedSet()
	var st ownedState
	if found, err := readOwnedFile(path, "owned services", &st, func() int { return st.Version }); !found || err != nil {
		return s, err
	}
	keys := map[ServiceKey]bool{}
	for i, e := range st.Services {
		k, err := ParseServiceKey(e)
		if err != nil {
			return s, fmt.Errorf("vip: owned services %s: entry %d: %w", path, i, err)
		}
		keys[k] = true
	}
	s.keys = keys
	s.saved = s.list()
	return s, nil
}

// Restore adds the services saved at path to s, and takes the file as
// what is saved (so s is Unsaved only when it holds services the file does
// not). A missing file adds nothing (first start). On an error (see
// LoadOwned) the entries that could be read are added all the same: the
// worst outcome of a lost entry is an orphaned service left in the kernel,
// never a deleted one.
func (s *OwnedSet) Restore(path string) error {
	f, err := LoadOwned(path)
	for k := range s.keys {
		f.Add(k)
	}
	*s = *f
	return err
}

// PruneAndSave forgets the services that are neither in configured nor
// present (in the kernel, as the reconciler last saw it), then Saves the
// set to path when it changed. It reads present key by key and writes only
// on a change, so it is cheap to run after every reconcile.
func (s *OwnedSet) PruneAndSave(path string, configured Table, present func(ServiceKey) bool) error {
	s.Prune(func(k ServiceKey) bool {
		_, want := configured[k]
		return want || present(k)
	})
	return s.Save(path)
}

// Add adds k to the set.
func (s *OwnedSet) Add(k ServiceKey) {
	if !s.keys[k] {
		s.keys[k] = true
		s.changed = true
	}
}

// Has reports whether k is in the set: the ownership test of a Reconciler.
func (s *OwnedSet) Has(k ServiceKey) bool { return s.keys[k] }

// Keys returns the services of the set in Compare order.
func (s *OwnedSet) Keys() []ServiceKey {
	out := make([]ServiceKey, 0, len(s.keys))
	for k := range s.keys {
		out = append(out, k)
	}
	slices.SortFunc(out, ServiceKey.Compare)
	return out
}

// Prune removes the services for which keep returns false.
func (s *OwnedSet) Prune(keep func(ServiceKey) bool) {
	for k := range s.keys {
		if !keep(k) {
			delete(s.keys, k)
			s.changed = true
		}
	}
}

// Unsaved reports whether the set differs from what its file holds (as
// last loaded or saved).
func (s *OwnedSet) Unsaved() bool {
	if !s.changed {
		return false
	}
	if slices.Equal(s.list(), s.saved) {
		s.changed = false
	}
	return s.changed
}

// Save writes the set to path atomically (internal/atomicfile) when it is
// Unsaved. On an error the set stays Unsaved, so the next Save tries
// again, except for an *atomicfile.DirSyncError: the file is then in
// place, only its durability is in doubt.
func (s *OwnedSet) Save(path string) error {
	if !s.Unsaved() {
		return nil
	}
	list := s.list()
	b, err := json.MarshalIndent(ownedState{Version: ownedFileVersion, Services: list}, "", "  ")
	if err != nil {
		return fmt.Errorf("vip: owned services: encode: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n')); err != nil {
		var ds *atomicfile.DirSyncError
		if errors.As(err, &ds) {
			s.saved, s.changed = list, false
		}
		return fmt.Errorf("vip: owned services: save: %w", err)
	}
	s.saved, s.changed = list, false
	return nil
}

// list returns the services of the set as sorted strings.
func (s *OwnedSet) list() []string {
	out := make([]string, 0, len(s.keys))
	for k := range s.keys {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// ParseServiceKey parses the form of ServiceKey.String: "udp/ADDR:PORT".
func ParseServiceKey(s string) (ServiceKey, error) {
	proto, ap, ok := strings.Cut(s, "/")
	if !ok {
		return ServiceKey{}, fmt.Errorf("want PROTO/ADDR:PORT, got %q", s)
	}
	a, err := netip.ParseAddrPort(ap)
	if err != nil {
		return ServiceKey{}, err
	}
	k := ServiceKey{Addr: a.Addr(), Port: a.Port()}
	switch proto {
	case "udp":
		k.Proto = UDP
	case "tcp":
		k.Proto = TCP
	default:
		return ServiceKey{}, fmt.Errorf("unknown protocol %q", proto)
	}
	return k, nil
}
