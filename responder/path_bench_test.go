package responder

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
)

// pathDoc is the configuration of BenchmarkServerPath: a zone with a
// static name, a dynamic name with a located policy (pool r0 with two
// IPv4 and two IPv6 members, algorithm all, falling back to pool gl) and
// a global one, ECS on, and a topology of two nets. It is the shape
// bench/responder/run.sh serves.
const pathDoc = `
[gslb]
policy_order = ["region", "global"]

[check.t]
kind = "tcp"
[check.t.tcp]
port = 9

[gslb.topology]
levels = ["region"]
[[gslb.topology.net]]
prefix = "10.0.0.0/16"
labels = { region = "r0" }
[[gslb.topology.net]]
prefix = "10.1.0.0/16"
labels = { region = "r1" }

[[gslb.pool]]
name = "r0"
monitors = ["t"]
algorithm = "all"
fallback = "gl"
[[gslb.pool.member]]
name = "a"
address = "127.10.0.1"
[[gslb.pool.member]]
name = "b"
address = "127.10.0.2"
[[gslb.pool.member]]
name = "c"
address = "fd00::10:1"
[[gslb.pool.member]]
name = "d"
address = "fd00::10:2"

[[gslb.pool]]
name = "gl"
monitors = ["t"]
algorithm = "all"
[[gslb.pool.member]]
name = "a"
address = "127.11.0.1"
[[gslb.pool.member]]
name = "c"
address = "fd00::11:1"

[[gslb.zone]]
name = "bench.test"
ns = ["ns1.bench.test."]
[[gslb.zone.record]]
name = "www"
type = "A"
value = "192.0.2.1"

[[gslb.name]]
name = "dyn.bench.test"
ecs = true
[[gslb.name.policy]]
match = { region = "r0" }
pool = "r0"
[[gslb.name.policy]]
pool = "gl"
`

// snapshotServer is a Server (not started) answering from a real
// snapshot of the configuration doc (gslb.NewSnapshot over the topology
// of package gslb/topology), every member of every pool up by check t.
func snapshotServer(tb testing.TB, doc string) *Server {
	tb.Helper()
	cfg, err := configs.Parse([]byte(doc), "bench.toml")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{}
	s.Swap(snapshotOf(tb, cfg))
	return s
}

// BenchmarkServerPath is the whole server path of one UDP query, as a
// UDP reader runs it without the socket (reply, with the reader's
// reused scratch and buffers): the query's bytes parsed, the reply built
// by respond from a real snapshot (gslb.NewSnapshot over the topology of
// package gslb/topology, every member up) and packed into a reused
// buffer.
func BenchmarkServerPath(b *testing.B) {
	s := snapshotServer(b, pathDoc)
	src := netip.MustParseAddr("127.0.0.1")
	for _, c := range []struct {
		name  string
		q     *dns.Msg
		rcode int
		n     int  // answer records
		m     bool // with metrics
	}{
		{"dynamic-A", query("dyn.bench.test.", dns.TypeA, 1232), dns.RcodeSuccess, 1, false},
		{"dynamic-AAAA", query("dyn.bench.test.", dns.TypeAAAA, 1232), dns.RcodeSuccess, 1, false},
		{"dynamic-A-ECS", withECS(query("dyn.bench.test.", dns.TypeA, 1232), []byte{0, 1, 24, 0, 10, 0, 7}), dns.RcodeSuccess, 2, false},
		{"static-A", query("www.bench.test.", dns.TypeA, 1232), dns.RcodeSuccess, 1, false},
		{"nxdomain", query("nx.bench.test.", dns.TypeA, 1232), dns.RcodeNameError, 0, false},
		{"dynamic-A-ECS-metrics", withECS(query("dyn.bench.test.", dns.TypeA, 1232), []byte{0, 1, 24, 0, 10, 0, 7}), dns.RcodeSuccess, 2, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := s
			if c.m {
				s = snapshotServer(b, pathDoc)
				m, err := NewMetrics(prometheus.NewRegistry())
				if err != nil {
					b.Fatal(err)
				}
				s.Metrics = m
			}
			wire, err := c.q.Pack()
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, dns.MaxMsgSize)
			check := func(out []byte) {
				r := new(dns.Msg)
				if err := r.Unpack(out); err != nil {
					b.Fatal(err)
				}
				if r.Rcode != c.rcode || len(r.Answer) != c.n {
					b.Fatalf("reply %v, want rcode %d with %d answers", r, c.rcode, c.n)
				}
			}
			sc := &scratch{reader: true, counters: counterCache{local: true}} // as a reader's
			in := make([]byte, len(wire))
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				copy(in, wire) // the read buffer
				if out = s.reply(sc, buf, in, src, false); out == nil {
					b.Fatal("no reply")
				}
			}
			check(out)
		})
	}
}

