package monitor

// dueHeap orders the queued targets by due time: a 4-ary min-heap (as the
// runtime's timers) of entries that hold their target's due time as
// nanoseconds since the monitor's epoch, so that ordering reads the
// heap's own array and never a target's memory. It is specialized (no
// interface, no generic dictionary) and keeps no index in the targets:
// an entry is removed lazily, by its target no longer pointing to it
// (heapEntry.live), and dropped when it comes to the top. At 5,000
// targets the generic heap's calls and its index writes into every
// target it moved were a fifth of the instructions of a check.
type dueHeap struct {
	items []heapEntry
}

// heapEntry is one queued target, its due time (target.at) and the
// target's queue sequence number when it was queued (target.qseq).
type heapEntry struct {
	at  int64
	t   *target
	seq uint32
}

// live reports whether e is still its target's place in the queue.
// Monitor.mu must be held.
func (e heapEntry) live() bool { return e.t.queued && e.t.qseq == e.seq }

// len is the number of entries, stale ones included.
func (h *dueHeap) len() int { return len(h.items) }

// push adds e and reports whether it is now the first.
func (h *dueHeap) push(e heapEntry) bool {
	h.items = append(h.items, e)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 4
		if e.at >= h.items[p].at {
			break
		}
		h.items[i] = h.items[p]
		i = p
	}
	h.items[i] = e
	return i == 0
}

// first returns the earliest live entry, dropping the stale ones before
// it; ok is false when no entry is live. Monitor.mu must be held.
func (h *dueHeap) first() (e heapEntry, ok bool) {
	for len(h.items) > 0 {
		if e = h.items[0]; e.live() {
			return e, true
		}
		h.pop()
	}
	return heapEntry{}, false
}

// pop removes and returns the first entry, live or not; the heap must
// not be empty.
func (h *dueHeap) pop() heapEntry {
	items := h.items
	top := items[0]
	n := len(items) - 1
	last := items[n]
	items[n] = heapEntry{}
	items = items[:n]
	h.items = items
	// Sift last down from the root: at each level the least of up to
	// four children moves up, until last is not later than it.
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m, at := c, items[c].at
		if c+3 < n {
			kids := items[c+1 : c+4 : c+4] // one bounds check for three
			if kids[0].at < at {
				m, at = c+1, kids[0].at
			}
			if kids[1].at < at {
				m, at = c+2, kids[1].at
			}
			if kids[2].at < at {
				m, at = c+3, kids[2].at
			}
		} else {
			for j := c + 1; j < n; j++ {
				if items[j].at < at {
					m, at = j, items[j].at
				}
			}
		}
		if at >= last.at {
			break
		}
		items[i] = items[m]
		i = m
	}
	if n > 0 {
		items[i] = last
	}
	return top
}

// reset empties the heap, unqueueing every target it held. Monitor.mu
// must be held.
func (h *dueHeap) reset() {
	for _, e := range h.items {
		if e.live() {
			e.t.queued = false
		}
	}
	clear(h.items)
	h.items = h.items[:0]
}
