package fleet

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestQuorum: a majority of the assigned probers.
func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 3, 5: 3} {
		if got := Quorum(n); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", n, got, want)
		}
	}
}

// nodes returns the fleet view of the named probers, each in its own
// location, all current on intent.
func nodes(names ...string) []Node {
	var out []Node
	for _, n := range names {
		out = append(out, Node{Heartbeat: Heartbeat{Name: n, Location: "dc-" + n, IntentRevision: 7}, CurrentRevision: 7})
	}
	return out
}

// TestJudge: the verdict rules over a fleet of three probers and one
// member, with the default up share (18 %: one up vote of three keeps the
// member) and a strict majority (50): too few votes, a prober that is
// not live.
func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const m = "www/www-1"
	vote := func(p string, up bool) Vote {
		return Vote{Prober: p, Location: "dc-" + p, Up: up, At: now.Add(-time.Hour)}
	}
	wasUp := map[string]Decision{m: {Verdict: VerdictUp, Decided: now.Add(-10 * time.Second)}}
	for _, tc := range []struct {
		name  string
		view  []Node
		votes []Vote
		prev  map[string]Decision
		want  string
		pct   int // Rules.UpPercent; 0: the default, 18
	}{
		{"two down of three: the one that reaches it keeps it", nodes("a", "b", "c"), []Vote{vote("a", false), vote("b", false), vote("c", true)}, nil, "up", 0},
		{"two down of three under a strict majority", nodes("a", "b", "c"), []Vote{vote("a", false), vote("b", false), vote("c", true)}, nil, "down", 50},
		{"three down of three", nodes("a", "b", "c"), []Vote{vote("a", false), vote("b", false), vote("c", false)}, wasUp, "down", 0},
		{"two up of three", nodes("a", "b", "c"), []Vote{vote("a", true), vote("b", false), vote("c", true)}, nil, "up", 50},
		{"old votes still count (under a lease)", nodes("a", "b", "c"), []Vote{vote("a", false), vote("b", false)}, wasUp, "down", 0},
		{"one vote of three is too few: held", nodes("a", "b", "c"), []Vote{vote("a", false)}, wasUp, "up (held)", 0},
		{"one vote of three, nothing before", nodes("a", "b", "c"), []Vote{vote("a", false)}, nil, "none", 0},
		{"one up of two", nodes("a", "b"), []Vote{vote("a", false), vote("b", true)}, nil, "up", 0},
		{"a tie is down under a strict majority", nodes("a", "b"), []Vote{vote("a", false), vote("b", true)}, wasUp, "down", 50},
		{"a lone prober decides alone", nodes("a"), []Vote{vote("a", false)}, wasUp, "down", 0},
		{"the vote of a prober not in the view does not count", nodes("a", "b", "c"), []Vote{vote("a", true), vote("x", false), vote("y", false)}, nil, "none", 0},
		{"a withdrawn prober's leftover vote does not count", withdraw(nodes("a", "b", "c"), "c"), []Vote{vote("a", true), vote("b", true), vote("c", false)}, nil, "up", 50},
		{"a prober behind on intent does not count", behind(nodes("a", "b", "c"), "a", "b"), []Vote{vote("a", false), vote("b", false), vote("c", true)}, nil, "up", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pct := tc.pct
			if pct == 0 {
				pct = 18
			}
			got := Judge([]string{m}, Live(tc.view), 3, map[string][]Vote{m: tc.votes}, tc.prev, Rules{Hold: time.Minute, UpPercent: pct}, now)[m]
			s := got.Decision.Verdict.String()
			if got.Decision.Held {
				s += " (held)"
			}
			if s != tc.want {
				t.Fatalf("verdict %s (%+v), want %s", s, got, tc.want)
			}
			for _, v := range got.Votes {
				if !containsProber(Live(tc.view), v.Prober) {
					t.Errorf("vote of %s counted, not a live prober", v.Prober)
				}
			}
		})
	}
}

func withdraw(ns []Node, names ...string) []Node {
	for i := range ns {
		for _, n := range names {
			if ns[i].Name == n {
				ns[i].Withdrawn = true
			}
		}
	}
	return ns
}

func behind(ns []Node, names ...string) []Node {
	for i := range ns {
		for _, n := range names {
			if ns[i].Name == n {
				ns[i].IntentRevision--
			}
		}
	}
	return ns
}

func containsProber(ps []Prober, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// TestJudgeHoldThenNone follows a member whose probers' votes vanish
// (their leases expire): the last verdict is held for the hold, then the
// fleet has none (the pool's own rule decides).
func TestJudgeHoldThenNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const m = "www/www-1"
		live := Live(nodes("a", "b", "c"))
		votes := map[string][]Vote{m: {{Prober: "a", Up: true}, {Prober: "b", Up: true}, {Prober: "c", Up: false}}}
		prev := map[string]Decision{}
		var trail []string
		for i := range 5 {
			if i == 1 {
				votes[m] = votes[m][:1] // b's and c's votes are gone
			}
			v := Judge([]string{m}, live, 3, votes, prev, Rules{Hold: 25 * time.Second, UpPercent: 18}, time.Now())[m]
			prev[m] = v.Decision
			s := v.Decision.Verdict.String()
			if v.Decision.Held {
				s += " (held)"
			}
			trail = append(trail, s)
			time.Sleep(10 * time.Second)
		}
		if got := fmt.Sprint(trail); got != "[up up (held) up (held) none none]" {
			t.Fatalf("verdicts every 10s: %s", got)
		}
	})
}

