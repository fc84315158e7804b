package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/testkit/netns"
)

// anycastAddr is the address every node of TestFleetNetnsAnycastCanaries
// holds on its loopback interface, as anycast LB hosts do.
const anycastAddr = "198.51.100.53"

// cutOutbound drops, in n's namespace, every connection n opens to the
// addresses to (nftables, conntrack state new): n's own probes and
// canaries fail, while the connections others open to n still work.
func cutOutbound(t *testing.T, n *fleetNode, to []string) (restore func()) {
	t.Helper()
	nft := func(rules string) {
		cmd := exec.Command("ip", "netns", "exec", n.host.Name(), "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: nft: %v: %s", n.name, err, out)
		}
	}
	nft(fmt.Sprintf("table inet lbdns_cut {\n\tchain output {\n\t\ttype filter hook output priority 0; policy accept;\n\t\tip daddr { %s } ct state new drop\n\t}\n}\n", strings.Join(to, ", ")))
	return func() { nft("delete table inet lbdns_cut\n") }
}

// TestFleetNetnsAnycastCanaries: three nodes that hold one anycast
// address and listen on every address, with no [fleet] canaries: each
// advertises its own unicast address as its canary (not the anycast
// one), probes the two others, and warns of nothing; two probers whose
// own connections to the members and the other nodes are cut withdraw
// their votes (most canaries fail) before they can vote a member down,
// and no node gives a wrong answer meanwhile.
func TestFleetNetnsAnycastCanaries(t *testing.T) {
	l := newFleetLab(t, "m1", "m2")
	l.noCanaries = true
	var nodes []*fleetNode
	for i, name := range []string{"a", "b", "c"} {
		n := l.newNode(name, fmt.Sprintf("dc%d", i+1))
		netns.IP(t, "-n", n.host.Name(), "addr", "add", anycastAddr+"/32", "dev", "lo")
		l.nodes[name] = n
		n.start()
		n.d.waitReady()
		nodes = append(nodes, n)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		n.waitAnswer("www.g.test", l.memberAddrs()...)
	}
	for _, n := range nodes {
		st := n.waitFleet("two canaries beyond itself, no warning", 15*time.Second, func(st control.FleetStatus) bool {
			return len(st.Nodes) == 3 && st.Canaries == 2 && len(st.CanaryWarnings) == 0
		})
		if want := n.host.AddrV4().String() + ":53"; st.CanaryAddress != want {
			t.Errorf("%s advertises canary %q, want its unicast %s", n.name, st.CanaryAddress, want)
		}
	}
	var to []string
	to = append(to, l.memberAddrs()...)
	to = append(to, a.host.AddrV4().String())
	for _, n := range []*fleetNode{b, c} {
		others := slices.Clone(to)
		for _, o := range []*fleetNode{b, c} {
			if o != n {
				others = append(others, o.host.AddrV4().String())
			}
		}
		restore := cutOutbound(t, n, others)
		defer restore()
	}
	wrong := 0
	check := func() {
		for _, n := range nodes {
			ans, err := n.dig("www.g.test")
			if err != nil || !slices.Equal(ans.addrs, l.memberAddrs()) {
				wrong++
				t.Errorf("%s answers %v (%v) while b and c are cut off, want %v", n.name, ans.addrs, err, l.memberAddrs())
			}
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		check()
		st := a.fleetStatus()
		if slices.Equal(st.Probers, []string{"a"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b and c not withdrawn within 15s: probers %v", st.Probers)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for range 15 { // 3 s more, b and c withdrawn
		check()
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("wrong answers while two of three probers were cut off: %d", wrong)
}
