//go:build ipvsvm

package vip_test

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/cloudflare/ipvs"
	"github.com/cloudflare/ipvs/netmask"

	"lbdns/testkit/ipvsvm"
)

// TestVMSmoke proves the VM harness: it programs IPVS with
// github.com/cloudflare/ipvs directly and cross-checks the result with
// ipvsadm, an independent tool reading the same kernel table.
func TestVMSmoke(t *testing.T) {
	ipvsvm.Require(t)
	c, err := ipvs.New()
	if err != nil {
		t.Fatalf("ipvs.New: %v", err)
	}
	t.Cleanup(func() {
		ipvsvm.Run(t, "ipvsadm", "-C")
	})

	info, err := c.Info()
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	t.Logf("IPVS version %v, connection table size %d", info.Version, info.ConnectionTableSize)

	if _, err := c.Services(); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Services on an empty table: %v", err)
	}

	tests := []struct {
		name string
		svc  ipvs.Service
		dest ipvs.Destination
		key  string
		rs   string
	}{
		{
			name: "v4 udp",
			svc: ipvs.Service{
				Address: netip.MustParseAddr("10.255.0.1"), Netmask: netmask.MaskFrom(32, 32),
				Port: 53, Family: ipvs.INET, Protocol: ipvs.UDP, Scheduler: "wrr",
			},
			dest: ipvs.Destination{
				Address: netip.MustParseAddr("10.255.1.1"), Port: 53, Family: ipvs.INET,
				FwdMethod: ipvs.Masquerade, Weight: 7,
			},
			key: "-u 10.255.0.1:53",
			rs:  "10.255.1.1:53",
		},
		{
			name: "v6 tcp",
			svc: ipvs.Service{
				Address: netip.MustParseAddr("fd00::1"), Netmask: netmask.MaskFrom(128, 128),
				Port: 53, Family: ipvs.INET6, Protocol: ipvs.TCP, Scheduler: "rr",
			},
			dest: ipvs.Destination{
				Address: netip.MustParseAddr("fd00::1:1"), Port: 53, Family: ipvs.INET6,
				FwdMethod: ipvs.DirectRoute, Weight: 3,
			},
			key: "-t [fd00::1]:53",
			rs:  "[fd00::1:1]:53",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.CreateService(tc.svc); err != nil {
				t.Fatalf("CreateService: %v", err)
			}
			if err := c.CreateService(tc.svc); !errors.Is(err, os.ErrExist) {
				t.Errorf("duplicate CreateService: got %v, want os.ErrExist", err)
			}
			if err := c.CreateDestination(tc.svc, tc.dest); err != nil {
				t.Fatalf("CreateDestination: %v", err)
			}
			got, err := c.Destinations(tc.svc)
			if err != nil {
				t.Fatalf("Destinations: %v", err)
			}
			if len(got) != 1 || got[0].Address != tc.dest.Address || got[0].Weight != tc.dest.Weight {
				t.Fatalf("Destinations = %+v, want one %v weight %d", got, tc.dest.Address, tc.dest.Weight)
			}

			tab := ipvsvm.Dump(t)
			s, ok := tab[tc.key]
			if !ok {
				t.Fatalf("ipvsadm -Sn has no %s:\n%s", tc.key, tab)
			}
			if s.Scheduler != tc.svc.Scheduler {
				t.Errorf("ipvsadm scheduler %q, want %q", s.Scheduler, tc.svc.Scheduler)
			}
			d, ok := s.Dests[tc.rs]
			if !ok || d.Weight != int(tc.dest.Weight) {
				t.Errorf("ipvsadm dest %s = %+v (present %v), want weight %d\n%s", tc.rs, d, ok, tc.dest.Weight, tab)
			}
		})
	}

	svcs, err := c.Services()
	if err != nil {
		t.Fatalf("Services: %v", err)
	}
	if len(svcs) != len(tests) {
		t.Errorf("Services() returned %d services, want %d", len(svcs), len(tests))
	}
	list := ipvsvm.Run(t, "ipvsadm", "-Ln")
	t.Logf("ipvsadm -Ln:\n%s", list)
	for _, want := range []string{"UDP  10.255.0.1:53 wrr", "TCP  [fd00::1]:53 rr", "10.255.1.1:53", "[fd00::1:1]:53"} {
		if !strings.Contains(list, want) {
			t.Errorf("ipvsadm -Ln lacks %q", want)
		}
	}
}
