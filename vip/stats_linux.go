package vip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/cloudflare/ipvs"
)

// KernelClient reads the kernel's statistics too.
var _ StatsReader = (*KernelClient)(nil)

// DestStats implements StatsReader over generic netlink. It makes one dump
// of the kernel's services and then one destination dump per owned
// service, so the counters of different services are read moments apart,
// not in one snapshot. The destinations of services that are not owned are
// never read. The 64-bit counters are used; only a kernel too old to send
// them gets the 32-bit ones (packet counts and rates then wrap at 2^32).
//
// The counters run from the destination's creation in the kernel. A
// destination deleted while connections to it linger waits in the
// kernel's trash for a while, and one created again with the same service
// and address comes back from there with its old counters and connection
// counts.
//
// An owned service without destinations maps to an empty map. An owned
// service deleted between the two dumps shows up the same way (the kernel
// answers a destination dump of a missing service with an empty one), or
// is left out if the kernel says it is gone. The context is checked before
// every dump (the netlink library takes none).
//
// It uses only the request/response socket of the other Client methods,
// whose transactions the netlink library serialises, so it may be called
// while another goroutine changes the table through the same KernelClient.
func (k *KernelClient) DestStats(ctx context.Context, owned func(ServiceKey) bool) (map[ServiceKey]map[netip.AddrPort]DestStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("vip: read stats: %w", err)
	}
	svcs, err := k.c.Services()
	if err == os.ErrNotExist { // the library's answer for an empty table
		return map[ServiceKey]map[netip.AddrPort]DestStats{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("vip: read stats: list services: %w", err)
	}
	out := make(map[ServiceKey]map[netip.AddrPort]DestStats)
	for _, s := range svcs {
		v, ok := fromIPVSService(s.Service)
		if !ok || !owned(v.Key) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("vip: read stats: %w", err)
		}
		dests, err := k.destStats(v.Key)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since the service dump
		}
		if err != nil {
			return nil, fmt.Errorf("vip: read stats: service %s: %w", v.Key, err)
		}
		out[v.Key] = dests
	}
	return out, nil
}

// destStats dumps the destinations of one service with their statistics.
// The error wraps os.ErrNotExist when the service is gone.
func (k *KernelClient) destStats(key ServiceKey) (map[netip.AddrPort]DestStats, error) {
	svc := toIPVSService(key, "")
	ds, err := k.c.Destinations(svc)
	if err == os.ErrNotExist { // the library's answer for no destinations
		return map[netip.AddrPort]DestStats{}, nil
	}
	if err != nil {
		return nil, kernelErr(err)
	}
	out := make(map[netip.AddrPort]DestStats, len(ds))
	for _, d := range ds {
		out[fromIPVSDest(d.Destination, svc.Family).Addr] = fromIPVSStats(d)
	}
	return out, nil
}

// fromIPVSStats maps a destination's counters from the kernel, preferring
// the 64-bit set. A kernel that sends no 64-bit set leaves it zero; then
// the 32-bit set is used (it is zero too when nothing was counted).
func fromIPVSStats(d ipvs.DestinationExtended) DestStats {
	st := d.Stats64
	if st == (ipvs.Stats{}) {
		st = d.Stats
	}
	return DestStats{
		ActiveConns:   d.ActiveConnections,
		InactiveConns: d.InactiveConnections,
		Conns:         st.Connections,
		PacketsIn:     st.IncomingPackets,
		PacketsOut:    st.OutgoingPackets,
		BytesIn:       st.IncomingBytes,
		BytesOut:      st.OutgoingBytes,
		CPS:           st.ConnectionRate,
		PPSIn:         st.IncomingPacketRate,
		PPSOut:        st.OutgoingPacketRate,
		BPSIn:         st.IncomingByteRate,
		BPSOut:        st.OutgoingByteRate,
	}
}
