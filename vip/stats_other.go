//go:build !linux

package vip

import (
	"context"
	"fmt"
	"net/netip"
)

// KernelClient is a StatsReader on every platform.
var _ StatsReader = (*KernelClient)(nil)

// DestStats implements StatsReader; off Linux there is no IPVS, so it
// always fails with an error wrapping ErrIPVSUnavailable.
func (k *KernelClient) DestStats(ctx context.Context, owned func(ServiceKey) bool) (map[ServiceKey]map[netip.AddrPort]DestStats, error) {
	return nil, fmt.Errorf("vip: read stats: %w: ipvs needs linux", ErrIPVSUnavailable)
}
