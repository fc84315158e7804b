//go:build ipvsvm

package vip_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/ipvsvm"
	"lbdns/vip"
)

// listing is the IPVS table as `ipvsadm -Ln --exact` and its --stats and
// --rate variants print it: the trailing numbers of each destination line,
// keyed by service ("UDP 10.255.5.1:53") and destination ("10.255.5.11:53").
type listing map[string]map[string][]uint64

// listIPVS runs `ipvsadm -Ln --exact` with the extra flags and parses the
// last n numbers of every destination line.
func listIPVS(t *testing.T, n int, flags ...string) listing {
	t.Helper()
	args := append([]string{"-Ln", "--exact"}, flags...)
	l, err := parseListing(ipvsvm.Run(t, "ipvsadm", args...), n)
	if err != nil {
		t.Fatalf("ipvsadm %s: %v", strings.Join(args, " "), err)
	}
	return l
}

// parseListing parses the output of `ipvsadm -Ln --exact`: service lines
// start with the protocol, destination lines with "->"; the two header
// lines (the version, and the column names) are skipped.
func parseListing(out string, n int) (listing, error) {
	l := listing{}
	var svc string
	sc := bufio.NewScanner(strings.NewReader(out))
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0 || f[0] == "IP" || f[0] == "Prot":
		case f[0] == "->" && len(f) >= 2 && f[1] == "RemoteAddress:Port":
		case f[0] == "UDP" || f[0] == "TCP" || f[0] == "FWM":
			if len(f) < 2 {
				return nil, fmt.Errorf("line %d: short service line %q", line, sc.Text())
			}
			svc = f[0] + " " + f[1]
			l[svc] = map[string][]uint64{}
		case f[0] == "->":
			if svc == "" || len(f) < 2+n {
				return nil, fmt.Errorf("line %d: destination line %q without a service or %d numbers", line, sc.Text(), n)
			}
			nums := make([]uint64, n)
			for i, s := range f[len(f)-n:] {
				v, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", line, err)
				}
				nums[i] = v
			}
			l[svc][f[1]] = nums
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", line, sc.Text())
		}
	}
	return l, sc.Err()
}

// fromStats renders DestStats as the three ipvsadm listings show them:
// plain (ActiveConn InActConn), --stats (Conns InPkts OutPkts InBytes
// OutBytes) and --rate (CPS InPPS OutPPS InBPS OutBPS).
func fromStats(got map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats) (plain, stats, rate listing) {
	plain, stats, rate = listing{}, listing{}, listing{}
	for k, ds := range got {
		name := strings.ToUpper(k.Proto.String()) + " " + netip.AddrPortFrom(k.Addr, k.Port).String()
		plain[name], stats[name], rate[name] = map[string][]uint64{}, map[string][]uint64{}, map[string][]uint64{}
		for a, d := range ds {
			plain[name][a.String()] = []uint64{uint64(d.ActiveConns), uint64(d.InactiveConns)}
			stats[name][a.String()] = []uint64{d.Conns, d.PacketsIn, d.PacketsOut, d.BytesIn, d.BytesOut}
			rate[name][a.String()] = []uint64{d.CPS, d.PPSIn, d.PPSOut, d.BPSIn, d.BPSOut}
		}
	}
	return plain, stats, rate
}

// only keeps the services of l that are in keep.
func only(l, keep listing) listing {
	out := listing{}
	for k, v := range l {
		if _, ok := keep[k]; ok {
			out[k] = v
		}
	}
	return out
}

// equalListings reports whether a and b hold the same numbers.
func equalListings(a, b listing) bool {
	return maps.EqualFunc(a, b, func(x, y map[string][]uint64) bool {
		return maps.EqualFunc(x, y, slices.Equal[[]uint64])
	})
}

// Addresses of TestVMDestStats, apart from the other tests': the kernel
// keeps a deleted destination that still has connection entries in a
// trash list for a while, and a destination created again with the same
// service and address comes back from there with its old counters.
var (
	statsVIP4  = netip.MustParseAddr("10.255.5.1")
	statsVIP6  = netip.MustParseAddr("fd00::5:1")
	statsEmpty = netip.MustParseAddr("10.255.5.3") // owned, without destinations
	// statsOther is an unowned service on the VIP, with a destination.
	statsOther = netip.MustParseAddrPort("10.255.5.1:5300")
)

// statsRS returns real server n of v for TestVMDestStats: 10.255.5.1n or
// fd00::5:1n, port 53.
func statsRS(v netip.Addr, n int) netip.AddrPort {
	if v.Is4() {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 255, 5, byte(10 + n)}), 53)
	}
	return netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("fd00::5:%x", 0x10+n)), 53)
}

// statsDelta is what happened to a destination's counters between two
// reads; the connection counts and rates are taken from the later one.
func statsDelta(before, after vip.DestStats) vip.DestStats {
	d := after
	d.Conns -= before.Conns
	d.PacketsIn -= before.PacketsIn
	d.PacketsOut -= before.PacketsOut
	d.BytesIn -= before.BytesIn
	d.BytesOut -= before.BytesOut
	return d
}

