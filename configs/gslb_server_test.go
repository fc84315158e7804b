package configs

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// serverDoc is a document with one GSLB pool that ends in [gslb.server]
// (line 13): a test's keys of the table follow it, from line 14.
const serverDoc = `
[check.c.dns]
qname = "example.com"

[[gslb.pool]]
name = "p"
monitors = ["c"]

[[gslb.pool.member]]
name = "m"
address = "192.0.2.1"

[gslb.server]
`

// TestGSLBServer: [gslb.server] defaults to off with udp_size 1232, and
// its listen addresses are parsed (IPv4-mapped IPv6 unmapped).
func TestGSLBServer(t *testing.T) {
	base := serverDoc
	cfg, err := Parse([]byte(base), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.GSLB.Server; len(s.Listen) != 0 || s.ListenAddrs != nil || s.UDPSize != DefaultGSLBUDPSize {
		t.Errorf("default [gslb.server] = %+v, want off with udp_size %d", s, DefaultGSLBUDPSize)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings %v, want none", cfg.Warnings)
	}
	if s := cfg.GSLB.Server; s.TCPMaxConnections != 1024 || s.TCPMaxPerSource != 64 || s.TCPIdleTimeout.Duration != 10*time.Second ||
		s.TCPMaxQueries != 1000 || s.TCPReservedFDs != 1024 {
		t.Errorf("default [gslb.server] TCP limits = %+v, want 1024 connections, 64 per source, idle 10s, 1000 queries, 1024 descriptors reserved", s)
	}
	cfg, err = Parse([]byte(base+`listen = ["192.0.2.53:53", "[2001:db8::53]:5353", "[::ffff:192.0.2.54]:53", "127.0.0.1:0", "127.0.0.1:0"]
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

// TestGSLBServerReplyCacheRemoved: reply_cache, a key of the reply cache
// that was removed, still loads, true or false, with a warning naming
// the file, its line and the key; of another type it is an error as
// before; Load carries the warning too.
func TestGSLBServerReplyCacheRemoved(t *testing.T) {
	base := serverDoc + "udp_size = 1232\n"
	const line = 15 // reply_cache's, after base
	for _, v := range []string{"true", "false"} {
		cfg, err := Parse([]byte(base+"reply_cache = "+v+"\n"), "t.toml")
		if err != nil {
			t.Fatalf("reply_cache = %s: %v", v, err)
		}
		want := []Problem{{File: "t.toml", Line: line, Key: "gslb.server.reply_cache", Value: v, Msg: "has no effect; the reply cache was removed"}}
		if !slices.Equal(cfg.Warnings, want) {
			t.Errorf("reply_cache = %s: warnings %+v, want %+v", v, cfg.Warnings, want)
		}
		if got, text := cfg.Warnings[0].Error(), `t.toml:15: gslb.server.reply_cache: value "`+v+`": has no effect; the reply cache was removed`; got != text {
			t.Errorf("warning text %q, want %q", got, text)
		}
	}
	_, err := Parse([]byte(base+"reply_cache = \"yes\"\n"), "t.toml")
	if ps := Problems(err); len(ps) == 0 || ps[0].Key != "gslb.server.reply_cache" || ps[0].Line != line || ps[0].Msg != "must be a boolean, not a string" {
		t.Errorf("reply_cache = \"yes\": %v, want first a problem at gslb.server.reply_cache line %d", err, line)
	}
	path := filepath.Join(t.TempDir(), "lbdns.toml")
	if err := os.WriteFile(path, []byte(base+"reply_cache = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || cfg.Warnings[0].File != path || cfg.Warnings[0].Line != line {
		t.Errorf("Load: warnings %+v, want one for %s line %d", cfg.Warnings, path, line)
	}
}

// TestGSLBServerTCP: the tcp_ keys of [gslb.server] are read; a
// tcp_max_connections below the default per-source cap lowers that
// default; a per-source cap above the total is an error naming both.
func TestGSLBServerTCP(t *testing.T) {
	base := serverDoc
	cfg, err := Parse([]byte(base+`tcp_max_connections = 5000
tcp_max_per_source = 100
tcp_idle_timeout = "30s"
tcp_max_queries = 1
tcp_reserved_fds = 4096
`), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.GSLB.Server; s.TCPMaxConnections != 5000 || s.TCPMaxPerSource != 100 || s.TCPIdleTimeout.Duration != 30*time.Second ||
		s.TCPMaxQueries != 1 || s.TCPReservedFDs != 4096 {
		t.Errorf("[gslb.server] TCP limits = %+v", s)
	}
	cfg, err = Parse([]byte(base+"tcp_max_connections = 10\n"), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.GSLB.Server.TCPMaxPerSource; got != 10 {
		t.Errorf("tcp_max_per_source = %d with tcp_max_connections 10, want 10", got)
	}
	_, err = Parse([]byte(base+"tcp_max_connections = 10\ntcp_max_per_source = 11\n"), "t.toml")
	want := `t.toml:15: gslb.server.tcp_max_per_source: value "11": must be between 1 and tcp_max_connections (10)`
	if err == nil || err.Error() != want {
		t.Errorf("per source above the total: %v, want %s", err, want)
	}
}
