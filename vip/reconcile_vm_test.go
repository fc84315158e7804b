//go:build ipvsvm

package vip_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/ipvsvm"
	"lbdns/testkit/vipfake"
	"lbdns/vip"
)

// Addresses used in the VM tests. They exist only inside the VM's kernel
// (the VM has no network device).
var (
	vip4 = netip.MustParseAddr("10.255.0.1")
	vip6 = netip.MustParseAddr("fd00::53")
)

// rs returns real server n (1..254) in the family of v, port 53:
// 10.255.1.n or fd00::1:n.
func rs(v netip.Addr, n int) netip.AddrPort {
	if v.Is4() {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 255, 1, byte(n)}), 53)
	}
	return netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("fd00::1:%x", n)), 53)
}

// key returns the key of port 53 on v.
func key(v netip.Addr, p vip.Protocol) vip.ServiceKey {
	return vip.ServiceKey{Addr: v, Port: 53, Proto: p}
}

// ownVIPs owns port 53 on the given addresses, as the daemon owns its VIPs.
func ownVIPs(vips ...netip.Addr) func(vip.ServiceKey) bool {
	return func(k vip.ServiceKey) bool {
		if k.Port != 53 {
			return false
		}
		for _, v := range vips {
			if k.Addr == v {
				return true
			}
		}
		return false
	}
}

// dnsTable returns UDP and TCP 53 on each VIP, each with real servers
// 1..n, NAT, weight 1, scheduler sched.
func dnsTable(sched string, n int, vips ...netip.Addr) vip.Table {
	t := vip.Table{}
	for _, v := range vips {
		for _, p := range []vip.Protocol{vip.UDP, vip.TCP} {
			k := key(v, p)
			s := vip.Service{Key: k, Scheduler: sched, Dests: map[netip.AddrPort]vip.Destination{}}
			for i := 1; i <= n; i++ {
				a := rs(v, i)
				s.Dests[a] = vip.Destination{Addr: a, Weight: 1, Forwarding: vip.NAT}
			}
			t[k] = s
		}
	}
	return t
}

// newKernel returns a KernelClient closed at the end of the test.
func newKernel(t *testing.T) *vip.KernelClient {
	t.Helper()
	c, err := vip.NewKernelClient()
	if err != nil {
		t.Fatalf("NewKernelClient: %v", err)
	}
	if cl, ok := any(c).(io.Closer); ok {
		t.Cleanup(func() { cl.Close() })
	}
	return c
}

// checkKernel fails t unless the kernel's table, read with ipvsadm, is
// exactly want plus the unowned services untouched.
func checkKernel(t *testing.T, want vip.Table, unowned ipvsvm.Table) {
	t.Helper()
	got := ipvsvm.Dump(t).String()
	exp := ipvsvm.Merge(unowned, ipvsvm.FromVIP(want)).String()
	if got != exp {
		t.Fatalf("kernel table (ipvsadm -Sn) differs from desired + unowned\n--- got:\n%s\n--- want:\n%s", got, exp)
	}
}

// opKinds counts ops by kind, for compact assertions.
func opKinds(ops []vip.Op) map[vip.OpKind]int {
	m := map[vip.OpKind]int{}
	for _, op := range ops {
		m[op.Kind]++
	}
	return m
}

// wantOps fails t unless ops has exactly the given number of each kind.
func wantOps(t *testing.T, ops []vip.Op, want map[vip.OpKind]int) {
	t.Helper()
	got := opKinds(ops)
	ok := len(got) == len(want)
	for k, n := range want {
		if got[k] != n {
			ok = false
		}
	}
	if !ok {
		var b strings.Builder
		for _, op := range ops {
			b.WriteString("\n  " + op.String())
		}
		t.Fatalf("ops by kind = %v, want %v; ops:%s", got, want, b.String())
	}
}

