package configs

import (
	"os"
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
