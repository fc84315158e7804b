package configs

import (
	"net/netip"
	"slices"
	"testing"
)

// TestGSLBServer: [gslb.server] defaults to off with udp_size 1232, and
// its listen addresses are parsed (IPv4-mapped IPv6 unmapped).
func TestGSLBServer(t *testing.T) {
	base := `
[check.c.dns]
qname = "example.com"

[[gslb.pool]]
name = "p"
monitors = ["c"]

[[gslb.pool.member]]
name = "m"
address = "192.0.2.1"
`
	cfg, err := Parse([]byte(base), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.GSLB.Server; len(s.Listen) != 0 || s.ListenAddrs != nil || s.UDPSize != DefaultGSLBUDPSize {
		t.Errorf("default [gslb.server] = %+v, want off with udp_size %d", s, DefaultGSLBUDPSize)
	}
	cfg, err = Parse([]byte(base+`
[gslb.server]
listen = ["192.0.2.53:53", "[2001:db8::53]:5353", "[::ffff:192.0.2.54]:53", "127.0.0.1:0", "127.0.0.1:0"]
udp_size = 4096
`), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.53:53"), netip.MustParseAddrPort("[2001:db8::53]:5353"),
		netip.MustParseAddrPort("192.0.2.54:53"), netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("127.0.0.1:0")}
	if s := cfg.GSLB.Server; !slices.Equal(s.ListenAddrs, want) || s.UDPSize != 4096 {
		t.Errorf("[gslb.server] = %+v, want listen %v, udp_size 4096", s, want)
	}
}
