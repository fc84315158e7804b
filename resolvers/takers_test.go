package resolvers

import (
	"net/netip"
	"reflect"
	"testing"

	"lbdns/configs"
	"lbdns/vip"
)

func TestTakers(t *testing.T) {
	cfg := &configs.Config{VIPs: []configs.VIP{{Name: "v4", Addr: netip.MustParseAddr("192.0.2.53")}},
		Resolvers: []configs.Resolver{{Name: "bind-1", AddrPort: netip.MustParseAddrPort("127.0.0.1:5301")}}}
	udp := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.53"), Port: 53, Proto: vip.UDP}
	tcp := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.53"), Port: 53, Proto: vip.TCP}
	other := vip.ServiceKey{Addr: netip.MustParseAddr("198.51.100.53"), Port: 53, Proto: vip.UDP}
	a, b := netip.MustParseAddrPort("127.0.0.1:5301"), netip.MustParseAddrPort("127.0.0.1:5302")
	// table builds services from key -> destination -> weight.
	table := func(svcs map[vip.ServiceKey]map[netip.AddrPort]uint32) vip.Table {
		out := vip.Table{}
		for k, ds := range svcs {
			s := vip.Service{Key: k, Scheduler: "wrr", Dests: map[netip.AddrPort]vip.Destination{}}
			for addr, w := range ds {
				s.Dests[addr] = vip.Destination{Addr: addr, Weight: w}
			}
			out[k] = s
		}
		return out
	}
	both := table(map[vip.ServiceKey]map[netip.AddrPort]uint32{udp: {a: 100, b: 100}, tcp: {a: 100, b: 100}, other: {a: 100}})
	for _, tc := range []struct {
		name          string
		before, after vip.Table
		lost, added   []string
	}{
		{name: "same", before: both, after: both},
		{name: "one of two drained", before: both,
			after: table(map[vip.ServiceKey]map[netip.AddrPort]uint32{udp: {a: 0, b: 100}, tcp: {a: 0, b: 100}, other: {a: 100}})},
		{name: "last taker drained", before: both,
			after: table(map[vip.ServiceKey]map[netip.AddrPort]uint32{udp: {a: 0, b: 0}, tcp: {b: 100}, other: {a: 0}}),
			lost:  []string{"v4 udp/192.0.2.53:53", "? udp/198.51.100.53:53"}},
		{name: "service gone", before: both,
			after: table(map[vip.ServiceKey]map[netip.AddrPort]uint32{udp: {a: 100}, other: {a: 100}}),
			lost:  []string{"v4 tcp/192.0.2.53:53"}},
		{name: "fail open adds", before: table(map[vip.ServiceKey]map[netip.AddrPort]uint32{udp: {a: 100, b: 0}}),
			after: table(map[vip.ServiceKey]map[netip.AddrPort]uint32{udp: {a: 0, b: 100}, tcp: {a: 100}}),
			// Named from the config, address kept; a destination no
			// resolver has is listed by its address.
			added: []string{"127.0.0.1:5302", "bind-1 (127.0.0.1:5301)"}},
		{name: "a resolver newly taking in two services is named once", before: vip.Table{},
			after: table(map[vip.ServiceKey]map[netip.AddrPort]uint32{udp: {a: 100}, tcp: {a: 100}}),
			added: []string{"bind-1 (127.0.0.1:5301)"}},
		{name: "weight zero is not a taker", before: vip.Table{},
			after: table(map[vip.ServiceKey]map[netip.AddrPort]uint32{udp: {a: 0}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LostTakers(cfg, tc.before, tc.after); !reflect.DeepEqual(got, tc.lost) {
				t.Errorf("LostTakers = %q, want %q", got, tc.lost)
			}
			if got := NewTakers(cfg, tc.before, tc.after); !reflect.DeepEqual(got, tc.added) {
				t.Errorf("NewTakers = %q, want %q", got, tc.added)
			}
		})
	}
}
