package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/netns"
	"lbdns/testkit/poll"
)

// The fleet lab: a three-member etcd cluster in a network namespace of
// its own, lbdnsd nodes each in its own namespace, and GSLB members (TCP
// listeners) in theirs; the root namespace routes between them (IPv4
// forwarding on the root ends of their links only). Every node answers
// www.g.test. (static set 198.51.100.9) from the pool of every member,
// and api.g.test. from the same pool without a static set.
//
// A scenario is a function over the lab, run in order by TestFleetNetns;
// one more is one more function and one more line there.

const (
	// fleetTTL is the nodes' lease TTL.
	fleetTTL = 2 * time.Second
	// fleetPrefix is the fleet's key prefix.
	fleetPrefix = "/lbdns-e2e/"
	// staticAddr is www.g.test.'s static set.
	staticAddr = "198.51.100.9"
)

// fleetLab is the lab of one test.
type fleetLab struct {
	t      *testing.T
	dir    string
	etcdNS *netns.Host
	etcd   *etcdtest.Cluster
	creds  etcdtest.Creds
	// members are the GSLB members' hosts, by name, in the order made.
	members     map[string]*netns.Host
	memberNames []string
	listeners   map[string]*tcpMember
	nodes       map[string]*fleetNode
	// noCanaries leaves [fleet] canaries out of the nodes' configuration.
	noCanaries bool
}

// fleetNode is one lbdnsd of the lab.
type fleetNode struct {
	lab      *fleetLab
	name     string
	location string
	host     *netns.Host
	dir      string
	cfgPath  string
	socket   string
	d        *lbdnsd
	// Variants of the configuration and the start (the fault lab's):
	// listen is the GSLB listen address ("0.0.0.0:53" when ""), status
	// the status endpoint ("" off), extra more tables at the end;
	// noCanaries leaves [fleet] canaries out; nofile starts lbdnsd under
	// prlimit --nofile (0: the inherited limit).
	listen, status, extra string
	noCanaries            bool
	nofile                int
}

// newFleetLab starts etcd in its namespace and the GSLB members named;
// it skips the test without root, namespaces or etcd (fails it with
// LBDNS_REQUIRE_NETNS=1 or LBDNS_REQUIRE_ETCD=1).
func newFleetLab(t *testing.T, members ...string) *fleetLab {
	netns.Require(t)
	if _, err := etcdtest.Find(); err != nil {
		if etcdtest.Required() {
			t.Fatalf("a real etcd is required (LBDNS_REQUIRE_ETCD=1): %v", err)
		}
		t.Skipf("no etcd: %v", err)
	}
	l := &fleetLab{t: t, dir: t.TempDir(), members: map[string]*netns.Host{}, listeners: map[string]*tcpMember{}, nodes: map[string]*fleetNode{}}
	l.etcdNS = netns.New(t, "fleet-etcd")
	l.etcdNS.Forward()
	// The members run in the namespace by a plain command: etcdtest waits
	// for each member itself, also for one it restarts (StartMember), so
	// the namespace's Command, which kills and waits for what is left at
	// the test's end, would wait for it a second time.
	inNS := func(name string, args ...string) *exec.Cmd {
		return exec.Command("ip", append([]string{"netns", "exec", l.etcdNS.Name(), name}, args...)...)
	}
	c, err := etcdtest.StartWith(l.dir, 3, etcdtest.Options{Addr: l.etcdNS.AddrV4(), Command: inNS})
	if err != nil {
		t.Fatalf("etcd in %s: %v", l.etcdNS.Name(), err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Log(c.Logs())
		}
	})
	l.etcd = c
	if l.creds, err = c.User("lbdns", fleetPrefix); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		h := netns.New(t, "fleet-"+m)
		h.Forward()
		l.listeners[m] = newTCPMember(t, h)
		l.members[m] = h
		l.memberNames = append(l.memberNames, m)
	}
	return l
}

// memberAddrs returns the members' addresses, sorted as dig's answers.
func (l *fleetLab) memberAddrs() []string {
	var out []string
	for _, h := range l.members {
		out = append(out, h.AddrV4().String())
	}
	slices.Sort(out)
	return out
}

// memberDown closes member m's listener: its TCP check fails.
func (l *fleetLab) memberDown(m string) { l.listeners[m].close() }

// memberUp opens member m's listener again.
func (l *fleetLab) memberUp(m string) { l.listeners[m].open() }

