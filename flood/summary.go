package flood

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"slices"
)

// Summary is a Space-Saving summary (Metwally, Agrawal, El Abbadi 2005)
// of a stream of weighted keys with at most m counters. A key counted
// has a counter of an estimate and an error: when the summary is full,
// a new key takes the counter of the smallest estimate min, with
// estimate min+w and error min. For every key x of true count f(x):
//
//   - x has a counter: estimate - error <= f(x) <= estimate;
//   - x has none: f(x) <= Min() (0 while the summary is not full);
//   - every error, and Min(), is at most N/m, N the weight added (the
//     estimates sum to N, and Min is the smallest of m of them).
//
// A key with a true count above N/m therefore always has a counter.
//
// It is the paper's Stream-Summary: the counters of one estimate hang
// from a bucket of that estimate, the buckets in a list by estimate, so
// that adding weight 1 to a key, or giving a new key the smallest
// counter, is a few links changed (a weight w walks past the buckets of
// estimates between the old and the new). Keys are found by a seeded
// 64-bit hash (hash/maphash), computed once per key added, in an open
// addressing table of the summary's own; two keys of one hash are told
// apart by their bytes. Each counter keeps its key in a buffer of its
// own that the keys taking the counter after it reuse (it grows only
// for a longer key), so that counting does not allocate once the
// buffers have grown. A Summary is not safe for concurrent use.
type Summary struct {
	m    int
	n    uint64
	seed maphash.Seed
	// typed: every key ends in a type of 2 bytes, hashed apart
	// (typedHash), so that a name's hash serves its (name, type).
	typed bool
	// table finds a key's counter: from the place of the hash's top
	// bits on (linear probing); a zero place is free. It has 4m
	// places or more: at a quarter full, most searches end at the
	// first place they look at.
	table []place
	shift uint // 64 - log2(len(table))
	// counters are the counters, the first used of them counting a
	// key each; those after keep their key buffers for reuse.
	counters []counter
	used     int
	// buckets are the estimates counted, each with the counters of
	// that estimate, in a list from first (the smallest) to last;
	// spare are the indexes of buckets unused.
	buckets     []bucket
	spare       []int32
	first, last int32
}

// place is one place of the table: the hash's top 16 bits (its own
// place among them) and the counter plus one (0: a free place).
type place struct {
	tag, c uint16
}

// counter is one counted key, in the list of its bucket, at place in
// the table.
type counter struct {
	key        []byte
	err        uint64
	bucket     int32
	prev, next int32 // in the bucket, -1 at either end
	place      int32
}

// bucket is one estimate and the counters of it: head and the list on
// from it; prev and next are the buckets of the estimates below and
// above (-1: none).
type bucket struct {
	est        uint64
	head       int32
	prev, next int32
}

// A counter's key buffer holds 16 bytes for a key that fits
// (addresses), else at least minKeyBuf (most names fit).
const minKeyBuf = 32

// MaxCounters is the most counters a Summary has: its table's places
// are of 16 bits.
const MaxCounters = 1 << 14

// NewSummary returns an empty summary of at most m counters (at least
// 1, at most MaxCounters).
func NewSummary(m int) *Summary { return newSummary(m, maphash.MakeSeed(), false) }

// newSummary is NewSummary hashing with seed: summaries of one seed
// hash a key alike (Tracker hashes a name once for three of them), the
// typed ones (KindNameType) with the type apart.
func newSummary(m int, seed maphash.Seed, typed bool) *Summary {
	m = min(max(m, 1), MaxCounters)
	size := 4
	for size < 4*m {
		size *= 2
	}
	return &Summary{m: m, seed: seed, typed: typed, table: make([]place, size),
		shift: uint(64 - bits.TrailingZeros(uint(size))), counters: make([]counter, 0, m),
		first: -1, last: -1}
}

// N is the weight added.
func (s *Summary) N() uint64 { return s.n }

// Len is the number of counters in use.
func (s *Summary) Len() int { return s.used }

// Min is the bound on the count of a key without a counter: the
// smallest estimate when the summary is full, else 0.
func (s *Summary) Min() uint64 {
	if s.used < s.m {
		return 0
	}
	return s.buckets[s.first].est
}

// Add counts key with weight w.
func (s *Summary) Add(key string, w uint64) {
	b := []byte(key)
	s.add(b, s.hash(b), w)
}

// AddBytes is Add of string(key). It does not allocate once the
// counters' buffers have grown to the keys' lengths.
func (s *Summary) AddBytes(key []byte, w uint64) {
	s.add(key, s.hash(key), w)
}

// hash is key's hash.
func (s *Summary) hash(key []byte) uint64 {
	if n := len(key) - 2; s.typed && n >= 0 {
		return typedHash(maphash.Bytes(s.seed, key[:n]), binary.BigEndian.Uint16(key[n:]))
	}
	return maphash.Bytes(s.seed, key)
}

