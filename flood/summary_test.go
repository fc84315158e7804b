package flood

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"testing"
)

// zipfStream is n keys drawn from a Zipf law (s 1.1) over keys distinct
// keys, with a planted key "flood" taking every share-th draw, and the
// exact counts.
func zipfStream(seed uint64, n, keys, share int) ([]string, map[string]uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	z := rand.NewZipf(r, 1.1, 1, uint64(keys-1))
	out := make([]string, n)
	exact := map[string]uint64{}
	for i := range out {
		k := fmt.Sprintf("k%d", z.Uint64())
		if share > 0 && i%share == 0 {
			k = "flood"
		}
		out[i] = k
		exact[k]++
	}
	return out, exact
}

// checkBounds checks a summary's guarantees against the exact counts.
func checkBounds(t *testing.T, s *Summary, exact map[string]uint64) {
	t.Helper()
	bound := s.N() / uint64(s.m)
	counted := map[string]bool{}
	for _, e := range s.Entries() {
		counted[e.Key] = true
		f := exact[e.Key]
		if e.Est-e.Err > f || f > e.Est {
			t.Errorf("%s: true count %d outside [%d, %d]", e.Key, f, e.Est-e.Err, e.Est)
		}
		if e.Err > bound {
			t.Errorf("%s: error %d above N/m = %d", e.Key, e.Err, bound)
		}
	}
	for k, f := range exact {
		if !counted[k] && f > s.Min() {
			t.Errorf("%s: true count %d not counted, above Min %d", k, f, s.Min())
		}
	}
	if s.Min() > bound {
		t.Errorf("Min %d above N/m = %d", s.Min(), bound)
	}
}

func TestSummaryBounds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		m, n, keys  int
		share       int
		wantCounted int
	}{
		{"fewer keys than counters", 64, 1000, 20, 0, 20},
		{"zipf", 256, 200000, 100000, 0, 256},
		{"zipf and flood", 512, 300000, 1000000, 20, 512},
		{"one counter", 1, 1000, 10, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, exact := zipfStream(1, tc.n, tc.keys, tc.share)
			s := NewSummary(tc.m)
			for _, k := range stream {
				s.Add(k, 1)
			}
			if s.N() != uint64(tc.n) {
				t.Fatalf("N = %d, want %d", s.N(), tc.n)
			}
			if s.Len() != min(tc.wantCounted, len(exact)) {
				t.Errorf("Len = %d, want %d", s.Len(), min(tc.wantCounted, len(exact)))
			}
			var sum uint64
			for _, e := range s.Entries() {
				sum += e.Est
			}
			if sum != s.N() {
				t.Errorf("estimates sum to %d, want N = %d", sum, s.N())
			}
			checkBounds(t, s, exact)
		})
	}
}

// checkMerged checks Merge's guarantees over summaries of m counters.
func checkMerged(t *testing.T, entries []Entry, n uint64, sums []*Summary, exact map[string]uint64) {
	t.Helper()
	var bound, mins uint64
	for _, s := range sums {
		bound += s.N() / uint64(s.m)
		mins += s.Min()
	}
	var total uint64
	for _, f := range exact {
		total += f
	}
	if n != total {
		t.Errorf("merged N = %d, want %d", n, total)
	}
	in := map[string]bool{}
	for _, e := range entries {
		in[e.Key] = true
		f := exact[e.Key]
		if e.Est-e.Err > f || f > e.Est {
			t.Errorf("%s: true count %d outside [%d, %d]", e.Key, f, e.Est-e.Err, e.Est)
		}
		if e.Err > bound {
			t.Errorf("%s: error %d above the sum of N_i/m = %d", e.Key, e.Err, bound)
		}
	}
	for k, f := range exact {
		if !in[k] && f > mins {
			t.Errorf("%s: true count %d in no summary, above the sum of Min %d", k, f, mins)
		}
	}
}