// memberAddrsBut returns the members' addresses without those of skip.
func (l *fleetLab) memberAddrsBut(skip ...string) []string {
	var out []string
	for name, h := range l.members {
		if !slices.Contains(skip, name) {
			out = append(out, h.AddrV4().String())
		}
	}
	slices.Sort(out)
	return out
}

// cutFromMembers cuts node n off from every member (nftables in its
// namespace), not from etcd; the returned function ends the cut. With
// the fleet's verdicts, a prober cut off this way must flip no verdict
// on any node: that scenario calls it.
func (l *fleetLab) cutFromMembers(n *fleetNode) (restore func()) {
	for _, h := range l.members {
		n.host.DropFrom(h.AddrV4())
	}
	return func() {
		for _, h := range l.members {
			n.host.UndropFrom(h.AddrV4())
		}
	}
}

// config is node n's configuration: its [daemon] and [fleet], the rest
// the same for every node (so the same configuration hash and serial).
func (n *fleetNode) config(cr etcdtest.Creds) string {
	l := n.lab
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = %q\n", filepath.Join(n.dir, "state"), n.socket, n.status)
	eps := make([]string, len(l.etcd.Endpoints))
	for i, e := range l.etcd.Endpoints {
		eps[i] = fmt.Sprintf("%q", e)
	}
	// The canaries, known-good for every node: the etcd members' ports.
	var canaries []string
	for _, e := range l.etcd.Endpoints {
		if !l.noCanaries {
			canaries = append(canaries, fmt.Sprintf("%q", strings.TrimPrefix(e, "https://")))
		}
	}
	if n.noCanaries {
		canaries = nil
	}
	fmt.Fprintf(&b, "\n[fleet]\nendpoints = [%s]\nname = %q\nlocation = %q\nprefix = %q\nlease_ttl = %q\ndial_timeout = \"2s\"\nca_file = %q\ncert_file = %q\nkey_file = %q\ncanaries = [%s]\n",
		strings.Join(eps, ", "), n.name, n.location, fleetPrefix, fleetTTL.String(), cr.CAFile, cr.CertFile, cr.KeyFile, strings.Join(canaries, ", "))
	fmt.Fprintf(&b, "\n[check.tcp]\nkind = \"tcp\"\ninterval = \"200ms\"\ntimeout = \"150ms\"\nrise = 1\nfall = 1\n\n[check.tcp.tcp]\nport = %d\n", gslbTCPPort)
	b.WriteString("\n[[gslb.pool]]\nname = \"site\"\nmonitors = [\"tcp\"]\nalgorithm = \"all\"\n")
	for _, m := range l.memberNames {
		fmt.Fprintf(&b, "\n[[gslb.pool.member]]\nname = %q\naddress = %q\n", m, l.members[m].AddrV4())
	}
	b.WriteString("\n[[gslb.zone]]\nname = \"g.test\"\nns = [\"ns1.g.test.\"]\n")
	fmt.Fprintf(&b, "\n[[gslb.name]]\nname = \"www.g.test\"\nstatic = [%q]\n\n[[gslb.name.policy]]\npool = \"site\"\n", staticAddr)
	b.WriteString("\n[[gslb.name]]\nname = \"api.g.test\"\n\n[[gslb.name.policy]]\npool = \"site\"\n")
	listen := n.listen
	if listen == "" {
		listen = "0.0.0.0:53"
	}
	fmt.Fprintf(&b, "\n[gslb.server]\nlisten = [%q]\n", listen)
	b.WriteString(n.extra)
	return b.String()
}

// newNode makes node name's namespace and configuration (with the
// lab's certificate), without starting it.
func (l *fleetLab) newNode(name, location string) *fleetNode {
	n := &fleetNode{lab: l, name: name, location: location, dir: filepath.Join(l.dir, name)}
	n.host = netns.New(l.t, "fleet-node-"+name)
	n.host.Forward()
	n.cfgPath, n.socket = filepath.Join(n.dir, "lbdns.toml"), filepath.Join(n.dir, "ctl.sock")
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		l.t.Fatal(err)
	}
	n.write(l.creds)
	return n
}

// write writes n's configuration with the certificate of cr.
func (n *fleetNode) write(cr etcdtest.Creds) {
	if err := os.WriteFile(n.cfgPath, []byte(n.config(cr)), 0o644); err != nil {
		n.lab.t.Fatal(err)
	}
}

// addNode makes node name and starts it, ready and warm.
func (l *fleetLab) addNode(name, location string) *fleetNode {
	n := l.newNode(name, location)
	l.nodes[name] = n
	n.start()
	n.d.waitReady()
	return n
}

