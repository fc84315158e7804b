package etcdfleet

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"lbdns/fleet"
	"lbdns/intent"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
)

// saveRetry saves st decided on the store's current revision, retrying
// (a bounded number of times) while the cluster recovers.
func saveRetry(t *testing.T, s *Store, st intent.State) intent.Revision {
	t.Helper()
	var last error
	for range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cur, err := s.Load(ctx)
		if err == nil {
			var rev intent.Revision
			rev, err = s.Save(ctx, st, cur.Revision)
			if err == nil {
				cancel()
				return rev
			}
		}
		cancel()
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("save did not succeed: %v", last)
	return 0
}

// TestStoreWatchAcrossPartition: a node whose only etcd member is gone
// while the others write and compact catches up whole, at the latest
// revision, when its member is back; a member left without a leader (the
// other two gone) makes the watch fail and be made again, and the next
// write after the quorum is back is delivered.
func TestStoreWatchAcrossPartition(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	prefix := "/partition/"
	cr, err := c.User("partition", prefix)
	if err != nil {
		t.Fatal(err)
	}
	fa := c.Fleet(cr, prefix, "a", "dc1", 2*time.Second)
	fa.Endpoints = c.Endpoints[:1] // a reaches member 0 only
	fb := c.Fleet(cr, prefix, "b", "dc2", 2*time.Second)
	fb.Endpoints = c.Endpoints[1:]
	var logs testlog.Buffer
	opts := func(name string) StoreOptions {
		return StoreOptions{Keys: KeysOf(prefix, "c1", name), Retry: 100 * time.Millisecond, Resync: time.Hour, Timeout: time.Second,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	}
	a := NewStore(connect(t, fa), opts("a"))
	b := NewStore(connect(t, fb), opts("b"))
	ctx := ctxT(t)
	if _, err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch := a.Watch(wctx)
	st := func(r string) intent.State { return intent.State{Overrides: []intent.Override{override(r)}} }
	rev := saveRetry(t, b, st("r1"))
	if got := collect(t, ctx, ch, 1)[0]; got.Revision != rev {
		t.Fatalf("first: revision %d, want %d", got.Revision, rev)
	}

	c.StopMember(0) // a is cut off
	// a's writes are refused, within its timeout, saying why.
	if _, err := a.Save(ctx, st("lost"), rev); err == nil || !strings.Contains(err.Error(), "etcd did not take the change") {
		t.Fatalf("a save while cut off: %v, want refused", err)
	}
	for i := 2; i <= 4; i++ {
		rev = saveRetry(t, b, st(fmt.Sprintf("r%d", i)))
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.Compact(cctx); err != nil { // the root's client reaches members 1 and 2
		t.Fatal(err)
	}
	cancel()
	if err := c.StartMember(0); err != nil {
		t.Fatal(err)
	}
	got := collect(t, ctx, ch, 1)[0]
	if got.Revision != rev || got.State.Overrides[0].Resolver != "r4" {
		t.Fatalf("after the partition and a compaction: revision %d (%s), want %d (r4)", got.Revision, got.State.Overrides[0].Resolver, rev)
	}
	// Caught up by reading the intent whole: after the compaction the
	// watch cannot resume (no resync here: it is an hour away).
	if !strings.Contains(logs.String(), "fell behind a compaction") {
		t.Errorf("the watch did not say it fell behind a compaction; logs:\n%s", logs.String())
	}

	c.StopMember(1) // member 0 is left without a leader
	c.StopMember(2)
	time.Sleep(time.Second) // let a's watch notice (it must not hang on)
	if err := c.StartMember(1); err != nil {
		t.Fatal(err)
	}
	if err := c.StartMember(2); err != nil {
		t.Fatal(err)
	}
	rev = saveRetry(t, b, st("r5"))
	defer func() { t.Logf("a's watch said:\n%s", logs.String()) }()
	for {
		got := collect(t, ctx, ch, 1)[0]
		if got.Revision > rev {
			t.Fatalf("revision %d delivered, beyond the last written %d", got.Revision, rev)
		}
		if got.Revision == rev {
			break
		}
	}
}

// TestFollowerAcrossPartition: a follower whose only etcd member is gone
// keeps its last view and says when etcd last answered; votes written and
// compacted meanwhile are in its view once its member is back (read
// whole, not resumed from before the compaction).
func TestFollowerAcrossPartition(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	prefix := "/follow-partition/"
	cr, err := c.User("follow-partition", prefix)
	if err != nil {
		t.Fatal(err)
	}
	fa := c.Fleet(cr, prefix, "a", "dc1", 2*time.Second)
	fa.Endpoints = c.Endpoints[:1] // the follower reaches member 0 only
	fb := c.Fleet(cr, prefix, "b", "dc2", 2*time.Second)
	fb.Endpoints = c.Endpoints[1:]
	ctx := ctxT(t)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	f := Follow(fctx, connect(t, fa), FollowOptions{Prefix: prefix, Check: 100 * time.Millisecond, Retry: 100 * time.Millisecond})
	defer func() { stop(); <-f.Done() }()
	cli := connect(t, fb)
	b, err := StartHeartbeat(ctx, cli, HeartbeatOptions{Keys: KeysOf(prefix, "", "b"), TTL: 10 * time.Second}, fleet.Heartbeat{Name: "b", Location: "dc2"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	vote := func(m string, up bool) {
		t.Helper()
		for range 40 { // the cluster may be electing
			if err := b.Vote(ctx, m, up); err == nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("vote on %s not written", m)
	}
	votesOf := func() string {
		var out []string
		v := f.View()
		for _, m := range []string{"www/www-1", "www/www-2"} {
			for _, x := range v.Votes[m] {
				out = append(out, fmt.Sprintf("%s:%s=%v", m, x.Prober, x.Up))
			}
		}
		return strings.Join(out, " ")
	}
	vote("www/www-1", true)
	poll.Until(t, 10*time.Second, "the first vote", func() (bool, string) {
		got := votesOf()
		return got == "www/www-1:b=true", got
	})

	c.StopMember(0)
	vote("www/www-1", false)
	vote("www/www-2", true)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.Compact(cctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(500 * time.Millisecond)
	if got := votesOf(); got != "www/www-1:b=true" {
		t.Errorf("cut off, the view changed to %q, want the last one", got)
	}
	if since := time.Since(f.Contact()); since < 300*time.Millisecond {
		t.Errorf("cut off, etcd answered %v ago", since)
	}
	if err := c.StartMember(0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the votes written during the partition", func() (bool, string) {
		got := votesOf()
		return got == "www/www-1:b=false www/www-2:b=true", got
	})
	if since := time.Since(f.Contact()); since > 2*time.Second {
		t.Errorf("etcd answered %v ago, after the partition", since)
	}
}
