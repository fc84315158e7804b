package control

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// seqs returns the Seq of each event.
func seqs(evs []Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEventLogNumbersAndStamps(t *testing.T) {
	clock := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	l := NewEventLog(10, func() time.Time { return clock })
	a := l.Append(Event{Kind: EventState, Subject: "bind-1/recursive", Message: "down"})
	clock = clock.Add(time.Minute)
	given := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	b := l.Append(Event{Kind: EventIPVS, Time: given, Seq: 99})
	if a.Seq != 1 || b.Seq != 2 {
		t.Errorf("seqs = %d, %d; want 1, 2 (a Seq in the event is overwritten)", a.Seq, b.Seq)
	}
	if !a.Time.Equal(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("a zero Time is stamped with the clock: got %v", a.Time)
	}
	if !b.Time.Equal(given) {
		t.Errorf("a given Time is kept: got %v, want %v", b.Time, given)
	}
	evs, next, _ := l.Since(0)
	if len(evs) != 2 || evs[0] != a || evs[1] != b {
		t.Errorf("Since(0) = %+v; want the two stored events", evs)
	}
	if next != 2 || l.Last() != 2 {
		t.Errorf("next = %d, Last = %d; want 2", next, l.Last())
	}
}

func TestEventLogSince(t *testing.T) {
	l := NewEventLog(3, nil)
	evs, next, _ := l.Since(0)
	if evs == nil || len(evs) != 0 || next != 0 {
		t.Fatalf("empty log: Since(0) = %v, %d; want [], 0", evs, next)
	}
	for range 5 {
		l.Append(Event{Kind: EventPool})
	}
	for _, tc := range []struct {
		after  uint64
		want   []uint64
		missed uint64
	}{
		{0, []uint64{3, 4, 5}, 2}, // 1 and 2 were dropped, oldest first
		{1, []uint64{3, 4, 5}, 1},
		{2, []uint64{3, 4, 5}, 0},
		{3, []uint64{4, 5}, 0},
		{4, []uint64{5}, 0},
		{5, []uint64{}, 0},
		{42, []uint64{}, 0}, // an after from an earlier daemon
	} {
		evs, next, missed := l.Since(tc.after)
		if !equalSeqs(seqs(evs), tc.want) || evs == nil {
			t.Errorf("Since(%d) = %v; want %v", tc.after, seqs(evs), tc.want)
		}
		if missed != tc.missed {
			t.Errorf("Since(%d): missed = %d; want %d", tc.after, missed, tc.missed)
		}
		if next != 5 {
			t.Errorf("Since(%d): next = %d; want 5, the newest Seq", tc.after, next)
		}
	}
	// The ring keeps wrapping correctly.
	for range 7 {
		l.Append(Event{Kind: EventPool})
	}
	if evs, next, missed := l.Since(0); !equalSeqs(seqs(evs), []uint64{10, 11, 12}) || next != 12 || missed != 9 {
		t.Errorf("after 12 appends: Since(0) = %v, %d; want [10 11 12], 12", seqs(evs), next)
	}
}

func TestEventLogDefaultCapacity(t *testing.T) {
	l := NewEventLog(0, nil)
	for range DefaultEventCapacity + 1 {
		l.Append(Event{})
	}
	evs, _, _ := l.Since(0)
	if len(evs) != DefaultEventCapacity || evs[0].Seq != 2 {
		t.Errorf("kept %d events starting at %d; want %d starting at 2", len(evs), evs[0].Seq, DefaultEventCapacity)
	}
}

func TestEventLogWait(t *testing.T) {
	l := NewEventLog(10, nil)
	l.Append(Event{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Wait(ctx, 0); err != nil {
		t.Fatalf("Wait(0) with event 1 kept: %v", err)
	}

	got := make(chan error, 1)
	go func() { got <- l.Wait(ctx, 1) }()
	l.Append(Event{})
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("Wait(1) after event 2: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait(1) did not return after event 2 was appended")
	}

	cctx, ccancel := context.WithCancel(context.Background())
	go func() { got <- l.Wait(cctx, 2) }()
	ccancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait after cancel = %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after its context was cancelled")
	}
	if _, next, _ := l.Since(0); next != 2 {
		t.Errorf("next = %d; want 2", next)
	}
}

func TestEventLogConcurrent(t *testing.T) {
	const writers, each = 8, 200
	l := NewEventLog(writers*each, nil)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				l.Append(Event{Kind: EventState})
			}
		})
	}
	// A reader runs alongside and must only ever see gap-free runs.
	stop := make(chan struct{})
	var rerr error
	var rwg sync.WaitGroup
	rwg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			evs, next, _ := l.Since(0)
			for i, ev := range evs {
				if ev.Seq != uint64(i+1) {
					rerr = errors.New("gap in Seq seen by a concurrent reader")
					return
				}
			}
			if uint64(len(evs)) != next {
				rerr = errors.New("next differs from the newest Seq returned")
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	rwg.Wait()
	if rerr != nil {
		t.Fatal(rerr)
	}
	evs, next, _ := l.Since(0)
	if len(evs) != writers*each || next != writers*each {
		t.Fatalf("%d events, next %d; want %d", len(evs), next, writers*each)
	}
}
