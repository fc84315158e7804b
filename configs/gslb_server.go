package configs

import (
	"fmt"
	"net/netip"
	"strconv"
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

	// ListenAddrs are Listen parsed (set by Load).
	ListenAddrs []netip.AddrPort `toml:"-"`
}

// Defaults and limits of [gslb.server].
const (
	DefaultGSLBUDPSize = 1232
	MinGSLBUDPSize     = 512
	MaxGSLBUDPSize     = 4096
	MaxGSLBUDPReaders  = 1024
)

// validateGSLBServer applies the defaults of [gslb.server] and checks it.
func (d *decoder) validateGSLBServer() {
	s := &d.cfg.GSLB.Server
	raw, _ := d.gslbRaw["server"].(map[string]any)
	if !hasKey(raw, "udp_size") {
		s.UDPSize = DefaultGSLBUDPSize
	}
	base := "gslb.server"
	if s.UDPSize < MinGSLBUDPSize || s.UDPSize > MaxGSLBUDPSize {
		d.p.add(joinKey(base, "udp_size"), strconv.Itoa(s.UDPSize), fmt.Sprintf("must be between %d and %d", MinGSLBUDPSize, MaxGSLBUDPSize))
	}
	if s.UDPReaders < 0 || s.UDPReaders > MaxGSLBUDPReaders {
		d.p.add(joinKey(base, "udp_readers"), strconv.Itoa(s.UDPReaders), fmt.Sprintf("must be between 0 (one per CPU but one) and %d", MaxGSLBUDPReaders))
	}
	s.ListenAddrs = nil
	first := map[netip.AddrPort]int{}
	for i, l := range s.Listen {
		key := indexKey(joinKey(base, "listen"), i)
		ap, err := netip.ParseAddrPort(l)
		switch {
		case err != nil:
			d.p.add(key, l, `not an "ADDR:PORT" address (IPv6 in brackets: "[2001:db8::53]:53")`)
			continue
		case ap.Addr().Zone() != "":
			d.p.add(key, l, "an address with a zone cannot be used")
			continue
		}
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if j, dup := first[ap]; dup && ap.Port() != 0 {
			d.p.add(key, l, fmt.Sprintf("listed twice (also %s)", indexKey(joinKey(base, "listen"), j)))
			continue
		}
		first[ap] = i
		s.ListenAddrs = append(s.ListenAddrs, ap)
	}
}
