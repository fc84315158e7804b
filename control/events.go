package control

import (
	"context"
	"sync"
	"time"
)

// DefaultEventCapacity is the number of events an EventLog keeps when
// NewEventLog is given a capacity below 1.
const DefaultEventCapacity = 1000

// EventLog is a bounded, concurrency-safe log of the daemon's events
// (GET /v1/events). It numbers events from 1 without gaps and keeps the
// newest capacity of them; older ones are dropped, oldest first.
type EventLog struct {
	now func() time.Time

	mu sync.Mutex
	// ring holds the kept events; the oldest is at ring[head] once the
	// ring is full, at ring[0] before.
	ring []Event
	head int
	full bool
	// last is the Seq of the newest event, 0 when none was appended.
	last uint64
	// changed is closed and replaced on every Append.
	changed chan struct{}
}

// NewEventLog returns an empty log that keeps the newest capacity events
// (DefaultEventCapacity when capacity < 1) and stamps events with now
// (time.Now when nil).
func NewEventLog(capacity int, now func() time.Time) *EventLog {
	if capacity < 1 {
		capacity = DefaultEventCapacity
	}
	if now == nil {
		now = time.Now
	}
	return &EventLog{
		now:     now,
		ring:    make([]Event, 0, capacity),
		changed: make(chan struct{}),
	}
}

// Append stores ev with the next sequence number, and with the current
// time when ev.Time is zero, and returns the stored event. It wakes every
// Wait.
func (l *EventLog) Append(ev Event) Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	ev.Seq = l.last
	if ev.Time.IsZero() {
		ev.Time = l.now()
	}
	if !l.full {
		l.ring = append(l.ring, ev)
		l.full = len(l.ring) == cap(l.ring)
	} else {
		l.ring[l.head] = ev
		l.head = (l.head + 1) % len(l.ring)
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return ev
}

// Since returns the kept events with Seq > after, oldest first (an empty,
// non-nil slice when there are none); next: the sequence number to pass
// as after the next time, which is the Seq of the newest event in the log
// (0 when it is empty); and missed: how many events with Seq > after the
// log no longer keeps (a reader that fell behind the ring is told so).
//
// Since always returns everything newer than after that is kept, so next
// is the last Seq returned when events are returned. A client holding an
// after from an earlier daemon (after > next) gets no events and a
// smaller next, from which it continues.
func (l *EventLog) Since(after uint64) (evs []Event, next, missed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs = []Event{}
	if after >= l.last {
		return evs, l.last, 0
	}
	n := len(l.ring)
	for i := range n {
		ev := l.ring[(l.head+i)%n]
		if ev.Seq > after {
			evs = append(evs, ev)
		}
	}
	return evs, l.last, l.last - after - uint64(len(evs))
}

// Capacity returns how many events the log keeps.
func (l *EventLog) Capacity() int { return cap(l.ring) }

// Last returns the Seq of the newest event, 0 when the log is empty.
func (l *EventLog) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Wait returns nil as soon as the log holds an event with Seq > after
// (at once when it already does), or ctx's error when ctx is done first.
func (l *EventLog) Wait(ctx context.Context, after uint64) error {
	for {
		l.mu.Lock()
		last, changed := l.last, l.changed
		l.mu.Unlock()
		if last > after {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
