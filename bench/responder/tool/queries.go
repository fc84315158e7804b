package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"

	"github.com/miekg/dns"
)

// The kinds of query a file holds.
const (
	kindDyn    = 0 // dynK.Z, A or AAAA: an answer by location
	kindStatic = 1 // sK.Z, A: a static record
	kindNX     = 2 // nx-HEX.Z, A: NXDOMAIN
)

// query is one query of a file, as its key: what makes two queries the
// same one (kind, name, type, ECS /24).
type query struct {
	kind  uint64
	aaaa  bool
	index uint32 // K of dynK or sK, the label of nx-HEX
	ecs   bool
	net   uint32 // the ECS /24: its address >> 8
}

// key packs q into 64 bits, one to one: kind in bits 62-63, AAAA in 61,
// ECS in 60, the ECS /24 in 36-59, the index in 0-31.
func (q query) key() uint64 {
	k := q.kind<<62 | uint64(q.net&0xffffff)<<36 | uint64(q.index)
	if q.aaaa {
		k |= 1 << 61
	}
	if q.ecs {
		k |= 1 << 60
	}
	return k
}

// rcodeOf is the response code a key's query must get.
func rcodeOf(key uint64) int {
	if key>>62 == kindNX {
		return dns.RcodeNameError
	}
	return dns.RcodeSuccess
}

// msg is q as a DNS message of zone: no recursion desired, EDNS0 with a
// 1,232-byte payload, the ECS option with a /24 if q has one.
func (q query) msg(zone string) *dns.Msg {
	m := new(dns.Msg)
	switch q.kind {
	case kindDyn:
		t := dns.TypeA
		if q.aaaa {
			t = dns.TypeAAAA
		}
		m.SetQuestion(fmt.Sprintf("dyn%d.%s.", q.index, zone), t)
	case kindStatic:
		m.SetQuestion(fmt.Sprintf("s%d.%s.", q.index, zone), dns.TypeA)
	default:
		m.SetQuestion(fmt.Sprintf("nx-%08x.%s.", q.index, zone), dns.TypeA)
	}
	m.RecursionDesired = false
	m.SetEdns0(1232, false)
	if q.ecs {
		a := q.net << 8
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24,
			Address: net.IPv4(byte(a>>24), byte(a>>16), byte(a>>8), 0).To4()})
	}
	return m
}

// netOf is /24 number i of the map (-prefixes P: 1.0.0.0/24 + i × 256)
// as an address >> 8.
func netOf(i int) uint32 { return uint32(0x010000 + i) }

