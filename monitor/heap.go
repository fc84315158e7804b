package monitor

import "lbdns/internal/timerheap"

// timerHeap orders targets by due time. Each entry holds its target's
// due time as nanoseconds since the monitor's epoch, so that ordering
// reads the heap's own array, not every target's memory.
type timerHeap = timerheap.Heap[heapEntry]

// heapEntry is one queued target and its due time (target.at).
type heapEntry struct {
	at int64
	t  *target
}

// Before orders entries by due time (timerheap.Item).
func (e heapEntry) Before(o heapEntry) bool { return e.at < o.at }

// SetIndex records the entry's place in the queue in its target
// (timerheap.Item).
func (e heapEntry) SetIndex(i int) { e.t.idx = i }
