package etcdfleet

import (
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/fleet"
	"lbdns/intent"
	"lbdns/testkit/poll"
)

// beat starts node name's heartbeat (cluster c1) with serial and the
// intent revision applied.
func (tf *testFleet) beat(name string, serial uint32, applied uint64) (*Heartbeater, fleet.Heartbeat) {
	tf.t.Helper()
	_, cli := tf.node(name, "c1", StoreOptions{})
	hb := fleet.Heartbeat{Name: name, Location: "dc-" + name, Cluster: "c1", Version: "test", ConfigHash: "h1", IntentRevision: applied, Serial: serial, Started: time.Unix(1700000000, 0).UTC()}
	h, err := StartHeartbeat(ctxT(tf.t), cli, HeartbeatOptions{Keys: KeysOf(tf.f.Prefix, "c1", name), TTL: 2 * time.Second}, hb)
	if err != nil {
		tf.t.Fatal(err)
	}
	return h, hb
}

// view reads the fleet view with the root client.
func (tf *testFleet) view() []fleet.Node {
	tf.t.Helper()
	nodes, err := Nodes(ctxT(tf.t), tf.c.Root(), tf.f.Prefix, time.Now())
	if err != nil {
		tf.t.Fatal(err)
	}
	return nodes
}

func names(nodes []fleet.Node) string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return fmt.Sprint(out)
}

// TestHeartbeat: every node's heartbeat is in the fleet view with what
// it says; a change is published; the odd one out is flagged; a node
// that closes leaves at once.
func TestHeartbeat(t *testing.T) {
	tf := newFleet(t, "heartbeat")
	a, _ := tf.node("writer", "c1", StoreOptions{})
	rev, err := a.Save(ctxT(t), intent.State{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ha, hbA := tf.beat("a", 7, uint64(rev))
	hb, _ := tf.beat("b", 7, uint64(rev))
	hc, hbC := tf.beat("c", 7, uint64(rev)-1)
	defer ha.Close()
	defer hc.Close()
	nodes := tf.view()
	if got := names(nodes); got != "[a b c]" {
		t.Fatalf("nodes %s, want [a b c]", got)
	}
	for _, n := range nodes {
		if n.CurrentRevision != uint64(rev) {
			t.Errorf("%s: current revision %d, want %d", n.Name, n.CurrentRevision, rev)
		}
		if n.Age < 0 || n.Age > time.Minute || n.Location != "dc-"+n.Name || n.Serial != 7 {
			t.Errorf("%s: %+v", n.Name, n)
		}
	}
	if odd := nodes[2].Odd; len(odd) != 1 || nodes[0].Odd != nil || nodes[1].Odd != nil {
		t.Errorf("odd: a %q, b %q, c %q; want only c, behind on intent", nodes[0].Odd, nodes[1].Odd, odd)
	}
	hbC.IntentRevision = uint64(rev)
	hc.Publish(hbC)
	hbA.Serial = 8
	ha.Publish(hbA)
	poll.Until(t, 10*time.Second, "the changes in the fleet view", func() (bool, string) {
		nodes := tf.view()
		return len(nodes) == 3 && nodes[0].Serial == 8 && nodes[2].IntentRevision == uint64(rev), fmt.Sprintf("%+v", nodes)
	})
	nodes = tf.view()
	if len(nodes[0].Odd) != 1 || nodes[2].Odd != nil {
		t.Errorf("odd: a %q, c %q; want a by its serial only", nodes[0].Odd, nodes[2].Odd)
	}
	hb.Close()
	if got := names(tf.view()); got != "[a c]" {
		t.Fatalf("after b closed: %s, want [a c]", got)
	}
}

// TestHeartbeatExpires: a node that dies without closing (its client
// gone, as on kill -9) leaves the fleet view when its lease expires.
func TestHeartbeatExpires(t *testing.T) {
	tf := newFleet(t, "expires")
	f := *tf.f
	f.Name = "dead"
	cli := connect(t, &f)
	h, err := StartHeartbeat(ctxT(t), cli, HeartbeatOptions{Keys: KeysOf(f.Prefix, "", "dead"), TTL: 2 * time.Second}, fleet.Heartbeat{Name: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(tf.view()); got != "[dead]" {
		t.Fatalf("nodes %s, want [dead]", got)
	}
	cli.Close() // no revoke: the lease runs out
	poll.Until(t, 15*time.Second, "the dead node's heartbeat to expire", func() (bool, string) {
		nodes := tf.view()
		return len(nodes) == 0, names(nodes)
	})
	h.Close() // with its client gone: returns all the same
}

// TestHeartbeatLeaseLost: when the lease is revoked behind the node's
// back, it gets a new one and writes its heartbeat again.
func TestHeartbeatLeaseLost(t *testing.T) {
	tf := newFleet(t, "leaselost")
	h, _ := tf.beat("a", 1, 0)
	defer h.Close()
	ctx := ctxT(t)
	resp, err := tf.c.Root().Get(ctx, tf.f.Prefix+"nodes/a")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("heartbeat key: %v, %v", resp, err)
	}
	old := resp.Kvs[0].Lease
	if _, err := tf.c.Root().Revoke(ctx, clientv3LeaseID(old)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, "a new lease", func() (bool, string) {
		resp, err := tf.c.Root().Get(ctx, tf.f.Prefix+"nodes/a")
		if err != nil || len(resp.Kvs) != 1 {
			return false, fmt.Sprintf("%v %v", resp, err)
		}
		return resp.Kvs[0].Lease != old && h.Alive(), fmt.Sprintf("lease %x", resp.Kvs[0].Lease)
	})
}

func clientv3LeaseID(id int64) clientv3.LeaseID { return clientv3.LeaseID(id) }

// TestHeartbeatAliveNeedsConfirmation: the node says its heartbeat is
// alive only while a write under the lease confirmed it within a TTL, so
// that a node whose writes fail (cut off from etcd) stops calling itself
// alive about when the others drop it, not when its client at last
// learns that the lease is gone.
func TestHeartbeatAliveNeedsConfirmation(t *testing.T) {
	tf := newFleet(t, "confirmed")
	_, cli := tf.node("a", "c1", StoreOptions{})
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// No periodic rewrite within the test: only Publish writes.
	h, err := StartHeartbeat(ctxT(t), cli, HeartbeatOptions{Keys: KeysOf(tf.f.Prefix, "c1", "a"), TTL: 2 * time.Second, Interval: time.Hour, Now: clock},
		fleet.Heartbeat{Name: "a", Location: "dc-a", Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.Alive() {
		t.Fatal("not alive right after the first write")
	}
	advance(2*time.Second + time.Millisecond)
	if h.Alive() {
		t.Fatal("alive with no write confirming the lease for more than a TTL")
	}
	h.Publish(fleet.Heartbeat{Name: "a", Location: "dc-a", Cluster: "c1", Serial: 9})
	poll.Until(t, 5*time.Second, "the published heartbeat to confirm the lease again", func() (bool, string) {
		return h.Alive(), "not alive"
	})
}
