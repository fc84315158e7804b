package vip

import (
	"context"
	"net/netip"
)

// DestStats are the kernel's counters and rate estimates of one IPVS
// destination (what `ipvsadm -Ln --stats --rate` shows).
type DestStats struct {
	ActiveConns   uint32
	InactiveConns uint32
	// Counters since the destination was created.
	Conns      uint64
	PacketsIn  uint64
	PacketsOut uint64
	BytesIn    uint64
	BytesOut   uint64
	// Rate estimates per second, as the kernel computes them.
	CPS    uint64
	PPSIn  uint64
	PPSOut uint64
	BPSIn  uint64
	BPSOut uint64
}

// StatsReader reads the per-destination statistics of the services for
// which owned returns true, in one dump of the kernel's table.
type StatsReader interface {
	DestStats(ctx context.Context, owned func(ServiceKey) bool) (map[ServiceKey]map[netip.AddrPort]DestStats, error)
}