// queries writes the query files of one mix: -files F files
// OUT.0.bin..OUT.F-1.bin in dnsperf's binary input format (-B), one
// slice each of one shuffled list of -n queries (so that F generators
// send disjoint streams), and beside each its keys (OUT.K.keys, 8 bytes
// a query, see query.key) for tool sent and check.
func queries(args []string) error {
	fs := flag.NewFlagSet("queries", flag.ContinueOnError)
	out := fs.String("out", "", "output files' prefix (OUT.K.bin, OUT.K.keys)")
	files := fs.Int("files", 1, "files: one per generator, disjoint slices")
	n := fs.Int("n", 200000, "number of queries in all the files")
	zone := fs.String("zone", "bench.test", "zone")
	dyn := fs.Int("dyn", 100, "dynamic names dyn0..dynN-1")
	static := fs.Int("static", 100, "static names s0..sN-1")
	regions := fs.Int("regions", 8, "regions: ECS from 10.R.0.0/16")
	prefixes := fs.Int("prefixes", 0, "ECS from these many /24s from 1.0.0.0 (0: the regions' networks)")
	seed := fs.Uint64("seed", 1, "random seed")
	mixName := fs.String("mix", "friendly", "friendly (names and ECS uniform, 30% of dynamic queries with ECS), realistic (Zipf names and Zipf ECS /24s, ECS on every dynamic query) or hostile (every query distinct)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *n < 1 || *files < 1 || *files > *n || *dyn < 1 || *static < 1 || *regions < 1 || *regions > 256 || *prefixes < 0 || *prefixes > 1<<23 {
		return errors.New("queries: -out is required; -n, -dyn, -static at least 1, -files 1..n, -regions 1..256, -prefixes 0..8388608")
	}
	switch *mixName {
	case "friendly", "realistic", "hostile":
	default:
		return fmt.Errorf("queries: -mix %q: want friendly, realistic or hostile", *mixName)
	}
	qs, err := mixQueries(*mixName, *n, *dyn, *static, *regions, *prefixes, *seed)
	if err != nil {
		return err
	}
	for k := range *files {
		if err := writeQueries(fmt.Sprintf("%s.%d", *out, k), *zone, qs[k**n / *files:(k+1)**n / *files]); err != nil {
			return err
		}
	}
	var dynA, dynAAAA, ecs, static0, nx int
	seen := make(map[uint64]struct{}, len(qs))
	for _, q := range qs {
		seen[q.key()] = struct{}{}
		switch {
		case q.kind == kindDyn && q.aaaa:
			dynAAAA++
		case q.kind == kindDyn:
			dynA++
		case q.kind == kindStatic:
			static0++
		default:
			nx++
		}
		if q.ecs {
			ecs++
		}
	}
	pct := func(k int) float64 { return 100 * float64(k) / float64(*n) }
	fmt.Printf("%d queries (%s mix) in %d file(s) of %d..%d, %d distinct: dynamic %.1f%% (A %.1f%%, AAAA %.1f%%), static %.1f%%, NXDOMAIN %.1f%%, with ECS %.1f%% of all; expected rcodes NOERROR %.2f%% NXDOMAIN %.2f%%\n",
		*n, *mixName, *files, *n / *files, (*n+*files-1) / *files, len(seen), pct(dynA+dynAAAA), pct(dynA), pct(dynAAAA), pct(static0), pct(nx), pct(ecs),
		pct(*n-nx), pct(nx))
	return nil
}

