package vipfake_test

import (
	"net/netip"
	"testing"

	"lbdns/testkit/vipfake"
	"lbdns/vip"
)

// plainClient hides MemClient's ApplyBatch: a Client that cannot batch.
type plainClient struct{ vip.Client }

func TestCountingClient(t *testing.T) {
	k := vip.ServiceKey{Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Proto: vip.UDP}
	d := vip.Destination{Addr: netip.MustParseAddrPort("10.0.0.1:53"), Weight: 1}
	for _, tc := range []struct {
		name string
		wrap func(*vip.MemClient) vip.Client
	}{
		{"batch client", func(m *vip.MemClient) vip.Client { return m }},
		{"plain client", func(m *vip.MemClient) vip.Client { return plainClient{m} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vip.NewMemClient()
			c := vipfake.NewCountingClient(tc.wrap(m))
			errs := c.ApplyBatch([]vip.Op{
				{Kind: vip.CreateService, Service: vip.Service{Key: k, Scheduler: "wrr"}},
				{Kind: vip.CreateDest, Service: vip.Service{Key: k}, Dest: d},
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
			}
			if err := c.UpdateDestination(k, d); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Services(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Destinations(k); err != nil {
				t.Fatal(err)
			}
			want := vipfake.ClientCounts{Services: 1, Destinations: 1, Writes: 3, Batches: 1}
			if got := c.Counts(); got != want {
				t.Errorf("counts %+v, want %+v", got, want)
			}
			if len(m.Table()[k].Dests) != 1 {
				t.Errorf("table %v", m.Table())
			}
		})
	}
}
