package timerheap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// item is a heap item that keeps its index.
type item struct {
	at  int
	idx int
}

func (e *item) Before(o *item) bool { return e.at < o.at }
func (e *item) SetIndex(i int)      { e.idx = i }

// check fails t when h is out of order or an item's index is wrong.
func check(t *testing.T, h *Heap[*item]) {
	t.Helper()
	for i := range h.Len() {
		if e := *h.At(i); e.idx != i {
			t.Fatalf("item at %d says %d", i, e.idx)
		}
		if p := (i - 1) / 2; i > 0 && (*h.At(i)).at < (*h.At(p)).at {
			t.Fatalf("item %d (%d) below its parent %d (%d)", i, (*h.At(i)).at, p, (*h.At(p)).at)
		}
	}
}

// TestHeap pushes, fixes and removes items at random and pops the rest:
// the order and every index hold throughout, and the pops come out
// sorted.
func TestHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Heap[*item]
	var in []*item
	for range 2000 {
		switch op := r.IntN(4); {
		case op <= 1 || len(in) == 0:
			e := &item{at: r.IntN(1000)}
			h.Push(e)
			in = append(in, e)
		case op == 2:
			e := in[r.IntN(len(in))]
			e.at = r.IntN(1000)
			h.Fix(e.idx)
		default:
			k := r.IntN(len(in))
			e := in[k]
			if got := h.Remove(e.idx); got != e || e.idx != -1 {
				t.Fatalf("Remove gave %p (index %d), want %p", got, e.idx, e)
			}
			in = slices.Delete(in, k, k+1)
		}
		check(t, &h)
	}
	var out []int
	for h.Len() > 0 {
		e := h.Pop()
		if e.idx != -1 {
			t.Fatalf("popped item says index %d", e.idx)
		}
		out = append(out, e.at)
	}
	if len(out) != len(in) || !slices.IsSorted(out) {
		t.Fatalf("popped %d items (want %d), sorted %v", len(out), len(in), slices.IsSorted(out))
	}
}
