//go:build ipvsvm

package ipvsbench_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/ipvsvm"
	"lbdns/testkit/vipfake"
	"lbdns/vip"
)

// Size of the benchmark table: addrs addresses (half IPv4, half IPv6), UDP
// and TCP 53 on each, dests destinations per service.
const (
	addrs = 500
	dests = 10
	// rounds is how many times each full-sync contender runs, taking
	// turns; the fastest is reported (the least disturbed by other load on
	// the host).
	rounds = 2
	// changes is how many single-destination changes are timed.
	changes = 20
)

// bigTable returns addrs*2 services with dests destinations each.
func bigTable() vip.Table {
	t := vip.Table{}
	for i := range addrs {
		var a netip.Addr
		if i%2 == 0 {
			a = netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)})
		} else {
			a = netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x00, 2: 0x02, 3: 0x00, 14: byte(i >> 8), 15: byte(i)})
		}
		for _, p := range []vip.Protocol{vip.UDP, vip.TCP} {
			k := vip.ServiceKey{Addr: a, Port: 53, Proto: p}
			s := vip.Service{Key: k, Scheduler: "wrr", Dests: map[netip.AddrPort]vip.Destination{}}
			for j := 1; j <= dests; j++ {
				var d netip.Addr
				if a.Is4() {
					d = netip.AddrFrom4([4]byte{10, 201, 0, byte(j)})
				} else {
					d = netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x00, 2: 0x02, 3: 0x01, 15: byte(j)})
				}
				ap := netip.AddrPortFrom(d, 53)
				s.Dests[ap] = vip.Destination{Addr: ap, Weight: uint32(j), Forwarding: vip.NAT}
			}
			t[k] = s
		}
	}
	return t
}

// weightOf returns the weight of destination d of the UDP service on v as
// `ipvsadm -Ln` shows it, or -1 if it is not there.
func weightOf(t *testing.T, v netip.Addr, d netip.AddrPort) int {
	out := ipvsvm.Run(t, "ipvsadm", "-Ln", "-u", netip.AddrPortFrom(v, 53).String())
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "->" && f[1] == d.String() {
			w, err := strconv.Atoi(f[3])
			if err != nil {
				t.Fatalf("ipvsadm weight %q: %v", f[3], err)
			}
			return w
		}
	}
	return -1
}

