package flood

import (
	"cmp"
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
// A Summary is not safe for concurrent use.
type Summary struct {
	m   int
	n   uint64
	idx map[string]int32 // key -> slot
	// slots hold the counters, each at a fixed slot while its key is
	// counted; heap orders the slots by estimate (a min-heap), and pos
	// is each slot's place in it: a sift moves slot numbers, never
	// touches the map.
	slots []counter
	heap  []int32
	pos   []int32
}

// counter is one counted key.
type counter struct {
	key      string
	est, err uint64
}

// NewSummary returns an empty summary of at most m counters (at least 1).
func NewSummary(m int) *Summary {
	m = max(m, 1)
	return &Summary{m: m, idx: make(map[string]int32, m), slots: make([]counter, 0, m),
		heap: make([]int32, 0, m), pos: make([]int32, 0, m)}
}

// N is the weight added.
func (s *Summary) N() uint64 { return s.n }

// Len is the number of counters in use.
func (s *Summary) Len() int { return len(s.slots) }

// Min is the bound on the count of a key without a counter: the
// smallest estimate when the summary is full, else 0.
func (s *Summary) Min() uint64 {
	if len(s.slots) < s.m {
		return 0
	}
	return s.slots[s.heap[0]].est
}

// Add counts key with weight w. key is copied only when it takes a
// counter, so a caller may pass a string converted from reused bytes
// (AddBytes).
func (s *Summary) Add(key string, w uint64) {
	s.n += w
	if i, ok := s.idx[key]; ok {
		s.slots[i].est += w
		s.down(int(s.pos[i]))
		return
	}
	s.insert(cloneKey(key), w, 0)
}

// AddBytes is Add of string(key), without allocating when key has a
// counter already.
func (s *Summary) AddBytes(key []byte, w uint64) {
	s.n += w
	if i, ok := s.idx[string(key)]; ok {
		s.slots[i].est += w
		s.down(int(s.pos[i]))
		return
	}
	s.insert(string(key), w, 0)
}

// cloneKey copies key (it may point at reused bytes).
func cloneKey(key string) string { return string([]byte(key)) }

// insert gives key (owned) a counter of estimate base+w and error err
// plus what the counter it takes had.
func (s *Summary) insert(key string, w, err uint64) {
	if len(s.slots) < s.m {
		i := int32(len(s.slots))
		s.slots = append(s.slots, counter{key: key, est: w, err: err})
		s.heap = append(s.heap, i)
		s.pos = append(s.pos, i)
		s.idx[key] = i
		s.up(int(i))
		return
	}
	i := s.heap[0]
	least := s.slots[i]
	delete(s.idx, least.key)
	s.slots[i] = counter{key: key, est: least.est + w, err: least.est + err}
	s.idx[key] = i
	s.down(0)
}

func (s *Summary) less(a, b int) bool { return s.slots[s.heap[a]].est < s.slots[s.heap[b]].est }

func (s *Summary) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.pos[s.heap[a]] = int32(a)
	s.pos[s.heap[b]] = int32(b)
}

func (s *Summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Summary) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && s.less(r, l) {
			j = r
		}
		if !s.less(j, i) {
			return
		}
		s.swap(i, j)
		i = j
	}
}

// Reset empties the summary, keeping its storage.
func (s *Summary) Reset() {
	s.n = 0
	clear(s.idx)
	clear(s.slots) // drop the keys
	s.slots, s.heap, s.pos = s.slots[:0], s.heap[:0], s.pos[:0]
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
	out := make([]Entry, len(s.slots))
	for i, c := range s.slots {
		out[i] = Entry{Key: c.key, Est: c.est, Err: c.err}
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
		for _, c := range s.slots {
			i, ok := at[c.key]
			if !ok {
				i = len(entries)
				at[c.key] = i
				// Start at every summary's bound; each summary
				// that counts x replaces its min by its estimate.
				entries = append(entries, Entry{Key: c.key, Est: mins, Err: mins})
			}
			e := &entries[i]
			m := s.Min()
			e.Est += c.est - m
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
	s.n = n
	// Smallest first is a min-heap.
	slices.Reverse(entries)
	for i, e := range entries {
		s.slots = append(s.slots, counter{key: e.Key, est: e.Est, err: e.Err})
		s.heap = append(s.heap, int32(i))
		s.pos = append(s.pos, int32(i))
		s.idx[e.Key] = int32(i)
	}
}
