package fleet_test

import (
	"fmt"
	"time"

	"lbdns/fleet"
)

// Every node computes the same probers for a member from the same list of
// live probers: no coordination is needed.
func ExampleProbers() {
	probers := []fleet.Prober{
		{Name: "lb1", Location: "fra"}, {Name: "lb2", Location: "fra"},
		{Name: "lb3", Location: "ams"}, {Name: "lb4", Location: "par"},
	}
	chosen := fleet.Probers("www/www-1", probers, 3)
	locations := map[string]bool{}
	for _, p := range chosen {
		locations[p.Location] = true
	}
	fmt.Println(len(chosen), "probers in", len(locations), "locations")
	// Output: 3 probers in 3 locations
}

// Two of three fresh votes say down, one up: under the default share
// (more than 18 % up) the member is up, since the prober that reaches it
// is evidence that it answers; all three down make it down. Then the
// votes go stale: the verdict is held, then gone.
func ExampleCount() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rules := fleet.Rules{MinVotes: 2, MaxAge: 10 * time.Second, Hold: time.Minute, UpPercent: 18}
	votes := []fleet.Vote{{Prober: "lb1", Up: true, At: now}, {Prober: "lb2", At: now}, {Prober: "lb3", At: now}}
	d := fleet.Count(votes, fleet.Decision{}, rules, now)
	fmt.Println(d.Verdict, d.Up, d.Down)
	votes[0].Up = false
	d = fleet.Count(votes, d, rules, now)
	fmt.Println(d.Verdict, d.Up, d.Down)
	d = fleet.Count(votes, d, rules, now.Add(30*time.Second))
	fmt.Println(d.Verdict, d.Held, d.Stale)
	d = fleet.Count(votes, d, rules, now.Add(2*time.Minute))
	fmt.Println(d.Verdict)
	// Output:
	// up 1 2
	// down 0 3
	// down true 3
	// none
}
