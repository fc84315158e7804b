package fleet

import "sort"

// MaxVersions is how many hashes a Versions register keeps: the most
// recent ones (by version). A hash left out that is served again is
// given a new version, above every other: the serial still only grows.
const MaxVersions = 64

// Versions is the register of configuration versions a fleet shares:
// one version per hash of the served data (responder.ConfigHash), so
// that every node serving the same data answers the same SOA serial
// (the version plus the intent revision). Versions are given out once
// each, in increasing order: Max is the highest ever given.
type Versions struct {
	// Max is the highest version the register has given out.
	Max uint32 `json:"max"`
	// Hashes maps a served data's hash to its version.
	Hashes map[string]uint32 `json:"versions"`
}

// Assign returns the version of hash that is at least floor (the
// lowest version the asking node may serve without its serial going
// back: its current version for the hash it serves, one more for
// another hash), and whether the register changed. A hash registered at
// floor or above keeps its version: every node serving it uses that one.
// A hash not registered, or registered below floor (a rollback to data
// served before, or a node whose own version is ahead of the fleet's),
// is given max(Max+1, floor): a version no other hash has, which the
// other nodes serving the same hash move up to.
func (v *Versions) Assign(hash string, floor uint32) (uint32, bool) {
	if got, ok := v.Hashes[hash]; ok && got >= floor {
		return got, false
	}
	n := max(v.Max+1, floor)
	if v.Hashes == nil {
		v.Hashes = map[string]uint32{}
	}
	v.Hashes[hash] = n
	v.Max = n
	v.prune()
	return n, true
}

// prune keeps the MaxVersions highest versions.
func (v *Versions) prune() {
	if len(v.Hashes) <= MaxVersions {
		return
	}
	type hv struct {
		h string
		v uint32
	}
	all := make([]hv, 0, len(v.Hashes))
	for h, n := range v.Hashes {
		all = append(all, hv{h, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
	for _, x := range all[MaxVersions:] {
		delete(v.Hashes, x.h)
	}
}