// handMade creates services the daemon does not own, the way an operator
// would: another address, another port on a VIP, and a firewall mark. It
// returns them as ipvsadm shows them.
func handMade(t *testing.T) ipvsvm.Table {
	t.Helper()
	ipvsvm.Run(t, "ipvsadm", "-C")
	for _, line := range []string{
		"ipvsadm -A -u 10.255.9.9:53 -s rr",
		"ipvsadm -a -u 10.255.9.9:53 -r 10.255.9.10:53 -m -w 2",
		"ipvsadm -A -t 10.255.0.1:5353 -s wlc",
		"ipvsadm -a -t 10.255.0.1:5353 -r 10.255.9.11:5353 -m -w 1",
		"ipvsadm -A -f 7 -s rr",
		"ipvsadm -a -f 7 -r 10.255.9.12:0 -g -w 1",
		"ipvsadm -A -u [fd00::99]:53 -s sh",
	} {
		ipvsvm.Sh(t, line)
	}
	tab := ipvsvm.Dump(t)
	if len(tab) != 4 {
		t.Fatalf("hand-made table has %d services, want 4:\n%s", len(tab), tab)
	}
	return tab
}

// TestVMReconcile drives the Reconciler over the real kernel through the
// life of a VIP: creation from empty, health changes, a daemon restart, and
// drift made by hand, with services it does not own alongside throughout.
// The steps share one kernel table and run in order.
func TestVMReconcile(t *testing.T) {
	ipvsvm.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() { ipvsvm.Run(t, "ipvsadm", "-C") })

	unowned := handMade(t)
	owned := ownVIPs(vip4, vip6)
	desired := dnsTable("wrr", 3, vip4, vip6)
	kc := newKernel(t)
	r := vip.NewReconciler(kc, owned)

	t.Run("create from empty", func(t *testing.T) {
		ops, err := r.Resync(ctx, desired)
		if err != nil {
			t.Fatalf("Resync: %v", err)
		}
		wantOps(t, ops, map[vip.OpKind]int{vip.CreateService: 4, vip.CreateDest: 12})
		checkKernel(t, desired, unowned)

		svcs, err := kc.Services()
		if err != nil {
			t.Fatalf("Services: %v", err)
		}
		seen := map[vip.ServiceKey]bool{}
		for _, s := range svcs {
			seen[s.Key] = true
		}
		for k := range desired {
			if !seen[k] {
				t.Errorf("Services() lacks %s: %v", k, svcs)
			}
			ds, err := kc.Destinations(k)
			if err != nil {
				t.Fatalf("Destinations(%s): %v", k, err)
			}
			if len(ds) != 3 {
				t.Errorf("Destinations(%s) = %v, want 3", k, ds)
			}
		}
		list := ipvsvm.Run(t, "ipvsadm", "-Ln")
		for _, want := range []string{"UDP  10.255.0.1:53 wrr", "TCP  [fd00::53]:53 wrr", "10.255.1.3:53", "[fd00::1:3]:53"} {
			if !strings.Contains(list, want) {
				t.Errorf("ipvsadm -Ln lacks %q:\n%s", want, list)
			}
		}
	})

	// Health changes: each step edits the desired table as the pool
	// policy would, and Sync applies exactly that change without reading
	// the kernel.
	u4, t6 := key(vip4, vip.UDP), key(vip6, vip.TCP)
	steps := []struct {
		name string
		edit func(vip.Table)
		want map[vip.OpKind]int
	}{
		{"remove a failed server", func(d vip.Table) { delete(d[u4].Dests, rs(vip4, 3)) },
			map[vip.OpKind]int{vip.DeleteDest: 1}},
		{"add it back", func(d vip.Table) {
			d[u4].Dests[rs(vip4, 3)] = vip.Destination{Addr: rs(vip4, 3), Weight: 1, Forwarding: vip.NAT}
		}, map[vip.OpKind]int{vip.CreateDest: 1}},
		{"reweight", func(d vip.Table) {
			d[t6].Dests[rs(vip6, 2)] = vip.Destination{Addr: rs(vip6, 2), Weight: 5, Forwarding: vip.NAT}
		}, map[vip.OpKind]int{vip.UpdateDest: 1}},
		{"drain to weight 0", func(d vip.Table) {
			d[u4].Dests[rs(vip4, 1)] = vip.Destination{Addr: rs(vip4, 1), Weight: 0, Forwarding: vip.NAT}
		}, map[vip.OpKind]int{vip.UpdateDest: 1}},
		{"add a new server everywhere", func(d vip.Table) {
			for k, s := range d {
				a := rs(k.Addr, 4)
				s.Dests[a] = vip.Destination{Addr: a, Weight: 2, Forwarding: vip.NAT}
			}
		}, map[vip.OpKind]int{vip.CreateDest: 4}},
		{"change scheduler", func(d vip.Table) {
			s := d[t6]
			s.Scheduler = "mh"
			d[t6] = s
		}, map[vip.OpKind]int{vip.UpdateService: 1}},
		{"no change", func(vip.Table) {}, map[vip.OpKind]int{}},
	}
	for _, st := range steps {
		t.Run("sync "+st.name, func(t *testing.T) {
			before := r.Stats()
			st.edit(desired)
			ops, err := r.Sync(ctx, desired)
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			wantOps(t, ops, st.want)
			if after := r.Stats(); after.Dumps != before.Dumps {
				t.Errorf("Sync dumped the table (%d dumps, was %d)", after.Dumps, before.Dumps)
			}
			checkKernel(t, desired, unowned)
		})
	}

	kc2 := newKernel(t) // the restarted daemon's connection, open to the end
	t.Run("restart adopts without flush", func(t *testing.T) {
		before := ipvsvm.Dump(t).String()
		cc := vipfake.NewCountingClient(kc2)
		r2 := vip.NewReconciler(cc, owned)
		ops, err := r2.Resync(ctx, desired)
		if err != nil {
			t.Fatalf("Resync: %v", err)
		}
		if len(ops) != 0 {
			t.Errorf("adoption applied %d ops, want 0: %v", len(ops), ops)
		}
		if n := cc.Counts().Writes; n != 0 {
			t.Errorf("adoption made %d writes, want 0", n)
		}
		if after := ipvsvm.Dump(t).String(); after != before {
			t.Errorf("table changed across adoption\n--- before:\n%s\n--- after:\n%s", before, after)
		}
		r = r2 // the restarted daemon carries on
	})

	t.Run("drift repair", func(t *testing.T) {
		for _, line := range []string{
			"ipvsadm -d -u 10.255.0.1:53 -r 10.255.1.2:53",          // server removed by hand
			"ipvsadm -e -t [fd00::53]:53 -r [fd00::1:1]:53 -m -w 9", // reweighted by hand
			"ipvsadm -a -u 10.255.0.1:53 -r 10.255.1.9:53 -m -w 1",  // stray servers added
			"ipvsadm -a -t [fd00::53]:53 -r [fd00::1:7]:53 -m -w 1",
			"ipvsadm -D -t 10.255.0.1:53", // whole service deleted
		} {
			ipvsvm.Sh(t, line)
		}
		ops, err := r.Resync(ctx, desired)
		if err != nil {
			t.Fatalf("Resync: %v", err)
		}
		wantOps(t, ops, map[vip.OpKind]int{
			vip.CreateService: 1, vip.CreateDest: 1 + 4, // tcp/10.255.0.1:53 again with its 4 servers, and 10.255.1.2
			vip.UpdateDest: 1, // fd00::1:1 back to its weight
			vip.DeleteDest: 2, // 10.255.1.9 and fd00::1:7
		})
		checkKernel(t, desired, unowned)
	})

	t.Run("resync is idempotent", func(t *testing.T) {
		ops, err := r.Resync(ctx, desired)
		if err != nil {
			t.Fatalf("Resync: %v", err)
		}
		wantOps(t, ops, map[vip.OpKind]int{})
		checkKernel(t, desired, unowned)
	})

	t.Run("empty desired removes only owned", func(t *testing.T) {
		ops, err := r.Resync(ctx, vip.Table{})
		if err != nil {
			t.Fatalf("Resync: %v", err)
		}
		wantOps(t, ops, map[vip.OpKind]int{vip.DeleteService: 4})
		checkKernel(t, vip.Table{}, unowned)
	})
}
