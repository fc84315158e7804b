package configs

import (
	"testing"
	"time"
)

// TestDnstapAbsent: without [dnstap] nothing listens (Dnstap nil).
func TestDnstapAbsent(t *testing.T) {
	cfg, err := Load("minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dnstap != nil {
		t.Fatalf("Dnstap = %+v without [dnstap], want nil", cfg.Dnstap)
	}
}

// TestDnstapDefaults: the keys left out take their documented defaults,
// and the ones given are kept.
func TestDnstapDefaults(t *testing.T) {
	cfg, err := Parse(fleetDoc(t, "[dnstap]\nunix = \"/run/lbdns/dnstap.sock\"\n"), "dnstap.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Dnstap{Unix: "/run/lbdns/dnstap.sock", MaxConnections: 64, MaxConnectionsPerSource: 4, IdleTimeout: Duration{10 * time.Minute}, MaxFrame: 131072, HandshakeTimeout: Duration{5 * time.Second}}
	if *cfg.Dnstap != want {
		t.Errorf("Dnstap = %+v, want %+v", *cfg.Dnstap, want)
	}
	cfg, err = Parse(fleetDoc(t, "[dnstap]\ntcp = \"[::]:6000\"\nmax_connections = 500\nmax_connections_per_source = 2\nidle_timeout = \"0s\"\nmax_frame = 65536\nhandshake_timeout = \"1s\"\n"), "dnstap.toml")
	if err != nil {
		t.Fatal(err)
	}
	want = Dnstap{TCP: "[::]:6000", MaxConnections: 500, MaxConnectionsPerSource: 2, MaxFrame: 65536, HandshakeTimeout: Duration{time.Second}}
	if *cfg.Dnstap != want {
		t.Errorf("Dnstap = %+v, want %+v", *cfg.Dnstap, want)
	}
}
