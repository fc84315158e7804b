package etcdfleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/fleet"
	"lbdns/testkit/poll"
)

// TestVotes: the probers' votes live under their leases: read by every
// node, counted into a verdict, written only on change, written again
// under a new lease, withdrawn, and gone with a prober that closes.
func TestVotes(t *testing.T) {
	tf := newFleet(t, "votes")
	ctx := ctxT(t)
	a, _ := tf.beat("a", 1, 0)
	b, _ := tf.beat("b", 1, 0)
	c, _ := tf.beat("c", 1, 0)
	defer a.Close()
	defer c.Close()
	const m = "www/www-1"
	for _, v := range []struct {
		h  *Heartbeater
		up bool
	}{{a, false}, {b, true}, {c, false}} {
		if err := v.h.Vote(ctx, m, v.up); err != nil {
			t.Fatal(err)
		}
	}
	votes := func() []fleet.Vote {
		t.Helper()
		all, err := Votes(ctx, tf.c.Root(), tf.f.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		return all[m]
	}
	got := votes()
	if len(got) != 3 || got[0].Prober != "a" || got[0].Location != "dc-a" || got[1].Up != true {
		t.Fatalf("votes %+v", got)
	}
	rules := fleet.Rules{MinVotes: 2, MaxAge: time.Hour, Hold: time.Minute, UpPercent: 50} // a strict majority
	if d := fleet.Count(got, fleet.Decision{}, rules, time.Now()); d.Verdict != fleet.VerdictDown || d.Down != 2 {
		t.Fatalf("verdict %+v, want down by 2 to 1 under a strict majority", d)
	}

	key := voteKey(tf.f.Prefix, m, "a")
	mod := func() int64 {
		resp, err := tf.c.Root().Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("vote key: %v %v", resp, err)
		}
		return resp.Kvs[0].ModRevision
	}
	before := mod()
	if err := a.Vote(ctx, m, false); err != nil {
		t.Fatal(err)
	}
	if after := mod(); after != before {
		t.Errorf("the same vote was written again (mod %d, then %d)", before, after)
	}

	resp, err := tf.c.Root().Get(ctx, voteKey(tf.f.Prefix, m, "c"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(resp, err)
	}
	if _, err := tf.c.Root().Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "c's vote under its new lease", func() (bool, string) {
		got := votes()
		return len(got) == 3, fmt.Sprintf("%+v", got)
	})

	if err := a.Withdraw(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got := votes(); len(got) != 1 || got[0].Prober != "c" {
		t.Fatalf("after a withdrew and b closed: %+v, want c's alone", got)
	}
}

// TestVoteWrittenAgain: a vote whose write failed (etcd did not answer
// in time) is written by the next Vote on it, though unchanged.
func TestVoteWrittenAgain(t *testing.T) {
	tf := newFleet(t, "votes-again")
	ctx := ctxT(t)
	a, _ := tf.beat("a", 1, 0)
	defer a.Close()
	const m = "www/www-1"
	dead, cancel := context.WithCancel(ctx)
	cancel() // the write cannot be made
	if err := a.Vote(dead, m, false); err == nil {
		t.Fatal("a vote with a cancelled context was written")
	}
	if all, err := Votes(ctx, tf.c.Root(), tf.f.Prefix); err != nil || len(all[m]) != 0 {
		t.Fatalf("votes after the failed write: %v %v, want none", all, err)
	}
	written, err := a.VoteChanged(ctx, m, false)
	if err != nil || !written {
		t.Fatalf("the same vote again: written %v, %v; want written", written, err)
	}
	all, err := Votes(ctx, tf.c.Root(), tf.f.Prefix)
	if err != nil || len(all[m]) != 1 || all[m][0].Up {
		t.Fatalf("votes: %v %v, want a's down vote", all, err)
	}
	if written, err := a.VoteChanged(ctx, m, false); err != nil || written {
		t.Errorf("once written, the same vote: written %v, %v; want not written", written, err)
	}
}
