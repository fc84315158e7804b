// Package timerheap is the one min-heap of the parts that wake at the
// earliest of many due times (the monitor's targets, the connect
// engine's deadlines, the prefetcher's entries): container/heap's
// algorithm over a typed slice, each item told its index as it moves so
// that it can be fixed or removed in place.
package timerheap

// Item is what a Heap holds: it orders itself against another item and
// is told its index whenever it moves (-1 once it is out of the heap).
type Item[E any] interface {
	Before(E) bool
	SetIndex(int)
}

// Heap is a min-heap of items, the one that is Before all others first.
// The zero value is an empty heap.
type Heap[E Item[E]] struct {
	items []E
}

// Len is the number of items.
func (h *Heap[E]) Len() int { return len(h.items) }

// At is item i (0 is the least); a change of its order key must be
// followed by Fix(i).
func (h *Heap[E]) At(i int) *E { return &h.items[i] }

// Push adds e.
func (h *Heap[E]) Push(e E) {
	h.items = append(h.items, e)
	n := len(h.items) - 1
	e.SetIndex(n)
	h.up(n)
}

// Pop removes and returns the least item.
func (h *Heap[E]) Pop() E {
	n := len(h.items) - 1
	h.swap(0, n)
	h.down(0, n)
	return h.cut()
}

// Remove removes and returns item i.
func (h *Heap[E]) Remove(i int) E {
	n := len(h.items) - 1
	if n != i {
		h.swap(i, n)
		if !h.down(i, n) {
			h.up(i)
		}
	}
	return h.cut()
}

// Fix restores the order after item i's key changed.
func (h *Heap[E]) Fix(i int) {
	if !h.down(i, len(h.items)) {
		h.up(i)
	}
}

// cut takes the last item off.
func (h *Heap[E]) cut() E {
	n := len(h.items) - 1
	e := h.items[n]
	var zero E
	h.items[n] = zero
	h.items = h.items[:n]
	e.SetIndex(-1)
	return e
}

func (h *Heap[E]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].SetIndex(i)
	h.items[j].SetIndex(j)
}

func (h *Heap[E]) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.items[j].Before(h.items[i]) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *Heap[E]) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.items[j2].Before(h.items[j1]) {
			j = j2 // right child
		}
		if !h.items[j].Before(h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
