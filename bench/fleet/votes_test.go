package fleetbench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/daemon"
	"lbdns/fleet"
	"lbdns/fleet/etcdfleet"
	"lbdns/gslb"
	"lbdns/internal/lab/vendors"
	"lbdns/probes"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/tcpsink"
)

// The members' checks of the vote benchmarks: a TCP connect every
// interval, down after fall failures.
const (
	checkInterval = 200 * time.Millisecond
	checkTimeout  = 100 * time.Millisecond
	checkFall     = 2
	leaseTTL      = 2 * time.Second
)

// benchNode is one lbdnsd of the fleet, in this process.
type benchNode struct {
	name   string
	path   string // its configuration
	d      *daemon.Daemon
	dns    string
	cancel context.CancelFunc
	done   chan error
}

func (n *benchNode) stop() {
	if n.cancel != nil {
		n.cancel()
		<-n.done
		n.cancel = nil
	}
}

// nodeConfig is a GSLB-only node: pool www of members members, member i
// answered as 198.18.x.y and probed at 127.1.x.y on port, all in name
// n0.gslb.example (algorithm all, at most 1,000 answered: the cap is the
// responder's), the responder on 127.0.0.1:dnsPort, [fleet] over
// endpoints.
func nodeConfig(t *testing.T, dir, name string, members, port, dnsPort int, endpoints []string, cr etcdtest.Creds, k int, interval time.Duration) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = \"127.0.0.1:0\"\n\n", dir+"/state", dir+"/ctl.sock")
	fmt.Fprintf(&b, "[check.web]\nkind = \"tcp\"\ninterval = %q\ntimeout = %q\nrise = 1\nfall = %d\n\n[check.web.tcp]\nport = %d\n\n",
		interval, min(checkTimeout, interval/2), checkFall, port)
	fmt.Fprintf(&b, "[[gslb.pool]]\nname = \"www\"\nmonitors = [\"web\"]\nalgorithm = \"all\"\n\n")
	for i := range members {
		fmt.Fprintf(&b, "[[gslb.pool.member]]\nname = \"m%d\"\naddress = \"198.18.%d.%d\"\nprobe_address = \"127.1.%d.%d\"\n\n", i, i/250, i%250+1, i/250, i%250+1)
	}
	fmt.Fprintf(&b, "[[gslb.zone]]\nname = \"gslb.example\"\nns = [\"ns1.gslb.example.\"]\n\n[[gslb.name]]\nname = \"n0.gslb.example\"\n\n[[gslb.name.policy]]\npool = \"www\"\n\n")
	fmt.Fprintf(&b, "[gslb.server]\nlisten = [\"127.0.0.1:%d\"]\n\n", dnsPort)
	eps := make([]string, len(endpoints))
	for i, e := range endpoints {
		eps[i] = strconv.Quote(e)
	}
	fmt.Fprintf(&b, "[fleet]\nendpoints = [%s]\nname = %q\nlocation = \"dc-%s\"\nprefix = \"/bench-votes/\"\nlease_ttl = %q\ndial_timeout = \"2s\"\n",
		strings.Join(eps, ", "), name, name, leaseTTL)
	fmt.Fprintf(&b, "ca_file = %q\ncert_file = %q\nkey_file = %q\nprobers_per_member = %d\n", cr.CAFile, cr.CertFile, cr.KeyFile, k)
	path := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// freePort returns a loopback port free for TCP and UDP.
func freePort(t *testing.T) int {
	t.Helper()
	p, err := vendors.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return int(p)
}

// startNodes starts n nodes named a, b, ... over c, members members
// probed on port, k probers each; endpoints(i) gives node i's etcd
// endpoints (nil: all).
func startNodes(t *testing.T, c *etcdtest.Cluster, n, members, port, k int, interval time.Duration, endpoints func(i int) []string) []*benchNode {
	t.Helper()
	cr, err := c.User("bench-votes", "/bench-votes/")
	if err != nil {
		t.Fatal(err)
	}
	var out []*benchNode
	for i := range n {
		name := string(rune('a' + i))
		eps := c.Endpoints
		if endpoints != nil {
			eps = endpoints(i)
		}
		dnsPort := freePort(t)
		path := nodeConfig(t, t.TempDir(), name, members, port, dnsPort, eps, cr, k, interval)
		out = append(out, runNode(t, name, path, fmt.Sprintf("127.0.0.1:%d", dnsPort)))
	}
	return out
}

// answers returns the A records node n answers for n0.gslb.example.
func answers(n *benchNode) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion("n0.gslb.example.", dns.TypeA)
	c := &dns.Client{Timeout: time.Second, UDPSize: 65000, Net: "tcp"}
	r, _, err := c.Exchange(m, n.dns)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out, nil
}

