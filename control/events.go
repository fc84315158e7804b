package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// EventFilter selects the events a listing shows (the page's ?kind= and
// ?all=1, lbctl events --kind and --all).
type EventFilter struct {
	// Kinds keeps the events of these kinds; none keeps every kind.
	Kinds []string
	// All lists routine events one by one; without it a run of them is
	// folded into one row.
	All bool
}

// EventRow is one row of an event listing: one event (Routine empty), or
// a run of consecutive routine events folded into one (Routine holds
// them, oldest first).
type EventRow struct {
	Event   Event
	Routine []Event
}

// Rows returns the events of evs (oldest first) that f keeps, as rows,
// oldest first: with f.All one row per event, without it one row per
// event for people and one per run of consecutive routine events.
func (f EventFilter) Rows(evs []Event) []EventRow {
	rows := []EventRow{}
	for _, ev := range evs {
		if !f.kind(ev) {
			continue
		}
		if f.All || ev.Routine == "" {
			rows = append(rows, EventRow{Event: ev})
			continue
		}
		if n := len(rows); n > 0 && len(rows[n-1].Routine) > 0 {
			rows[n-1].Routine = append(rows[n-1].Routine, ev)
			continue
		}
		rows = append(rows, EventRow{Routine: []Event{ev}})
	}
	return rows
}

// Keep reports whether f lists ev on a line of its own (of a kind f
// keeps, and for people unless f.All): a followed stream prints those.
func (f EventFilter) Keep(ev Event) bool { return f.kind(ev) && (f.All || ev.Routine == "") }

// Folds reports whether f folds ev into a run of routine work (of a
// kind f keeps, routine, and f not All).
func (f EventFilter) Folds(ev Event) bool { return f.kind(ev) && !f.All && ev.Routine != "" }

// kind reports whether f keeps ev's kind: every kind when f names none;
// a stream's line of missed events always.
func (f EventFilter) kind(ev Event) bool {
	return len(f.Kinds) == 0 || ev.Kind == EventMissed || slices.Contains(f.Kinds, ev.Kind)
}

// RoutineText says what a run of routine events is, by count of each
// work in the order of its first event: "12 IPVS operations (dry run)",
// "1 start-up, 5 back ends up at their first checks".
func RoutineText(run []Event) string {
	counts := map[string]int{}
	var order []string
	for _, ev := range run {
		if counts[ev.Routine] == 0 {
			order = append(order, ev.Routine)
		}
		counts[ev.Routine]++
	}
	parts := make([]string, 0, len(order))
	for _, r := range order {
		parts = append(parts, routineNoun(r, counts[r]))
	}
	return strings.Join(parts, ", ")
}

// routineNoun is n events of routine work r, in words.
func routineNoun(r string, n int) string {
	s := "s"
	if n == 1 {
		s = ""
	}
	switch r {
	case RoutineIPVS:
		return fmt.Sprintf("%d IPVS operation%s", n, s)
	case RoutineIPVSDryRun:
		return fmt.Sprintf("%d IPVS operation%s (dry run)", n, s)
	case RoutineStart:
		return fmt.Sprintf("%d start-up line%s", n, s)
	case RoutineFirstUp:
		if n == 1 {
			return "1 back end up at its first checks"
		}
		return fmt.Sprintf("%d back ends up at their first checks", n)
	}
	return fmt.Sprintf("%d routine event%s (%s)", n, s, r)
}

// UnknownEventKinds returns the kinds of kinds that are not event kinds
// (EventKinds).
func UnknownEventKinds(kinds []string) []string {
	var out []string
	for _, k := range kinds {
		if !slices.Contains(EventKinds(), k) {
			out = append(out, k)
		}
	}
	return out
}

// SplitKinds splits a comma-separated list of kinds ("pool,state"),
// dropping empty items and spaces.
func SplitKinds(s string) []string {
	var out []string
	for k := range strings.SplitSeq(s, ",") {
		if k = strings.TrimSpace(k); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
