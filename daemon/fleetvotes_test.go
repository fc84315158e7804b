package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/fleet/etcdfleet"
	"lbdns/fleet/node"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/monitor"
	"lbdns/probes"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/poll"
	"lbdns/testkit/promgolden"
	"lbdns/testkit/tcpsink"
)

// votesConfig is a GSLB-only node of a fleet: pool www of members www-1
// (192.0.2.80, probed at 127.0.0.2) and www-2 (192.0.2.81, probed at
// 127.0.0.3), judged by a TCP connect to port %[2]d; the name
// n0.gslb.example answers every healthy member; the responder listens
// on 127.0.0.1:%[3]d. %[1]s is the node's directory; %[4]s its [fleet].
const votesConfig = `
[daemon]
state_dir = "%[1]s/state"
control_socket = "%[1]s/ctl.sock"
status_listen = "127.0.0.1:0"

[check.web]
kind = "tcp"
interval = "100ms"
timeout = "50ms"
rise = 1
fall = 2

[check.web.tcp]
port = %[2]d

[[gslb.pool]]
name = "www"
monitors = ["web"]
algorithm = "all"

[[gslb.pool.member]]
name = "www-1"
address = "192.0.2.80"
probe_address = "127.0.0.2"

[[gslb.pool.member]]
name = "www-2"
address = "192.0.2.81"
probe_address = "127.0.0.3"

[[gslb.zone]]
name = "gslb.example"
ns = ["ns1.gslb.example."]

[[gslb.name]]
name = "n0.gslb.example"

[[gslb.name.policy]]
pool = "www"

[gslb.server]
listen = ["127.0.0.1:%[3]d"]
%[4]s`

// votesFleetTable is the [fleet] of votesConfig: endpoints, name, CA, cert,
// key, k, canaries.
const votesFleetTable = `
[fleet]
endpoints = [%s]
name = %q
location = "dc-%[2]s"
prefix = "/lbdns-test/"
lease_ttl = "2s"
dial_timeout = "2s"
canary_interval = "100ms"
vote_hold = "5s"
ca_file = %q
cert_file = %q
key_file = %q
probers_per_member = %d
canaries = [%s]
`

// votesNode is one daemon of the fleet.
type votesNode struct {
	name string
	h    *harness
	dns  string // the responder's address
}

// votesNodeOpts say how one node differs.
type votesNodeOpts struct {
	probePort int      // the members' port it probes
	canaries  []string // its [fleet] canaries
	extra     string   // more keys of its [fleet]
}

