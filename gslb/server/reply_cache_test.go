package server

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/gslb/topology"
	"lbdns/health"
	"lbdns/monitor"
)

// cacheDoc is packDoc with a name per pool algorithm (rr, wrr, hash by
// source and by ECS, rendezvous, priority, random) and a name whose
// pool is down (its last resort answers).
func cacheDoc() string {
	var b strings.Builder
	b.WriteString(packDoc())
	for i, alg := range []string{"rr", "wrr", "hash", "rendezvous", "priority", "random", "all"} {
		fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = %q\nmonitors = [\"t\"]\nalgorithm = %q\n", alg, alg)
		for j := range 3 {
			fmt.Fprintf(&b, "[[gslb.pool.member]]\nname = \"m%d\"\naddress = \"127.20.%d.%d\"\nweight = %d\npriority = %d\n", j, i, j+1, j+1, j/2)
		}
		fmt.Fprintf(&b, "[[gslb.pool.member]]\nname = \"v6\"\naddress = \"fd00::20:%d\"\n", i)
		fmt.Fprintf(&b, "\n[[gslb.name]]\nname = \"%s.bench.test\"\n[[gslb.name.policy]]\nmatch = { region = \"r1\" }\npool = \"gl\"\n[[gslb.name.policy]]\npool = %q\n", alg, alg)
		fmt.Fprintf(&b, "\n[[gslb.name]]\nname = \"%s-ecs.bench.test\"\necs = true\n[[gslb.name.policy]]\npool = %q\n", alg, alg)
	}
	b.WriteString(`
[[gslb.pool]]
name = "down"
monitors = ["t"]
[[gslb.pool.member]]
name = "d"
address = "127.30.0.1"

[[gslb.name]]
name = "down.bench.test"
[[gslb.name.policy]]
pool = "down"
`)
	return b.String()
}

// cacheSnapshot is the snapshot of cfg with every member up but those
// of pools in down, and of members "POOL/MEMBER" in down.
func cacheSnapshot(t testing.TB, cfg *configs.Config, down ...string) *gslb.Snapshot {
	t.Helper()
	statuses := map[monitor.Key]monitor.TargetStatus{}
	for _, p := range cfg.GSLB.Pools {
		for _, m := range p.Members {
			st := health.Up
			for _, d := range down {
				if d == p.Name || d == p.Name+"/"+m.Name {
					st = health.Down
				}
			}
			k := gslb.MonitorKey(p.Name, m.Name, "t")
			statuses[k] = monitor.TargetStatus{Key: k, Health: health.Status{State: st}}
		}
	}
	loc, err := topology.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return gslb.NewSnapshot(cfg, gslb.Evaluate(cfg, statuses, time.Unix(1_800_000_000, 0)), loc, 1)
}

// cacheQueries are n queries of every shape of cacheDoc's snapshot but
// the random pick's: names of every kind asked A, AAAA and other
// types, in random case, with and without EDNS, with ECS from a few
// prefixes, each with a random ID and from one of a few sources.
func cacheQueries(rng *rand.Rand, n int) (wires [][]byte, srcs []netip.Addr) {
	names := []string{"dyn", "www", "v6", "alias", "txt", "nx", "whoami", "", "down", "example.com."}
	for _, alg := range []string{"rr", "wrr", "hash", "rendezvous", "priority", "all"} {
		names = append(names, alg, alg+"-ecs")
	}
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeMX, dns.TypeSOA}
	ecss := [][]byte{nil, {0, 1, 24, 0, 10, 0, 7}, {0, 1, 24, 0, 10, 1, 9}, {0, 1, 16, 0, 10, 1}, {0, 2, 48, 0, 0x20, 1, 0xd, 0xb8, 0, 1}, {0, 1, 0, 0}}
	sources := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.0.9.9"), netip.MustParseAddr("fd00::53")}
	for range n {
		name := names[rng.IntN(len(names))]
		switch {
		case name == "":
			name = "bench.test."
		case !strings.HasSuffix(name, "."):
			name += ".bench.test."
		}
		if rng.IntN(4) == 0 {
			name = strings.ToUpper(name[:1]) + name[1:]
		}
		m := query(name, types[rng.IntN(len(types))], []uint16{0, 512, 1232, 4096}[rng.IntN(4)])
		m.Id = uint16(rng.Uint32())
		if e := ecss[rng.IntN(len(ecss))]; e != nil {
			withECS(m, e)
		} else if rng.IntN(2) == 0 {
			withECS(m, randomECS(rng))
		}
		w, err := m.Pack()
		if err != nil {
			panic(err)
		}
		wires = append(wires, w)
		srcs = append(srcs, sources[rng.IntN(len(sources))])
	}
	return wires, srcs
}

