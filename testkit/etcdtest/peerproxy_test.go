package etcdtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"lbdns/testkit/poll"
)

// TestPartitionPeers: a member partitioned from its peers loses its
// leader while the other two keep one (a new one when it led) and
// serve writes; its client URL still answers (its status); healed, it
// follows the leader again. Both cases: the member cut is a follower,
// then the leader.
func TestPartitionPeers(t *testing.T) {
	c := StartT(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leaderOf := func(i int) int {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		defer scancel()
		l, err := c.MemberLeader(sctx, i)
		if err != nil {
			return -2
		}
		return l
	}
	for _, cutLeader := range []bool{false, true} {
		t.Run(fmt.Sprintf("leader=%v", cutLeader), func(t *testing.T) {
			var lead int
			poll.Until(t, 20*time.Second, "a leader all members follow", func() (bool, string) {
				lead = leaderOf(0)
				return lead >= 0 && leaderOf(1) == lead && leaderOf(2) == lead, fmt.Sprint(lead)
			})
			cut := (lead + 1) % 3
			if cutLeader {
				cut = lead
			}
			if err := c.PartitionPeers(cut); err != nil {
				t.Fatal(err)
			}
			others := []int{(cut + 1) % 3, (cut + 2) % 3}
			poll.Until(t, 20*time.Second, fmt.Sprintf("m%d without a leader, the others with one of them", cut), func() (bool, string) {
				a, b, x := leaderOf(others[0]), leaderOf(others[1]), leaderOf(cut)
				return x == -1 && a >= 0 && a == b && a != cut, fmt.Sprintf("m%d follows %d, m%d %d, m%d %d", cut, x, others[0], a, others[1], b)
			})
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := c.Root().Put(pctx, "/etcdtest/partitioned", "v")
			pcancel()
			if err != nil {
				t.Fatalf("a write with m%d partitioned: %v", cut, err)
			}
			c.HealPeers(cut)
			poll.Until(t, 20*time.Second, fmt.Sprintf("m%d following the leader again", cut), func() (bool, string) {
				a, x := leaderOf(others[0]), leaderOf(cut)
				return a >= 0 && x == a, fmt.Sprintf("m%d follows %d, m%d %d", cut, x, others[0], a)
			})
		})
	}
}
