package monitor

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDueHeap: entries come out by due time; a target queued again comes
// out once, at its last due time; an unqueued one never.
func TestDueHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var h dueHeap
		targets := make([]*target, 1+rng.IntN(300))
		want := map[*target]int64{}
		queue := func(tg *target, at int64) {
			tg.at = at
			tg.qseq++
			tg.queued = true
			h.push(heapEntry{at, tg, tg.qseq})
			want[tg] = at
		}
		for i := range targets {
			targets[i] = &target{}
			queue(targets[i], rng.Int64N(1000))
		}
		for range len(targets) {
			tg := targets[rng.IntN(len(targets))]
			switch rng.IntN(3) {
			case 0:
				queue(tg, rng.Int64N(1000)) // moved
			case 1:
				tg.queued = false // unqueued
				delete(want, tg)
			}
		}
		var got []int64
		seen := map[*target]bool{}
		for {
			e, ok := h.first()
			if !ok {
				break
			}
			h.pop()
			e.t.queued = false
			if seen[e.t] {
				t.Fatalf("round %d: a target came out twice", round)
			}
			seen[e.t] = true
			if e.at != want[e.t] {
				t.Fatalf("round %d: a target came out at %d, queued last at %d", round, e.at, want[e.t])
			}
			got = append(got, e.at)
		}
		if len(got) != len(want) || !slices.IsSorted(got) {
			t.Fatalf("round %d: %d entries out of %d, sorted %v", round, len(got), len(want), slices.IsSorted(got))
		}
		if h.len() != 0 {
			t.Fatalf("round %d: %d entries left", round, h.len())
		}
	}
}