// median returns the median of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestBenchIPVS times, in one VM run, (1) a full sync of a 1,000-service,
// 10,000-destination table from empty through the Reconciler next to
// `ipvsadm -R` restoring the same table, and (2) one destination change on
// that table through Sync, counting the netlink calls it made. It prints
// the figures; it asserts only behaviour (the kernel's table and the call
// counts), never speed.
func TestBenchIPVS(t *testing.T) {
	ipvsvm.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t.Cleanup(func() { ipvsvm.Run(t, "ipvsadm", "-C") })

	desired := bigTable()
	want := ipvsvm.FromVIP(desired).String()
	rules := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(rules, []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		if got, want := ipvsvm.Dump(t).String(), ipvsvm.FromVIP(desired).String(); got != want {
			t.Fatalf("%s: kernel table differs from desired (%d vs %d bytes)", what, len(got), len(want))
		}
	}

	kc, err := vip.NewKernelClient()
	if err != nil {
		t.Fatalf("NewKernelClient: %v", err)
	}
	if cl, ok := any(kc).(io.Closer); ok {
		defer cl.Close()
	}

	var restore, recon []time.Duration
	var r *vip.Reconciler
	var cc *vipfake.CountingClient
	var sends []uint64 // sendmsg calls of the batch path per Reconciler round
	for i := range rounds {
		ipvsvm.Run(t, "ipvsadm", "-C")
		start := time.Now()
		ipvsvm.Sh(t, "ipvsadm -R < "+rules)
		restore = append(restore, time.Since(start))
		check(fmt.Sprintf("ipvsadm -R round %d", i))

		ipvsvm.Run(t, "ipvsadm", "-C")
		cc = vipfake.NewCountingClient(kc)
		r = vip.NewReconciler(cc, nil)
		sent := kc.BatchSends()
		start = time.Now()
		ops, err := r.Resync(ctx, desired)
		recon = append(recon, time.Since(start))
		sends = append(sends, kc.BatchSends()-sent)
		if err != nil {
			t.Fatalf("Resync round %d: %v", i, err)
		}
		if n := len(ops); n != addrs*2*(1+dests) {
			t.Fatalf("Resync round %d applied %d ops, want %d", i, n, addrs*2*(1+dests))
		}
		check(fmt.Sprintf("Reconciler round %d", i))
	}
	mr, mc := slices.Min(restore), slices.Min(recon)
	t.Logf("full sync of %d services x %d destinations from empty, best of %d:", addrs*2, dests, rounds)
	t.Logf("  ipvsadm -R      %8.1f ms  %v", ms(mr), restore)
	t.Logf("  vip.Reconciler  %8.1f ms  %v", ms(mc), recon)
	t.Logf("  ratio Reconciler / ipvsadm -R = %.2f", float64(mc)/float64(mr))
	t.Logf("  Reconciler writes per round: %d ops in %d ApplyBatch call(s), %v sendmsg calls",
		cc.Counts().Writes, cc.Counts().Batches, sends)

	// One health change at a time on the full table: flip one weight.
	k := vip.ServiceKey{Addr: netip.AddrFrom4([4]byte{10, 200, 0, 0}), Port: 53, Proto: vip.UDP}
	d := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 201, 0, 1}), 53)
	var one, diffs []time.Duration
	for i := range changes {
		w := uint32(100 + i)
		desired[k].Dests[d] = vip.Destination{Addr: d, Weight: w, Forwarding: vip.NAT}
		cur := r.Table()
		start := time.Now()
		vip.Diff(cur, desired, nil)
		diffs = append(diffs, time.Since(start))
		before := cc.Counts()
		start = time.Now()
		ops, err := r.Sync(ctx, desired)
		one = append(one, time.Since(start))
		if err != nil {
			t.Fatalf("Sync change %d: %v", i, err)
		}
		after := cc.Counts()
		writes, svcReads, destReads := after.Writes-before.Writes, after.Services-before.Services, after.Destinations-before.Destinations
		if len(ops) != 1 || writes != 1 || svcReads != 0 || destReads != 0 {
			t.Fatalf("change %d: %d ops, %d writes, %d service dumps, %d destination dumps; want 1, 1, 0, 0",
				i, len(ops), writes, svcReads, destReads)
		}
		if got := weightOf(t, k.Addr, d); got != int(w) {
			t.Fatalf("change %d: kernel weight %d, want %d", i, got, w)
		}
	}
	t.Logf("one destination change on that table via Sync, %d changes:", changes)
	t.Logf("  median %.3f ms, min %.3f ms, max %.3f ms", ms(median(one)), ms(slices.Min(one)), ms(slices.Max(one)))
	t.Logf("  of which the pure Diff over the whole table: median %.3f ms", ms(median(diffs)))
	t.Logf("  netlink calls per change: 1 write, 0 service dumps, 0 destination dumps")
	check("after the changes")
	t.Logf("  (a full resync of the same table reads 1 service dump + %d destination dumps)", addrs*2)

	// The peers for one change, in the same run: ipvsadm editing the one
	// destination (one process, one netlink request), and ipvsadm -R
	// restoring the whole table (what a tool that regenerates its rules
	// does).
	var edits []time.Duration
	for i := range changes {
		start := time.Now()
		ipvsvm.Run(t, "ipvsadm", "-e", "-u", netip.AddrPortFrom(k.Addr, k.Port).String(), "-r", d.String(), "-m", "-w", fmt.Sprint(200+i))
		edits = append(edits, time.Since(start))
	}
	t.Logf("  ipvsadm -e of the same destination, %d changes: median %.3f ms", changes, ms(median(edits)))
	t.Logf("  ratio one change via Sync / ipvsadm -e = %.2f; / ipvsadm -R of the table = %.4f",
		float64(median(one))/float64(median(edits)), float64(median(one))/float64(mr))
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
