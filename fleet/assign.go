package fleet

import (
	"cmp"
	"hash/fnv"
	"slices"

	"lbdns/internal/splitmix"
)

// Prober is one node that probes GSLB members: its name (unique in the
// fleet) and the location it probes from.
type Prober struct {
	Name     string
	Location string
}

// DefaultProbersPerMember is the k of Assign when the caller has no
// other: each member is probed from three probers.
const DefaultProbersPerMember = 3

// Score is the rendezvous (highest random weight) score of prober for
// member: every node computes the same score from the two names alone,
// so that assignments need no coordination.
func Score(member, prober string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(prober))
	return splitmix.Mix(h.Sum64())
}

// Probers returns the k probers of member among probers: the highest
// scores (Score), taking at most one prober per location while other
// locations have probers left, then the next highest scores whatever
// their location. Fewer than k probers give them all. The order is the
// order of choice; probers must have distinct names.
func Probers(member string, probers []Prober, k int) []Prober {
	if k <= 0 || len(probers) == 0 {
		return nil
	}
	type scored struct {
		p Prober
		s uint64
	}
	all := make([]scored, len(probers))
	for i, p := range probers {
		all[i] = scored{p, Score(member, p.Name)}
	}
	slices.SortFunc(all, func(a, b scored) int {
		if c := cmp.Compare(b.s, a.s); c != 0 {
			return c
		}
		return cmp.Compare(a.p.Name, b.p.Name)
	})
	k = min(k, len(all))
	out := make([]Prober, 0, k)
	taken := make([]bool, len(all))
	seen := map[string]bool{}
	for i, c := range all { // one per location, best first
		if len(out) == k {
			break
		}
		if !seen[c.p.Location] {
			seen[c.p.Location] = true
			taken[i] = true
			out = append(out, c.p)
		}
	}
	for i, c := range all { // then the best of the rest
		if len(out) == k {
			break
		}
		if !taken[i] {
			out = append(out, c.p)
		}
	}
	return out
}

// Assign returns the probers of every member (Probers), by member name.
func Assign(members []string, probers []Prober, k int) map[string][]Prober {
	out := make(map[string][]Prober, len(members))
	for _, m := range members {
		out[m] = Probers(m, probers, k)
	}
	return out
}

// Moved returns the fraction of the members of before whose probers
// (as a set) are not the same in after (0 when before has none): what a
// join or a leave costs. A join of the (N+1)th prober moves about
// k/(N+1) of the members, each by one prober.
func Moved(before, after map[string][]Prober) float64 {
	if len(before) == 0 {
		return 0
	}
	moved := 0
	for m, ps := range before {
		qs := after[m]
		same := len(ps) == len(qs)
		for _, p := range ps {
			if !slices.ContainsFunc(qs, func(q Prober) bool { return q.Name == p.Name }) {
				same = false
			}
		}
		if !same {
			moved++
		}
	}
	return float64(moved) / float64(len(before))
}

// Live returns the probers among nodes that count: those in the fleet
// view (their lease is alive) that have applied the intent revision in
// force for their scope ("status is intent, heartbeat is fact") and have
// not withdrawn their votes (Heartbeat.Withdrawn), by name. Every node
// computes the same list from the same view.
func Live(nodes []Node) []Prober {
	var out []Prober
	for _, n := range nodes {
		if n.IntentRevision == n.CurrentRevision && !n.Withdrawn {
			out = append(out, Prober{Name: n.Name, Location: n.Location})
		}
	}
	slices.SortFunc(out, func(a, b Prober) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
