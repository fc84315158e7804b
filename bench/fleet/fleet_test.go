package fleetbench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/configs"
	"lbdns/fleet"
	"lbdns/fleet/etcdfleet"
	"lbdns/intent"
	"lbdns/testkit/etcdtest"
)

// enabled skips t unless LBDNS_BENCH_FLEET=1.
func enabled(t *testing.T) {
	if os.Getenv("LBDNS_BENCH_FLEET") != "1" {
		t.Skip("a benchmark: set LBDNS_BENCH_FLEET=1 (bench/fleet/run.sh)")
	}
}

// rounds is LBDNS_BENCH_ROUNDS (default 100, at most 10,000).
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("LBDNS_BENCH_ROUNDS")); err == nil && n > 0 && n <= 10000 {
		return n
	}
	return 100
}

func connect(t *testing.T, f *configs.Fleet) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := etcdfleet.Connect(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// TestPropagation: one node changes the intent, rounds times; each time,
// how long until every other node's watch delivered it.
func TestPropagation(t *testing.T) {
	enabled(t)
	c := etcdtest.StartT(t, 3)
	for _, n := range []int{3, 5} {
		prefix := fmt.Sprintf("/bench-%d/", n)
		cr, err := c.User(fmt.Sprintf("bench-%d", n), prefix)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stores := make([]*etcdfleet.Store, n)
		watches := make([]<-chan intent.Stored, n)
		for i := range stores {
			name := fmt.Sprintf("n%d", i)
			stores[i] = etcdfleet.NewStore(connect(t, c.Fleet(cr, prefix, name, "dc", 10*time.Second)), etcdfleet.StoreOptions{Keys: etcdfleet.KeysOf(prefix, "c1", name)})
			if _, err := stores[i].Load(ctx); err != nil {
				t.Fatal(err)
			}
			watches[i] = stores[i].Watch(ctx)
		}
		var lat []time.Duration
		var rev intent.Revision
		for r := range rounds() {
			st := intent.State{Overrides: []intent.Override{{Resolver: fmt.Sprintf("r%d", r), Action: intent.ActionDrain, Set: time.Unix(1, 0).UTC()}}}
			start := time.Now()
			next, err := stores[0].Save(ctx, st, rev)
			if err != nil {
				t.Fatal(err)
			}
			rev = next
			for i := 1; i < n; i++ {
				for got := (intent.Stored{}); got.Revision < rev; {
					select {
					case got = <-watches[i]:
					case <-time.After(30 * time.Second):
						t.Fatalf("node %d: revision %d not delivered within 30 s", i, rev)
					}
				}
				lat = append(lat, time.Since(start))
			}
			for got := (intent.Stored{}); got.Revision < rev; { // the writer's own watch too
				got = <-watches[0]
			}
		}
		cancel()
		fmt.Printf("fleet intent change to every node, %d nodes, %d changes: p50 %v, p99 %v, max %v (goal: p99 < 300ms)\n",
			n, rounds(), percentile(lat, 0.5).Round(time.Microsecond), percentile(lat, 0.99).Round(time.Microsecond), percentile(lat, 1).Round(time.Microsecond))
	}
}

// TestMovedOnJoin: the fraction of 1,000 members whose k = 3 probers
// change when a node joins 3 or 5 nodes, beside k/(N+1).
func TestMovedOnJoin(t *testing.T) {
	enabled(t)
	members := make([]string, 1000)
	for i := range members {
		members[i] = fmt.Sprintf("pool-%d/member-%d", i%10, i)
	}
	for _, n := range []int{3, 5} {
		probers := make([]fleet.Prober, n+1)
		for i := range probers {
			probers[i] = fleet.Prober{Name: fmt.Sprintf("lb%d", i), Location: fmt.Sprintf("dc%d", i)}
		}
		moved := fleet.Moved(fleet.Assign(members, probers[:n], 3), fleet.Assign(members, probers, 3))
		ideal := min(1, 3/float64(n+1))
		fmt.Printf("fleet assignments moved when node %d joins %d: %.3f of 1000 members, k/(N+1) = %.3f (goal: within 10%%: %.3f..%.3f)\n",
			n+1, n, moved, ideal, 0.9*ideal, 1.1*ideal)
	}
}

// TestKilledNodeLeaves: a node whose client is gone without revoking
// its lease (kill -9) leaves the fleet view about the lease TTL later.
func TestKilledNodeLeaves(t *testing.T) {
	enabled(t)
	c := etcdtest.StartT(t, 3)
	prefix := "/bench-kill/"
	cr, err := c.User("bench-kill", prefix)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	f := c.Fleet(cr, prefix, "dead", "dc", ttl)
	cli := connect(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := etcdfleet.StartHeartbeat(ctx, cli, etcdfleet.HeartbeatOptions{Keys: etcdfleet.KeysOf(prefix, "", "dead"), TTL: ttl}, fleet.Heartbeat{Name: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cli.Close()
	for {
		nodes, err := etcdfleet.Nodes(ctx, c.Root(), prefix, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) == 0 {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("the killed node is still in the view after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("fleet: a killed node left the view %v after it died, lease TTL %v (goal: <= TTL + 1s)\n", time.Since(start).Round(time.Millisecond), ttl)
	h.Close()
}