// TestVMDestStats reads the kernel's per-destination counters through
// KernelClient.DestStats around a known number of DNS queries through the
// VIPs, and cross-checks every number with ipvsadm, which reads the same
// counters through its own netlink code.
func TestVMDestStats(t *testing.T) {
	ipvsvm.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	handMade(t) // clears the table first
	t.Cleanup(func() { ipvsvm.Run(t, "ipvsadm", "-C") })
	// An unowned service on the VIP that gets traffic too, so that
	// leaving it out is not an accident of zero counters.
	ipvsvm.Sh(t, fmt.Sprintf("ipvsadm -A -u %s -s rr && ipvsadm -a -u %s -r %s -m -w 1",
		statsOther, statsOther, statsRS(statsVIP4, 1)))
	unowned := ipvsvm.Dump(t)

	ipvsvm.Sh(t, "ip link add lbdnsst0 type dummy && ip link set lbdnsst0 up")
	t.Cleanup(func() { ipvsvm.Sh(t, "ip link del lbdnsst0") })
	backends := map[netip.AddrPort]*backend{}
	desired := vip.Table{}
	for _, v := range []netip.Addr{statsVIP4, statsVIP6} {
		bits := v.BitLen()
		ipvsvm.Sh(t, fmt.Sprintf("ip addr add %s/%d dev lbdnsst0", v, bits))
		for i := 1; i <= 2; i++ {
			ipvsvm.Sh(t, fmt.Sprintf("ip addr add %s/%d dev lbdnsst0", statsRS(v, i).Addr(), bits))
			backends[statsRS(v, i)] = startBackend(t, statsRS(v, i))
		}
		for _, p := range []vip.Protocol{vip.UDP, vip.TCP} {
			s := vip.Service{Key: key(v, p), Scheduler: "rr", Dests: map[netip.AddrPort]vip.Destination{}}
			for i := 1; i <= 2; i++ {
				a := statsRS(v, i)
				s.Dests[a] = vip.Destination{Addr: a, Weight: 1, Forwarding: vip.NAT}
			}
			desired[s.Key] = s
		}
	}
	ek := key(statsEmpty, vip.UDP)
	desired[ek] = vip.Service{Key: ek, Scheduler: "rr", Dests: map[netip.AddrPort]vip.Destination{}}
	owned := ownVIPs(statsVIP4, statsVIP6, statsEmpty)
	c := newKernel(t)
	if _, err := vip.NewReconciler(c, owned).Resync(ctx, desired); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	// New destinations start at zero, unless one came back from the
	// trash (see statsVIP4): count from what they hold now.
	base, err := c.DestStats(ctx, owned)
	if err != nil {
		t.Fatalf("DestStats before traffic: %v", err)
	}

	// Bounded traffic: UDP and TCP on the IPv4 VIP, UDP on the IPv6 VIP;
	// TCP on the IPv6 VIP gets none. With rr over two real servers both
	// serve every queried service.
	sent := []struct {
		k vip.ServiceKey
		n int
	}{{key(statsVIP4, vip.UDP), 6}, {key(statsVIP4, vip.TCP), 4}, {key(statsVIP6, vip.UDP), 4}}
	hits := map[vip.ServiceKey]map[netip.AddrPort]int64{}
	src := &sourcePorts{next: 25000}
	for _, s := range sent {
		before := map[netip.AddrPort]int64{}
		for a := range desired[s.k].Dests {
			before[a] = backends[a].hits.Load()
		}
		if got := askVIP(t, strings.ToLower(s.k.Proto.String()), netip.AddrPortFrom(s.k.Addr, 53), s.n, src); len(got) != 2 {
			t.Fatalf("%s: answered by %v, want both real servers", s.k, got)
		}
		hits[s.k] = map[netip.AddrPort]int64{}
		for a := range desired[s.k].Dests {
			hits[s.k][a] = backends[a].hits.Load() - before[a]
		}
	}
	askVIP(t, "udp", statsOther, 2, src)

	// The kernel folds its per-CPU counters into what it reports every
	// two seconds: poll until every query is counted.
	var got map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats
	for {
		got, err = c.DestStats(ctx, owned)
		if err != nil {
			t.Fatalf("DestStats: %v", err)
		}
		counted := true
		for k, hs := range hits {
			for a, n := range hs {
				if statsDelta(base[k][a], got[k][a]).Conns < uint64(n) {
					counted = false
				}
			}
		}
		if counted {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("DestStats never counted every query; last read %+v, queries per real server %v", got, hits)
		case <-time.After(200 * time.Millisecond):
		}
	}

	t.Run("only owned services", func(t *testing.T) {
		var keys []string
		for k := range got {
			keys = append(keys, k.String())
		}
		var want []string
		for k := range desired {
			want = append(want, k.String())
		}
		slices.Sort(keys)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Errorf("DestStats services = %v, want exactly the owned %v (unowned in the kernel: %s)", keys, want, unowned)
		}
		if ds, ok := got[ek]; !ok || len(ds) != 0 {
			t.Errorf("owned service without destinations: %v (present %v), want an empty map", ds, ok)
		}
		for k, s := range desired {
			if ds := got[k]; len(ds) != len(s.Dests) {
				t.Errorf("%s: %d destinations, want %d", k, len(ds), len(s.Dests))
			}
		}
	})

	t.Run("counts match the queries", func(t *testing.T) {
		for k, hs := range hits {
			for a, n := range hs {
				d := statsDelta(base[k][a], got[k][a])
				if n == 0 {
					t.Errorf("%s %s served no query; rr should have used it", k, a)
				}
				if d.Conns != uint64(n) {
					t.Errorf("%s %s: Conns %d, want %d (one per query, each from a new socket)", k, a, d.Conns, n)
				}
				if k.Proto == vip.UDP && (d.PacketsIn != uint64(n) || d.PacketsOut != uint64(n)) {
					t.Errorf("%s %s: packets in/out %d/%d, want %d/%d (one query, one answer each)", k, a, d.PacketsIn, d.PacketsOut, n, n)
				}
				if d.PacketsIn < uint64(n) || d.PacketsOut < uint64(n) {
					t.Errorf("%s %s: packets in/out %d/%d, want at least %d each", k, a, d.PacketsIn, d.PacketsOut, n)
				}
				// Every packet carries at least an IP and a UDP or TCP
				// header: 28 bytes.
				if d.BytesIn < 28*d.PacketsIn || d.BytesOut < 28*d.PacketsOut {
					t.Errorf("%s %s: bytes in/out %d/%d for packets %d/%d: below 28 per packet", k, a, d.BytesIn, d.BytesOut, d.PacketsIn, d.PacketsOut)
				}
				// The estimator computes the rates in the same tick that
				// folds in the counters, and a few hundred bytes decay
				// to zero only after a dozen ticks (24 s).
				if d.BPSIn == 0 || d.BPSOut == 0 {
					t.Errorf("%s %s: byte rates in/out %d/%d just after traffic, want both > 0", k, a, d.BPSIn, d.BPSOut)
				}
			}
		}
		quiet := key(statsVIP6, vip.TCP)
		for a, d := range got[quiet] {
			if d := statsDelta(base[quiet][a], d); d.Conns != 0 || d.PacketsIn != 0 || d.PacketsOut != 0 || d.BytesIn != 0 || d.BytesOut != 0 {
				t.Errorf("%s %s got no traffic but counted %+v", quiet, a, d)
			}
		}
	})

	t.Run("numbers equal ipvsadm", func(t *testing.T) {
		// Rates move at every estimator tick and connections expire, so
		// the ipvsadm read is taken between two DestStats reads and
		// counts only when those two agree: then nothing moved in
		// between (the counters only grow and the rates only decay).
		for try := 1; ; try++ {
			before, err := c.DestStats(ctx, owned)
			if err != nil {
				t.Fatalf("DestStats: %v", err)
			}
			plain := listIPVS(t, 2)
			stats := listIPVS(t, 5, "--stats")
			rate := listIPVS(t, 5, "--rate")
			after, err := c.DestStats(ctx, owned)
			if err != nil {
				t.Fatalf("DestStats: %v", err)
			}
			bp, bs, br := fromStats(before)
			ap, as, ar := fromStats(after)
			if !equalListings(bp, ap) || !equalListings(bs, as) || !equalListings(br, ar) {
				if ctx.Err() != nil {
					t.Fatalf("the counters never held still over %d tries", try)
				}
				continue
			}
			if p := only(plain, bp); !equalListings(bp, p) {
				t.Errorf("active/inactive connections: DestStats %v, ipvsadm -Ln %v", bp, p)
			}
			if s := only(stats, bs); !equalListings(bs, s) {
				t.Errorf("counters: DestStats %v, ipvsadm -Ln --stats %v", bs, s)
			}
			if r := only(rate, br); !equalListings(br, r) {
				t.Errorf("rates: DestStats %v, ipvsadm -Ln --rate %v", br, r)
			}
			if len(plain) != len(bp)+len(unowned) {
				t.Errorf("ipvsadm lists %d services, want %d owned + %d unowned", len(plain), len(bp), len(unowned))
			}
			unownedTraffic := stats["UDP "+statsOther.String()][statsRS(statsVIP4, 1).String()]
			if len(unownedTraffic) == 0 || unownedTraffic[0] == 0 {
				t.Errorf("the unowned service %s shows no connections in ipvsadm: %v", statsOther, stats)
			}
			t.Logf("agreed after %d tries; ipvsadm -Ln --stats --exact:\n%s\nipvsadm -Ln --rate --exact:\n%s", try,
				ipvsvm.Run(t, "ipvsadm", "-Ln", "--stats", "--exact"), ipvsvm.Run(t, "ipvsadm", "-Ln", "--rate", "--exact"))
			return
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		if _, err := c.DestStats(cctx, owned); !errors.Is(err, context.Canceled) {
			t.Errorf("DestStats with a cancelled context: %v, want context.Canceled", err)
		}
	})
}
