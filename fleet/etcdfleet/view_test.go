package etcdfleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"lbdns/testkit/poll"
)

// TestFollower: the follower's view has every node and every vote as
// they are written, unvoted, withdrawn and gone with a closed node, and
// the same as a whole read (Nodes, Votes) once the writes settle.
func TestFollower(t *testing.T) {
	tf := newFleet(t, "follow")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	a, _ := tf.beat("a", 1, 0)
	defer a.Close()
	f := Follow(ctx, tf.c.Root(), FollowOptions{Prefix: tf.f.Prefix, Check: 200 * time.Millisecond})
	b, _ := tf.beat("b", 1, 0)
	const m = "www/www-1"
	if err := a.Vote(ctx, m, true); err != nil {
		t.Fatal(err)
	}
	if err := b.Vote(ctx, m, false); err != nil {
		t.Fatal(err)
	}
	if err := b.Vote(ctx, "www/www-2", true); err != nil {
		t.Fatal(err)
	}
	seen := func(what string, want string) {
		t.Helper()
		poll.Until(t, 10*time.Second, what, func() (bool, string) {
			v := f.View()
			got := fmt.Sprintf("nodes %s votes", names(v.Nodes))
			for _, m := range []string{"www/www-1", "www/www-2"} {
				for _, x := range v.Votes[m] {
					got += fmt.Sprintf(" %s:%s=%v", m, x.Prober, x.Up)
				}
			}
			return v.Loaded && got == want, got
		})
	}
	seen("both nodes and their votes", "nodes [a b] votes www/www-1:a=true www/www-1:b=false www/www-2:b=true")
	if _, err := b.Unvote(ctx, "www/www-2"); err != nil {
		t.Fatal(err)
	}
	if err := a.Vote(ctx, m, false); err != nil {
		t.Fatal(err)
	}
	seen("b's vote on www-2 gone, a's changed", "nodes [a b] votes www/www-1:a=false www/www-1:b=false")
	if err := a.Withdraw(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	seen("a withdrawn, b gone", "nodes [a] votes")
	if c := f.Contact(); time.Since(c) > 2*time.Second {
		t.Errorf("last contact %v ago, want within the checks' pace", time.Since(c))
	}
	whole, err := Votes(ctx, tf.c.Root(), tf.f.Prefix)
	if err != nil || len(whole) != 0 {
		t.Errorf("Votes read whole: %v %v, want none", whole, err)
	}
}
