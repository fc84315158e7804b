package configs

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// GSLBServer is where the GSLB responder listens ([gslb.server]).
type GSLBServer struct {
	// Listen are the addresses the responder serves DNS on, UDP and TCP
	// on each, as "ADDR:PORT" ("192.0.2.53:53", "[2001:db8::53]:53").
	// Empty (the default): the responder is off. Port 0 picks a free
	// port (tests).
	Listen []string `toml:"listen"`
	// UDPSize is the EDNS payload size the responder advertises and fills
	// over UDP, 512..4096. Default 1232 (no IP fragmentation on common
	// paths, DNS flag day 2020).
	UDPSize int `toml:"udp_size"`
	// UDPReaders is how many threads read each listen address's UDP
	// socket, 0..1024; 0 (the default): one per CPU the Go runtime runs
	// on (GOMAXPROCS) but one, at least one.
	UDPReaders int `toml:"udp_readers"`
	// ReplyCache is the key reply_cache of the responder's reply cache,
	// which was removed: it is still accepted (a boolean), so that older
	// files load, with a warning (Config.Warnings).
	//
	// Deprecated: it has no effect.
	ReplyCache bool `toml:"reply_cache"`
	// TCPMaxConnections is the most TCP connections open at once, all
	// listen addresses together, 1..1048576; a new one beyond closes the
	// longest idle one. Default 1024.
	TCPMaxConnections int `toml:"tcp_max_connections"`
	// TCPMaxPerSource is the most TCP connections open at once from one
	// client (an IPv4 address, an IPv6 /64), 1..TCPMaxConnections; a new
	// one beyond is refused. Default 64.
	TCPMaxPerSource int `toml:"tcp_max_per_source"`
	// TCPIdleTimeout closes a TCP connection that had no answer written
	// for that long since it was opened or since its last answer, and
	// bounds each write, 1s..1h. Default 10s.
	TCPIdleTimeout Duration `toml:"tcp_idle_timeout"`
	// TCPMaxQueries is how many queries (messages, answered or not) one
	// TCP connection is read before it is closed gracefully after the
	// last one's answer, 1..2147483647. Default 1000.
	TCPMaxQueries int `toml:"tcp_max_queries"`
	// TCPReservedFDs is how many descriptors below the process's
	// RLIMIT_NOFILE new TCP connections may not take (they are refused),
	// for the monitors, the control socket and the status endpoint,
	// 16..1048576 (at most half the limit is reserved). Default 1024.
	TCPReservedFDs int `toml:"tcp_reserved_fds"`

	// ListenAddrs are Listen parsed (set by Load).
	ListenAddrs []netip.AddrPort `toml:"-"`
}

// Defaults and limits of [gslb.server].
const (
	DefaultGSLBUDPSize = 1232
	MinGSLBUDPSize     = 512
	MaxGSLBUDPSize     = 4096
	MaxGSLBUDPReaders  = 1024

	DefaultGSLBTCPMaxConnections = 1024
	MaxGSLBTCPMaxConnections     = 1 << 20
	DefaultGSLBTCPMaxPerSource   = 64
	DefaultGSLBTCPIdleTimeout    = 10 * time.Second
	MinGSLBTCPIdleTimeout        = time.Second
	MaxGSLBTCPIdleTimeout        = time.Hour
	DefaultGSLBTCPMaxQueries     = 1000
	MaxGSLBTCPMaxQueries         = 1<<31 - 1
	DefaultGSLBTCPReservedFDs    = 1024
	MinGSLBTCPReservedFDs        = 16
	MaxGSLBTCPReservedFDs        = 1 << 20
)