// TestReplyCacheSame holds the reply cache to its word: a UDP reader
// with the cache sends the very bytes a reader without it sends, query
// after query (rotations, hashes, locations by source and by ECS,
// scopes, last resorts, whoami, truncation, FORMERR), across snapshot
// swaps, and counts the same metrics, while many of its replies come
// from the cache: most when questions repeat; many when only their ECS
// prefixes' scopes do.
func TestReplyCacheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	// 6,000 queries drawn from 400 (most asked many times).
	set, setSrcs := cacheQueries(rng, 400)
	var wires [][]byte
	var srcs []netip.Addr
	for range 6000 {
		i := rng.IntN(len(set))
		wires, srcs = append(wires, set[i]), append(srcs, setSrcs[i])
	}
	if hits := sameReplies(t, wires, srcs); hits < 0.6 {
		t.Errorf("repeated questions: %.2f of the replies from the cache, want most", hits)
	}
	// 6,000 queries of dyn and the ECS names with ECS options drawn
	// anew each time (a few repeat).
	wires, srcs = wires[:0], srcs[:0]
	for i := range 6000 {
		name := []string{"dyn", "hash-ecs", "all-ecs", "rr-ecs", "www"}[i%5] + ".bench.test."
		m := withECS(query(name, []uint16{dns.TypeA, dns.TypeAAAA}[rng.IntN(2)], 1232), randomECS(rng))
		w, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		wires, srcs = append(wires, w), append(srcs, netip.MustParseAddr("127.0.0.1"))
	}
	if hits := sameReplies(t, wires, srcs); hits < 0.3 {
		t.Errorf("ECS prefixes drawn anew: %.2f of the replies from the cache, want many (by scope)", hits)
	}
}

