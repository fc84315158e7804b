//go:build bgpbench && linux

package bgpbench_test

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lbdns/testkit/ecmp"
)

// Pool death rounds and the client's rate.
const (
	deathRounds   = 5
	queryInterval = 500 * time.Microsecond // 2,000 queries a second
	before, after = time.Second, 2 * time.Second
)

// TestPoolDeathECMP: two LB hosts announce the VIP (ECMP at the
// router); the client sends 2,000 queries a second spread over 32
// source ports; lb2's pool dies (its responder stops answering and its
// verdict turns dead at the same moment) and its route is withdrawn.
// The queries lost are those the router still sent to lb2 after its
// death (goal: only those in flight). Printed: the queries lost of those
// sent, and the time from the death to lb2 gone from the router's
// kernel route.
func TestPoolDeathECMP(t *testing.T) {
	nw := ecmp.New(t, 2)
	both := func(r string) bool { return strings.Contains(r, ecmp.Via(1)) && strings.Contains(r, ecmp.Via(2)) }
	nw.WaitKernel("ECMP route over both LB hosts", both)
	lb2 := nw.LBs[1]
	var lostAll, sentAll int
	var gone []time.Duration
	for round := range deathRounds {
		sent, lost, d := deathRound(t, nw, lb2)
		t.Logf("round %d: %d of %d queries lost, lb2 gone from the kernel route %v after its death", round, lost, sent, d)
		sentAll, lostAll = sentAll+sent, lostAll+lost
		gone = append(gone, d)
		lb2.Mute(false)
		lb2.Say(t, "serve")
		nw.WaitKernel("lb2 serving again: ECMP", both)
	}
	fmt.Printf("bgp: pool death with a second host (ECMP): %d of %d queries lost (%.3f%%) over %d deaths at %d qps; death -> out of the router's kernel route: %s (goal: only those in flight)\n",
		lostAll, sentAll, 100*float64(lostAll)/float64(sentAll), deathRounds, time.Second/queryInterval, summary(gone))
}

// deathRound sends queries for before+after, kills lb2's pool after
// before, and returns the queries sent, those never answered, and how
// long after the death lb2 left the router's kernel route.
func deathRound(t *testing.T, nw *ecmp.Net, lb2 *ecmp.LB) (sent, lost int, gone time.Duration) {
	conns := nw.Conns()
	n := int((before + after) / queryInterval)
	answered := make([]atomic.Bool, n)
	var wg sync.WaitGroup
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Time{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 512)
			for {
				m, _, err := c.ReadFrom(buf)
				if err != nil {
					return // the deadline set after the round
				}
				q, _, ok := strings.Cut(strings.TrimPrefix(string(buf[:m]), "q"), ":")
				if i, err := strconv.Atoi(q); ok && err == nil && i >= 0 && i < n {
					answered[i].Store(true)
				}
			}
		}()
	}
	vip := net.UDPAddrFromAddrPort(netip.AddrPortFrom(ecmp.VIP.Addr(), ecmp.VIP.Port()))
	goneAt := make(chan time.Duration, 1)
	start := time.Now()
	var died time.Time
	for i := range n {
		if at := start.Add(time.Duration(i) * queryInterval); time.Until(at) > 0 {
			time.Sleep(time.Until(at))
		}
		if died.IsZero() && time.Since(start) >= before {
			died = time.Now()
			lb2.Mute(true)
			lb2.Say(t, "dead")
			go func() {
				for time.Since(died) < 10*time.Second {
					if !strings.Contains(nw.KernelRoute(), ecmp.Via(2)) {
						goneAt <- time.Since(died)
						return
					}
					time.Sleep(time.Millisecond)
				}
				goneAt <- -1
			}()
		}
		if _, err := conns[i%len(conns)].WriteTo(fmt.Appendf(nil, "q%d:", i), vip); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // the last answers
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now())
	}
	wg.Wait()
	for i := range n {
		if !answered[i].Load() {
			lost++
		}
	}
	gone = <-goneAt
	if gone < 0 {
		t.Fatalf("lb2 still in the router's kernel route 10 s after its death: %q", nw.KernelRoute())
	}
	return n, lost, gone
}
