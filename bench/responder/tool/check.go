package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// netMap is the network map of config's layout: count units of 1<<shift
// addresses from base, unit i in region i mod regions; every other
// address is outside the map (the global pool).
type netMap struct {
	base         uint64
	count, shift uint64
	regions      uint64
}

// newNetMap is the map of -prefixes P (P /24s from 1.0.0.0) or, with
// none, the regions' 10.R.0.0/16.
func newNetMap(regions, prefixes int) netMap {
	if prefixes > 0 {
		return netMap{base: 0x01000000, count: uint64(prefixes), shift: 8, regions: uint64(regions)}
	}
	return netMap{base: 0x0a000000, count: uint64(regions), shift: 16, regions: uint64(regions)}
}

// region is a's region, or -1 outside the map.
func (m netMap) region(a uint32) int {
	if uint64(a) < m.base || uint64(a) >= m.base+m.count<<m.shift {
		return -1
	}
	return int((uint64(a) - m.base) >> m.shift % m.regions)
}

// uniform reports whether every address of lo..hi gets the same pool.
func (m netMap) uniform(lo, hi uint64) bool {
	end := m.base + m.count<<m.shift
	pools := uint64(0)
	if lo < m.base || hi >= end {
		pools++ // the global pool
	}
	if hi >= m.base && lo < end {
		i0, i1 := (max(lo, m.base)-m.base)>>m.shift, (min(hi, end-1)-m.base)>>m.shift
		pools += min(i1-i0+1, m.regions)
	}
	return pools == 1
}

// minScope is the shortest ECS scope that is right for a client in a's
// /24: the shortest prefix of a whose addresses all get the same pool.
// A reply with a shorter scope would let a resolver give the answer to
// clients of another pool.
func (m netMap) minScope(a uint32) int {
	for l := range 24 {
		mask := uint64(0xffffffff) << (32 - l) & 0xffffffff
		lo := uint64(a) & mask
		if m.uniform(lo, lo|^mask&0xffffffff) {
			return l
		}
	}
	return 24
}

// sample is one query drawn from a generator's file.
type sample struct{ wire []byte }

// checked counts what a worker checked.
type checked struct{ dyn, static, nx, ecs, scopeMin int }

// check sends -n queries drawn from the first SENT queries of each
// generator's file (the queries it sent: dnsperf reads from the start
// and loops) to a server of the layout config writes, and fails on the
// first reply that is not right: the response code (NXDOMAIN for nx-*,
// else NOERROR), the answer (a dynamic name: the members of the pool of
// the client's ECS /24, or the global pool without ECS, every member
// up; a static name: its record; NXDOMAIN: none) or the ECS option (with
// ECS in the query: echoed, family, source and address the query's,
// scope no longer than the source and, for a dynamic name, no shorter
// than the map's; without: none).
func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	server := fs.String("server", "127.0.0.1:5301", "the server")
	files := fs.String("queries", "", "BIN:SENT[,BIN:SENT...]: each generator's query file and the queries it sent")
	n := fs.Int("n", 200, "queries")
	regions := fs.Int("regions", 8, "regions")
	prefixes := fs.Int("prefixes", 0, "the map's /24s (0: 10.R.0.0/16 per region)")
	zone := fs.String("zone", "bench.test", "zone")
	seed := fs.Uint64("seed", 3, "random seed")
	workers := fs.Int("workers", 4, "queries in flight")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *files == "" || *n < 1 || *regions < 1 || *regions > 200 || *workers < 1 {
		return errors.New("check: -queries is required; -n, -workers at least 1, -regions 1..200")
	}
	type gen struct {
		msgs [][]byte
		sent int
	}
	var gens []gen
	total := 0
	for _, f := range strings.Split(*files, ",") {
		path, s, ok := strings.Cut(f, ":")
		sent, err := strconv.Atoi(s)
		if !ok || err != nil || sent < 0 {
			return fmt.Errorf("check: -queries %q: want BIN:SENT", f)
		}
		msgs, err := readQueries(path)
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		if len(msgs) == 0 {
			return fmt.Errorf("check: %s: no queries", path)
		}
		gens = append(gens, gen{msgs, sent})
		total += sent
	}
	if total == 0 {
		return errors.New("check: no query was sent")
	}
	rng := rand.New(rand.NewPCG(*seed, 17))
	samples := make([]sample, *n)
	for i := range samples {
		j := rng.IntN(total)
		for _, g := range gens {
			if j < g.sent {
				samples[i] = sample{g.msgs[j%len(g.msgs)]}
				break
			}
			j -= g.sent
		}
	}
	m := newNetMap(*regions, *prefixes)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sum   checked
	)
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := checkWorker(*server, *zone, m, samples[w**n / *workers:(w+1)**n / *workers])
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			sum.dyn, sum.static, sum.nx, sum.ecs, sum.scopeMin = sum.dyn+c.dyn, sum.static+c.static, sum.nx+c.nx, sum.ecs+c.ecs, sum.scopeMin+c.scopeMin
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	fmt.Printf("%d answers checked (drawn from the %d queries sent): dynamic %d, static %d, NXDOMAIN %d; dynamic with ECS %d, scope the map's in %d, longer in %d: every one right\n",
		*n, total, sum.dyn, sum.static, sum.nx, sum.ecs, sum.scopeMin, sum.ecs-sum.scopeMin)
	return nil
}