// sameReplies answers wires (from srcs) by a reader with the cache and
// one without over the same three snapshots of cacheDoc (in turn, a
// third of the queries each), fails on the first reply or counter that
// differs, and returns the share of replies that came from the cache.
func sameReplies(t *testing.T, wires [][]byte, srcs []netip.Addr) float64 {
	t.Helper()
	cfg, err := configs.Parse([]byte(cacheDoc()), "cache.toml")
	if err != nil {
		t.Fatal(err)
	}
	// Each server its own snapshots: the shared counters of the
	// answers never reused (last resorts) turn for it alone.
	var snaps [2][]*gslb.Snapshot
	for k := range snaps {
		snaps[k] = []*gslb.Snapshot{cacheSnapshot(t, cfg, "down"), cacheSnapshot(t, cfg, "down", "rr/m1", "all/m0", "r0"), cacheSnapshot(t, cfg, "down", "gl", "hash/m2", "wrr/m0")}
	}
	regs := [2]*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var srvs [2]*Server
	var scs [2]*scratch
	for i := range srvs {
		m, err := NewMetrics(regs[i])
		if err != nil {
			t.Fatal(err)
		}
		srvs[i] = &Server{Metrics: m}
		scs[i] = &scratch{reader: true, counters: counterCache{local: true}}
	}
	scs[1].cache = newReplyCache(replyCacheSlots(1))
	bufs := [2][]byte{make([]byte, dns.MaxMsgSize), make([]byte, dns.MaxMsgSize)}
	third := (len(wires) + 2) / 3
	for i, w := range wires {
		if i%third == 0 {
			for k, s := range srvs {
				s.Swap(snaps[k][i/third])
			}
		}
		var outs [2][]byte
		for k := range srvs {
			in := bytes.Clone(w)               // reply may change it
			in[0], in[1] = byte(i), byte(i>>8) // a new ID
			outs[k] = bytes.Clone(srvs[k].reply(scs[k], bufs[k], in, srcs[i], false))
		}
		if !bytes.Equal(outs[0], outs[1]) {
			var a, b dns.Msg
			_, _ = a.Unpack(outs[0]), b.Unpack(outs[1])
			var q dns.Msg
			_ = q.Unpack(w)
			t.Fatalf("query %d %v %v from %s: cached reply\n%v\nwant\n%v", i, q.Question, q.IsEdns0(), srcs[i], &b, &a)
		}
	}
	if fmt.Sprint(scs[0].rot) != fmt.Sprint(scs[1].rot) {
		t.Errorf("rotation counters %v with the cache, %v without", scs[1].rot, scs[0].rot)
	}
	// Every series but the cache's counted the same.
	got := [2]map[string]float64{}
	for k, reg := range regs {
		got[k] = counters(t, reg)
	}
	hits, misses := got[1]["lbdns_gslb_reply_cache_total{result=hit}"], got[1]["lbdns_gslb_reply_cache_total{result=miss}"]
	delete(got[1], "lbdns_gslb_reply_cache_total{result=hit}")
	delete(got[1], "lbdns_gslb_reply_cache_total{result=miss}")
	if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
		t.Errorf("metrics with the cache:\n%v\nwithout:\n%v", got[1], got[0])
	}
	if hits+misses != float64(len(wires)) {
		t.Errorf("cache: %v hits, %v misses of %d queries: want every query counted", hits, misses, len(wires))
	}
	t.Logf("%v hits, %v misses", hits, misses)
	return hits / float64(len(wires))
}

// counters are the counter values of reg by series.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				l = append(l, lp.GetName()+"="+lp.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(l, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

// randomECS is the data of a Client Subnet option: IPv4 from 10.0.0.0/13
// (inside and around the topology's networks) of SOURCE 16 to 32, the
// same IPv4-mapped (FAMILY 2, SOURCE 112 to 128), or IPv6 of SOURCE 48
// to 64; one in 20 with a bit set beyond SOURCE.
func randomECS(rng *rand.Rand) []byte {
	family, source := 1, 16+rng.IntN(17)
	addr := []byte{10, byte(rng.IntN(8)), byte(rng.Uint32()), byte(rng.Uint32())}
	switch rng.IntN(6) {
	case 0, 1:
		family, source = 2, 48+rng.IntN(17)
		addr = []byte{0x20, 1, 0xd, 0xb8, 0, byte(rng.IntN(2)), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), 0, 0, 0, 0, 0, 0, 0}
	case 2:
		family, source = 2, source+96
		addr = append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, addr...)
	}
	p := netip.PrefixFrom(netip.AddrFrom16([16]byte(append(addr, make([]byte, 16)...)[:16])), source)
	if family == 1 {
		p = netip.PrefixFrom(netip.AddrFrom4([4]byte(addr)), source)
	}
	raw := p.Masked().Addr().AsSlice()[:(source+7)/8]
	if rng.IntN(20) == 0 && source%8 != 0 {
		raw[len(raw)-1] |= 1 // beyond SOURCE: FORMERR
	}
	return append([]byte{0, byte(family), byte(source), 0}, raw...)
}