// TestCutOffProberFlipsNothing: two probers of three are cut off from
// the members (they see the member down) and from most of their
// canaries: they withdraw (Heartbeat.Withdrawn) and are no probers any
// more; the one prober left decides alone, up. Had they voted, the
// member would be down.
func TestCutOffProberFlipsNothing(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const m = "www/www-1"
	canaries := map[string][2]int{"a": {3, 3}, "b": {1, 3}, "c": {0, 3}} // up of total
	view := nodes("a", "b", "c")
	votes := map[string][]Vote{m: {{Prober: "a", Up: true, At: now}}}
	for i := range view {
		c := canaries[view[i].Name]
		view[i].Withdrawn = CutOff(c[0], c[1])
		if !view[i].Withdrawn && view[i].Name != "a" {
			votes[m] = append(votes[m], Vote{Prober: view[i].Name, At: now})
		}
	}
	if naive := Count([]Vote{{Prober: "a", Up: true, At: now}, {Prober: "b", At: now}, {Prober: "c", At: now}}, Decision{}, Rules{MinVotes: 2, UpPercent: 50}, now); naive.Verdict != VerdictDown {
		t.Fatalf("without canaries, under a strict majority: %v, want down (the case canaries guard against)", naive.Verdict)
	}
	live := Live(view)
	if len(live) != 1 || live[0].Name != "a" {
		t.Fatalf("live probers %v, want a alone", live)
	}
	got := Judge([]string{m}, live, 3, votes, nil, Rules{Hold: time.Minute, UpPercent: 50}, now)[m]
	if got.Decision.Verdict != VerdictUp || len(got.Probers) != 1 {
		t.Fatalf("verdict %+v, want up from a alone", got)
	}
	if mine := Assigned([]string{m}, live, 3, "b"); len(mine) != 0 {
		t.Errorf("withdrawn b is assigned %v", mine)
	}
}

// TestAssigned: every member is assigned to exactly k of the live
// probers, and a node's leave moves only the members it probed.
func TestAssigned(t *testing.T) {
	ms := members(3000)
	live := Live(nodes("a", "b", "c", "d", "e"))
	count := map[string]int{}
	for _, p := range live {
		for _, m := range Assigned(ms, live, 3, p.Name) {
			count[m]++
		}
	}
	for _, m := range ms {
		if count[m] != 3 {
			t.Fatalf("%s assigned to %d probers, want 3", m, count[m])
		}
	}
	before := Assign(ms, live, 3)
	after := Assign(ms, Live(nodes("a", "b", "c", "d")), 3)
	onE := map[string]bool{}
	for _, m := range Assigned(ms, live, 3, "e") {
		onE[m] = true
	}
	for m, ps := range before {
		if fmt.Sprint(ps) != fmt.Sprint(after[m]) && !onE[m] {
			t.Fatalf("%s moved on e's leave, but e did not probe it", m)
		}
	}
}

// TestDownConfirmed: a down vote waits for most canaries to answer
// after the member went down.
func TestDownConfirmed(t *testing.T) {
	down := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	before, after := down.Add(-time.Second), down.Add(100*time.Millisecond)
	for _, tc := range []struct {
		name string
		ok   []time.Time
		want bool
	}{
		{"no canaries", nil, true},
		{"all answered since", []time.Time{after, after, after}, true},
		{"two of three answered since", []time.Time{after, after, before}, true},
		{"half answered since", []time.Time{after, before}, true},
		{"one of three answered since", []time.Time{after, before, before}, false},
		{"none since (the prober's network failed with the member)", []time.Time{before, before, before}, false},
		{"never answered", []time.Time{{}, {}}, false},
		{"answered at the very moment: not after", []time.Time{down}, false},
	} {
		if got := DownConfirmed(tc.ok, down); got != tc.want {
			t.Errorf("%s: DownConfirmed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestProbing: a node probes its assigned members, and keeps probing a
// member that moved away until its new probers have all voted.
func TestProbing(t *testing.T) {
	ms := members(200)
	before := Live(nodes("a", "b", "c"))
	after := Live(nodes("a", "b", "c", "d")) // d joins
	all := func(string) bool { return true }
	mine := map[string]bool{}
	for _, m := range Assigned(ms, before, 2, "a") {
		mine[m] = true
	}
	was := func(m string) bool { return mine[m] }
	assigned := Assigned(ms, after, 2, "a")
	// No vote yet from the new probers: a keeps every member it had.
	got := Probing(ms, after, 2, "a", nil, was)
	for m := range mine {
		if !slices.Contains(got, m) {
			t.Fatalf("%s dropped before its new probers voted", m)
		}
	}
	for _, m := range assigned {
		if !slices.Contains(got, m) {
			t.Fatalf("assigned %s not probed", m)
		}
	}
	// Every assigned prober voted: a probes its assignment alone.
	votes := map[string][]Vote{}
	for m, ps := range Assign(ms, after, 2) {
		for _, p := range ps {
			votes[m] = append(votes[m], Vote{Prober: p.Name, Up: true})
		}
	}
	if got := Probing(ms, after, 2, "a", votes, was); !slices.Equal(got, assigned) {
		t.Fatalf("with every vote in: %d members, want the %d assigned", len(got), len(assigned))
	}
	// A node that probed nothing takes only its assignment.
	if got := Probing(ms, after, 2, "d", nil, func(string) bool { return false }); !slices.Equal(got, Assigned(ms, after, 2, "d")) {
		t.Fatalf("d probes %d members, want its %d", len(got), len(Assigned(ms, after, 2, "d")))
	}
	if got := Probing(ms, after, 2, "d", nil, all); len(got) != len(ms) {
		t.Fatalf("d, which probed every member and sees no vote, probes %d, want all %d", len(got), len(ms))
	}
}