func TestMergeBounds(t *testing.T) {
	const epochs, per = 10, 30000
	var sums []*Summary
	exact := map[string]uint64{}
	for i := range epochs {
		stream, ex := zipfStream(uint64(i+7), per, 200000, 10*(i%3+1))
		s := NewSummary(256)
		for _, k := range stream {
			s.Add(k, 1)
		}
		for k, f := range ex {
			exact[k] += f
		}
		sums = append(sums, s)
	}
	entries, n := Merge(sums)
	checkMerged(t, entries, n, sums, exact)
	if len(entries) < 3 || !slices.ContainsFunc(entries[:3], func(e Entry) bool { return e.Key == "flood" }) {
		t.Errorf("top = %v, want the planted flood among the first three", entries[:min(3, len(entries))])
	}

	t.Run("fold", func(t *testing.T) {
		// Folded two at a time into slabs, then merged: the same
		// guarantees, the errors added.
		a, b := NewSummary(256), NewSummary(256)
		a.fold(sums[:5]...)
		b.fold(sums[5:]...)
		for _, s := range []*Summary{a, b} {
			if s.Len() != 256 {
				t.Errorf("folded Len = %d, want 256", s.Len())
			}
		}
		entries, n := Merge([]*Summary{a, b})
		checkMerged(t, entries, n, sums, exact)
		// A folded summary is a whole Stream-Summary: adding to it
		// keeps its order.
		checkStructure(t, a)
		a.Add("flood", 5)
		a.Add("new", 1)
		checkStructure(t, a)
	})
}

// checkStructure checks a summary's links: the buckets in order of
// estimate, each with its counters, every counter in one bucket and
// found in the table by its key and hash, and nothing else there.
func checkStructure(t *testing.T, s *Summary) {
	t.Helper()
	seen := 0
	keys := map[string]bool{}
	prev := int32(-1)
	inList := 0
	for b := s.first; b >= 0; b = s.buckets[b].next {
		inList++
		bk := s.buckets[b]
		if bk.prev != prev {
			t.Fatalf("bucket %d: prev %d, want %d", b, bk.prev, prev)
		}
		if prev >= 0 && s.buckets[prev].est >= bk.est {
			t.Fatalf("bucket %d: estimate %d not above the one before, %d", b, bk.est, s.buckets[prev].est)
		}
		if bk.head < 0 {
			t.Fatalf("bucket %d of estimate %d is empty", b, bk.est)
		}
		cp := int32(-1)
		for i := bk.head; i >= 0; i = s.counters[i].next {
			c := s.counters[i]
			if c.bucket != b || c.prev != cp {
				t.Fatalf("counter %d: bucket %d prev %d, want %d and %d", i, c.bucket, c.prev, b, cp)
			}
			if keys[string(c.key)] {
				t.Fatalf("counter %d: key %q counted twice", i, c.key)
			}
			keys[string(c.key)] = true
			// Its place is reached from the home of its tag:
			// no free place in between.
			mask := uint64(len(s.table) - 1)
			p := s.table[c.place]
			if int32(p.c) != i+1 {
				t.Fatalf("counter %d: at place %d, which has %d", i, c.place, p.c-1)
			}
			for j := uint64(p.tag) >> (s.shift - 48); j != uint64(c.place); j = (j + 1) & mask {
				if s.table[j].c == 0 {
					t.Fatalf("counter %d at place %d: free place %d before it", i, c.place, j)
				}
			}
			cp = i
			seen++
		}
		prev = b
	}
	if prev != s.last {
		t.Fatalf("last bucket %d, want %d", s.last, prev)
	}
	if seen != s.used || inList+len(s.spare) != len(s.buckets) {
		t.Fatalf("%d counters in buckets, %d used; %d buckets listed, %d spare, %d in all", seen, s.used, inList, len(s.spare), len(s.buckets))
	}
	placed := 0
	for _, p := range s.table {
		if p.c == 0 {
			continue
		}
		placed++
		if int(p.c-1) >= s.used {
			t.Fatalf("place of counter %d: not a counter in use", p.c-1)
		}
	}
	if placed != s.used {
		t.Fatalf("%d places taken, want %d", placed, s.used)
	}
}

