package flood

import (
	"bytes"
	"cmp"
	"hash/maphash"
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
// Keys are found by a seeded 64-bit hash (hash/maphash) in an open
// addressing table of its own, each hash computed once per key added;
// two keys of the same hash are told apart by their bytes. Each counter
// keeps its key in a buffer of its own, reused by the keys that take
// the counter after it (a buffer grows only for a longer key), so that
// counting does not allocate once the buffers have grown. A Summary is
// not safe for concurrent use.
type Summary struct {
	m    int
	n    uint64
	seed maphash.Seed
	// table finds a key's counter: at h&mask for a key of hash h, or
	// the next places on (linear probing); 0 is a free place.
	table []place
	mask  uint64
	// slots hold the counters, each at a fixed slot while its key is
	// counted (those from len(heap) on are free, kept for their
	// buffers); heap orders them by estimate (a min-heap, with the
	// estimates in it), and pos is each slot's place in it.
	slots []counter
	heap  []heapEntry
	pos   []int32
}

// place is one place of the table: the upper half of the hash of the
// key there (to skip most others without reading their counter), and
// its slot plus one (0: free).
type place struct {
	tag  uint32
	slot int32
}

// counter is one counted key; its estimate is in the heap.
type counter struct {
	key  []byte
	hash uint64
	err  uint64
}

type heapEntry struct {
	est  uint64
	slot int32
}

// minKeyBuf is the least a counter's key buffer holds: most names fit.
const minKeyBuf = 32

// NewSummary returns an empty summary of at most m counters (at least 1).
func NewSummary(m int) *Summary {
	return newSummary(m, maphash.MakeSeed())
}

func newSummary(m int, seed maphash.Seed) *Summary {
	m = max(m, 1)
	size := 4
	for size < 2*m {
		size *= 2
	}
	return &Summary{m: m, seed: seed, table: make([]place, size), mask: uint64(size - 1),
		slots: make([]counter, 0, m), heap: make([]heapEntry, 0, m), pos: make([]int32, 0, m)}
}

// N is the weight added.
func (s *Summary) N() uint64 { return s.n }

// Len is the number of counters in use.
func (s *Summary) Len() int { return len(s.heap) }

// Min is the bound on the count of a key without a counter: the
// smallest estimate when the summary is full, else 0.
func (s *Summary) Min() uint64 {
	if len(s.heap) < s.m {
		return 0
	}
	return s.heap[0].est
}

// Add counts key with weight w.
func (s *Summary) Add(key string, w uint64) {
	s.add([]byte(key), maphash.String(s.seed, key), w)
}

// AddBytes is Add of string(key). It does not allocate once the
// counters' buffers have grown to the keys' lengths.
func (s *Summary) AddBytes(key []byte, w uint64) {
	s.add(key, maphash.Bytes(s.seed, key), w)
}

// add counts key, of hash h, with weight w. Only the counters hold on
// to key: it may be reused bytes.
func (s *Summary) add(key []byte, h, w uint64) {
	s.n += w
	if i, ok := s.find(key, h); ok {
		p := s.pos[i]
		s.heap[p].est += w
		s.down(int(p))
		return
	}
	s.insert(key, h, w, 0)
}

// find is the slot of key, of hash h.
func (s *Summary) find(key []byte, h uint64) (slot int32, ok bool) {
	tag := uint32(h >> 32)
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		p := s.table[i]
		if p.slot == 0 {
			return 0, false
		}
		if p.tag == tag {
			if c := &s.slots[p.slot-1]; c.hash == h && bytes.Equal(c.key, key) {
				return p.slot - 1, true
			}
		}
	}
}

// place puts slot, of hash h, in the table (its key is not there).
func (s *Summary) place(slot int32, h uint64) {
	i := h & s.mask
	for s.table[i].slot != 0 {
		i = (i + 1) & s.mask
	}
	s.table[i] = place{tag: uint32(h >> 32), slot: slot + 1}
}

// unplace takes slot, of hash h, out of the table, moving the places
// after it back so that every key stays reachable from its own place
// (deletion in linear probing, without tombstones).
func (s *Summary) unplace(slot int32, h uint64) {
	i := h & s.mask
	for s.table[i].slot != slot+1 {
		i = (i + 1) & s.mask
	}
	for j := (i + 1) & s.mask; ; j = (j + 1) & s.mask {
		p := s.table[j]
		if p.slot == 0 {
			break
		}
		// p may move to i when its own place is not in (i, j].
		home := s.slots[p.slot-1].hash & s.mask
		if (j-home)&s.mask >= (j-i)&s.mask {
			s.table[i] = p
			i = j
		}
	}
	s.table[i] = place{}
}

// setKey copies key into slot i's buffer, growing it when too short.
func (s *Summary) setKey(i int32, key []byte) {
	c := &s.slots[i]
	if cap(c.key) < len(key) {
		c.key = make([]byte, 0, max(len(key), minKeyBuf))
	}
	c.key = append(c.key[:0], key...)
}

// insert gives key, of hash h, a counter of estimate base+w and error
// err plus base, base the estimate of the counter it takes (0 while the
// summary is not full).
func (s *Summary) insert(key []byte, h, w, err uint64) {
	if len(s.heap) < s.m {
		i := int32(len(s.heap))
		if int(i) == len(s.slots) {
			s.slots = append(s.slots, counter{})
		} // else slots[i] is a counter of before Reset, with its buffer
		s.setKey(i, key)
		s.slots[i].hash, s.slots[i].err = h, err
		s.heap = append(s.heap, heapEntry{est: w, slot: i})
		s.pos = append(s.pos, i)
		s.place(i, h)
		s.up(int(i))
		return
	}
	least := s.heap[0]
	i := least.slot
	s.unplace(i, s.slots[i].hash)
	s.setKey(i, key)
	s.slots[i].hash, s.slots[i].err = h, least.est+err
	s.heap[0].est = least.est + w
	s.place(i, h)
	s.down(0)
}

func (s *Summary) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.pos[s.heap[a].slot] = int32(a)
	s.pos[s.heap[b].slot] = int32(b)
}

func (s *Summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[i].est >= s.heap[p].est {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Summary) down(i int) {
	h := s.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && h[r].est < h[l].est {
			j = r
		}
		if h[j].est >= h[i].est {
			return
		}
		s.swap(i, j)
		i = j
	}
}

// Reset empties the summary, keeping its storage (the counters' key
// buffers too).
func (s *Summary) Reset() {
	s.n = 0
	clear(s.table)
	s.heap, s.pos = s.heap[:0], s.pos[:0]
}

// Entry is one key of a summary or of a merge of summaries: its
// estimated count and the error of the estimate, Est - Err <= true
// count <= Est.
type Entry struct {
	Key      string
	Est, Err uint64
}

// Entries are the summary's counters, largest estimate first.
func (s *Summary) Entries() []Entry {
	out := make([]Entry, len(s.heap))
	for i, e := range s.heap {
		c := &s.slots[e.slot]
		out[i] = Entry{Key: string(c.key), Est: e.est, Err: c.err}
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
		for _, he := range s.heap {
			c := &s.slots[he.slot]
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
			e.Est += he.est - m
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
	// Smallest first is a min-heap: each insert leaves it in place.
	for _, e := range slices.Backward(entries) {
		key := []byte(e.Key)
		s.insert(key, maphash.Bytes(s.seed, key), e.Est, e.Err)
	}
	s.n = n
}
