package vip

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"syscall"
	"testing"

	"github.com/cloudflare/ipvs"
)

// statsFake is an ipvs.Client with canned dumps; the methods DestStats
// does not use are left to the nil interface (they panic if called).
type statsFake struct {
	ipvs.Client
	svcs    []ipvs.ServiceExtended
	svcsErr error
	dests   map[netip.Addr][]ipvs.DestinationExtended
	errs    map[netip.Addr]error
	asked   []netip.Addr
}

func (f *statsFake) Services() ([]ipvs.ServiceExtended, error) { return f.svcs, f.svcsErr }

func (f *statsFake) Destinations(s ipvs.Service) ([]ipvs.DestinationExtended, error) {
	f.asked = append(f.asked, s.Address)
	if err := f.errs[s.Address]; err != nil {
		return nil, err
	}
	return f.dests[s.Address], nil
}

func TestFromIPVSStats(t *testing.T) {
	s32 := ipvs.Stats{Connections: 1, IncomingPackets: 2, OutgoingPackets: 3, IncomingBytes: 4, OutgoingBytes: 5,
		ConnectionRate: 6, IncomingPacketRate: 7, OutgoingPacketRate: 8, IncomingByteRate: 9, OutgoingByteRate: 10}
	s64 := ipvs.Stats{Connections: 1 << 33, IncomingPackets: 12, OutgoingPackets: 13, IncomingBytes: 14, OutgoingBytes: 15,
		ConnectionRate: 16, IncomingPacketRate: 17, OutgoingPacketRate: 18, IncomingByteRate: 19, OutgoingByteRate: 20}
	tests := []struct {
		name string
		d    ipvs.DestinationExtended
		want DestStats
	}{
		{"64-bit preferred", ipvs.DestinationExtended{ActiveConnections: 21, InactiveConnections: 22, Stats: s32, Stats64: s64},
			DestStats{ActiveConns: 21, InactiveConns: 22, Conns: 1 << 33, PacketsIn: 12, PacketsOut: 13, BytesIn: 14, BytesOut: 15,
				CPS: 16, PPSIn: 17, PPSOut: 18, BPSIn: 19, BPSOut: 20}},
		{"32-bit when no 64-bit set", ipvs.DestinationExtended{ActiveConnections: 1, Stats: s32},
			DestStats{ActiveConns: 1, Conns: 1, PacketsIn: 2, PacketsOut: 3, BytesIn: 4, BytesOut: 5,
				CPS: 6, PPSIn: 7, PPSOut: 8, BPSIn: 9, BPSOut: 10}},
		{"nothing counted", ipvs.DestinationExtended{InactiveConnections: 3}, DestStats{InactiveConns: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromIPVSStats(tc.d); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDestStatsFake(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	svc := func(addr string, proto ipvs.Protocol, port uint16) ipvs.ServiceExtended {
		fam := ipvs.INET
		if a(addr).Is6() {
			fam = ipvs.INET6
		}
		return ipvs.ServiceExtended{Service: ipvs.Service{Address: a(addr), Port: port, Protocol: proto, Family: fam}}
	}
	d := func(addr string, conns uint64) ipvs.DestinationExtended {
		fam := ipvs.INET
		if a(addr).Is6() {
			fam = ipvs.INET6
		}
		return ipvs.DestinationExtended{
			Destination: ipvs.Destination{Address: a(addr), Port: 53, Family: fam},
			Stats64:     ipvs.Stats{Connections: conns},
		}
	}
	f := &statsFake{
		svcs: []ipvs.ServiceExtended{
			svc("192.0.2.1", ipvs.UDP, 53),
			svc("2001:db8::1", ipvs.UDP, 53),
			svc("192.0.2.9", ipvs.UDP, 53), // not owned
			svc("192.0.2.2", ipvs.UDP, 53), // owned, no destinations
			svc("192.0.2.3", ipvs.UDP, 53), // owned, deleted since the service dump
			{Service: ipvs.Service{FWMark: 7, Family: ipvs.INET}},
		},
		dests: map[netip.Addr][]ipvs.DestinationExtended{
			a("192.0.2.1"):   {d("10.0.0.1", 5), d("10.0.0.2", 6)},
			a("2001:db8::1"): {d("2001:db8::a", 7)},
			a("192.0.2.9"):   {d("10.0.0.9", 9)},
		},
		errs: map[netip.Addr]error{
			a("192.0.2.2"): os.ErrNotExist, // the library's answer for an empty dump
			a("192.0.2.3"): syscall.ESRCH,
		},
	}
	owned := func(k ServiceKey) bool { return k.Addr != a("192.0.2.9") }
	got, err := (&KernelClient{c: f}).DestStats(context.Background(), owned)
	if err != nil {
		t.Fatalf("DestStats: %v", err)
	}
	want := map[ServiceKey]map[netip.AddrPort]uint64{
		key("192.0.2.1:53", UDP):     {netip.MustParseAddrPort("10.0.0.1:53"): 5, netip.MustParseAddrPort("10.0.0.2:53"): 6},
		key("[2001:db8::1]:53", UDP): {netip.MustParseAddrPort("[2001:db8::a]:53"): 7},
		key("192.0.2.2:53", UDP):     {},
	}
	if len(got) != len(want) {
		t.Errorf("got %d services %v, want %d", len(got), got, len(want))
	}
	for k, wd := range want {
		gd, ok := got[k]
		if !ok || gd == nil || len(gd) != len(wd) {
			t.Errorf("%s: got %v (present %v), want %v", k, gd, ok, wd)
			continue
		}
		for addr, conns := range wd {
			if gd[addr].Conns != conns {
				t.Errorf("%s %s: Conns %d, want %d", k, addr, gd[addr].Conns, conns)
			}
		}
	}
	for _, asked := range f.asked {
		if asked == a("192.0.2.9") {
			t.Error("the destinations of an unowned service were read")
		}
	}

	t.Run("empty table", func(t *testing.T) {
		got, err := (&KernelClient{c: &statsFake{svcsErr: os.ErrNotExist}}).DestStats(context.Background(), owned)
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("got %v, %v; want an empty map", got, err)
		}
	})
	t.Run("errors wrapped", func(t *testing.T) {
		_, err := (&KernelClient{c: &statsFake{svcsErr: syscall.EPERM}}).DestStats(context.Background(), owned)
		if !errors.Is(err, syscall.EPERM) {
			t.Errorf("service dump error: %v, want EPERM wrapped", err)
		}
		f := &statsFake{svcs: f.svcs[:1], errs: map[netip.Addr]error{a("192.0.2.1"): syscall.ENOMEM}}
		_, err = (&KernelClient{c: f}).DestStats(context.Background(), owned)
		if !errors.Is(err, syscall.ENOMEM) {
			t.Errorf("destination dump error: %v, want ENOMEM wrapped", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := (&KernelClient{c: f}).DestStats(ctx, owned)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	})
}