// start starts n's lbdnsd in its namespace.
func (n *fleetNode) start() {
	args := []string{binaries.lbdnsd, "-config", n.cfgPath, "-log-format", "json"}
	if n.nofile > 0 {
		args = append([]string{"prlimit", fmt.Sprintf("--nofile=%d", n.nofile), "--"}, args...)
	}
	n.d = spawnLbdnsd(n.lab.t, n.socket, n.host.Command(args[0], args[1:]...))
}

// lbctl runs lbctl against n's control socket.
func (n *fleetNode) lbctl(args ...string) result {
	return run(n.lab.t, binaries.lbctl, append([]string{"-socket", n.socket}, args...)...)
}

// mustLbctl is lbctl failing the test unless it exits 0.
func (n *fleetNode) mustLbctl(args ...string) result {
	n.lab.t.Helper()
	r := n.lbctl(args...)
	if r.code != 0 {
		n.lab.t.Fatalf("%s: lbctl %q: %s", n.name, args, r)
	}
	return r
}

// fleetStatus is lbctl fleet status -o json on n.
func (n *fleetNode) fleetStatus() control.FleetStatus {
	n.lab.t.Helper()
	var st control.FleetStatus
	if err := json.Unmarshal([]byte(n.mustLbctl("fleet", "status", "-o", "json").stdout), &st); err != nil {
		n.lab.t.Fatalf("%s: fleet status: %v", n.name, err)
	}
	return st
}

// dig asks n's responder for qname A with dig.
func (n *fleetNode) dig(qname string) (digAnswer, error) {
	return digA(n.lab.t, netip.AddrPortFrom(n.host.AddrV4(), 53), qname, "+norecurse")
}

// waitAnswer waits until n answers qname with want (sorted addresses).
func (n *fleetNode) waitAnswer(qname string, want ...string) {
	n.lab.t.Helper()
	slices.Sort(want)
	var last digAnswer
	poll.Until(n.lab.t, 15*time.Second, fmt.Sprintf("%s to answer %s %v", n.name, qname, want), func() (bool, string) {
		a, err := n.dig(qname)
		if err != nil {
			return false, err.Error()
		}
		last = a
		return slices.Equal(a.addrs, want), last.out
	})
}

// waitFleet waits until n's fleet status satisfies ok and returns it.
func (n *fleetNode) waitFleet(what string, budget time.Duration, ok func(control.FleetStatus) bool) control.FleetStatus {
	n.lab.t.Helper()
	var st control.FleetStatus
	poll.Until(n.lab.t, budget, n.name+": "+what, func() (bool, string) {
		st = n.fleetStatus()
		b, _ := json.Marshal(st)
		return ok(st), string(b)
	})
	return st
}

// names returns the names of the nodes of st.
func names(st control.FleetStatus) []string {
	var out []string
	for _, x := range st.Nodes {
		out = append(out, x.Name)
	}
	return out
}

// converged: every node of st, and exactly want, has applied the
// revision in force, with no odd one out.
func converged(want ...string) func(control.FleetStatus) bool {
	return func(st control.FleetStatus) bool {
		if st.Error != "" || !slices.Equal(names(st), want) {
			return false
		}
		for _, x := range st.Nodes {
			if x.IntentRevision != x.CurrentRevision || len(x.Odd) > 0 {
				return false
			}
		}
		return true
	}
}

// TestFleetNetns runs the fleet's scenarios over one lab of three nodes
// (a, b, c in three locations) and two members.
func TestFleetNetns(t *testing.T) {
	l := newFleetLab(t, "m1", "m2")
	a, b, c := l.addNode("a", "dc1"), l.addNode("b", "dc2"), l.addNode("c", "dc3")
	for _, n := range []*fleetNode{a, b, c} {
		n.waitAnswer("www.g.test", l.memberAddrs()...)
	}
	a.waitFleet("three nodes, converged", 10*time.Second, converged("a", "b", "c"))

	scenarioMemberDeath(l, "m1", a, b, c)
	scenarioProberCutOff(l, c, a, b)
	scenarioEmergency(l, a, b, c)
	scenarioStaleWrite(l, a, b, c)
	scenarioCutOff(l, b, a)
	scenarioKill9(l, c, a)
	scenarioWrongCertificate(l)
}

