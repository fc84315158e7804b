package configs

import (
	"net/netip"
	"slices"
	"testing"
)

const topologyPool = `
[check.web]
kind = "tcp"
[check.web.tcp]
port = 80

[[gslb.pool]]
name = "www"
monitors = ["web"]

[[gslb.pool.member]]
name = "a"
address = "192.0.2.1"
`

func TestGSLBTopologyDefaults(t *testing.T) {
	cfg, err := Parse([]byte(topologyPool), "/etc/lbdns/lbdnsd.toml")
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.GSLB.Topology
	if !slices.Equal(tp.Levels, DefaultTopologyLevels()) || tp.MaxMindDB != "" || tp.Files != nil || tp.Nets != nil {
		t.Errorf("Topology = %+v, want the default levels and nothing else", tp)
	}
	// A config without [gslb] has the default levels too.
	full, err := Load("full.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(full.GSLB.Topology.Levels, DefaultTopologyLevels()) {
		t.Errorf("full.toml levels = %v", full.GSLB.Topology.Levels)
	}
}

func TestGSLBTopology(t *testing.T) {
	doc := topologyPool + `
[gslb.topology]
levels = ["isp", "country"]
maxmind_db = "geo/country.mmdb"

[[gslb.topology.file]]
path = "nets/cmcc.txt"
labels = { isp = "cmcc" }

[[gslb.topology.file]]
path = "/var/lib/lbdns/ct.txt"
labels = { isp = "ct", country = "cn" }

[[gslb.topology.net]]
prefix = "10.0.0.0/8"
labels = { country = "zz" }

[[gslb.topology.net]]
prefix = "::ffff:192.0.2.0/120"
labels = { isp = "docs" }
`
	cfg, err := Parse([]byte(doc), "/etc/lbdns/lbdnsd.toml")
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.GSLB.Topology
	if !slices.Equal(tp.Levels, []string{"isp", "country"}) || len(tp.Files) != 2 || len(tp.Nets) != 2 {
		t.Fatalf("Topology = %+v", tp)
	}
	if tp.Files[1].Labels["country"] != "cn" || tp.Nets[0].Net != netip.MustParsePrefix("10.0.0.0/8") ||
		tp.Nets[1].Net != netip.MustParsePrefix("192.0.2.0/24") {
		t.Errorf("Topology = %+v", tp)
	}
	for in, want := range map[string]string{
		tp.MaxMindDB:     "/etc/lbdns/geo/country.mmdb",
		tp.Files[0].Path: "/etc/lbdns/nets/cmcc.txt",
		tp.Files[1].Path: "/var/lib/lbdns/ct.txt",
	} {
		if got := cfg.TopologyPath(in); got != want {
			t.Errorf("TopologyPath(%q) = %q, want %q", in, got, want)
		}
	}
}
