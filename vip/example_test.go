package vip_test

import (
	"context"
	"fmt"
	"net/netip"

	"lbdns/vip"
)

// A dry run: the reconciler programs an in-memory table. With a
// KernelClient from vip.NewKernelClient the same calls program the kernel.
func ExampleReconciler() {
	key := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Proto: vip.UDP}
	r1 := netip.MustParseAddrPort("10.0.0.1:53")
	r2 := netip.MustParseAddrPort("10.0.0.2:53")
	desired := vip.Table{key: {
		Key:       key,
		Scheduler: "wrr",
		Dests: map[netip.AddrPort]vip.Destination{
			r1: {Addr: r1, Weight: 100, Forwarding: vip.DirectRoute},
			r2: {Addr: r2, Weight: 100, Forwarding: vip.DirectRoute},
		},
	}}
	owned := func(k vip.ServiceKey) bool { return k == key }
	rec := vip.NewReconciler(vip.NewMemClient(), owned)
	ctx := context.Background()

	ops, err := rec.Resync(ctx, desired) // at start: adopt, no flush
	if err != nil {
		fmt.Println(err)
	}
	for _, op := range ops {
		fmt.Println(op)
	}

	// r2 failed its checks: one write, no read.
	desired[key].Dests[r2] = vip.Destination{Addr: r2, Weight: 0, Forwarding: vip.DirectRoute}
	ops, _ = rec.Sync(ctx, desired)
	fmt.Println(ops)
	// Output:
	// create-service udp/192.0.2.1:53 sched=wrr
	// create-dest udp/192.0.2.1:53 -> 10.0.0.1:53 w=100 dr
	// create-dest udp/192.0.2.1:53 -> 10.0.0.2:53 w=100 dr
	// [update-dest udp/192.0.2.1:53 -> 10.0.0.2:53 w=0 dr]
}