// startVotesNode starts node name of the fleet on c, probing members on
// port, k probers per member.
func startVotesNode(t *testing.T, c *etcdtest.Cluster, cr etcdtest.Creds, name string, k int, o votesNodeOpts) *votesNode {
	t.Helper()
	eps := make([]string, len(c.Endpoints))
	for i, e := range c.Endpoints {
		eps[i] = fmt.Sprintf("%q", e)
	}
	var can []string
	for _, a := range o.canaries {
		can = append(can, fmt.Sprintf("%q", a))
	}
	dir := t.TempDir()
	port := freePort(t)
	f := fmt.Sprintf(votesFleetTable, strings.Join(eps, ", "), name, cr.CAFile, cr.CertFile, cr.KeyFile, k, strings.Join(can, ", ")) + o.extra
	path := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(votesConfig, dir, o.probePort, port, f)), 0o644); err != nil {
		t.Fatal(err)
	}
	build := probes.NewBuilder(probes.Deps{}).Build // real TCP connects
	d, err := New(Options{ConfigPath: path, Checkers: func(chk *configs.Check, a netip.AddrPort) (check.Checker, error) { return build(chk, a) },
		Identify: noIdentify, TickInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &votesNode{name: name, h: run(t, d, nil, nil), dns: fmt.Sprintf("127.0.0.1:%d", port)}
}

// votesFleet starts an etcd cluster with the nodes' user, and the two
// members www-1 (returned) and www-2 on a free port.
func votesFleet(t *testing.T) (*etcdtest.Cluster, etcdtest.Creds, int, *tcpsink.Sink) {
	t.Helper()
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	m1 := tcpsink.ListenT(t, fmt.Sprintf("127.0.0.2:%d", port))
	tcpsink.ListenT(t, fmt.Sprintf("127.0.0.3:%d", port))
	return c, cr, port, m1
}

// deadPort returns a loopback port nothing listens on.
func deadPort(t *testing.T) int { return freePort(t) }

// answersEverywhere waits until every node answers n0.gslb.example with
// want.
func answersEverywhere(t *testing.T, nodes []*votesNode, want ...string) {
	t.Helper()
	for _, n := range nodes {
		poll.Until(t, 15*time.Second, n.name+" to answer "+fmt.Sprint(want), func() (bool, string) {
			got := askA(t, n.dns, "n0.gslb.example.")
			return slices.Equal(got, want), fmt.Sprint(got)
		})
	}
}

// fleetOf reads node n's /v1/fleet.
func fleetOf(t *testing.T, n *votesNode) *control.FleetStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // the view's read fails when etcd is gone
	defer cancel()
	st, err := n.h.d.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// probed returns the GSLB members node n's monitor probes.
func probed(n *votesNode) []string {
	var out []string
	for k := range n.h.d.Monitor().Status() {
		if k.Kind == gslb.MonitorKind {
			out = append(out, k.Member)
		}
	}
	slices.Sort(out)
	return out
}

// TestFleetVotesMemberDeath runs three daemons on one etcd, two probers
// per member: each member is probed by two nodes only, every node
// answers from the fleet's verdicts, and a member's death makes every
// node stop answering it, also those that do not probe it; lbctl gslb
// members (the status) shows the votes by prober and location. When a
// node leaves, its members move to the nodes left, which then probe
// both.
func TestFleetVotesMemberDeath(t *testing.T) {
	c, cr, port, m1 := votesFleet(t)
	var nodes []*votesNode
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, startVotesNode(t, c, cr, name, 2, votesNodeOpts{probePort: port}))
	}
	answersEverywhere(t, nodes, "192.0.2.80", "192.0.2.81")
	poll.Until(t, 15*time.Second, "each member probed by two nodes, all verdicts the fleet's", func() (bool, string) {
		count := map[string]int{}
		var got []string
		for _, n := range nodes {
			st := fleetOf(t, n)
			if st.Verdicts != "fleet" || len(st.Probers) != 3 {
				return false, fmt.Sprintf("%s: %+v", n.name, st)
			}
			for _, m := range probed(n) {
				count[m]++
			}
			got = append(got, fmt.Sprintf("%s probes %v", n.name, probed(n)))
		}
		return count["www-1"] == 2 && count["www-2"] == 2, fmt.Sprint(got)
	})

	m1.Down()
	answersEverywhere(t, nodes, "192.0.2.81")
	for _, n := range nodes {
		st, err := n.h.d.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		w1 := st.GSLB[0].Members[0]
		f := w1.Fleet
		if w1.Name != "www-1" || w1.State != "down" || f == nil || f.Source != "fleet" || f.Verdict != "down" || len(f.Probers) != 2 || f.Quorum != 2 {
			t.Fatalf("%s: www-1 %+v, fleet %+v: want down by the fleet, two probers", n.name, w1, f)
		}
		for _, v := range f.Votes {
			if v.Up || v.Location != "dc-"+v.Prober {
				t.Errorf("%s: vote %+v, want down from its prober's location", n.name, v)
			}
		}
	}
	checkVotesMetrics(t, nodes[0].h.d)
	if err := m1.Up(); err != nil {
		t.Fatal(err)
	}
	answersEverywhere(t, nodes, "192.0.2.80", "192.0.2.81")

	nodes[2].h.stop() // c leaves: its lease is revoked
	left := nodes[:2]
	poll.Until(t, 15*time.Second, "a and b to probe both members", func() (bool, string) {
		got := fmt.Sprint(probed(left[0]), probed(left[1]))
		return got == "[www-1 www-2] [www-1 www-2]", got
	})
	answersEverywhere(t, left, "192.0.2.80", "192.0.2.81")
}

