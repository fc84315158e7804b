package fleet

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestCount, under a strict majority (UpPercent 50): more than half
// of the fresh votes up is up, else down; too few fresh votes keep the
// last verdict, marked held.
func TestCount(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := Rules{MinVotes: 2, MaxAge: 10 * time.Second, Hold: time.Minute, UpPercent: 50}
	up := func(p string, age time.Duration) Vote { return Vote{Prober: p, Up: true, At: now.Add(-age)} }
	down := func(p string, age time.Duration) Vote { return Vote{Prober: p, At: now.Add(-age)} }
	wasUp := Decision{Verdict: VerdictUp, Decided: now.Add(-30 * time.Second)}
	wasUpLong := Decision{Verdict: VerdictUp, Decided: now.Add(-2 * time.Minute)}
	for _, tc := range []struct {
		name       string
		votes      []Vote
		prev       Decision
		want       Verdict
		held       bool
		u, d, s    int
		decidedNow bool
	}{
		{"up majority", []Vote{up("a", 0), up("b", 0), down("c", 0)}, Decision{}, VerdictUp, false, 2, 1, 0, true},
		{"down majority", []Vote{up("a", 0), down("b", 0), down("c", 0)}, wasUp, VerdictDown, false, 1, 2, 0, true},
		{"all up", []Vote{up("a", 0), up("b", 0), up("c", 0)}, Decision{}, VerdictUp, false, 3, 0, 0, true},
		{"a tie is down under a strict majority", []Vote{up("a", 0), down("b", 0)}, wasUp, VerdictDown, false, 1, 1, 0, true},
		{"too few fresh votes", []Vote{down("a", 0), down("b", 11*time.Second), down("c", time.Hour)}, wasUp, VerdictUp, true, 0, 1, 2, false},
		{"held too long", []Vote{down("a", 0)}, wasUpLong, VerdictNone, false, 0, 1, 0, false},
		{"no votes", nil, wasUp, VerdictUp, true, 0, 0, 0, false},
		{"vote at MaxAge counts", []Vote{down("a", 10*time.Second), down("b", 0)}, wasUp, VerdictDown, false, 0, 2, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Count(tc.votes, tc.prev, r, now)
			if got.Verdict != tc.want || got.Held != tc.held || got.Up != tc.u || got.Down != tc.d || got.Stale != tc.s {
				t.Fatalf("Count = %+v, want verdict %v held %v up %d down %d stale %d", got, tc.want, tc.held, tc.u, tc.d, tc.s)
			}
			switch {
			case tc.decidedNow && !got.Decided.Equal(now):
				t.Errorf("Decided = %v, want now", got.Decided)
			case !tc.decidedNow && got.Held && !got.Decided.Equal(tc.prev.Decided):
				t.Errorf("a held verdict's Decided = %v, want the last decision's %v", got.Decided, tc.prev.Decided)
			}
		})
	}
}

// TestCountUpShare: under the default share (18 %) a member stays up
// while any sixth of its fresh votes say up, and is down only when
// nearly all fail it.
func TestCountUpShare(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := Rules{MinVotes: 1, UpPercent: 18}
	votes := func(up, down int) []Vote {
		var out []Vote
		for i := range up + down {
			out = append(out, Vote{Prober: fmt.Sprint("p", i), Up: i < up, At: now})
		}
		return out
	}
	for _, tc := range []struct {
		up, down int
		want     Verdict
	}{
		{1, 2, VerdictUp}, {1, 4, VerdictUp}, {1, 5, VerdictDown}, {0, 3, VerdictDown}, {2, 9, VerdictUp}, {3, 0, VerdictUp}, {0, 1, VerdictDown},
	} {
		if got := Count(votes(tc.up, tc.down), Decision{}, r, now); got.Verdict != tc.want {
			t.Errorf("%d up, %d down: %v, want %v", tc.up, tc.down, got.Verdict, tc.want)
		}
	}
}

// TestCountSince: a verdict's Since is when it took its value, kept
// across the decisions that confirm it and across a hold, and moved by
// a change of verdict.
func TestCountSince(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := Rules{MinVotes: 1, Hold: time.Minute}
		start := time.Now()
		up := []Vote{{Prober: "a", Up: true, At: start}}
		d := Count(up, Decision{}, r, time.Now())
		if !d.Since.Equal(start) {
			t.Fatalf("first verdict: Since %v, want %v", d.Since, start)
		}
		time.Sleep(10 * time.Second)
		d = Count(up, d, r, time.Now())
		if !d.Since.Equal(start) || !d.Decided.Equal(time.Now()) {
			t.Fatalf("confirmed verdict: Since %v Decided %v, want Since %v, Decided now", d.Since, d.Decided, start)
		}
		time.Sleep(10 * time.Second)
		d = Count(nil, d, r, time.Now()) // no votes: held
		if !d.Held || !d.Since.Equal(start) {
			t.Fatalf("held verdict: %+v, want Since %v", d, start)
		}
		time.Sleep(10 * time.Second)
		changed := time.Now()
		d = Count([]Vote{{Prober: "a", At: changed}}, d, r, changed)
		if d.Verdict != VerdictDown || !d.Since.Equal(changed) {
			t.Fatalf("changed verdict: %+v, want down since %v", d, changed)
		}
	})
}

// TestCountHoldExpires follows one member through time: two of its
// three votes go stale; the last verdict is held for Hold after the
// votes last decided, then the fleet has none.
func TestCountHoldExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := Rules{MinVotes: 2, MaxAge: 5 * time.Second, Hold: 20 * time.Second}
		start := time.Now()
		votes := []Vote{{Prober: "a", Up: true, At: start}, {Prober: "b", Up: true, At: start}, {Prober: "c", Up: false, At: start}}
		var d Decision
		var trail []string
		for range 7 {
			d = Count(votes, d, r, time.Now())
			trail = append(trail, d.Verdict.String())
			if d.Held {
				trail[len(trail)-1] += " (held)"
			}
			time.Sleep(5 * time.Second)
			votes[0].At = time.Now() // only a keeps confirming: one fresh vote is too few
		}
		// At 5s the three votes are exactly MaxAge old and still count.
		want := []string{"up", "up", "up (held)", "up (held)", "up (held)", "up (held)", "none"}
		for i := range want {
			if trail[i] != want[i] {
				t.Fatalf("verdicts every 5s = %q, want %q", trail, want)
			}
		}
	})
}

// TestVerdictString names the verdicts.
func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{VerdictNone: "none", VerdictUp: "up", VerdictDown: "down"} {
		if v.String() != want {
			t.Errorf("%d.String() = %q, want %q", v, v.String(), want)
		}
	}
}

// TestCutOff: a prober withdraws its votes while most of its canaries
// fail.
func TestCutOff(t *testing.T) {
	for _, tc := range []struct {
		up, total int
		want      bool
	}{{0, 0, false}, {3, 3, false}, {2, 3, false}, {1, 3, true}, {0, 3, true}, {1, 2, false}, {0, 1, true}} {
		if got := CutOff(tc.up, tc.total); got != tc.want {
			t.Errorf("CutOff(%d up of %d) = %v, want %v", tc.up, tc.total, got, tc.want)
		}
	}
}
