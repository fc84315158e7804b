package health

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// step is one observation; the clock advances one second per step.
type step struct {
	ok     bool
	reason string
}

// parseSteps turns "++-+" into steps: + success, - failure. Each step's
// reason is "ok N" or "fail N" with N its index.
func parseSteps(s string) []step {
	var out []step
	for i, c := range s {
		if c == '+' {
			out = append(out, step{true, fmt.Sprintf("ok %d", i)})
		} else {
			out = append(out, step{false, fmt.Sprintf("fail %d", i)})
		}
	}
	return out
}

// trans is an expected transition at step index i.
type trans struct {
	i        int
	from, to State
}

func TestObserve(t *testing.T) {
	tests := []struct {
		name       string
		rise, fall int
		steps      string
		want       []trans
		final      State
		flaps      int
	}{
		{"no observations stay unknown", 2, 3, "", nil, Unknown, 0},
		{"unknown needs full rise", 2, 3, "+", nil, Unknown, 0},
		{"unknown to up after rise", 2, 3, "++", []trans{{1, Unknown, Up}}, Up, 0},
		{"unknown needs full fall", 2, 3, "--", nil, Unknown, 0},
		{"unknown to down after fall", 2, 3, "---", []trans{{2, Unknown, Down}}, Down, 0},
		{"failure resets success count from unknown", 2, 3, "+-+", nil, Unknown, 0},
		{"success resets failure count from unknown", 2, 3, "--+--", nil, Unknown, 0},
		{"up to down after fall", 2, 3, "++---", []trans{{1, Unknown, Up}, {4, Up, Down}}, Down, 1},
		{"up stays up below fall", 2, 3, "++--+--+", []trans{{1, Unknown, Up}}, Up, 0},
		{"down to up after rise", 2, 3, "---++", []trans{{2, Unknown, Down}, {4, Down, Up}}, Up, 1},
		{"down stays down below rise", 2, 3, "---+-+-", []trans{{2, Unknown, Down}}, Down, 0},
		{"up down up counts two flaps", 2, 2, "++--++", []trans{{1, Unknown, Up}, {3, Up, Down}, {5, Down, Up}}, Up, 2},
		{"alternating never transitions with rise=fall=2", 2, 2, "+-+-+-+-+-+-", nil, Unknown, 0},
		{"alternating after up stays up with rise=fall=2", 2, 2, "++-+-+-+-", []trans{{1, Unknown, Up}}, Up, 0},
		{"alternating after down stays down with rise=fall=2", 2, 2, "--+-+-+-+", []trans{{1, Unknown, Down}}, Down, 0},
		{"rise=1 first success decides", 1, 1, "+", []trans{{0, Unknown, Up}}, Up, 0},
		{"fall=1 first failure decides", 1, 1, "-", []trans{{0, Unknown, Down}}, Down, 0},
		{"rise=fall=1 alternating flaps every step", 1, 1, "+-+-", []trans{{0, Unknown, Up}, {1, Up, Down}, {2, Down, Up}, {3, Up, Down}}, Down, 3},
		{"rise=1 fall=3 single failure does not drop", 1, 3, "+-+--+", []trans{{0, Unknown, Up}}, Up, 0},
		{"zero thresholds act as one", 0, 0, "+-", []trans{{0, Unknown, Up}, {1, Up, Down}}, Down, 1},
		{"repeated success in up is no transition", 1, 1, "++++", []trans{{0, Unknown, Up}}, Up, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(tc.rise, tc.fall, t0)
			var got []trans
			for i, s := range parseSteps(tc.steps) {
				now := t0.Add(time.Duration(i+1) * time.Second)
				x, changed := tr.Observe(s.ok, s.reason, now)
				if !changed {
					if x != (Transition{}) {
						t.Errorf("step %d: unchanged but transition %+v", i, x)
					}
					continue
				}
				if x.At != now || x.Reason != s.reason {
					t.Errorf("step %d: transition At=%v Reason=%q, want %v %q", i, x.At, x.Reason, now, s.reason)
				}
				got = append(got, trans{i, x.From, x.To})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("transitions = %v, want %v", got, tc.want)
			}
			st := tr.Snapshot()
			if st.State != tc.final || tr.State() != tc.final {
				t.Errorf("final state = %v, want %v", st.State, tc.final)
			}
			if st.Flaps != tc.flaps {
				t.Errorf("flaps = %d, want %d", st.Flaps, tc.flaps)
			}
			if st.Checks != uint64(len(tc.steps)) {
				t.Errorf("checks = %d, want %d", st.Checks, len(tc.steps))
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	tr := NewTracker(2, 2, t0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	t.Run("initial", func(t *testing.T) {
		st := tr.Snapshot()
		want := Status{State: Unknown, Since: t0, Rise: 2, Fall: 2}
		if st != want {
			t.Errorf("got %+v, want %+v", st, want)
		}
	})
	tr.Observe(true, "ok a", at(1))
	tr.Observe(true, "ok b", at(2))
	tr.Observe(false, "rcode SERVFAIL", at(3))
	t.Run("after ok ok fail", func(t *testing.T) {
		st := tr.Snapshot()
		want := Status{
			State: Up, Since: at(2), LastOK: at(2), LastFail: at(3),
			LastReason: "rcode SERVFAIL", LastFailReason: "rcode SERVFAIL",
			ConsecutiveOK: 0, ConsecutiveFail: 1, Flaps: 0, Checks: 3, Rise: 2, Fall: 2,
		}
		if st != want {
			t.Errorf("got %+v, want %+v", st, want)
		}
	})
	tr.Observe(true, "ok c", at(4))
	t.Run("success keeps last fail reason", func(t *testing.T) {
		st := tr.Snapshot()
		if st.LastReason != "ok c" || st.LastFailReason != "rcode SERVFAIL" {
			t.Errorf("reasons = %q / %q", st.LastReason, st.LastFailReason)
		}
		if st.ConsecutiveOK != 1 || st.ConsecutiveFail != 0 {
			t.Errorf("consecutive = %d/%d, want 1/0", st.ConsecutiveOK, st.ConsecutiveFail)
		}
		if st.Since != at(2) {
			t.Errorf("since = %v, want %v (unchanged state keeps since)", st.Since, at(2))
		}
	})
}

func TestFresh(t *testing.T) {
	maxAge := 6 * time.Second
	tests := []struct {
		name    string
		st      Status
		now     time.Time
		fresh   bool
		healthy bool
	}{
		{"no observation is stale", Status{State: Up}, t0, false, false},
		{"recent success", Status{State: Up, LastOK: t0}, t0.Add(time.Second), true, true},
		{"exactly max age is fresh", Status{State: Up, LastOK: t0}, t0.Add(maxAge), true, true},
		{"older than max age is stale", Status{State: Up, LastOK: t0}, t0.Add(maxAge + 1), false, false},
		{"recent failure counts as fresh fact", Status{State: Up, LastOK: t0, LastFail: t0.Add(5 * time.Second)}, t0.Add(10 * time.Second), true, true},
		{"fresh down is not healthy", Status{State: Down, LastFail: t0}, t0, true, false},
		{"fresh unknown is not healthy", Status{State: Unknown, LastOK: t0}, t0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.st.Fresh(tc.now, maxAge); got != tc.fresh {
				t.Errorf("Fresh = %v, want %v", got, tc.fresh)
			}
			if got := tc.st.Healthy(tc.now, maxAge); got != tc.healthy {
				t.Errorf("Healthy = %v, want %v", got, tc.healthy)
			}
		})
	}
}

func TestFlaps(t *testing.T) {
	tests := []struct {
		name  string
		steps string // one step per second starting at t0+1s
		want  int
	}{
		{"none", "++++", 0},
		{"first decision is not a flap", "+", 0},
		{"every change after the first decision", "+-+-", 3},
		{"not capped", strings.Repeat("+-", 30), 59},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(1, 1, t0)
			for i, s := range parseSteps(tc.steps) {
				tr.Observe(s.ok, s.reason, t0.Add(time.Duration(i+1)*time.Second))
			}
			if got := tr.Snapshot().Flaps; got != tc.want {
				t.Errorf("Flaps = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestStateString(t *testing.T) {
	tests := []struct {
		s    State
		want string
	}{
		{Unknown, "unknown"}, {Up, "up"}, {Down, "down"}, {State(7), "state(7)"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.s.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWithThresholds(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tr := NewTracker(1, 3, now)
	tr.Observe(true, "ok", now)
	c := tr.WithThresholds(2, 1)
	if c.State() != Up {
		t.Fatalf("copy state = %v, want up", c.State())
	}
	// The new fall (1) applies at once to the copy, not to the original.
	if _, changed := c.Observe(false, "rcode SERVFAIL", now.Add(time.Second)); !changed || c.State() != Down {
		t.Fatalf("copy after one failure = %v, want down", c.State())
	}
	if tr.State() != Up {
		t.Fatalf("original changed with its copy: %v", tr.State())
	}
}

// TestAbstainHoldsState: local failures ('L') between real observations
// move neither run nor the state, make no transition, and the status says
// since when the tracker abstains; the next real observation ends it.
func TestAbstainHoldsState(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps string // + success, - failure, L local failure
		want  State
		fails int // ConsecutiveFail at the end
	}{
		{"up holds through many local failures", "++LLLLLLLLLL", Up, 0},
		{"down holds", "---LLLLL", Down, 3},
		{"unknown holds", "LLLLLLLLLL", Unknown, 0},
		{"a run of failures is not lengthened", "++--LLLLL", Up, 2},
		{"a run spans the abstention", "++--LLL-", Down, 3},
		{"successes spanning an abstention", "---+LL+", Up, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(2, 3, t0)
			starts := 0
			for i, c := range tc.steps {
				now := t0.Add(time.Duration(i+1) * time.Second)
				switch c {
				case 'L':
					if tr.Abstain("socket: too many open files", now) {
						starts++
					}
					if !tr.Abstaining() {
						t.Fatalf("step %d: not abstaining after a local failure", i)
					}
				default:
					tr.Observe(c == '+', "x", now)
					if tr.Abstaining() {
						t.Fatalf("step %d: still abstaining after a real observation", i)
					}
				}
			}
			s := tr.Snapshot()
			if s.State != tc.want || s.ConsecutiveFail != tc.fails {
				t.Errorf("state %v, %d failures in a row; want %v, %d", s.State, s.ConsecutiveFail, tc.want, tc.fails)
			}
			if n := strings.Count(tc.steps, "L"); s.LocalFailures != uint64(n) || s.Checks != uint64(len(tc.steps)-n) {
				t.Errorf("LocalFailures %d, Checks %d; want %d, %d", s.LocalFailures, s.Checks, n, len(tc.steps)-n)
			}
			if starts != 1 {
				t.Errorf("%d abstentions started, want one", starts)
			}
		})
	}
}

// TestAbstainNoTransition: an up tracker fed nothing but local failures
// for far longer than fall makes no transition and keeps its since; the
// status reports the abstention's start and the last local reason.
func TestAbstainNoTransition(t *testing.T) {
	tr := NewTracker(1, 1, t0)
	tr.Observe(true, "ok", t0)
	upSince := tr.Snapshot().Since
	first := t0.Add(time.Second)
	for i := 1; i <= 100; i++ {
		started := tr.Abstain(fmt.Sprintf("local %d", i), t0.Add(time.Duration(i)*time.Second))
		if started != (i == 1) {
			t.Fatalf("local failure %d: started %v", i, started)
		}
	}
	s := tr.Snapshot()
	if s.State != Up || !s.Since.Equal(upSince) {
		t.Fatalf("after 100 local failures with fall 1: %v since %v, want up since %v", s.State, s.Since, upSince)
	}
	if !s.Abstaining() || !s.AbstainingSince.Equal(first) || s.LastLocalReason != "local 100" {
		t.Errorf("abstaining %v since %v reason %q", s.Abstaining(), s.AbstainingSince, s.LastLocalReason)
	}
	if _, changed := tr.Observe(false, "refused", t0.Add(200*time.Second)); !changed {
		t.Error("a real failure after the abstention (fall 1) made no transition")
	}
}