// validateGSLBServer applies the defaults of [gslb.server] and checks it.
func (d *decoder) validateGSLBServer() {
	s := &d.cfg.GSLB.Server
	raw, _ := d.gslbRaw["server"].(map[string]any)
	if !hasKey(raw, "udp_size") {
		s.UDPSize = DefaultGSLBUDPSize
	}
	base := "gslb.server"
	if v, ok := raw["reply_cache"]; ok {
		d.p.warn(joinKey(base, "reply_cache"), scalarText(v), "has no effect; the reply cache was removed")
	}
	if s.UDPSize < MinGSLBUDPSize || s.UDPSize > MaxGSLBUDPSize {
		d.p.add(joinKey(base, "udp_size"), strconv.Itoa(s.UDPSize), fmt.Sprintf("must be between %d and %d", MinGSLBUDPSize, MaxGSLBUDPSize))
	}
	if s.UDPReaders < 0 || s.UDPReaders > MaxGSLBUDPReaders {
		d.p.add(joinKey(base, "udp_readers"), strconv.Itoa(s.UDPReaders), fmt.Sprintf("must be between 0 (one per CPU but one) and %d", MaxGSLBUDPReaders))
	}
	d.validateGSLBTCP(s, raw, base)
	first := map[netip.AddrPort]string{}
	s.ListenAddrs = d.listenAddrs(joinKey(base, "listen"), s.Listen, first)
	d.validateGSLBTLS(first)
}

// validateGSLBTCP applies the defaults of the tcp_ keys of [gslb.server]
// (raw, at key base) to s and checks them.
func (d *decoder) validateGSLBTCP(s *GSLBServer, raw map[string]any, base string) {
	if !hasKey(raw, "tcp_max_connections") {
		s.TCPMaxConnections = DefaultGSLBTCPMaxConnections
	}
	if !hasKey(raw, "tcp_max_per_source") {
		s.TCPMaxPerSource = min(DefaultGSLBTCPMaxPerSource, max(s.TCPMaxConnections, 1))
	}
	if !hasKey(raw, "tcp_idle_timeout") {
		s.TCPIdleTimeout.Duration = DefaultGSLBTCPIdleTimeout
	}
	if !hasKey(raw, "tcp_max_queries") {
		s.TCPMaxQueries = DefaultGSLBTCPMaxQueries
	}
	if !hasKey(raw, "tcp_reserved_fds") {
		s.TCPReservedFDs = DefaultGSLBTCPReservedFDs
	}
	between := func(key string, v, lo, hi int, hiName string) {
		if v < lo || v > hi {
			d.p.add(joinKey(base, key), strconv.Itoa(v), fmt.Sprintf("must be between %d and %s", lo, hiName))
		}
	}
	between("tcp_max_connections", s.TCPMaxConnections, 1, MaxGSLBTCPMaxConnections, strconv.Itoa(MaxGSLBTCPMaxConnections))
	if s.TCPMaxConnections >= 1 && s.TCPMaxConnections <= MaxGSLBTCPMaxConnections {
		between("tcp_max_per_source", s.TCPMaxPerSource, 1, s.TCPMaxConnections, fmt.Sprintf("tcp_max_connections (%d)", s.TCPMaxConnections))
	} else {
		between("tcp_max_per_source", s.TCPMaxPerSource, 1, MaxGSLBTCPMaxConnections, strconv.Itoa(MaxGSLBTCPMaxConnections))
	}
	if v := s.TCPIdleTimeout.Duration; v < MinGSLBTCPIdleTimeout || v > MaxGSLBTCPIdleTimeout {
		d.p.add(joinKey(base, "tcp_idle_timeout"), fmtDur(v), "must be between "+fmtDur(MinGSLBTCPIdleTimeout)+" and "+fmtDur(MaxGSLBTCPIdleTimeout))
	}
	between("tcp_max_queries", s.TCPMaxQueries, 1, MaxGSLBTCPMaxQueries, strconv.Itoa(MaxGSLBTCPMaxQueries))
	between("tcp_reserved_fds", s.TCPReservedFDs, MinGSLBTCPReservedFDs, MaxGSLBTCPReservedFDs, strconv.Itoa(MaxGSLBTCPReservedFDs))
}
