package health_test

import (
	"fmt"
	"time"

	"lbdns/health"
)

func ExampleTracker() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := health.NewTracker(2, 3, start) // rise 2, fall 3
	results := []struct {
		ok     bool
		detail string
	}{
		{true, "NOERROR"}, {true, "NOERROR"}, // second success: unknown -> up
		{false, "timeout after 1s"}, {false, "rcode SERVFAIL"}, {false, "rcode SERVFAIL"}, // third failure: up -> down
	}
	for i, r := range results {
		now := start.Add(time.Duration(i+1) * 2 * time.Second)
		if x, changed := tr.Observe(r.ok, r.detail, now); changed {
			fmt.Printf("%s -> %s (%s)\n", x.From, x.To, x.Reason)
		}
	}
	st := tr.Snapshot()
	now := start.Add(20 * time.Second)
	fmt.Println(st.State, st.Flaps, st.Fresh(now, 6*time.Second))
	// Output:
	// unknown -> up (NOERROR)
	// up -> down (rcode SERVFAIL)
	// down 1 false
}