// FuzzReplyCache is TestReplyCacheSame for any query: a reader with the
// reply cache (warmed by every input before) sends the bytes a reader
// without it sends, asked twice (the second may come from the cache).
// Questions for the random pick's name are left out: its answers differ
// by design.
func FuzzReplyCache(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	wires, _ := cacheQueries(rng, 200)
	for _, w := range wires {
		f.Add(w)
	}
	cfg, err := configs.Parse([]byte(cacheDoc()), "cache.toml")
	if err != nil {
		f.Fatal(err)
	}
	var srvs [2]*Server
	var scs [2]*scratch
	for k := range srvs {
		srvs[k] = &Server{}
		srvs[k].Swap(cacheSnapshot(f, cfg, "down", "all/m0"))
		scs[k] = &scratch{reader: true, counters: counterCache{local: true}}
	}
	scs[1].cache = newReplyCache(replyCacheSlots(1))
	src := netip.MustParseAddr("10.1.2.3")
	bufs := [2][]byte{make([]byte, dns.MaxMsgSize), make([]byte, dns.MaxMsgSize)}
	f.Fuzz(func(t *testing.T, b []byte) {
		var q dns.Msg
		if q.Unpack(b) == nil && len(q.Question) > 0 && strings.EqualFold(q.Question[0].Name, "random.bench.test.") {
			return
		}
		for range 2 {
			var outs [2][]byte
			for k := range srvs {
				outs[k] = bytes.Clone(srvs[k].reply(scs[k], bufs[k], bytes.Clone(b), src, false))
			}
			if !bytes.Equal(outs[0], outs[1]) {
				t.Fatalf("query %x: cached reply %x, want %x", b, outs[1], outs[0])
			}
		}
	})
}

// TestReplyCacheLetsGo checks that a reader's reply cache does not keep
// a snapshot swapped out alive: its entries hold a weak pointer to it.
func TestReplyCacheLetsGo(t *testing.T) {
	cfg, err := configs.Parse([]byte(cacheDoc()), "cache.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{}
	sc := &scratch{reader: true, counters: counterCache{local: true}, cache: newReplyCache(replyCacheSlots(1))}
	buf := make([]byte, dns.MaxMsgSize)
	wires, srcs := cacheQueries(rand.New(rand.NewPCG(5, 6)), 200)
	old := func() weak.Pointer[gslb.Snapshot] {
		snap := cacheSnapshot(t, cfg, "down")
		s.Swap(snap)
		for range 2 {
			for i, w := range wires {
				s.reply(sc, buf, bytes.Clone(w), srcs[i], false)
			}
		}
		return weak.Make(snap)
	}()
	if held := slices.ContainsFunc(sc.cache.slots, func(sl cacheSlot) bool { return sl.klen > 0 }); !held {
		t.Fatal("nothing cached")
	}
	s.Swap(cacheSnapshot(t, cfg, "down"))
	for range 3 {
		runtime.GC()
	}
	if old.Value() != nil {
		t.Error("the snapshot swapped out is still reachable (through the reply cache)")
	}
	runtime.KeepAlive(sc)
}

// TestReplyCacheOff: a started server's UDP readers answer from their
// reply cache unless NoReplyCache is set ([gslb.server] reply_cache =
// false); the replies are the same either way.
func TestReplyCacheOff(t *testing.T) {
	cfg, err := configs.Parse([]byte(cacheDoc()), "cache.toml")
	if err != nil {
		t.Fatal(err)
	}
	var replies [2][]string
	for k, off := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, UDPReaders: 1, NoReplyCache: off, Metrics: m}
		s.Swap(cacheSnapshot(t, cfg, "down"))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		addr := s.Addrs()[0].String()
		for range 10 {
			r := exchange(t, addr, "udp", query("hash.bench.test.", dns.TypeA, 0))
			replies[k] = append(replies[k], fmt.Sprint(r.Answer))
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		hits := counters(t, reg)["lbdns_gslb_reply_cache_total{result=hit}"]
		switch {
		case off && hits != 0:
			t.Errorf("NoReplyCache: %v replies from the cache, want none", hits)
		case !off && hits < 5:
			t.Errorf("reply cache on: %v of 10 repeated questions from the cache, want most", hits)
		}
	}
	if !slices.Equal(replies[0], replies[1]) {
		t.Errorf("answers with the cache %v, without %v", replies[0], replies[1])
	}
}
