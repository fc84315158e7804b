package bird

import "testing"

// TestParseRoutes pins the parser on BIRD 2's output.
func TestParseRoutes(t *testing.T) {
	out := `BIRD 2.0.12 ready.
Table master4:
192.0.2.53/32        unicast [lb 12:00:00.000] * (100) [AS65001i]
	via 198.18.0.1 on eth0
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 65001
	BGP.next_hop: 198.18.0.1
	BGP.med: 1000
	BGP.local_pref: 100
	BGP.community: (65001,200) (65535,0)
192.0.2.54/32        unicast [lb 12:00:00.000] * (100) [AS65001i]
	via 198.18.0.1 on eth0
	BGP.med: 100
`
	got := ParseRoutes(out)
	if got["192.0.2.53/32"] != (Route{MED: "1000", Communities: "(65001,200) (65535,0)"}) || got["192.0.2.54/32"] != (Route{MED: "100"}) || len(got) != 2 {
		t.Errorf("got %+v", got)
	}
}