// mixQueries draws n queries of a mix: exactly 70 % dynamic (A or AAAA
// half and half), 20 % static, 10 % NXDOMAIN, in a shuffled order, each
// drawn on its own (so that any part of the list, a short run's first
// seconds too, samples the whole distribution).
//
//   - friendly: names uniform, 30 % of the dynamic queries with an ECS
//     /24 drawn uniformly from the map;
//   - realistic: names by Zipf popularity (s = 1.1, dyn0 the most asked),
//     an ECS /24 on every dynamic query by Zipf popularity (s = 1.1) over
//     every /24 of the map in a random order of ranks;
//   - hostile: every query distinct (a query drawn again is drawn anew):
//     names and ECS /24s uniform, an ECS /24 on every dynamic and static
//     query (static answers do not depend on it, but no two queries are
//     the same), NXDOMAIN labels random.
//
// The map's /24s are the -prefixes P /24s from 1.0.0.0, or without them
// the regions' 10.R.0.0/16 (friendly, realistic: their R × 256 /24s;
// hostile: the 65,536 /24s of 10/8, most outside the map).
func mixQueries(mix string, n, dyn, static, regions, prefixes int, seed uint64) ([]query, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	kinds := make([]uint64, n)
	for i := range kinds {
		switch {
		case i < n*70/100:
			kinds[i] = kindDyn
		case i < n*90/100:
			kinds[i] = kindStatic
		default:
			kinds[i] = kindNX
		}
	}
	rng.Shuffle(n, func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	mapped := prefixes
	if mapped == 0 {
		mapped = regions * 256
	}
	// anyNet is a /24 of the map (or, hostile without -prefixes, of 10/8)
	// drawn uniformly.
	anyNet := func() uint32 {
		switch {
		case prefixes > 0:
			return netOf(rng.IntN(prefixes))
		case mix == "hostile":
			return 0x0a0000 + uint32(rng.IntN(65536))
		default:
			return 0x0a0000 + uint32(rng.IntN(mapped)) // 10.R.x.0: R = i / 256
		}
	}
	var names, nets *rand.Zipf
	var rank []int
	if mix == "realistic" {
		names = rand.NewZipf(rand.New(rand.NewPCG(seed, 11)), 1.1, 1, uint64(dyn-1))
		nets = rand.NewZipf(rand.New(rand.NewPCG(seed, 12)), 1.1, 1, uint64(mapped-1))
		rank = rand.New(rand.NewPCG(seed, 13)).Perm(mapped)
	}
	qs := make([]query, n)
	seen := map[uint64]struct{}{}
	for i, kind := range kinds {
		for try := 0; ; try++ {
			q := query{kind: kind}
			switch kind {
			case kindDyn:
				q.aaaa = rng.IntN(2) == 1
				q.index = uint32(rng.IntN(dyn))
				q.ecs = mix != "friendly" || rng.IntN(10) < 3
				switch {
				case names != nil:
					q.index = uint32(names.Uint64())
					k := rank[nets.Uint64()]
					q.net = netOf(k)
					if prefixes == 0 {
						q.net = 0x0a0000 + uint32(k)
					}
				case q.ecs:
					q.net = anyNet()
				}
			case kindStatic:
				q.index = uint32(rng.IntN(static))
				if mix == "hostile" {
					q.ecs, q.net = true, anyNet()
				}
			default:
				q.index = rng.Uint32()
			}
			if mix != "hostile" {
				qs[i] = q
				break
			}
			if _, dup := seen[q.key()]; !dup {
				seen[q.key()] = struct{}{}
				qs[i] = q
				break
			}
			if try == 100 {
				return nil, fmt.Errorf("queries: hostile: no distinct query left after %d of %d (more names or prefixes needed)", i, n)
			}
		}
	}
	return qs, nil
}

// writeQueries writes qs to NAME.bin (dnsperf -B: each query a 2-byte
// length and the message) and their keys to NAME.keys.
func writeQueries(name, zone string, qs []query) error {
	var packErr error
	if err := writeFile(name+".bin", func(w *bufio.Writer) {
		buf := make([]byte, 0, 512)
		for i, q := range qs {
			m := q.msg(zone)
			m.Id = uint16(i)
			b, err := m.PackBuffer(buf)
			if err != nil {
				packErr = fmt.Errorf("queries: pack %s: %w", m.Question[0].Name, err)
				return
			}
			var l [2]byte
			binary.BigEndian.PutUint16(l[:], uint16(len(b)))
			_, _ = w.Write(l[:])
			_, _ = w.Write(b)
		}
	}); err != nil {
		return err
	}
	if packErr != nil {
		return packErr
	}
	return writeFile(name+".keys", func(w *bufio.Writer) {
		var b [8]byte
		for _, q := range qs {
			binary.BigEndian.PutUint64(b[:], q.key())
			_, _ = w.Write(b[:])
		}
	})
}

// readKeys reads a keys file of queries.
func readKeys(path string) ([]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b)%8 != 0 || len(b) == 0 {
		return nil, fmt.Errorf("%s: not a keys file (%d bytes)", path, len(b))
	}
	keys := make([]uint64, len(b)/8)
	for i := range keys {
		keys[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	return keys, nil
}

// readQueries reads a query file in dnsperf's binary format: each
// message's bytes.
func readQueries(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReaderSize(f, 1<<16)
	var msgs [][]byte
	for {
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err == io.EOF {
			return msgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		msgs = append(msgs, b)
	}
}

// sent prints what a run sent, from the keys files of its generators
// and the queries each sent (tool sent KEYS SENT [KEYS SENT ...]):
// dnsperf reads its file from the start and loops, so generator k sent
// the first SENT lines of its file, round and round. One line: the
// queries sent, the distinct ones among them, and how many of them must
// be answered NOERROR and NXDOMAIN.
func sent(args []string) error {
	if len(args) == 0 || len(args)%2 != 0 {
		return errors.New("sent: want KEYS SENT pairs")
	}
	var total, noerror, nx int
	seen := map[uint64]struct{}{}
	for i := 0; i < len(args); i += 2 {
		keys, err := readKeys(args[i])
		if err != nil {
			return fmt.Errorf("sent: %w", err)
		}
		s, err := strconv.Atoi(args[i+1])
		if err != nil || s < 0 {
			return fmt.Errorf("sent: %q: not a count", args[i+1])
		}
		for j := range s {
			k := keys[j%len(keys)]
			seen[k] = struct{}{}
			if rcodeOf(k) == dns.RcodeNameError {
				nx++
			} else {
				noerror++
			}
		}
		total += s
	}
	fmt.Printf("%d %d %d %d\n", total, len(seen), noerror, nx)
	return nil
}
