//go:build ipvsvm

package vip_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"lbdns/testkit/ipvsvm"
	"lbdns/vip"
)

// newBatchKernel returns a KernelClient on an empty table, emptied again
// after the test.
func newBatchKernel(t *testing.T) *vip.KernelClient {
	t.Helper()
	ipvsvm.Require(t)
	ipvsvm.Run(t, "ipvsadm", "-C")
	t.Cleanup(func() { ipvsvm.Run(t, "ipvsadm", "-C") })
	c, err := vip.NewKernelClient()
	if err != nil {
		t.Fatalf("NewKernelClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mixedTable returns UDP and TCP 53 on vip4 and vip6 with n real servers
// each, the forwarding method cycling through dr, nat and tunnel and the
// weights 1..n.
func mixedTable(n int) vip.Table {
	fwds := []vip.Forwarding{vip.DirectRoute, vip.NAT, vip.Tunnel}
	t := vip.Table{}
	for _, v := range []netip.Addr{vip4, vip6} {
		for _, p := range []vip.Protocol{vip.UDP, vip.TCP} {
			k := key(v, p)
			s := vip.Service{Key: k, Scheduler: "wrr", Dests: map[netip.AddrPort]vip.Destination{}}
			for i := 1; i <= n; i++ {
				a := rs(v, i)
				s.Dests[a] = vip.Destination{Addr: a, Weight: uint32(i), Forwarding: fwds[i%3]}
			}
			t[k] = s
		}
	}
	return t
}

// applyAll applies ops in one batch and fails the test on any error.
func applyAll(t *testing.T, c *vip.KernelClient, ops []vip.Op) {
	t.Helper()
	errs := c.ApplyBatch(ops)
	if len(errs) != len(ops) {
		t.Fatalf("%d errors for %d ops", len(errs), len(ops))
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("op %d %s: %v", i, ops[i], err)
		}
	}
}

func TestVMBatchMatchesIPVSAdm(t *testing.T) {
	c := newBatchKernel(t)
	// 4 services x 40 destinations: 164 ops, more than one sendmsg.
	want := mixedTable(40)
	ops := vip.Diff(vip.Table{}, want, nil)
	applyAll(t, c, ops)
	if got, w := ipvsvm.Dump(t).String(), ipvsvm.FromVIP(want).String(); got != w {
		t.Fatalf("after create: ipvsadm -Sn\n%s\nwant\n%s", got, w)
	}
	if n := c.BatchSends(); n < 2 {
		t.Errorf("%d sendmsg calls for %d ops, want at least 2", n, len(ops))
	}

	// Updates and deletes of every kind in one batch.
	next := mixedTable(40)
	k := key(vip4, vip.UDP)
	s := next[k]
	s.Scheduler = "rr"
	next[k] = s
	delete(next, key(vip6, vip.TCP))
	a := rs(vip6, 7)
	next[key(vip6, vip.UDP)].Dests[a] = vip.Destination{Addr: a, Weight: 99, Forwarding: vip.Tunnel}
	delete(next[key(vip4, vip.TCP)].Dests, rs(vip4, 3))
	ops = vip.Diff(want, next, nil)
	if len(ops) != 4 {
		t.Fatalf("diff %v, want 4 ops", ops)
	}
	applyAll(t, c, ops)
	if got, w := ipvsvm.Dump(t).String(), ipvsvm.FromVIP(next).String(); got != w {
		t.Fatalf("after update: ipvsadm -Sn\n%s\nwant\n%s", got, w)
	}
}

func TestVMBatchErrors(t *testing.T) {
	c := newBatchKernel(t)
	base := mixedTable(2)
	delete(base, key(vip6, vip.TCP))
	applyAll(t, c, vip.Diff(vip.Table{}, base, nil))

	missing := key(vip6, vip.TCP)
	u4 := key(vip4, vip.UDP)
	d := func(v netip.Addr, n int) vip.Destination {
		return vip.Destination{Addr: rs(v, n), Weight: 5, Forwarding: vip.NAT}
	}
	ops := []vip.Op{
		{Kind: vip.CreateDest, Service: vip.Service{Key: u4}, Dest: d(vip4, 10)},                  // ok
		{Kind: vip.CreateDest, Service: vip.Service{Key: missing}, Dest: d(vip6, 1)},              // no service
		{Kind: vip.CreateService, Service: vip.Service{Key: u4, Scheduler: "wrr"}},                // exists
		{Kind: vip.CreateDest, Service: vip.Service{Key: u4}, Dest: d(vip4, 1)},                   // exists
		{Kind: vip.UpdateDest, Service: vip.Service{Key: u4}, Dest: d(vip4, 50)},                  // no dest
		{Kind: vip.DeleteDest, Service: vip.Service{Key: u4}, Dest: d(vip4, 51)},                  // no dest
		{Kind: vip.UpdateService, Service: vip.Service{Key: missing, Scheduler: "rr"}},            // no service
		{Kind: vip.DeleteService, Service: vip.Service{Key: missing}},                             // no service
		{Kind: vip.UpdateDest, Service: vip.Service{Key: u4}, Dest: d(vip4, 2)},                   // ok
		{Kind: vip.CreateService, Service: vip.Service{Key: missing, Scheduler: "no-such-sched"}}, // no scheduler
	}
	want := []error{nil, os.ErrNotExist, os.ErrExist, os.ErrExist, os.ErrNotExist, os.ErrNotExist, os.ErrNotExist, os.ErrNotExist, nil, os.ErrNotExist}
	errs := c.ApplyBatch(ops)
	if len(errs) != len(ops) {
		t.Fatalf("%d errors for %d ops", len(errs), len(ops))
	}
	for i, err := range errs {
		t.Logf("op %d %s: %v", i, ops[i], err)
		if want[i] == nil && err != nil || want[i] != nil && !errors.Is(err, want[i]) {
			t.Errorf("op %d %s: error %v, want %v", i, ops[i], err, want[i])
		}
	}
	// The same errors as the one-call-per-op path.
	single := []error{
		c.CreateDestination(missing, d(vip6, 1)),
		c.CreateService(vip.Service{Key: u4, Scheduler: "wrr"}),
		c.UpdateDestination(u4, d(vip4, 50)),
	}
	for i, j := range []int{1, 2, 4} {
		if fmt.Sprint(errors.Is(single[i], os.ErrNotExist), errors.Is(single[i], os.ErrExist)) !=
			fmt.Sprint(errors.Is(errs[j], os.ErrNotExist), errors.Is(errs[j], os.ErrExist)) {
			t.Errorf("op %d: batch error %v, single-call error %v", j, errs[j], single[i])
		}
	}
	base[u4].Dests[rs(vip4, 10)] = d(vip4, 10)
	base[u4].Dests[rs(vip4, 2)] = d(vip4, 2)
	if got, w := ipvsvm.Dump(t).String(), ipvsvm.FromVIP(base).String(); got != w {
		t.Fatalf("ipvsadm -Sn\n%s\nwant\n%s", got, w)
	}
}

// TestVMSingleWritesMatchIPVSAdm: the Client methods, one request per op
// through the same encoder as ApplyBatch, build the same table, tunnel
// destinations included, and read back as written.
func TestVMSingleWritesMatchIPVSAdm(t *testing.T) {
	c := newBatchKernel(t)
	want := mixedTable(6)
	ops := vip.Diff(vip.Table{}, want, nil)
	for i, err := range vip.ApplyEach(c, ops) {
		if err != nil {
			t.Errorf("op %d %s: %v", i, ops[i], err)
		}
	}
	if n := c.BatchSends(); n != 0 {
		t.Errorf("single writes made %d batch sendmsg calls", n)
	}
	if got, w := ipvsvm.Dump(t).String(), ipvsvm.FromVIP(want).String(); got != w {
		t.Fatalf("ipvsadm -Sn\n%s\nwant\n%s", got, w)
	}
	for _, k := range want.Keys() {
		ds, err := c.Destinations(k)
		if err != nil {
			t.Fatalf("Destinations(%s): %v", k, err)
		}
		for _, d := range ds {
			if w := want[k].Dests[d.Addr]; d != w {
				t.Errorf("%s: read back %v, want %v", k, d, w)
			}
		}
	}
}
