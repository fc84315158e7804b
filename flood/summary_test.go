package flood

import (
	"fmt"
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
		// A folded summary is a valid min-heap: adding to it keeps
		// the bounds.
		a.Add("flood", 5)
		for i := 1; i < a.Len(); i++ {
			if a.heap[i].est < a.heap[(i-1)/2].est {
				t.Fatalf("folded summary is not a min-heap at %d", i)
			}
		}
	})
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
