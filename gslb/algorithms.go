package gslb

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/internal/splitmix"
)

// member is one member of a pool, of one address family, as a name
// answers it.
type member struct {
	name     string
	addr     netip.Addr
	weight   int
	priority int
	state    health.State
	key      uint64 // hash of the member's name (rendezvous)
	rr       dns.RR
}

// ring is records answered in rotation: rrs holds them twice, so that a
// window of any start is one sub-slice (no allocation per answer).
type ring struct {
	rrs []dns.RR
	n   int
}

// newRing makes the ring of rrs.
func newRing(rrs []dns.RR) ring {
	return ring{rrs: append(slices.Clip(rrs), rrs...), n: len(rrs)}
}

// take returns k records starting at position c (mod n); the slice is
// capped so that appending to it copies.
func (r ring) take(c uint64, k int) []dns.RR {
	if r.n == 0 || k <= 0 {
		return nil
	}
	k = min(k, r.n)
	i := int(c % uint64(r.n))
	return r.rrs[i : i+k : i+k]
}

// rotor is a pool's position in its rotation: a counter shared by every
// caller, and its slot in a caller's own counters (Query.Rotation).
type rotor struct {
	shared *atomic.Uint64
	slot   int
}

// next returns the next position and moves on: in the caller's own
// counters when it has them (no memory shared with other callers), else
// in the shared counter.
func (r rotor) next(own []uint64) uint64 {
	if r.slot < len(own) {
		v := own[r.slot]
		own[r.slot] = v + 1
		return v
	}
	return r.shared.Add(1) - 1
}

// famPool is one pool of a name for one address family: its members,
// those up, and what the pool's algorithm needs precomputed.
type famPool struct {
	name      string
	algorithm string
	max       int
	// rot rotates rr, wrr, all and priority; shared by every name
	// answering from the pool (the snapshot's only mutable state).
	rot     rotor
	members []member // every member of the family, configuration order
	all     []dns.RR // their records
	isUp    []bool   // by members index
	up      []member // members up, configuration order
	upRing  ring     // their records
	unknown bool     // some member is still without a verdict
	// prio are the records of the members up with the lowest priority.
	prio ring
	// sched is the smooth weighted round-robin schedule of the members up.
	sched []dns.RR
}

// newFamPool precomputes the pool's selection over members.
func newFamPool(p *configs.GSLBPool, rot rotor, members []member) *famPool {
	fp := &famPool{name: p.Name, algorithm: p.Algorithm, max: p.MaxRecords, rot: rot, members: members,
		isUp: make([]bool, len(members))}
	if fp.max < 1 {
		fp.max = configs.DefaultMaxRecords
	}
	// Slices made at their size: a reload builds 20,000 pools' worth.
	nUp := 0
	for _, m := range members {
		if m.state == health.Up {
			nUp++
		}
	}
	var upRRs []dns.RR
	if len(members) > 0 {
		fp.all = make([]dns.RR, 0, len(members))
	}
	if nUp > 0 {
		fp.up, upRRs = make([]member, 0, nUp), make([]dns.RR, 0, nUp)
	}
	for i, m := range members {
		fp.all = append(fp.all, m.rr)
		switch m.state {
		case health.Up:
			fp.isUp[i] = true
			fp.up = append(fp.up, m)
			upRRs = append(upRRs, m.rr)
		case health.Unknown:
			fp.unknown = true
		}
	}
	fp.upRing = newRing(upRRs)
	if len(fp.up) == 0 {
		return fp
	}
	switch fp.algorithm {
	case configs.AlgorithmPriority:
		low := fp.up[0].priority
		for _, m := range fp.up {
			low = min(low, m.priority)
		}
		var tie []dns.RR
		for _, m := range fp.up {
			if m.priority == low {
				tie = append(tie, m.rr)
			}
		}
		fp.prio = newRing(tie)
	case configs.AlgorithmWRR:
		fp.sched = smoothSchedule(fp.up)
	}
	return fp
}

// maxSchedule bounds the length of a weighted round-robin schedule;
// weights are scaled down to fit.
const maxSchedule = 4096

// smoothSchedule is one cycle of smooth weighted round robin (as nginx
// does it) over ms: every member appears in proportion to its weight,
// spread out rather than in runs.
func smoothSchedule(ms []member) []dns.RR {
	w := make([]int, len(ms))
	g, total := 0, 0
	for i, m := range ms {
		w[i] = max(m.weight, 1)
		g = gcd(g, w[i])
	}
	for i := range w {
		w[i] /= g
		total += w[i]
	}
	if total > maxSchedule {
		scaled := 0
		for i := range w {
			w[i] = max(1, w[i]*maxSchedule/total)
			scaled += w[i]
		}
		total = scaled
	}
	cur := make([]int, len(ms))
	out := make([]dns.RR, 0, total)
	for range total {
		best := 0
		for i := range w {
			cur[i] += w[i]
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		out = append(out, ms[best].rr)
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// pick returns the records the pool answers for a client with hash key
// (nil when no member is up) and whether the choice depends on the key.
func (fp *famPool) pick(key uint64, own []uint64) ([]dns.RR, bool) {
	n := len(fp.up)
	if n == 0 {
		return nil, false
	}
	switch fp.algorithm {
	case configs.AlgorithmWRR:
		i := int(fp.rot.next(own) % uint64(len(fp.sched)))
		return fp.sched[i : i+1 : i+1], false
	case configs.AlgorithmRandom:
		i := rand.IntN(n)
		return fp.upRing.rrs[i : i+1 : i+1], false
	case configs.AlgorithmPriority:
		return fp.prio.take(fp.rot.next(own), fp.max), false
	case configs.AlgorithmAll:
		return fp.upRing.take(fp.rot.next(own), fp.max), false
	case configs.AlgorithmHash:
		// The client's member of all of them while it is up; else one
		// of those up, by the same key.
		i := int(key % uint64(len(fp.members)))
		if fp.isUp[i] {
			return fp.all[i : i+1 : i+1], true
		}
		j := int(splitmix.Mix(key^0x9e3779b97f4a7c15) % uint64(n))
		return fp.upRing.rrs[j : j+1 : j+1], true
	case configs.AlgorithmRendezvous:
		j := rendezvous(fp.up, key)
		return fp.upRing.rrs[j : j+1 : j+1], true
	default: // rr
		return fp.upRing.take(fp.rot.next(own), 1), false
	}
}

// rendezvous returns the index in ms of the member with the highest
// weighted random weight for key (weighted rendezvous hashing: score =
// weight / -ln(u), u uniform in (0,1) from the key and the member).
func rendezvous(ms []member, key uint64) int {
	best, bestScore := 0, math.Inf(-1)
	for i := range ms {
		u := (float64(splitmix.Mix(key^ms[i].key)>>11) + 0.5) / (1 << 53)
		score := float64(ms[i].weight) / -math.Log(u)
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// addrKey is the hash key of a client: its address and prefix length.
func addrKey(a netip.Addr, bits int) uint64 {
	b := a.As16()
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return splitmix.Mix(h ^ uint64(bits))
}

// stringKey is the FNV-1a hash of s, mixed.
func stringKey(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return splitmix.Mix(h)
}