// checkWorker sends samples one at a time over one socket and checks
// each reply; a reply lost is asked again once.
func checkWorker(server, zone string, m netMap, samples []sample) (checked, error) {
	var c checked
	client := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	conn, err := client.Dial(server)
	if err != nil {
		return c, fmt.Errorf("check: %w", err)
	}
	defer func() { _ = conn.Close() }()
	rng := rand.New(rand.NewPCG(uint64(len(samples)), 5))
	for _, s := range samples {
		q := new(dns.Msg)
		if err := q.Unpack(s.wire); err != nil {
			return c, fmt.Errorf("check: unpack a query of the file: %w", err)
		}
		q.Id = uint16(rng.Uint32())
		resp, _, err := client.ExchangeWithConn(q, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			resp, _, err = client.ExchangeWithConn(q, conn)
		}
		if err != nil {
			return c, fmt.Errorf("check: %s: %w", q.Question[0].String(), err)
		}
		if err := judge(q, resp, zone, m, &c); err != nil {
			return c, fmt.Errorf("check: %s %v: %w", strings.TrimSpace(q.Question[0].String()), q.IsEdns0().Option, err)
		}
	}
	return c, nil
}

// judge checks one reply to q, counting it in c.
func judge(q, resp *dns.Msg, zone string, m netMap, c *checked) error {
	qn, qt := q.Question[0].Name, q.Question[0].Qtype
	var qecs *dns.EDNS0_SUBNET
	for _, o := range q.IsEdns0().Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			qecs = e
		}
	}
	label, _, _ := strings.Cut(qn, ".")
	wantRcode, minScope := dns.RcodeSuccess, 0
	var want []string
	switch {
	case strings.HasPrefix(label, "dyn"):
		c.dyn++
		a, b, c6 := 11, 0, "11:0"
		if qecs != nil {
			addr := qecs.Address.To4()
			ip := uint32(addr[0])<<24 | uint32(addr[1])<<16 | uint32(addr[2])<<8 | uint32(addr[3])
			if r := m.region(ip); r >= 0 {
				a, b, c6 = 10, r, fmt.Sprintf("10:%d", r)
			}
			minScope = m.minScope(ip)
		}
		want = []string{v4(a, b, 1), v4(a, b, 2)}
		if qt == dns.TypeAAAA {
			want = []string{"fd00::" + c6 + ":1", "fd00::" + c6 + ":2"}
		}
	case strings.HasPrefix(label, "nx-"):
		c.nx++
		wantRcode = dns.RcodeNameError
	default:
		c.static++
		k, err := strconv.Atoi(strings.TrimPrefix(label, "s"))
		if err != nil {
			return fmt.Errorf("not a query of the layout")
		}
		want = []string{fmt.Sprintf("198.18.%d.%d", k/250, k%250+1)}
	}
	if !resp.Response || len(resp.Question) != 1 || resp.Question[0].Name != qn || resp.Question[0].Qtype != qt {
		return fmt.Errorf("not a reply to the query: %v", resp.Question)
	}
	var got []string
	for _, rr := range resp.Answer {
		switch v := rr.(type) {
		case *dns.A:
			got = append(got, v.A.String())
		case *dns.AAAA:
			got = append(got, v.AAAA.String())
		default:
			got = append(got, dns.TypeToString[rr.Header().Rrtype])
		}
	}
	slices.Sort(got)
	if resp.Rcode != wantRcode || !slices.Equal(got, want) {
		return fmt.Errorf("answer %s %s, want %s %s", dns.RcodeToString[resp.Rcode], strings.Join(got, " "), dns.RcodeToString[wantRcode], strings.Join(want, " "))
	}
	var recs *dns.EDNS0_SUBNET
	if opt := resp.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				recs = e
			}
		}
	}
	switch {
	case qecs == nil && recs != nil:
		return fmt.Errorf("ECS %v in the reply to a query without", recs)
	case qecs == nil:
	case recs == nil && want != nil && strings.HasPrefix(label, "dyn"):
		return errors.New("no ECS in the reply")
	case recs == nil:
	case recs.Family != qecs.Family || recs.SourceNetmask != qecs.SourceNetmask || !recs.Address.Equal(qecs.Address):
		return fmt.Errorf("ECS %v in the reply, the query's was %v", recs, qecs)
	case int(recs.SourceScope) > int(qecs.SourceNetmask) || int(recs.SourceScope) < minScope:
		return fmt.Errorf("ECS scope /%d, want /%d..%d", recs.SourceScope, minScope, qecs.SourceNetmask)
	case strings.HasPrefix(label, "dyn"):
		c.ecs++
		if int(recs.SourceScope) == minScope {
			c.scopeMin++
		}
	}
	return nil
}
