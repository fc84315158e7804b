package fleet

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"lbdns/configs"
)

// TestCompare flags the odd one out: a node behind on intent, another
// configuration in its cluster, another serial.
func TestCompare(t *testing.T) {
	n := func(name, cluster, hash string, applied, current uint64, serial uint32) Node {
		return Node{Heartbeat: Heartbeat{Name: name, Cluster: cluster, ConfigHash: hash, IntentRevision: applied, Serial: serial}, CurrentRevision: current}
	}
	for _, tc := range []struct {
		name  string
		nodes []Node
		odd   map[string][]string
	}{
		{"all the same", []Node{n("a", "c1", "h", 5, 5, 7), n("b", "c1", "h", 5, 5, 7), n("c", "c1", "h", 5, 5, 7)}, nil},
		{"one behind", []Node{n("a", "c1", "h", 5, 5, 7), n("b", "c1", "h", 4, 5, 7), n("c", "c1", "h", 5, 5, 7)},
			map[string][]string{"b": {"intent revision 4 applied, 5 in force"}}},
		{"another config and serial", []Node{n("a", "c1", "h", 5, 5, 7), n("b", "c1", "h", 5, 5, 7), n("c", "c1", "x", 5, 5, 8)},
			map[string][]string{"c": {"configuration x, most of its cluster run h", "SOA serial 8, most nodes answer 7"}}},
		{"clusters run their own configs", []Node{n("a", "c1", "h", 5, 5, 7), n("b", "c1", "h", 5, 5, 7), n("c", "c2", "x", 9, 9, 7)}, nil},
		{"two differ, no majority", []Node{n("a", "c1", "h", 5, 5, 7), n("b", "c1", "x", 5, 5, 7)},
			map[string][]string{"a": {"configuration h, the cluster's differ"}, "b": {"configuration x, the cluster's differ"}}},
		{"alone", []Node{n("a", "", "h", 1, 1, 2)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(tc.nodes)
			for i, g := range got {
				if i > 0 && got[i-1].Name > g.Name {
					t.Fatalf("not sorted by name: %v", got)
				}
				if !slices.Equal(g.Odd, tc.odd[g.Name]) {
					t.Errorf("%s: Odd = %q, want %q", g.Name, g.Odd, tc.odd[g.Name])
				}
			}
		})
	}
}

// TestConfigHash: the same configuration under another [fleet] or path
// has the same hash; another configuration another.
func TestConfigHash(t *testing.T) {
	a, err := configs.Load("../configs/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	b := *a
	b.Path = "/elsewhere.toml"
	b.Fleet = &configs.Fleet{Name: "lb2"}
	b.Daemon.StateDir = "/var/lib/lbdns-2"
	ha, err := ConfigHash(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := ConfigHash(&b)
	if ha == "" || ha != hb {
		t.Errorf("hashes %q and %q, want the same, not empty", ha, hb)
	}
	c := *a
	c.IPVS.ResyncInterval.Duration++
	if hc, _ := ConfigHash(&c); hc == ha {
		t.Errorf("another resync interval has the same hash %q", hc)
	}
}

// TestHeartbeatSame ignores the beat's time only.
func TestHeartbeatSame(t *testing.T) {
	h := Heartbeat{Name: "a", Serial: 3, Beat: time.Unix(1, 0)}
	g := h
	g.Beat = time.Unix(2, 0)
	if !h.Same(g) {
		t.Error("Same = false for another Beat only")
	}
	g.Serial = 4
	if h.Same(g) {
		t.Error("Same = true for another serial")
	}
	g = h
	g.Announced = []Announcement{{Prefix: netip.MustParsePrefix("192.0.2.53/32"), Grade: GradeUp}}
	if h.Same(g) {
		t.Error("Same = true for another announcement")
	}
	h.Announced = []Announcement{{Prefix: netip.MustParsePrefix("192.0.2.53/32"), Grade: GradeUp}}
	if !h.Same(g) {
		t.Error("Same = false for equal announcements")
	}
	h.Announced[0].Grade = GradeDegraded
	if h.Same(g) {
		t.Error("Same = true for another grade")
	}
}

// TestAnnouncers counts, per prefix, the other nodes that announce it
// up or degraded, alive (in the view), not drained and with the intent
// in force applied.
func TestAnnouncers(t *testing.T) {
	p1, p2 := netip.MustParsePrefix("192.0.2.53/32"), netip.MustParsePrefix("2001:db8::53/128")
	n := func(name string, drained bool, applied, current uint64, ann ...Announcement) Node {
		return Node{Heartbeat: Heartbeat{Name: name, Drained: drained, IntentRevision: applied, Announced: ann}, CurrentRevision: current}
	}
	a := func(p netip.Prefix, grade string) Announcement { return Announcement{Prefix: p, Grade: grade} }
	nodes := []Node{
		n("self", false, 3, 3, a(p1, GradeUp), a(p2, GradeUp)),
		n("up", false, 3, 3, a(p1, GradeUp)),
		n("degraded", false, 3, 3, a(p1, GradeDegraded), a(p2, GradeDegraded)),
		n("held", false, 3, 3, a(p1, GradeHeld)),
		n("draining", false, 3, 3, a(p1, GradeDraining)),
		n("drained", true, 3, 3, a(p1, GradeUp)),
		n("behind", false, 2, 3, a(p1, GradeUp)),
		n("nothing", false, 3, 3),
	}
	got := Announcers(nodes, "self")
	want := map[netip.Prefix][]string{p1: {"degraded", "up"}, p2: {"degraded"}}
	if len(got) != len(want) {
		t.Fatalf("Announcers = %v, want %v", got, want)
	}
	for p, names := range want {
		if !slices.Equal(got[p], names) {
			t.Errorf("%s: %v, want %v", p, got[p], names)
		}
	}
	if got := Announcers(nil, "self"); len(got) != 0 {
		t.Errorf("no nodes: %v", got)
	}
}
