package fleet

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func aps(ss ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddrPort(s)
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// TestChooseCanary: the canary a node advertises is an address of its
// own whatever its listen addresses: canary_address when set; a
// specific unshared listen address as is; for an anycast (announced)
// or VIP listen address or loopback, the responder's port on an own
// interface address only when the responder listens on every address,
// else the status endpoint; none when nothing of its own accepts.
func TestChooseCanary(t *testing.T) {
	ifs := addrs("127.0.0.1", "::1", "fe80::1", "198.51.100.53", "10.0.0.11", "2001:db8::11")
	for _, tc := range []struct {
		name string
		h    CanaryHost
		want string // "" for none
	}{
		{"configured wins", CanaryHost{Configured: netip.MustParseAddrPort("10.9.9.9:80"), Listen: aps("10.0.0.11:53"), Interfaces: ifs}, "10.9.9.9:80"},
		{"specific unshared listen", CanaryHost{Listen: aps("10.0.0.11:53"), Interfaces: ifs}, "10.0.0.11:53"},
		{"first specific unshared listen after a shared one", CanaryHost{Listen: aps("198.51.100.53:53", "10.0.0.11:5353"), Shared: addrs("198.51.100.53"), Interfaces: ifs}, "10.0.0.11:5353"},
		{"wildcard v4 listen: an own v4 interface address, not the anycast one", CanaryHost{Listen: aps("0.0.0.0:53"), Shared: addrs("198.51.100.53"), Interfaces: ifs}, "10.0.0.11:53"},
		{"wildcard v6 listen: an own v6 address first", CanaryHost{Listen: aps("[::]:53"), Shared: addrs("198.51.100.53"), Interfaces: ifs}, "[2001:db8::11]:53"},
		{"wildcard v6 listen, v4 interfaces only (dual stack)", CanaryHost{Listen: aps("[::]:53"), Interfaces: addrs("127.0.0.1", "10.0.0.11")}, "10.0.0.11:53"},
		{"wildcard listen skips a listen address on an interface", CanaryHost{Listen: aps("198.51.100.53:53", "0.0.0.0:5353"), Interfaces: addrs("198.51.100.53", "10.0.0.11")}, "198.51.100.53:53"},
		{"shared listen, wildcard listen later", CanaryHost{Listen: aps("198.51.100.53:53", "0.0.0.0:5353"), Shared: addrs("198.51.100.53"), Interfaces: ifs}, "10.0.0.11:5353"},
		{"shared listen only: the status endpoint", CanaryHost{Listen: aps("198.51.100.53:53"), Shared: addrs("198.51.100.53"), Status: netip.MustParseAddrPort("10.0.0.11:9353"), Interfaces: ifs}, "10.0.0.11:9353"},
		{"shared listen, status on every address", CanaryHost{Listen: aps("198.51.100.53:53"), Shared: addrs("198.51.100.53"), Status: netip.MustParseAddrPort("0.0.0.0:9353"), Interfaces: ifs}, "10.0.0.11:9353"},
		{"shared listen, loopback status: none", CanaryHost{Listen: aps("198.51.100.53:53"), Shared: addrs("198.51.100.53"), Status: netip.MustParseAddrPort("127.0.0.1:9353"), Interfaces: ifs}, ""},
		{"loopback listen: none", CanaryHost{Listen: aps("127.0.0.1:53"), Interfaces: ifs}, ""},
		{"VIP listen (shared) only", CanaryHost{Listen: aps("192.0.2.53:53"), Shared: addrs("192.0.2.53"), Interfaces: addrs("192.0.2.53")}, ""},
		{"wildcard listen, no own interface address", CanaryHost{Listen: aps("0.0.0.0:53"), Shared: addrs("198.51.100.53"), Interfaces: addrs("127.0.0.1", "198.51.100.53", "fe80::1")}, ""},
		{"port 0 (not bound yet)", CanaryHost{Listen: aps("10.0.0.11:0", "0.0.0.0:0"), Interfaces: ifs}, ""},
		{"IPv4-mapped shared", CanaryHost{Listen: aps("[::ffff:198.51.100.53]:53"), Shared: addrs("198.51.100.53"), Interfaces: ifs}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := ChooseCanary(tc.h)
			if tc.want == "" {
				if got.IsValid() {
					t.Fatalf("canary %v (%s), want none", got, why)
				}
				if !strings.Contains(why, "canary_address") {
					t.Errorf("why %q does not name canary_address", why)
				}
				return
			}
			if got.String() != tc.want {
				t.Errorf("canary %v (%s), want %s", got, why, tc.want)
			}
		})
	}
}

