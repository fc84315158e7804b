package clientfw_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"lbdns/clientfw"
	"lbdns/intent"
	"lbdns/testkit/netns"
)

// benchActions are n actions: blocks and limits at two rates, IPv4 and
// IPv6, each its own /32 or /64.
func benchActions(n int, until time.Time) []intent.ClientAction {
	out := make([]intent.ClientAction, 0, n)
	for i := range n {
		c := intent.ClientAction{Action: intent.ActionBlock, Until: until, Reason: "bench", Set: time.Now()}
		switch i % 4 {
		case 0, 1:
			c.Client = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32)
		case 2:
			c.Client = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, byte(i >> 8), byte(i)}), 64)
		}
		if i%4 == 1 || i%4 == 3 {
			c.Action, c.Rate = intent.ActionLimit, 50+50*(i%8/4)
			if i%4 == 3 {
				c.Client = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 32)
			}
		}
		out = append(out, c)
	}
	return out
}

// BenchmarkApply: the enforcer's reconcile in a namespace, with the
// kernel's table read back each time: unchanged (read and compare
// only), and changed (one action's expiry moves: the table is written
// whole).
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{16, 1024} {
		ns := netns.New(b, fmt.Sprintf("fw-bench-%d", n))
		enf := clientfw.New(clientfw.Options{Table: "lbdns_bench", NetNS: ns.FD()})
		until := time.Now().Add(time.Hour)
		acts := benchActions(n, until)
		if _, err := enf.Apply(acts); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("unchanged/%d", n), func(b *testing.B) {
			for b.Loop() {
				if wrote, err := enf.Apply(acts); err != nil || wrote {
					b.Fatalf("wrote %v, %v", wrote, err)
				}
			}
		})
		b.Run(fmt.Sprintf("changed/%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				acts[0].Until = until.Add(time.Duration(i) * time.Second)
				if wrote, err := enf.Apply(acts); err != nil || !wrote {
					b.Fatalf("wrote %v, %v", wrote, err)
				}
			}
		})
	}
}
