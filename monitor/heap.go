package monitor

// timerHeap orders targets by due time (container/heap). Each entry holds
// its target's due time as nanoseconds since the monitor's epoch, so that
// ordering reads the heap's own array, not every target's memory.
type timerHeap []heapEntry

// heapEntry is one queued target and its due time (target.at).
type heapEntry struct {
	at int64
	t  *target
}

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }

func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].t.idx, h[j].t.idx = i, j
}

func (h *timerHeap) Push(x any) {
	t := x.(*target)
	t.idx = len(*h)
	*h = append(*h, heapEntry{t.at, t})
}

func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = heapEntry{}
	e.t.idx = -1
	*h = old[:len(old)-1]
	return e.t
}