// TestFleetVotesCutOffProber: two probers of three cannot reach the
// members (they probe a port nothing listens on) and most of their
// canaries fail: they withdraw, leave the live probers, write no vote,
// and no node stops answering a member; had they voted, the members
// would be down two votes to one.
func TestFleetVotesCutOffProber(t *testing.T) {
	c, cr, port, _ := votesFleet(t)
	dead := []string{fmt.Sprintf("127.0.0.1:%d", deadPort(t)), fmt.Sprintf("127.0.0.1:%d", deadPort(t)), fmt.Sprintf("127.0.0.1:%d", deadPort(t))}
	blind := votesNodeOpts{probePort: deadPort(t), canaries: dead}
	nodes := []*votesNode{
		startVotesNode(t, c, cr, "a", 3, votesNodeOpts{probePort: port}),
		startVotesNode(t, c, cr, "b", 3, blind),
		startVotesNode(t, c, cr, "c", 3, blind),
	}
	poll.Until(t, 20*time.Second, "b and c withdrawn, a the only prober", func() (bool, string) {
		var got []string
		for _, n := range nodes {
			st := fleetOf(t, n)
			got = append(got, fmt.Sprintf("%s: verdicts %s withdrawn %v probers %v", n.name, st.Verdicts, st.Withdrawn, st.Probers))
		}
		want := []string{"a: verdicts fleet withdrawn false probers [a]", "b: verdicts fleet withdrawn true probers [a]", "c: verdicts fleet withdrawn true probers [a]"}
		return slices.Equal(got, want), fmt.Sprint(got)
	})
	answersEverywhere(t, nodes, "192.0.2.80", "192.0.2.81")
	for range 20 { // for two seconds, no node drops a member
		for _, n := range nodes {
			if got := askA(t, n.dns, "n0.gslb.example."); !slices.Equal(got, []string{"192.0.2.80", "192.0.2.81"}) {
				t.Fatalf("%s answers %v, want both members", n.name, got)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range nodes[1:] {
		if st := fleetOf(t, n); st.VoteWrites != 0 {
			t.Errorf("%s wrote %d votes; a cut-off prober writes none", n.name, st.VoteWrites)
		}
	}
	votes, err := etcdfleet.Votes(context.Background(), c.Root(), "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	for m, vs := range votes {
		for _, v := range vs {
			if v.Prober != "a" || !v.Up {
				t.Errorf("vote on %s: %+v, want a's up votes only", m, v)
			}
		}
	}
}

// ownJudged reports whether node n's own monitors judged every member.
func ownJudged(n *votesNode) bool {
	for k, ts := range n.h.d.Monitor().Status() {
		if k.Kind == gslb.MonitorKind && ts.Health.State == health.Unknown {
			return false
		}
	}
	return true
}

// TestFleetVotesOwnProbes: with etcd gone for longer than the lease TTL
// every node judges the members from its own probes, probing all of
// them, and says so, without losing a member from its answers while the
// first probes of the members it did not probe run; a member's death
// then still makes every node stop answering it; when etcd is back the fleet's verdicts are in force
// again and each member is probed by its one prober again.
func TestFleetVotesOwnProbes(t *testing.T) {
	c, cr, port, m1 := votesFleet(t)
	nodes := []*votesNode{
		startVotesNode(t, c, cr, "a", 1, votesNodeOpts{probePort: port}),
		startVotesNode(t, c, cr, "b", 1, votesNodeOpts{probePort: port}),
	}
	answersEverywhere(t, nodes, "192.0.2.80", "192.0.2.81")
	sources := func(want string, probes int) {
		t.Helper()
		poll.Until(t, 20*time.Second, fmt.Sprintf("verdicts from %s, %d member probes in all", want, probes), func() (bool, string) {
			var got []string
			n := 0
			for _, x := range nodes {
				st := fleetOf(t, x)
				got = append(got, x.name+": "+st.Verdicts+" ("+st.VerdictsWhy+") probes "+fmt.Sprint(probed(x)))
				if st.Verdicts != want {
					return false, fmt.Sprint(got)
				}
				n += len(probed(x))
			}
			return n == probes, fmt.Sprint(got)
		})
	}
	sources("fleet", 2)
	for i := range 3 {
		c.StopMember(i)
	}
	// Across the switch to its own probes, no node loses a member from
	// its answers while the first probes of the members it did not
	// probe run: it keeps their last fleet verdict until then.
	for deadline := time.Now().Add(20 * time.Second); ; {
		switched := true
		for _, n := range nodes {
			if got := askA(t, n.dns, "n0.gslb.example."); !slices.Equal(got, []string{"192.0.2.80", "192.0.2.81"}) {
				t.Fatalf("%s answers %v while judging from its own probes begins, want both members", n.name, got)
			}
			st := fleetOf(t, n)
			switched = switched && st.Verdicts == "own probes" && len(probed(n)) == 2 && ownJudged(n)
		}
		if switched || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	sources("own probes", 4)
	m1.Down()
	answersEverywhere(t, nodes, "192.0.2.81")
	if err := m1.Up(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.StartMember(i); err != nil {
			t.Fatal(err)
		}
	}
	sources("fleet", 2)
	answersEverywhere(t, nodes, "192.0.2.80", "192.0.2.81")
}

// fleetFamilies gathers the lbdns_fleet_ families of a registry.
type fleetFamilies struct{ g prometheus.Gatherer }

func (f fleetFamilies) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := f.g.Gather()
	var out []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "lbdns_fleet_") {
			out = append(out, mf)
		}
	}
	return out, err
}

// checkVotesMetrics checks the fleet's metric families against the
// golden, and their values with www-1 down by the fleet: one member up,
// one down, three live probers, none withdrawn, the fleet's verdicts.
func checkVotesMetrics(t *testing.T, d *Daemon) {
	t.Helper()
	promgolden.Check(t, "the daemon's fleet", promgolden.Lines(t, fleetFamilies{d.Registry()}))
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{"lbdns_fleet_member_verdicts{up}": 1, "lbdns_fleet_member_verdicts{down}": 1, "lbdns_fleet_live_probers": 3,
		"lbdns_fleet_votes_withdrawn": 0, "lbdns_fleet_own_verdicts": 0, "lbdns_fleet_heartbeat_alive": 1} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if got["lbdns_fleet_vote_writes_total"] < 1 || got["lbdns_fleet_probed_members"] < 1 {
		t.Errorf("vote writes %v, probed members %v: want some", got["lbdns_fleet_vote_writes_total"], got["lbdns_fleet_probed_members"])
	}
}

// TestFleetVotesSharedCanary: three nodes that all advertise one
// canary address (a shared anycast address given as canary_address)
// each leave it out as their own, probe no canary, and say so: the
// fleet status warns that the nodes advertise the same canary and that
// this node probes no canary beyond itself (and so do the others), and
// the monitor runs no canary.
func TestFleetVotesSharedCanary(t *testing.T) {
	c, cr, port, _ := votesFleet(t)
	shared := votesNodeOpts{probePort: port, extra: "canary_address = \"198.51.100.53:53\"\n"}
	nodes := []*votesNode{
		startVotesNode(t, c, cr, "a", 3, shared),
		startVotesNode(t, c, cr, "b", 3, shared),
		startVotesNode(t, c, cr, "c", 3, shared),
	}
	answersEverywhere(t, nodes, "192.0.2.80", "192.0.2.81")
	for _, n := range nodes {
		var st *control.FleetStatus
		poll.Until(t, 15*time.Second, n.name+" to warn of the shared canary", func() (bool, string) {
			st = fleetOf(t, n)
			return len(st.Nodes) == 3 && len(st.CanaryWarnings) == 4, fmt.Sprintf("%+v", st)
		})
		none := func(who string) string {
			return who + " probes no canary beyond itself: it cannot tell it is cut off from the members, and votes them down if it is; configure [fleet] canaries or give the nodes unicast canary addresses"
		}
		want := []string{
			none("this node (" + n.name + ")"),
			"nodes a, b, c advertise the same canary 198.51.100.53:53 (a shared or anycast address): none of them probes it, each finds it its own; set [fleet] canary_address to each node's unicast address",
		}
		for _, o := range nodes {
			if o != n {
				want = append(want, none(o.name))
			}
		}
		if !slices.Equal(st.CanaryWarnings, want) {
			t.Errorf("%s: warnings\n%s\nwant\n%s", n.name, strings.Join(st.CanaryWarnings, "\n"), strings.Join(want, "\n"))
		}
		if st.Canaries != 0 || st.CanaryAddress != "198.51.100.53:53" || !slices.Equal(st.CanariesOwn, []string{"198.51.100.53:53"}) {
			t.Errorf("%s: canaries %d, advertised %q, own %v; want 0, the shared address, and it left out", n.name, st.Canaries, st.CanaryAddress, st.CanariesOwn)
		}
		n.h.d.Monitor().EachKind(node.CanaryKind, func(ts monitor.TargetStatus) { t.Errorf("%s probes canary %s, want none", n.name, ts.Key.Member) })
	}
}