// TestSummaryCollisions counts keys whose hashes collide: all of them
// (one hash for every key), or in a few places of the table (hashes of
// a few top bits): the keys are kept apart, the table stays whole as
// counters are taken over, and the bounds hold against exact counts,
// with weights above 1 too.
func TestSummaryCollisions(t *testing.T) {
	t.Run("same hash", func(t *testing.T) {
		s := NewSummary(8)
		for _, k := range []string{"a", "b", "a", "c", "a", "b"} {
			s.add([]byte(k), 42, 1)
		}
		got := map[string]uint64{}
		for _, e := range s.Entries() {
			got[e.Key] = e.Est
		}
		if len(got) != 3 || got["a"] != 3 || got["b"] != 2 || got["c"] != 1 {
			t.Errorf("entries %v, want a 3, b 2, c 1", got)
		}
		checkStructure(t, s)
	})
	for _, tc := range []struct {
		name string
		bits uint // of the hash kept, at the top
		maxW uint64
	}{
		{"one hash", 0, 1},
		{"4 places", 2, 1},
		{"16 places, weights", 4, 8},
		{"full hash, weights", 64, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, _ := zipfStream(3, 20000, 5000, 50)
			r := rand.New(rand.NewPCG(5, 6))
			s := NewSummary(64)
			exact := map[string]uint64{}
			for i, k := range stream {
				h := maphash.String(s.seed, k)
				if tc.bits < 64 {
					h = h >> (64 - tc.bits) << (64 - tc.bits)
					if tc.bits == 0 {
						h = 0x5eed
					}
				}
				w := 1 + r.Uint64N(tc.maxW)
				s.add([]byte(k), h, w)
				exact[k] += w
				if i%997 == 0 {
					checkStructure(t, s)
				}
			}
			checkStructure(t, s)
			checkBounds(t, s, exact)
			var sum uint64
			for _, e := range s.Entries() {
				sum += e.Est
			}
			if sum != s.N() {
				t.Errorf("estimates sum to %d, want N = %d", sum, s.N())
			}
		})
	}
}

// TestHeavyHitters measures precision and recall of the keys reported
// above a share phi against the exact counts: every key whose true
// count is above phi*N is reported (recall 1, as the bounds promise),
// and few reported are not (precision).
func TestHeavyHitters(t *testing.T) {
	const phi = 0.005
	for _, tc := range []struct {
		name  string
		m     int
		share int
	}{
		{"zipf", 512, 0},
		{"zipf and planted flood 5%", 512, 20},
		{"zipf and planted flood 1%", 512, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, exact := zipfStream(42, 500000, 2000000, tc.share)
			var sums []*Summary
			for i := 0; i < len(stream); i += 50000 {
				s := NewSummary(tc.m)
				for _, k := range stream[i:min(i+50000, len(stream))] {
					s.Add(k, 1)
				}
				sums = append(sums, s)
			}
			entries, n := Merge(sums)
			thr := uint64(phi * float64(n))
			truth := map[string]bool{}
			for k, f := range exact {
				if f > thr {
					truth[k] = true
				}
			}
			var reported, right int
			for _, e := range entries {
				if e.Est > thr {
					reported++
					if truth[e.Key] {
						right++
					}
				}
			}
			recall := float64(right) / float64(len(truth))
			precision := float64(right) / float64(reported)
			t.Logf("phi %.3f: %d heavy keys, %d reported, precision %.3f, recall %.3f", phi, len(truth), reported, precision, recall)
			if recall != 1 {
				t.Errorf("recall %.3f, want 1", recall)
			}
			if precision < 0.8 {
				t.Errorf("precision %.3f, want at least 0.8", precision)
			}
			if tc.share > 0 && !truth["flood"] {
				t.Errorf("the planted flood is not a heavy key")
			}
		})
	}
}
