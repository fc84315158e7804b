package configs

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// fleetDoc is minimal.toml with the [fleet] table extra appended.
func fleetDoc(t *testing.T, extra string) []byte {
	t.Helper()
	b, err := os.ReadFile("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, []byte("\n"+extra)...)
}

// TestFleetAbsent: without [fleet] the host is alone (Fleet nil).
func TestFleetAbsent(t *testing.T) {
	cfg, err := Load("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Fleet != nil {
		t.Fatalf("Fleet = %+v without [fleet], want nil", cfg.Fleet)
	}
}

// TestFleetDefaults: the keys left out take their documented defaults.
func TestFleetDefaults(t *testing.T) {
	cfg, err := Parse(fleetDoc(t, `[fleet]
endpoints = ["https://etcd1:2379", "[2001:db8::1]:2379"]
name = "lb1"
location = "dc1"
ca_file = "/etc/lbdns/ca.pem"
cert_file = "/etc/lbdns/lb1.pem"
key_file = "/etc/lbdns/lb1-key.pem"
`), "fleet.toml")
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Fleet
	if f == nil {
		t.Fatal("Fleet is nil")
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"prefix", f.Prefix, "/lbdns/"},
		{"cluster", f.Cluster, ""},
		{"lease_ttl", f.LeaseTTL.Duration, 10 * time.Second},
		{"dial_timeout", f.DialTimeout.Duration, 5 * time.Second},
		{"resync_interval", f.ResyncInterval.Duration, 5 * time.Minute},
		{"probers_per_member", f.ProbersPerMember, 3},
		{"vote_hold", f.VoteHold.Duration, 30 * time.Second},
		{"canaries", len(f.Canaries), 0},
		{"canary_interval", f.CanaryInterval.Duration, 250 * time.Millisecond},
		{"endpoint 0", FleetEndpointHostPort(f.Endpoints[0]), "etcd1:2379"},
		{"endpoint 1", FleetEndpointHostPort(f.Endpoints[1]), "[2001:db8::1]:2379"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// TestFleetRestartOnly: a reload that changes [fleet] keeps the running
// one and says so.
func TestFleetRestartOnly(t *testing.T) {
	doc := func(loc string) *Config {
		cfg, err := Parse(fleetDoc(t, `[fleet]
endpoints = ["etcd1:2379"]
name = "lb1"
location = "`+loc+`"
ca_file = "/ca.pem"
cert_file = "/c.pem"
key_file = "/k.pem"
`), "fleet.toml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	running, next := doc("dc1"), doc("dc2")
	if !next.KeepRestartOnly(running) {
		t.Error("KeepRestartOnly = false for a changed [fleet]")
	}
	if next.Fleet.Location != "dc1" {
		t.Errorf("location after KeepRestartOnly = %q, want the running dc1", next.Fleet.Location)
	}
	same := doc("dc1")
	if same.KeepRestartOnly(running) {
		t.Error("KeepRestartOnly = true for the same [fleet]")
	}
	alone, _ := Load("minimal.toml")
	if !alone.KeepRestartOnly(running) || alone.Fleet == nil {
		t.Error("a reload dropping [fleet] must keep the running one until a restart")
	}
}

// TestFleetCanaryAddress: canary_address is parsed into CanaryAddr,
// refused when it is no address the other nodes can connect to, and
// warned of when it is shared (a VIP) or loopback; a configured canary
// that is this node's own listen address, status endpoint or
// canary_address is warned of (it is left out of the canaries).
func TestFleetCanaryAddress(t *testing.T) {
	const head = `[fleet]
endpoints = ["etcd1:2379"]
name = "lb1"
location = "dc1"
ca_file = "/etc/lbdns/ca.pem"
cert_file = "/etc/lbdns/lb1.pem"
key_file = "/etc/lbdns/lb1-key.pem"
`
	t.Run("set", func(t *testing.T) {
		cfg, err := Parse(fleetDoc(t, head+`canary_address = "[::ffff:10.1.2.3]:9353"`+"\n"), "fleet.toml")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cfg.Fleet.CanaryAddr, netip.MustParseAddrPort("10.1.2.3:9353"); got != want {
			t.Errorf("CanaryAddr = %v, want %v", got, want)
		}
		if len(cfg.Warnings) != 0 {
			t.Errorf("warnings %v, want none", cfg.Warnings)
		}
	})
	t.Run("unset", func(t *testing.T) {
		cfg, err := Parse(fleetDoc(t, head), "fleet.toml")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Fleet.CanaryAddr.IsValid() || cfg.Fleet.CanaryAddress != "" {
			t.Errorf("canary_address = %q (%v) by default, want unset", cfg.Fleet.CanaryAddress, cfg.Fleet.CanaryAddr)
		}
	})
	for _, tc := range []struct{ value, want string }{
		{"10.1.2.3", `fleet.toml:36: fleet.canary_address: value "10.1.2.3": want "ADDRESS:PORT" (an IP address and a TCP port, "[v6]:PORT" for IPv6)`},
		{"10.1.2.3:0", `fleet.toml:36: fleet.canary_address: value "10.1.2.3:0": port must be 1..65535`},
		{"[ff02::1]:53", `fleet.toml:36: fleet.canary_address: value "[ff02::1]:53": must be a unicast address of this host that the other nodes reach (not unspecified or multicast)`},
		{"[fe80::1%eth0]:53", `fleet.toml:36: fleet.canary_address: value "[fe80::1%eth0]:53": must not carry a zone: the other nodes reach it from their own hosts`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			_, err := Parse(fleetDoc(t, head+`canary_address = "`+tc.value+`"`+"\n"), "fleet.toml")
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
	t.Run("warnings", func(t *testing.T) {
		doc := head + `canary_address = "192.0.2.53:53"
canaries = ["127.0.0.1:9353", "192.0.2.53:53", "198.51.100.7:53"]
`
		cfg, err := Parse(fleetDoc(t, doc), "fleet.toml")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range cfg.Warnings {
			got = append(got, w.Error())
		}
		want := []string{
			`fleet.toml:36: fleet.canary_address: value "192.0.2.53:53": is the address of VIP dns-v4: every host that holds it reaches itself there, so it is no canary; give this host's own unicast address`,
			`fleet.toml:37: fleet.canaries[0]: value "127.0.0.1:9353": is this node's own status endpoint (daemon.status_listen): it is left out of this node's canaries (a node never probes itself as a canary)`,
			`fleet.toml:37: fleet.canaries[1]: value "192.0.2.53:53": is this node's own canary_address: it is left out of this node's canaries (a node never probes itself as a canary)`,
		}
		if !slices.Equal(got, want) {
			t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
