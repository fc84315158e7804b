package fleet

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"lbdns/configs"
)

// nodeConfig is one node's configuration: the same shared tables, its
// own keys from n, and ttl for the GSLB name.
func nodeConfig(t *testing.T, n, ttl int) *configs.Config {
	t.Helper()
	doc := fmt.Sprintf(`[daemon]
state_dir      = "/var/lib/lbdns-%[1]d"
control_socket = "/run/lbdns-%[1]d/lbdns.sock"
status_listen  = "127.0.0.%[1]d:9353"

[[vip]]
name      = "dns-v4"
address   = "192.0.2.53"
pool      = "main"
interface = "dummy%[1]d"

[[pool]]
name    = "main"
members = ["bind-1"]
check   = "recursive"

[[resolver]]
name    = "bind-1"
address = "198.51.100.11"
vendor  = "bind"

[check.recursive.dns]
zone = "probe.example.net"

[gslb.server]
listen = ["203.0.113.%[1]d:53"]

[[gslb.pool]]
name     = "web"
monitors = ["recursive"]

[[gslb.pool.member]]
name    = "w1"
address = "192.0.2.80"

[[gslb.zone]]
name = "gslb.example.com"
ns   = ["ns1.gslb.example.com."]

[[gslb.name]]
name        = "www.gslb.example.com"
ttl         = %[2]d
last_resort = "servfail"

[[gslb.name.policy]]
pool = "web"

[bgp]
router_id = "198.51.100.%[1]d"
local_as  = 65001

[[bgp.peer]]
address = "198.51.100.%[3]d"
as      = 65000

[dnstap]
unix = "/run/lbdns-%[1]d/dnstap.sock"
tcp  = "127.0.0.%[1]d:6000"
`, n, ttl, 200+n)
	cfg, err := configs.Parse([]byte(doc), fmt.Sprintf("/etc/lbdns/lb%d.toml", n))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestConfigHashNodeLocal: nodes whose configurations differ only in
// their own keys ([daemon], GSLB listen addresses, BGP router id and
// peers, VIP interface, dnstap listen addresses, path) have the same
// hash and the same sections; a shared table changed changes the hash
// and that table's section only.
func TestConfigHashNodeLocal(t *testing.T) {
	a, b := nodeConfig(t, 1, 30), nodeConfig(t, 2, 30)
	ha, sa, err := ConfigHashes(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, sb, _ := ConfigHashes(b)
	if ha != hb || !maps.Equal(sa, sb) {
		t.Errorf("node-local keys change the hash: %s %v vs %s %v", ha, sa, hb, sb)
	}
	for _, want := range []string{"gslb", "vip", "pool", "resolver", "check.recursive", "bgp", "dnstap"} {
		if sa[want] == "" {
			t.Errorf("no section %q in %v", want, slices.Sorted(maps.Keys(sa)))
		}
	}
	if _, ok := sa["daemon"]; ok {
		t.Error("[daemon] is a section")
	}
	if a.GSLB.Server.Listen == nil || a.BGP.RouterID == "" || a.VIPs[0].Interface == "" || a.Dnstap.Unix == "" {
		t.Error("ConfigHashes changed its configuration")
	}
	hc, sc, _ := ConfigHashes(nodeConfig(t, 3, 60))
	if hc == ha {
		t.Error("another GSLB TTL has the same hash")
	}
	var diff []string
	for k := range sa {
		if sa[k] != sc[k] {
			diff = append(diff, k)
		}
	}
	if !slices.Equal(diff, []string{"gslb"}) {
		t.Errorf("sections that differ: %v, want [gslb]", diff)
	}
	if h, _ := ConfigHash(a); h != ha {
		t.Errorf("ConfigHash %s, ConfigHashes %s", h, ha)
	}
}

// TestCompareSections: a node whose configuration differs is told the
// tables it differs in from most of its cluster; a node without
// sections (an older lbdnsd) is still compared by its hash alone.
func TestCompareSections(t *testing.T) {
	sec := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	base := sec("gslb", "g1", "check.recursive", "c1", "resolver", "r1")
	n := func(name, hash string, s map[string]string) Node {
		return Node{Heartbeat: Heartbeat{Name: name, Cluster: "c", ConfigHash: hash, ConfigSections: s, Serial: 7}}
	}
	for _, tc := range []struct {
		name  string
		nodes []Node
		odd   map[string][]string
	}{
		{"one table", []Node{n("a", "h", base), n("b", "h", base), n("c", "x", sec("gslb", "g2", "check.recursive", "c1", "resolver", "r1"))},
			map[string][]string{"c": {"configuration x, most of its cluster run h: differs in [gslb]"}}},
		{"two tables and one missing", []Node{n("a", "h", base), n("b", "h", base), n("c", "x", sec("gslb", "g2", "check.recursive", "c2"))},
			map[string][]string{"c": {"configuration x, most of its cluster run h: differs in [check.recursive], [gslb], [resolver]"}}},
		{"an old node", []Node{n("a", "h", base), n("b", "h", base), n("c", "x", nil)},
			map[string][]string{"c": {"configuration x, most of its cluster run h"}}},
		{"no majority", []Node{n("a", "h", base), n("b", "x", sec("gslb", "g2", "check.recursive", "c1", "resolver", "r1"))},
			map[string][]string{"a": {"configuration h, the cluster's differ: differs in [gslb]"}, "b": {"configuration x, the cluster's differ: differs in [gslb]"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, g := range Compare(tc.nodes) {
				if !slices.Equal(g.Odd, tc.odd[g.Name]) {
					t.Errorf("%s: Odd = %q, want %q", g.Name, g.Odd, tc.odd[g.Name])
				}
			}
		})
	}
}
