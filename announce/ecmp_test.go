//go:build linux

package announce_test

import (
	"strings"
	"testing"
	"time"

	"lbdns/testkit/ecmp"
)

// TestECMP: two LB hosts announce the same VIP to BIRD, which installs
// both as an ECMP route in its kernel; a client behind the router sends
// queries to the VIP, which a UDP responder on each LB host answers
// (standing in for IPVS). Both hosts get queries; a host drain moves
// every query to the other host with none lost (BIRD's import filter
// honours GRACEFUL_SHUTDOWN as RFC 8326 asks, by local preference 0),
// and after the drain delay the drained host's route is gone; when the
// other host's VIP dies, its route goes, and the queries reach the first
// host again once it is enabled.
func TestECMP(t *testing.T) {
	nw := ecmp.New(t, 2)
	lbs := nw.LBs
	via := ecmp.Via
	waitKernel := nw.WaitKernel
	query := nw.Query
	birdRoutes := nw.BirdRoutes
	waitKernel("ECMP route over both LB hosts", func(r string) bool { return strings.Contains(r, via(1)) && strings.Contains(r, via(2)) })

	who := map[string]int{}
	for i := range 200 {
		who[query(i)]++
	}
	if who[""] != 0 || who["lb1"] == 0 || who["lb2"] == 0 {
		t.Fatalf("before the drain, answers by host: %v (want both, none lost)", who)
	}
	t.Logf("before the drain, answers by host: %v", who)

	// Drain lb1 while the client queries without pause, until its route
	// is withdrawn: BIRD first shows it marked (65535,0) (and the kernel
	// route leaves lb1), then the route goes; no query is lost.
	lb2Before := lbs[1].Answered()
	lbs[0].Say(t, "drain")
	lost, i, marked := 0, 0, false
	deadline := time.Now().Add(20 * time.Second)
	for ; time.Now().Before(deadline); i++ {
		if query(i) == "" {
			lost++
		}
		if i%10 != 0 {
			continue
		}
		r := birdRoutes()
		if strings.Contains(r, "(65535,0)") {
			marked = true
		}
		if !strings.Contains(r, ecmp.Gateway(1)) {
			break
		}
	}
	t.Logf("drain of lb1: %d queries sent until its route was withdrawn, %d lost", i, lost)
	if !marked {
		t.Errorf("the router never saw lb1's route marked GRACEFUL_SHUTDOWN (65535,0) before the withdrawal")
	}
	if strings.Contains(birdRoutes(), ecmp.Gateway(1)) {
		t.Fatalf("lb1's route not withdrawn after the drain delay:\n%s", birdRoutes())
	}
	if lost != 0 {
		t.Errorf("%d of %d queries lost during the drain of lb1", lost, i)
	}
	waitKernel("lb1 drained: route over lb2 only", func(r string) bool { return !strings.Contains(r, via(1)) && strings.Contains(r, via(2)) })
	lb1 := lbs[0].Answered()
	who = map[string]int{}
	for i := range 100 {
		who[query(i)]++
	}
	if who["lb2"] != 100 || lbs[0].Answered() != lb1 {
		t.Errorf("after the drain, answers by host: %v (want all by lb2)", who)
	}
	if lbs[1].Answered() <= lb2Before {
		t.Errorf("lb2 answered nothing during the drain")
	}

	// lb1 enabled: both again; then lb2's VIP dies: its route goes, and
	// every query reaches lb1.
	lbs[0].Say(t, "enable")
	waitKernel("lb1 enabled: ECMP again", func(r string) bool { return strings.Contains(r, via(1)) && strings.Contains(r, via(2)) })
	lbs[1].Say(t, "dead")
	waitKernel("lb2 dead: route over lb1 only", func(r string) bool { return strings.Contains(r, via(1)) && !strings.Contains(r, via(2)) })
	who = map[string]int{}
	for i := range 100 {
		who[query(i)]++
	}
	if who["lb1"] != 100 {
		t.Errorf("after lb2's VIP died, answers by host: %v (want all by lb1)", who)
	}
}
