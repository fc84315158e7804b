package etcdfleet

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/fleet"
	"lbdns/intent"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
)

// linkRecorder is a LinkEvents that keeps what it was told.
type linkRecorder struct {
	mu   sync.Mutex
	lost []string
}

func (r *linkRecorder) FleetEtcdLost(cause error, _ uint64, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = append(r.lost, cause.Error())
}

func (r *linkRecorder) FleetEtcdBack(time.Duration) {}

func (r *linkRecorder) FleetStartedWithoutEtcd(cause error, _ uint64, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = append(r.lost, "started without etcd: "+cause.Error())
}

func (r *linkRecorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lost...)
}

// stableLeader waits until every member follows one leader and returns
// it.
func stableLeader(t *testing.T, c *etcdtest.Cluster) int {
	t.Helper()
	of := func(i int) int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		l, err := c.MemberLeader(ctx, i)
		if err != nil {
			return -2
		}
		return l
	}
	var lead int
	poll.Until(t, 30*time.Second, "a leader every member follows", func() (bool, string) {
		lead = of(0)
		a, b := of(1), of(2)
		return lead >= 0 && a == lead && b == lead, fmt.Sprintf("m0 follows %d, m1 %d, m2 %d", lead, a, b)
	})
	return lead
}

// TestSavesWithOneMemberCutOff: with one etcd member of three cut off
// from its peers (its clients still reach it; the quorum holds), a node
// whose endpoints are all three members makes 100 sequential intent
// changes (Load, then Save through the LossStore, as lbctl's do) from
// the moment of the cut: none is refused, each confirms within
// SaveTimeout (2s, the LossStore's bound; the store retries on another
// member within it), each change is in etcd exactly once (one revision
// of the scope key holds each change's content: no retry applied
// twice), the link never calls etcd unreachable, the heartbeat (lease
// TTL 5s) and its votes are written every time without a lease lost,
// and the follower's view never loses the node. Both cases: the member
// cut off follows the leader, and it leads (the other two elect a new
// one).
func TestSavesWithOneMemberCutOff(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	prefix := fmt.Sprintf("/one-cut-%d/", time.Now().UnixNano())
	cr, err := c.User("one-cut", prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, cutLeader := range []bool{false, true} {
		name := "follower"
		if cutLeader {
			name = "leader"
		}
		t.Run(name, func(t *testing.T) { savesWithOneCut(t, c, cr, prefix+name+"/", cutLeader) })
	}
}

func savesWithOneCut(t *testing.T, c *etcdtest.Cluster, cr etcdtest.Creds, prefix string, cutLeader bool) {
	const writes = 100
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := c.Fleet(cr, prefix, "a", "dc1", 5*time.Second)
	cli := connect(t, f)
	var logs testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	keys := KeysOf(prefix, "", "a")

	hb, err := StartHeartbeat(ctx, cli, HeartbeatOptions{Keys: keys, TTL: f.LeaseTTL.Duration, Logger: logger}, fleet.Heartbeat{Name: "a", Location: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	fctx, stopFollow := context.WithCancel(ctx)
	fo := Follow(fctx, cli, FollowOptions{Prefix: prefix, Check: 100 * time.Millisecond, Retry: 100 * time.Millisecond, Logger: logger})
	defer func() { stopFollow(); <-fo.Done() }()
	hasNode := func() bool {
		for _, n := range fo.View().Nodes {
			if n.Name == "a" {
				return true
			}
		}
		return false
	}
	poll.Until(t, 10*time.Second, "the follower's view with node a", func() (bool, string) { return hasNode(), "" })

	rec := &linkRecorder{}
	link := NewLink(time.Now, rec, func() uint64 { return 0 })
	ls := NewLossStore(LossStoreOptions{
		Inner: NewStore(cli, StoreOptions{Keys: keys, Logger: logger}), Client: cli, Key: keys.Fleet, Link: link,
		CopyPath: filepath.Join(t.TempDir(), CopyFile), Node: "a", Now: time.Now, Logger: logger,
	})
	if _, err := ls.Load(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopWatch(); wg.Wait() }()
	in := ls.Watch(wctx) // runs the link's checks
	wg.Go(func() {
		for range in {
		}
	})
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	head, err := c.Root().Get(rctx, "/etcdtest/head")
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	from := head.Header.Revision

	lead := stableLeader(t, c)
	cut := (lead + 1) % 3
	if cutLeader {
		cut = lead
	}
	if err := c.PartitionPeers(cut); err != nil {
		t.Fatal(err)
	}
	healed := false
	heal := func() {
		if healed {
			return
		}
		healed = true
		c.HealPeers(cut)
		stableLeader(t, c) // whole again for what follows
	}
	defer heal()
	t.Logf("m%d cut off from its peers (the leader was m%d)", cut, lead)

	var refused, viewLost, notAlive, voteFailed int
	var worst time.Duration
	revs := map[intent.Revision]string{}
	for i := range writes {
		content := fmt.Sprintf("w%03d", i)
		t0 := time.Now()
		cur, err := ls.Load(ctx)
		if err == nil {
			var rev intent.Revision
			rev, err = ls.Save(ctx, intent.State{Overrides: []intent.Override{override(content)}}, cur.Revision)
			if err == nil {
				revs[rev] = content
			}
		}
		if d := time.Since(t0); d > worst {
			worst = d
		}
		if err != nil {
			refused++
			t.Errorf("write %d refused: %v", i, err)
		}
		vctx, vcancel := context.WithTimeout(ctx, 2*time.Second)
		if err := hb.Vote(vctx, "www/www-1", i%2 == 0); err != nil {
			voteFailed++
			t.Errorf("vote %d: %v", i, err)
		}
		vcancel()
		if !hb.Alive() {
			notAlive++
		}
		if !hasNode() {
			viewLost++
		}
	}
	t.Logf("writes refused %d/%d, worst Load+Save %v (bound: SaveTimeout %v each)", refused, writes, worst, SaveTimeout)
	if worst > 2*SaveTimeout {
		t.Errorf("worst Load+Save %v, beyond a Load and a Save each within %v", worst, SaveTimeout)
	}
	if notAlive > 0 || voteFailed > 0 || viewLost > 0 {
		t.Errorf("heartbeat not alive after %d writes, votes failed %d, the follower's view without node a %d times", notAlive, voteFailed, viewLost)
	}
	if n := logs.Count("cannot write the fleet heartbeat") + logs.Count("lease is lost"); n > 0 {
		t.Errorf("the heartbeat failed %d times; logs:\n%s", n, logs.String())
	}
	if ev := rec.events(); len(ev) > 0 {
		t.Errorf("the link called etcd unreachable %d times: %s", len(ev), strings.Join(ev, "; "))
	}
	heal()

	// Every change is in etcd exactly once, at the revision Save returned.
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	defer hcancel()
	seen := map[string]int{}
	var last int64
	if len(revs) > 0 {
		for r := range revs {
			last = max(last, int64(r))
		}
		wch := c.Root().Watch(hctx, keys.Scope, clientv3.WithRev(from+1))
	events:
		for resp := range wch {
			if err := resp.Err(); err != nil {
				t.Fatalf("history of %s: %v", keys.Scope, err)
			}
			for _, ev := range resp.Events {
				st, err := intent.Parse(ev.Kv.Value)
				if err != nil || len(st.Overrides) != 1 {
					t.Fatalf("revision %d of %s: %q (%v)", ev.Kv.ModRevision, keys.Scope, ev.Kv.Value, err)
				}
				got := st.Overrides[0].Resolver
				seen[got]++
				if want, ok := revs[intent.Revision(ev.Kv.ModRevision)]; ok && want != got {
					t.Errorf("revision %d holds %s, Save returned it for %s", ev.Kv.ModRevision, got, want)
				}
				if ev.Kv.ModRevision >= last {
					break events
				}
			}
		}
	}
	saved := map[string]bool{}
	for _, content := range revs {
		saved[content] = true
	}
	for i := range writes {
		// A refused change may be in etcd (not confirmed in time), but
		// never twice.
		content := fmt.Sprintf("w%03d", i)
		if n := seen[content]; n > 1 || saved[content] && n != 1 {
			t.Errorf("%s is in etcd %d times, want once", content, n)
		}
	}
}