// scenarioEmergency: intelligent resolution switched off on a is off on
// the others (they answer the static set), and switched on from b it is
// on again everywhere.
func scenarioEmergency(l *fleetLab, a *fleetNode, others ...*fleetNode) {
	l.t.Log("scenario: an emergency switch set on one node is in force on every node")
	a.mustLbctl("gslb", "off", "--name", "www.g.test", "--reason", "fleet e2e")
	for _, n := range others {
		n.waitAnswer("www.g.test", staticAddr)
	}
	a.waitAnswer("www.g.test", staticAddr)
	st := others[len(others)-1].waitFleet("every node at the switch's revision", 10*time.Second, converged("a", "b", "c"))
	serial := st.Nodes[0].Serial
	for _, x := range st.Nodes {
		if x.Serial != serial {
			l.t.Errorf("serials differ with the same configuration and intent: %+v", st.Nodes)
		}
	}
	others[0].mustLbctl("gslb", "on", "--name", "www.g.test", "--reason", "fleet e2e done")
	a.waitAnswer("www.g.test", l.memberAddrs()...)
	for _, n := range others {
		n.waitAnswer("www.g.test", l.memberAddrs()...)
	}
}

// scenarioMemberDeath: member m's death makes every node stop answering
// it, and its return brings it back everywhere.
func scenarioMemberDeath(l *fleetLab, m string, nodes ...*fleetNode) {
	l.t.Log("scenario: a member's death makes every node stop answering it")
	l.memberDown(m)
	for _, n := range nodes {
		n.waitAnswer("www.g.test", l.memberAddrsBut(m)...)
	}
	l.memberUp(m)
	for _, n := range nodes {
		n.waitAnswer("www.g.test", l.memberAddrs()...)
	}
}

