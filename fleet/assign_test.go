package fleet

import (
	"fmt"
	"math"
	"testing"
)

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("pool-%d/member-%d", i%7, i)
	}
	return out
}

// probers returns n probers named node-0.., over locs locations (each
// its own location when locs is 0).
func probers(n, locs int) []Prober {
	out := make([]Prober, n)
	for i := range out {
		loc := fmt.Sprintf("dc-%d", i)
		if locs > 0 {
			loc = fmt.Sprintf("dc-%d", i%locs)
		}
		out[i] = Prober{Name: fmt.Sprintf("node-%d", i), Location: loc}
	}
	return out
}

// TestProbersDeterministic: the choice depends on the names only, not
// on the order the probers are listed in.
func TestProbersDeterministic(t *testing.T) {
	ps := probers(7, 3)
	rev := make([]Prober, len(ps))
	for i, p := range ps {
		rev[len(ps)-1-i] = p
	}
	for _, m := range members(50) {
		a, b := Probers(m, ps, 3), Probers(m, rev, 3)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s: %v listed forwards, %v backwards", m, a, b)
		}
	}
}

// TestProbersLocations: k probers in k distinct locations when there are
// enough locations; all locations, then the best of the rest, when there
// are fewer.
func TestProbersLocations(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, locs, k int
		wantLocs   int
	}{
		{"enough locations", 9, 3, 3, 3},
		{"two locations", 6, 2, 3, 2},
		{"one location", 4, 1, 3, 1},
		{"fewer probers than k", 2, 0, 3, 2},
		{"k of 1", 5, 5, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range members(200) {
				got := Probers(m, probers(tc.n, tc.locs), tc.k)
				if want := min(tc.k, tc.n); len(got) != want {
					t.Fatalf("%s: %d probers, want %d", m, len(got), want)
				}
				locs, names := map[string]bool{}, map[string]bool{}
				for _, p := range got {
					locs[p.Location], names[p.Name] = true, true
				}
				if len(names) != len(got) {
					t.Fatalf("%s: a prober twice in %v", m, got)
				}
				if len(locs) != tc.wantLocs {
					t.Fatalf("%s: %d locations in %v, want %d", m, len(locs), got, tc.wantLocs)
				}
			}
		})
	}
	if got := Probers("m", nil, 3); got != nil {
		t.Errorf("no probers: %v, want none", got)
	}
}

// TestMovedOnJoinAndLeave: a join of the (N+1)th prober moves about
// k/(N+1) of the members (within 10 %), a leave about k/N, and only
// members whose top k changed: every member keeps at least k-1 of its
// probers.
func TestMovedOnJoinAndLeave(t *testing.T) {
	const k, nMembers = 3, 20000
	ms := members(nMembers)
	for _, tc := range []struct {
		name string
		n    int
		locs int
	}{
		{"5 nodes, own locations", 5, 0},
		{"10 nodes, own locations", 10, 0},
		{"20 nodes, own locations", 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := probers(tc.n+1, tc.locs)
			before := Assign(ms, all[:tc.n], k)
			after := Assign(ms, all, k)
			checkMoved(t, "join", before, after, float64(k)/float64(tc.n+1))
			checkMoved(t, "leave", after, before, float64(k)/float64(tc.n+1))
			for m, ps := range before {
				kept := 0
				for _, p := range ps {
					for _, q := range after[m] {
						if p.Name == q.Name {
							kept++
						}
					}
				}
				if kept < k-1 {
					t.Fatalf("%s keeps %d of its probers on a join, want at least %d", m, kept, k-1)
				}
			}
		})
	}
}

// TestMovedWithSharedLocations: with nodes sharing locations, a join
// still moves only a small share (the spread over locations costs a
// little more than k/(N+1)).
func TestMovedWithSharedLocations(t *testing.T) {
	const k = 3
	ms := members(20000)
	all := probers(10, 3) // node-9 joins dc-0
	before := Assign(ms, all[:9], k)
	after := Assign(ms, all, k)
	got := Moved(before, after)
	if ideal := float64(k) / 10; got > 1.5*ideal || got < 0.5*ideal {
		t.Errorf("join moved %.3f of the members, want about %.3f", got, ideal)
	}
	t.Logf("join into shared locations moved %.3f (k/(N+1) = %.3f)", got, float64(k)/10)
}

func checkMoved(t *testing.T, what string, before, after map[string][]Prober, want float64) {
	t.Helper()
	got := Moved(before, after)
	if math.Abs(got-want) > 0.1*want {
		t.Errorf("%s moved %.4f of the members, want %.4f ± 10%%", what, got, want)
	}
}

// TestMovedNothing: the same assignments move nothing.
func TestMovedNothing(t *testing.T) {
	a := Assign(members(100), probers(5, 0), 3)
	if got := Moved(a, a); got != 0 {
		t.Errorf("Moved(a, a) = %v", got)
	}
	if got := Moved(nil, a); got != 0 {
		t.Errorf("Moved(nil, a) = %v", got)
	}
}

// TestLive: a node behind on intent does not count.
func TestLive(t *testing.T) {
	nodes := []Node{
		{Heartbeat: Heartbeat{Name: "c", Location: "dc3", IntentRevision: 5}, CurrentRevision: 5},
		{Heartbeat: Heartbeat{Name: "a", Location: "dc1", IntentRevision: 5}, CurrentRevision: 5},
		{Heartbeat: Heartbeat{Name: "b", Location: "dc2", IntentRevision: 4}, CurrentRevision: 5},
	}
	if got := fmt.Sprint(Live(nodes)); got != "[{a dc1} {c dc3}]" {
		t.Errorf("Live = %s, want a and c", got)
	}
}