// manyNamesDoc is the configuration of BenchmarkServerPathManyNames:
// pathDoc's pools behind one service with ECS, names dyn0..dyn(n-1)
// naming it, and a topology file (nets.txt beside the configuration) of
// the /24s of 1.0.0.0/8 in region r0.
func manyNamesDoc(n int) string {
	var b strings.Builder
	doc := strings.Replace(pathDoc, `[[gslb.topology.net]]
prefix = "10.0.0.0/16"
labels = { region = "r0" }`, `[[gslb.topology.file]]
path = "nets.txt"
labels = { region = "r0" }`, 1)
	b.WriteString(doc[:strings.Index(doc, "[[gslb.name]]")])
	b.WriteString("[[gslb.service]]\nname = \"geo\"\necs = true\n[[gslb.service.policy]]\nmatch = { region = \"r0\" }\npool = \"r0\"\n[[gslb.service.policy]]\npool = \"gl\"\n")
	for i := range n {
		fmt.Fprintf(&b, "[[gslb.name]]\nname = \"dyn%d.bench.test\"\nservice = \"geo\"\n", i)
	}
	return b.String()
}

// BenchmarkServerPathManyNames is BenchmarkServerPath's ECS query over
// 20,000 names and 65,536 /24s, each query a name and a /24 drawn at
// random from 50,000 such queries: the names a reader's own caches do
// not hold (a realistic server's, not one name asked again and again).
func BenchmarkServerPathManyNames(b *testing.B) {
	dir := b.TempDir()
	var nets strings.Builder
	for i := range 65536 {
		fmt.Fprintf(&nets, "1.%d.%d.0/24\n", i>>8, i&0xff)
	}
	if err := os.WriteFile(filepath.Join(dir, "nets.txt"), []byte(nets.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := configs.Parse([]byte(manyNamesDoc(20000)), filepath.Join(dir, "lbdns.toml"))
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{}
	s.Swap(snapshotOf(b, cfg))
	r := rand.New(rand.NewPCG(1, 2))
	var wires [][]byte
	for range 50000 {
		m := withECS(query("dyn"+strconv.Itoa(r.IntN(20000))+".bench.test.", dns.TypeA, 1232),
			[]byte{0, 1, 24, 0, 1, byte(r.IntN(256)), byte(r.IntN(256))})
		w, err := m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		wires = append(wires, w)
	}
	buf := make([]byte, dns.MaxMsgSize)
	sc := &scratch{reader: true, counters: counterCache{local: true}} // as a reader's
	src := netip.MustParseAddr("127.0.0.1")
	in := make([]byte, 512)
	b.ReportAllocs()
	i := 0
	var out []byte
	for b.Loop() {
		n := copy(in, wires[i%len(wires)])
		i++
		if out = s.reply(sc, buf, in[:n], src, false); out == nil {
			b.Fatal("no reply")
		}
	}
	var m dns.Msg
	if err := m.Unpack(out); err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 2 {
		b.Fatalf("last reply %v: %v", &m, err)
	}
}