// scenarioProberCutOff: prober n cut off from the members (nftables in
// its namespace), not from etcd nor from its canaries, votes them down
// and is outvoted: no node's answer changes, n's own included, while
// another node sees n's down votes; when the cut ends n votes them up
// again.
func scenarioProberCutOff(l *fleetLab, n *fleetNode, others ...*fleetNode) {
	l.t.Log("scenario: a prober cut off from the members but not from etcd flips no verdict")
	restore := l.cutFromMembers(n)
	cut := true
	defer func() {
		if cut {
			restore()
		}
	}()
	others[0].waitVotes(n.name, false)
	for range 10 { // 2 s more of answers, every node alike
		for _, x := range append([]*fleetNode{n}, others...) {
			a, err := x.dig("www.g.test")
			if err != nil || !slices.Equal(a.addrs, l.memberAddrs()) {
				l.t.Fatalf("%s answers %v (%v) while %s alone is cut off from the members, want %v", x.name, a.addrs, err, n.name, l.memberAddrs())
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	restore()
	cut = false
	others[0].waitVotes(n.name, true)
}

// waitVotes waits until node x's lbctl gslb members -o json shows
// prober's vote on every member as up (or down).
func (x *fleetNode) waitVotes(prober string, up bool) {
	x.lab.t.Helper()
	poll.Until(x.lab.t, 15*time.Second, fmt.Sprintf("%s: %s's votes up=%v on every member", x.name, prober, up), func() (bool, string) {
		var pools []control.GSLBPool
		out := x.mustLbctl("gslb", "members", "-o", "json").stdout
		if err := json.Unmarshal([]byte(out), &pools); err != nil || len(pools) != 1 {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		for _, m := range pools[0].Members {
			if m.Fleet == nil || !slices.ContainsFunc(m.Fleet.Votes, func(v control.GSLBVote) bool { return v.Prober == prober && v.Up == up }) {
				return false, out
			}
		}
		return true, ""
	})
}

// scenarioStaleWrite: two operators change the intent at once on a and
// b (both daemons are stopped while the requests are queued, then
// continued together, so that both decide on the same revision): a
// write decided on a revision the other replaced is refused (exit 1, "
// changed meanwhile") and nothing of it is in force; a write decided
// after the other's keeps both. Each round leaves in force exactly the
// writes that were accepted; the rounds go on until one was refused (at
// most 10).
func scenarioStaleWrite(l *fleetLab, a, b, c *fleetNode) {
	l.t.Log("scenario: a stale write is refused")
	for round := 1; round <= 10; round++ {
		c.waitFleet("converged before the round", 10*time.Second, converged("a", "b", "c"))
		for _, n := range []*fleetNode{a, b} {
			n.d.signal(syscall.SIGSTOP)
		}
		ra, rb := make(chan result, 1), make(chan result, 1)
		go func() { ra <- a.lbctl("gslb", "ttl", "300", "--name", "www.g.test", "--reason", "round a") }()
		go func() { rb <- b.lbctl("gslb", "off", "--name", "api.g.test", "--reason", "round b") }()
		time.Sleep(200 * time.Millisecond) // both requests queued on the stopped daemons' sockets
		for _, n := range []*fleetNode{a, b} {
			n.d.signal(syscall.SIGCONT)
		}
		resA, resB := <-ra, <-rb
		refused := 0
		for _, r := range []result{resA, resB} {
			switch {
			case r.code == 0:
			case r.code == 1 && strings.Contains(r.stderr, "changed meanwhile"):
				refused++
				l.t.Logf("round %d: refused: %s", round, strings.TrimSpace(r.stderr))
			default:
				l.t.Fatalf("round %d: lbctl: %s", round, r)
			}
		}
		if refused == 2 {
			l.t.Fatalf("round %d: both writes refused:\n%s\n%s", round, resA, resB)
		}
		// In force on c: exactly the accepted writes.
		wantTTL, wantOff := resA.code == 0, resB.code == 0
		st := c.waitFleet("converged after the round", 10*time.Second, converged("a", "b", "c"))
		var got control.Status
		if err := json.Unmarshal([]byte(c.mustLbctl("status", "-o", "json").stdout), &got); err != nil {
			l.t.Fatal(err)
		}
		var ttl, off bool
		for _, g := range got.GSLBIntent {
			ttl = ttl || g.Kind == "ttl"
			off = off || g.Kind == "off"
		}
		if ttl != wantTTL || off != wantOff {
			l.t.Fatalf("round %d at revision %d: in force ttl %v off %v, want %v %v (a: %s; b: %s)", round, st.Nodes[0].CurrentRevision, ttl, off, wantTTL, wantOff, resA, resB)
		}
		a.mustLbctl("gslb", "on", "--reason", "round done")
		a.mustLbctl("gslb", "ttl", "--clear", "--reason", "round done")
		if refused == 1 {
			return
		}
	}
	l.t.Fatal("no write was refused in 10 rounds of two writes at once")
}

// scenarioCutOff: node n cut off from etcd (nftables in its namespace
// drops what etcd sends) keeps answering as it did, says so, refuses a
// change (exit 5) and leaves the others' fleet view with its lease;
// meanwhile other switches www off and the history is compacted; n,
// restarted while still cut off, starts from its local copy of the
// intent; when the cut ends it catches up whole: it answers the static
// set, at other's revision.
func scenarioCutOff(l *fleetLab, n, other *fleetNode) {
	l.t.Log("scenario: a node cut off from etcd keeps serving, says so, refuses writes and catches up after a compaction")
	etcdAddr := l.etcdNS.AddrV4()
	n.host.DropFrom(etcdAddr)
	cut := true
	defer func() {
		if cut {
			n.host.UndropFrom(etcdAddr)
		}
	}()
	st := n.waitFleet("etcd unreachable", 10*time.Second, func(st control.FleetStatus) bool { return st.Etcd != nil && !st.Etcd.Reachable })
	l.t.Logf("%s cut off: %+v", n.name, *st.Etcd)
	n.waitAnswer("www.g.test", l.memberAddrs()...) // still serving what it applied
	if r := n.mustLbctl("fleet", "status"); !strings.Contains(r.stdout, "ETCD UNREACHABLE since") {
		l.t.Errorf("lbctl fleet status on a node cut off from etcd does not say so:\n%s", r.stdout)
	}
	if !hasFleetEvent(n, "etcd unreachable") {
		l.t.Error("no fleet event for the loss of etcd")
	}
	r := n.lbctl("gslb", "off", "--name", "www.g.test", "--reason", "while cut off")
	if r.code != 5 || !strings.Contains(r.stderr, "etcd is unreachable") {
		l.t.Errorf("a change on a node cut off from etcd: %s, want exit 5 saying etcd is unreachable", r)
	}
	other.waitFleet(n.name+" gone from the view", fleetTTL+5*time.Second, func(st control.FleetStatus) bool { return !slices.Contains(names(st), n.name) })
	other.mustLbctl("gslb", "off", "--name", "www.g.test", "--reason", "during the cut")
	other.mustLbctl("gslb", "ttl", "120", "--name", "www.g.test", "--reason", "during the cut")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.etcd.Compact(ctx); err != nil {
		l.t.Fatal(err)
	}
	n.waitAnswer("www.g.test", l.memberAddrs()...) // the change did not reach it

	// Restarted while cut off, it starts from its local copy of the
	// intent and says so.
	n.d.stop()
	n.start()
	n.d.waitReady()
	st = n.waitFleet("restarted without etcd", 10*time.Second, func(st control.FleetStatus) bool { return st.Etcd != nil && !st.Etcd.Reachable })
	if st.Etcd.IntentSource != control.IntentFromLocalCopy {
		l.t.Errorf("%s restarted without etcd: %+v, want the intent from its local copy", n.name, *st.Etcd)
	}
	n.waitAnswer("www.g.test", l.memberAddrs()...)

	n.host.UndropFrom(etcdAddr)
	cut = false
	n.waitAnswer("www.g.test", staticAddr)
	n.waitFleet("etcd back, converged", 15*time.Second, func(st control.FleetStatus) bool {
		return st.Etcd != nil && st.Etcd.Reachable && converged("a", "b", "c")(st)
	})
	if !hasFleetEvent(n, "etcd reachable again") {
		l.t.Error("no fleet event for the return of etcd")
	}
	other.mustLbctl("gslb", "on", "--reason", "cut over")
	other.mustLbctl("gslb", "ttl", "--clear", "--reason", "cut over")
	n.waitAnswer("www.g.test", l.memberAddrs()...)
}

// hasFleetEvent reports whether n's lbctl events holds a fleet event
// whose message contains s.
func hasFleetEvent(n *fleetNode, s string) bool {
	for _, ev := range decodeEvents(n.lab.t, n.mustLbctl("-o", "json", "events").stdout) {
		if ev.Kind == control.EventFleet && strings.Contains(ev.Message, s) {
			return true
		}
	}
	return false
}

// scenarioKill9: a node killed with SIGKILL (its lease not revoked)
// leaves the fleet view within the lease TTL and a little.
func scenarioKill9(l *fleetLab, n, other *fleetNode) {
	l.t.Log("scenario: kill -9 of a node: its heartbeat expires within the lease TTL")
	before := other.fleetStatus()
	if !slices.Contains(names(before), n.name) {
		l.t.Fatalf("%s not in the view before the kill: %v", n.name, names(before))
	}
	if !hasEventAbout(other, "node "+n.name, "joined the fleet view") {
		l.t.Errorf("%s has no event of %s joining its fleet view (it started after)", other.name, n.name)
	}
	n.d.kill9()
	killed := time.Now()
	other.waitFleet(n.name+" gone after kill -9", fleetTTL+3*time.Second, func(st control.FleetStatus) bool { return !slices.Contains(names(st), n.name) })
	l.t.Logf("%s left the fleet view %v after kill -9 (lease TTL %v)", n.name, time.Since(killed).Round(100*time.Millisecond), fleetTTL)
	poll.Until(l.t, 5*time.Second, other.name+"'s event that "+n.name+" left the fleet view", func() (bool, string) {
		return hasEventAbout(other, "node "+n.name, "left the fleet view"), "no such event"
	})
}

// hasEventAbout reports whether n's events hold a fleet event on
// subject whose message holds s.
func hasEventAbout(n *fleetNode, subject, s string) bool {
	for _, ev := range decodeEvents(n.lab.t, n.mustLbctl("-o", "json", "events").stdout) {
		if ev.Kind == control.EventFleet && ev.Subject == subject && strings.Contains(ev.Message, s) {
			return true
		}
	}
	return false
}

// scenarioWrongCertificate: a node whose certificate etcd does not trust
// does not start, and says why.
func scenarioWrongCertificate(l *fleetLab) {
	l.t.Log("scenario: a node with a wrong certificate is refused with a clear error")
	other, err := etcdtest.NewCA(l.t.TempDir(), "other")
	if err != nil {
		l.t.Fatal(err)
	}
	cr := l.creds
	if cr.CertFile, cr.KeyFile, err = other.Issue("intruder", cr.User); err != nil {
		l.t.Fatal(err)
	}
	n := l.newNode("x", "dc9")
	n.write(cr)
	n.start()
	if code := n.d.waitExit(); code == 0 {
		l.t.Fatalf("lbdnsd with a certificate of another CA exited 0:\n%s", n.d.stderr)
	}
	if log := n.d.stderr.String(); !strings.Contains(log, "etcd refused the TLS connection") || !strings.Contains(log, "unknown certificate authority") {
		l.t.Errorf("lbdnsd with a certificate of another CA did not say why:\n%s", log)
	}
}