// TestCanariesLeaveOutSelf: every candidate that is the node itself is
// left out (its chosen canary, canary_address, listen addresses, status
// endpoint, interface addresses, the unspecified address), loopback
// only where it listens; what is left is sorted without repeats.
func TestCanariesLeaveOutSelf(t *testing.T) {
	h := CanaryHost{
		Configured: netip.MustParseAddrPort("10.0.0.11:9000"),
		Listen:     aps("198.51.100.53:53", "0.0.0.0:5353"),
		Status:     netip.MustParseAddrPort("127.0.0.1:9353"),
		Shared:     addrs("198.51.100.53"),
		Interfaces: addrs("127.0.0.1", "198.51.100.53", "10.0.0.11", "2001:db8::11"),
	}
	chosen := h.Configured
	cands := []string{
		"198.51.100.53:53", "198.51.100.53:53", // the anycast listen, advertised by every node
		"10.0.0.11:9000",    // its own canary_address
		"10.0.0.11:22",      // another port on an own address
		"[2001:db8::11]:53", // an own IPv6 address
		"127.0.0.1:9353",    // its status endpoint
		"127.0.0.1:5353",    // loopback where it listens on every address
		"0.0.0.0:53",        // unspecified
		"127.0.0.1:8080",    // loopback it does not listen on: another node of a lab
		"10.0.0.12:53", "10.0.0.13:53", "10.0.0.12:53",
		"not an address",
	}
	probe, own := Canaries(h, chosen, cands)
	if want := []string{"10.0.0.12:53", "10.0.0.13:53", "127.0.0.1:8080"}; !slices.Equal(probe, want) {
		t.Errorf("probe %v, want %v", probe, want)
	}
	if want := []string{"0.0.0.0:53", "10.0.0.11:22", "10.0.0.11:9000", "127.0.0.1:5353", "127.0.0.1:9353", "198.51.100.53:53", "[2001:db8::11]:53"}; !slices.Equal(own, want) {
		t.Errorf("own %v, want %v", own, want)
	}
	// Every node advertising the shared listen address: nothing to probe.
	probe, own = Canaries(CanaryHost{Listen: aps("198.51.100.53:53"), Interfaces: addrs("198.51.100.53")}, netip.MustParseAddrPort("198.51.100.53:53"),
		[]string{"198.51.100.53:53", "198.51.100.53:53"})
	if len(probe) != 0 || !slices.Equal(own, []string{"198.51.100.53:53"}) {
		t.Errorf("shared listen: probe %v own %v, want none and the shared address", probe, own)
	}
}

func count(n int) *int { return &n }

// TestCanaryWarnings: the fleet view says loudly when several nodes
// advertise one canary address, when a node advertises none, and when
// a node probes fewer than two canaries; a healthy fleet says nothing.
func TestCanaryWarnings(t *testing.T) {
	node := func(name, canary string, n *int) Node {
		return Node{Heartbeat: Heartbeat{Name: name, Canary: canary, Canaries: n}}
	}
	if got := CanaryWarnings([]Node{node("a", "10.0.0.11:53", count(2)), node("b", "10.0.0.12:53", count(2)), node("c", "10.0.0.13:53", nil)}); len(got) != 0 {
		t.Errorf("healthy fleet: warnings %q, want none", got)
	}
	got := CanaryWarnings([]Node{
		node("c", "198.51.100.53:53", count(0)), node("a", "198.51.100.53:53", count(0)), node("b", "198.51.100.53:53", count(1)),
		node("d", "", nil), node("e", "", count(3)),
	})
	want := []string{
		"nodes a, b, c advertise the same canary 198.51.100.53:53 (a shared or anycast address): none of them probes it, each finds it its own; set [fleet] canary_address to each node's unicast address",
		"d, e advertise no canary: the other nodes cannot use them as a canary; set [fleet] canary_address",
		"a probes no canary beyond itself: it cannot tell it is cut off from the members, and votes them down if it is; configure [fleet] canaries or give the nodes unicast canary addresses",
		"b probes only 1 canary beyond itself: it cannot tell its own cut from that canary's failure (it withdraws its votes whenever that one fails); 2 or more are needed",
		"c probes no canary beyond itself: it cannot tell it is cut off from the members, and votes them down if it is; configure [fleet] canaries or give the nodes unicast canary addresses",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