// typedHash is the hash of a key of hash h followed by type t: h and t
// mixed (a bijection of h^t, every bit of which moves the top bits).
func typedHash(h uint64, t uint16) uint64 {
	x := h ^ uint64(t)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

// add counts key, of hash h, with weight w. h must be the same for a
// key every time it is added: that of AddBytes, or (in tests) any
// function of the key; keys of one hash are told apart, only slower.
// Only the counters hold on to key: it may be reused bytes.
func (s *Summary) add(key []byte, h, w uint64) {
	s.n += w
	if i, ok := s.find(key, h); ok {
		s.raise(i, w)
		return
	}
	if s.used < s.m {
		s.insert(key, h, w, 0)
		return
	}
	// The new key takes a counter of the smallest estimate.
	b := s.first
	i := s.buckets[b].head
	c := &s.counters[i]
	s.unplace(i)
	s.setKey(i, key)
	c.err = s.buckets[b].est
	s.place(i, h)
	s.raise(i, w)
}

// find is the counter of key, of hash h.
func (s *Summary) find(key []byte, h uint64) (int32, bool) {
	tag := uint16(h >> 48)
	mask := uint64(len(s.table) - 1)
	for i := h >> s.shift; ; i = (i + 1) & mask {
		p := s.table[i]
		if p.c == 0 {
			return 0, false
		}
		if p.tag == tag {
			if bytes.Equal(s.counters[p.c-1].key, key) {
				return int32(p.c) - 1, true
			}
		}
	}
}

// place puts counter i, of hash h, in the table (its key is not there).
func (s *Summary) place(i int32, h uint64) {
	mask := uint64(len(s.table) - 1)
	j := h >> s.shift
	for s.table[j].c != 0 {
		j = (j + 1) & mask
	}
	s.table[j] = place{tag: uint16(h >> 48), c: uint16(i + 1)}
	s.counters[i].place = int32(j)
}

// unplace takes counter i out of the table, moving the places after
// it back so that every key stays reachable from its own place
// (deletion in linear probing, without tombstones).
func (s *Summary) unplace(i int32) {
	mask := uint64(len(s.table) - 1)
	hole := uint64(s.counters[i].place)
	for j := (hole + 1) & mask; ; j = (j + 1) & mask {
		p := s.table[j]
		if p.c == 0 {
			break
		}
		// p moves back to the hole unless its own place is in
		// (hole, j].
		home := uint64(p.tag) >> (s.shift - 48)
		if (j-home)&mask >= (j-hole)&mask {
			s.table[hole] = p
			s.counters[p.c-1].place = int32(hole)
			hole = j
		}
	}
	s.table[hole] = place{}
}

// setKey copies key into counter i's buffer, growing it when too short.
func (s *Summary) setKey(i int32, key []byte) {
	c := &s.counters[i]
	if n := len(key); cap(c.key) < n {
		switch {
		case n <= 16:
			n = 16
		case n < minKeyBuf:
			n = minKeyBuf
		}
		c.key = make([]byte, 0, n)
	}
	c.key = append(c.key[:0], key...)
}

// insert gives key, of hash h, a counter of a new estimate est and
// error err; the summary is not full.
func (s *Summary) insert(key []byte, h, est, err uint64) {
	i := int32(s.used)
	if s.used == len(s.counters) {
		s.counters = append(s.counters, counter{})
	}
	s.used++
	s.setKey(i, key)
	s.counters[i].err = err
	s.place(i, h)
	// The bucket below which est goes: from the last when est is
	// above every estimate (as when fold builds a summary, smallest
	// first), else from the first.
	switch {
	case s.first < 0:
		s.link(i, s.newBucket(est, -1, -1))
	case est >= s.buckets[s.last].est:
		s.settle(i, s.last, est)
	case est <= s.buckets[s.first].est:
		if b := s.first; s.buckets[b].est == est {
			s.link(i, b)
		} else {
			s.link(i, s.newBucket(est, -1, b))
		}
	default:
		s.settle(i, s.first, est)
	}
}

// raise adds w to counter i's estimate.
func (s *Summary) raise(i int32, w uint64) {
	c := &s.counters[i]
	b := c.bucket
	est := s.buckets[b].est + w
	next := s.buckets[b].next
	if c.prev < 0 && c.next < 0 && (next < 0 || s.buckets[next].est > est) {
		// Alone in its bucket, and no estimate in between.
		s.buckets[b].est = est
		return
	}
	s.unlink(i)
	s.settle(i, b, est)
	if s.buckets[b].head < 0 {
		s.dropBucket(b)
	}
}

// settle links counter i (in no bucket) to the bucket of est, found
// from bucket from (of an estimate no larger) on, made when missing.
func (s *Summary) settle(i, from int32, est uint64) {
	prev := from
	for b := s.buckets[prev].next; b >= 0 && s.buckets[b].est <= est; b = s.buckets[b].next {
		prev = b
	}
	if s.buckets[prev].est == est {
		s.link(i, prev)
		return
	}
	s.link(i, s.newBucket(est, prev, s.buckets[prev].next))
}

// link puts counter i at the head of bucket b.
func (s *Summary) link(i, b int32) {
	c := &s.counters[i]
	h := s.buckets[b].head
	c.bucket, c.prev, c.next = b, -1, h
	if h >= 0 {
		s.counters[h].prev = i
	}
	s.buckets[b].head = i
}

// unlink takes counter i out of its bucket (which may be left empty).
func (s *Summary) unlink(i int32) {
	c := &s.counters[i]
	if c.prev >= 0 {
		s.counters[c.prev].next = c.next
	} else {
		s.buckets[c.bucket].head = c.next
	}
	if c.next >= 0 {
		s.counters[c.next].prev = c.prev
	}
	c.prev, c.next = -1, -1
}

// newBucket makes an empty bucket of est between prev and next.
func (s *Summary) newBucket(est uint64, prev, next int32) int32 {
	var b int32
	if n := len(s.spare); n > 0 {
		b = s.spare[n-1]
		s.spare = s.spare[:n-1]
	} else {
		b = int32(len(s.buckets))
		s.buckets = append(s.buckets, bucket{})
	}
	s.buckets[b] = bucket{est: est, head: -1}
	s.join(prev, b)
	s.join(b, next)
	return b
}

// dropBucket takes the empty bucket b out of the list.
func (s *Summary) dropBucket(b int32) {
	s.join(s.buckets[b].prev, s.buckets[b].next)
	s.spare = append(s.spare, b)
}

// join makes bucket b the one after a in the list (-1: b is the first,
// or a the last).
func (s *Summary) join(a, b int32) {
	if a >= 0 {
		s.buckets[a].next = b
	} else {
		s.first = b
	}
	if b >= 0 {
		s.buckets[b].prev = a
	} else {
		s.last = a
	}
}

// Reset empties the summary, keeping its storage (the counters' key
// buffers too).
func (s *Summary) Reset() {
	s.n = 0
	clear(s.table)
	s.used = 0
	s.buckets, s.spare = s.buckets[:0], s.spare[:0]
	s.first, s.last = -1, -1
}

// est is counter i's estimate.
func (s *Summary) est(i int) uint64 { return s.buckets[s.counters[i].bucket].est }

// Entry is one key of a summary or of a merge of summaries: its
// estimated count and the error of the estimate, Est - Err <= true
// count <= Est.
type Entry struct {
	Key      string
	Est, Err uint64
}

// Entries are the summary's counters, largest estimate first.
func (s *Summary) Entries() []Entry {
	out := make([]Entry, s.used)
	for i, c := range s.counters[:s.used] {
		out[i] = Entry{Key: string(c.key), Est: s.est(i), Err: c.err}
	}
	sortEntries(out)
	return out
}

// sortEntries orders by estimate, largest first, then by key.
func sortEntries(e []Entry) {
	slices.SortFunc(e, func(a, b Entry) int {
		if c := cmp.Compare(b.Est, a.Est); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}

// Merge combines summaries of disjoint parts of a stream (the epochs of
// a window) into the entries of the whole, largest first. For a key x,
// with est_i, err_i its counter in summary i when it has one and min_i
// that summary's Min otherwise:
//
//	Est(x) = sum over i of (est_i if x counted in i, else min_i)
//	Err(x) = Est(x) - sum over counted i of (est_i - err_i)
//
// so that Est - Err <= f(x) <= Est, and Err(x) <= sum of N_i/m_i (N/m
// for summaries of one size m). A key in no summary has a true count of
// at most the sum of the Min of all, which is at most the smallest Est
// returned when any summary is full. It also returns N, the weight of
// all.
func Merge(sums []*Summary) (entries []Entry, n uint64) {
	var mins uint64
	for _, s := range sums {
		n += s.n
		mins += s.Min()
	}
	at := make(map[string]int)
	for _, s := range sums {
		m := s.Min()
		for j, c := range s.counters[:s.used] {
			i, ok := at[string(c.key)]
			if !ok {
				i = len(entries)
				key := string(c.key)
				at[key] = i
				// Start at every summary's bound; each summary
				// that counts x replaces its min by its estimate.
				entries = append(entries, Entry{Key: key, Est: mins, Err: mins})
			}
			e := &entries[i]
			e.Est += s.est(j) - m
			e.Err += c.err - m
		}
	}
	sortEntries(entries)
	return entries, n
}

// fold adds the summaries sums (disjoint parts of the stream, as for
// Merge) into s, as a summary of their union with s's part: s keeps the
// m largest merged estimates, each with its merged error. The
// invariants of Summary hold for the result (a key dropped has a merged
// estimate no larger than the smallest kept; N stays the true weight),
// with the errors added: Err <= sum of N_i/m.
func (s *Summary) fold(sums ...*Summary) {
	all := append([]*Summary{s}, sums...)
	entries, n := Merge(all)
	if len(entries) > s.m {
		entries = entries[:s.m]
	}
	s.Reset()
	// Smallest first: each goes at the end of the buckets.
	for _, e := range slices.Backward(entries) {
		key := []byte(e.Key)
		s.insert(key, s.hash(key), e.Est, e.Err)
	}
	s.n = n
}