// waitAll waits until every node answers satisfies ok, within limit.
func waitAll(t *testing.T, nodes []*benchNode, limit time.Duration, what string, ok func([]string) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, n := range nodes {
		for {
			got, err := answers(n)
			if err == nil && ok(got) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s not within %v (answers %v, %v)", n.name, what, limit, got, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestVerdictOnDeath: three nodes, k = 3; member m0 dies (its listener,
// a tcpsink at 127.1.0.1, closes): how long until no node answers it
// any more, the last node's time, over LBDNS_BENCH_DEATHS deaths
// (default 10). The members' listeners on 0.0.0.0 in the other
// benchmarks take every loopback address (127.1.x.y): nothing leaves
// the host.
func TestVerdictOnDeath(t *testing.T) {
	enabled(t)
	deaths := 10
	if n, err := strconv.Atoi(os.Getenv("LBDNS_BENCH_DEATHS")); err == nil && n > 0 && n <= 200 {
		deaths = n
	}
	c := etcdtest.StartT(t, 3)
	port := freePort(t)
	m0 := tcpsink.ListenT(t, fmt.Sprintf("127.1.0.1:%d", port))
	tcpsink.ListenT(t, fmt.Sprintf("127.1.0.2:%d", port))
	nodes := startNodes(t, c, 3, 2, port, 3, checkInterval, nil)
	both := func(got []string) bool { return slices.Equal(got, []string{"198.18.0.1", "198.18.0.2"}) }
	waitAll(t, nodes, 30*time.Second, "both members answered", both)
	var lat []time.Duration
	for range deaths {
		start := time.Now()
		m0.Down()
		waitAll(t, nodes, 10*time.Second, "m0 out of the answers", func(got []string) bool { return slices.Equal(got, []string{"198.18.0.2"}) })
		lat = append(lat, time.Since(start))
		if err := m0.Up(); err != nil {
			t.Fatal(err)
		}
		waitAll(t, nodes, 10*time.Second, "m0 back", both)
		time.Sleep(checkInterval) // a steady state between deaths
	}
	goal := checkFall*checkInterval + checkTimeout + 500*time.Millisecond
	fmt.Printf("fleet member death to the fleet verdict on every node, 3 nodes, k=3, %d deaths: p50 %v, max %v (interval %v, fall %d, timeout %v; goal: <= %v)\n",
		deaths, percentile(lat, 0.5).Round(time.Millisecond), percentile(lat, 1).Round(time.Millisecond), checkInterval, checkFall, checkTimeout, goal)
}

// TestCutOffProberVotes: node c reaches etcd through one member alone,
// a follower, then (another cluster) the leader; that member dies: c is
// cut off from etcd (the others keep a quorum). How long until c's
// votes are gone from etcd (its lease expired), and how many answers of
// a and b, sampled meanwhile every 10 ms, were wrong (both members live:
// every answer must hold both).
func TestCutOffProberVotes(t *testing.T) {
	enabled(t)
	t.Run("follower", func(t *testing.T) { cutOffProber(t, false) })
	t.Run("leader", func(t *testing.T) { cutOffProber(t, true) })
}

// cutOffProber is one run of TestCutOffProberVotes: c reaches a
// follower alone, or the leader (whose death makes an election, which
// extends every lease by an election timeout).
func cutOffProber(t *testing.T, leader bool) {
	c := etcdtest.StartT(t, 3)
	port := freePort(t)
	tcpsink.ListenT(t, fmt.Sprintf("0.0.0.0:%d", port))
	cut := member(t, c, leader)
	nodes := startNodes(t, c, 3, 2, port, 3, checkInterval, func(i int) []string {
		if i == 2 {
			return []string{c.Endpoints[cut]}
		}
		return slices.Delete(slices.Clone(c.Endpoints), cut, cut+1)
	})
	both := func(got []string) bool { return slices.Equal(got, []string{"198.18.0.1", "198.18.0.2"}) }
	waitAll(t, nodes, 30*time.Second, "both members answered", both)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := c.Root()
	votesOf := func(prober string) int {
		all, err := etcdfleet.Votes(ctx, cli, "/bench-votes/")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, vs := range all {
			for _, v := range vs {
				if v.Prober == prober {
					n++
				}
			}
		}
		return n
	}
	// A steady state: every node has both members up by the fleet's
	// verdict (not a node's first probe round still running).
	for deadline := time.Now().Add(30 * time.Second); votesOf("c") < 2 || !fleetUp(t, nodes); {
		if time.Now().After(deadline) {
			t.Fatal("no steady state within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	c.StopMember(cut)
	var gone time.Duration
	wrong, samples := 0, 0
	for time.Since(start) < 3*leaseTTL+5*time.Second {
		for _, n := range nodes[:2] {
			got, err := answers(n)
			samples++
			if err != nil || !both(got) {
				wrong++
				fmt.Printf("fleet: wrong answer from %s %v after the cut: %v %v\n", n.name, time.Since(start).Round(time.Millisecond), got, err)
			}
		}
		if gone == 0 && votesOf("c") == 0 {
			gone = time.Since(start)
		}
		if gone != 0 && time.Since(start) > gone+2*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if gone == 0 {
		t.Fatalf("c's votes still in etcd %v after it was cut off", time.Since(start))
	}
	st, err := daemonFleet(nodes[2].d)
	if err != nil {
		t.Fatal(err)
	}
	what := "a follower"
	if leader {
		what = "the leader (an election)"
	}
	fmt.Printf("fleet: a prober cut off from etcd (its one member, %s, killed) lost its votes %v after the cut, lease TTL %v; %d wrong answers of %d sampled on the other nodes; the cut-off node judges from %q (goal: <= TTL + 1s, 0 wrong)\n",
		what, gone.Round(time.Millisecond), leaseTTL, wrong, samples, st.Verdicts)
	if err := c.StartMember(cut); err != nil {
		t.Fatal(err)
	}
}

// fleetUp reports whether every node has every member up by the
// fleet's verdict.
func fleetUp(t *testing.T, nodes []*benchNode) bool {
	t.Helper()
	for _, n := range nodes {
		st, err := n.d.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.GSLB {
			for _, m := range p.Members {
				if m.Fleet == nil || m.Fleet.Source != "fleet" || m.Fleet.Verdict != "up" {
					return false
				}
			}
		}
	}
	return true
}

// member returns the index of the etcd leader, or of a follower.
func member(t *testing.T, c *etcdtest.Cluster, leader bool) int {
	t.Helper()
	for i, ep := range c.Endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := c.Root().Status(ctx, ep)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if (st.Leader == st.Header.MemberId) == leader {
			return i
		}
	}
	t.Fatalf("no etcd member with leader = %v", leader)
	return 0
}

// daemonFleet reads d's /v1/fleet.
func daemonFleet(d *daemon.Daemon) (*control.FleetStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return d.Fleet(ctx)
}

// cpuTime is the process's user + system CPU time.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestVotesAtScale: three nodes, k = 3 (the default), 1,000 members
// (LBDNS_BENCH_MEMBERS) all alive, checked every 2s (the default): the
// CPU per node (this process's CPU, three daemons, over three) and the
// vote writes per node, in the first probe round and per second in a
// steady spell of 20 s; and etcd's revisions per second (every write of
// the fleet, heartbeats included).
func TestVotesAtScale(t *testing.T) {
	enabled(t)
	members := 1000
	if n, err := strconv.Atoi(os.Getenv("LBDNS_BENCH_MEMBERS")); err == nil && n > 0 && n <= 2000 {
		members = n
	}
	const k, n, interval = 3, 3, 2 * time.Second
	c := etcdtest.StartT(t, 3)
	port := freePort(t)
	tcpsink.ListenT(t, fmt.Sprintf("0.0.0.0:%d", port))
	cpu0, t0 := cpuTime(t), time.Now()
	nodes := startNodes(t, c, n, members, port, k, interval, nil)
	status := func(x *benchNode) *control.FleetStatus {
		st, err := daemonFleet(x.d)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	writes := func() uint64 {
		var w uint64
		for _, x := range nodes {
			w += status(x).VoteWrites
		}
		return w
	}
	// The first round: until every node has every member up by the
	// fleet's verdict and the vote writes stop moving.
	for prev := uint64(0); ; {
		time.Sleep(time.Second)
		up := 0
		for _, x := range nodes {
			st, err := x.d.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(st.GSLB) == 1 && st.GSLB[0].Up == members && status(x).Verdicts == "fleet" {
				up++
			}
		}
		w := writes()
		if up == n && w == prev && w > 0 {
			break
		}
		prev = w
		if time.Since(t0) > 3*time.Minute {
			t.Fatalf("not settled after 3 minutes: %d nodes with every member up, %d vote writes", up, w)
		}
	}
	first, firstCPU, firstTook := writes(), cpuTime(t)-cpu0, time.Since(t0)
	rev := func() int64 {
		resp, err := c.Root().Get(context.Background(), "/bench-votes/nodes/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	const spell = 20 * time.Second
	w0, r0, cpuS, tS := writes(), rev(), cpuTime(t), time.Now()
	time.Sleep(spell)
	w1, r1, cpuE, took := writes(), rev(), cpuTime(t), time.Since(tS)
	perNode := func(cpu time.Duration, d time.Duration) float64 { return 100 * cpu.Seconds() / d.Seconds() / n }
	fmt.Printf("fleet votes, %d members, %d nodes, k=%d, checks every %v: settled in %v, %d vote writes (%.0f per node), CPU %.1f%% of a core per node meanwhile\n",
		members, n, k, interval, firstTook.Round(100*time.Millisecond), first, float64(first)/n, perNode(firstCPU, firstTook))
	fmt.Printf("fleet votes, %d members, steady %v: %.2f vote writes/s per node, %.2f etcd revisions/s in all (heartbeats included), CPU %.1f%% of a core per node (%.0f member probes/s per node)\n",
		members, spell, float64(w1-w0)/took.Seconds()/n, float64(r1-r0)/took.Seconds(), perNode(cpuE-cpuS, took), float64(members*k)/n/interval.Seconds())
}

// probersOf returns, by member, the nodes whose monitors probe it.
func probersOf(nodes []*benchNode) map[string][]fleet.Prober {
	out := map[string][]fleet.Prober{}
	for _, n := range nodes {
		for k := range n.d.Monitor().Status() {
			if k.Kind == gslb.MonitorKind {
				m := k.Owner + "/" + k.Member
				out[m] = append(out[m], fleet.Prober{Name: n.name})
			}
		}
	}
	return out
}

// TestMovedOnJoinDaemons: the fraction of 300 members whose probers (the
// nodes whose monitors probe them) change when a fourth node joins three
// daemons, k = 2, read from the daemons' monitors, beside k/(N+1) and
// the pure figure (fleet.Moved over fleet.Assign).
func TestMovedOnJoinDaemons(t *testing.T) {
	enabled(t)
	const members, k = 300, 2
	c := etcdtest.StartT(t, 3)
	port := freePort(t)
	tcpsink.ListenT(t, fmt.Sprintf("0.0.0.0:%d", port))
	nodes := startNodes(t, c, 4, members, port, k, 2*time.Second, nil)
	nodes[3].stop() // d joins later, on the same configuration
	settled := func(ns []*benchNode) map[string][]fleet.Prober {
		deadline := time.Now().Add(time.Minute)
		for {
			ps := probersOf(ns)
			ok := len(ps) == members
			for _, p := range ps {
				ok = ok && len(p) == k
			}
			if ok {
				return ps
			}
			if time.Now().After(deadline) {
				t.Fatalf("members not each probed by %d of %d nodes within a minute", k, len(ns))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	before := settled(nodes[:3])
	start := time.Now()
	d := restart(t, nodes[3])
	nodes[3] = d
	after := settled(nodes)
	took := time.Since(start)
	var names []string
	for m := range before {
		names = append(names, m)
	}
	ps := []fleet.Prober{{Name: "a", Location: "dc-a"}, {Name: "b", Location: "dc-b"}, {Name: "c", Location: "dc-c"}, {Name: "d", Location: "dc-d"}}
	pure := fleet.Moved(fleet.Assign(names, ps[:3], k), fleet.Assign(names, ps, k))
	ideal := float64(k) / 4
	fmt.Printf("fleet assignments moved when node 4 joins 3 daemons: %.3f of %d members (read from the monitors, settled %v after the start), pure %.3f, k/(N+1) = %.3f with k=%d (goal: within 10%%: %.3f..%.3f)\n",
		fleet.Moved(before, after), members, took.Round(100*time.Millisecond), pure, ideal, k, 0.9*ideal, 1.1*ideal)
}

// restart starts a stopped node again on its configuration.
func restart(t *testing.T, n *benchNode) *benchNode {
	t.Helper()
	return runNode(t, n.name, n.path, n.dns)
}

// runNode runs an lbdnsd on the configuration at path, its members
// checked by real TCP connects.
func runNode(t *testing.T, name, path, dnsAddr string) *benchNode {
	t.Helper()
	build := probes.NewBuilder(probes.Deps{}).Build
	d, err := daemon.New(daemon.Options{ConfigPath: path, TickInterval: 100 * time.Millisecond,
		Checkers: func(chk *configs.Check, a netip.AddrPort) (check.Checker, error) { return build(chk, a) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	bn := &benchNode{name: name, path: path, d: d, dns: dnsAddr, cancel: cancel, done: make(chan error, 1)}
	go func() { bn.done <- d.Run(ctx) }()
	t.Cleanup(bn.stop)
	return bn
}
