package responder

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/monitor"
)

// regionsConfig is a zone gslb.test served on 127.0.0.1:0 by one UDP
// reader, with a map of IPv4 and IPv6 regions:
// 10.2.0.0/16 a, 10.1.0.0/16 b, 192.0.2.0/24 c, 2001:db8:1::/48 d,
// 127.0.0.0/8 lo. Names (ECS on but ind-src):
//
//   - geo: region a, b, c, d, lo each its pool (one member each), the
//     others pool g;
//   - hash: every client by a hash of its subnet over pool h (3 members);
//   - lr: region a pool pa, region b pool down (no member up), no global
//     policy: region b and the unlocated get its last resort (fail-open);
//   - ind: every client pool g (the answer depends on no client).
func regionsConfig(t *testing.T) *configs.Config {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\n\n[check.c.dns]\nqname = \"example.com\"\n", t.TempDir())
	b.WriteString(`
[gslb]
policy_order = ["region", "global"]

[gslb.server]
listen = ["127.0.0.1:0"]
udp_readers = 1

[[gslb.zone]]
name = "gslb.test"
ns = ["ns1.gslb.test."]

[[gslb.zone.record]]
name = "static"
type = "A"
value = "192.0.2.80"
`)
	pools := map[string][]string{"pa": {"198.51.100.1"}, "pb": {"198.51.100.2"}, "pc": {"198.51.100.3"}, "pd": {"198.51.100.4"},
		"plo": {"198.51.100.5"}, "g": {"198.51.100.9"}, "h": {"203.0.113.1", "203.0.113.2", "203.0.113.3"}, "down": {"203.0.113.66"}}
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for k := range pools {
			if !yield(k) {
				return
			}
		}
	}) {
		alg := "rr"
		if p == "h" {
			alg = "hash"
		}
		fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = %q\nmonitors = [\"c\"]\nalgorithm = %q\n", p, alg)
		for i, a := range pools[p] {
			fmt.Fprintf(&b, "[[gslb.pool.member]]\nname = \"m%d\"\naddress = %q\n", i, a)
		}
	}
	policy := func(region, pool string) {
		if region == "" {
			fmt.Fprintf(&b, "[[gslb.name.policy]]\npool = %q\n", pool)
			return
		}
		fmt.Fprintf(&b, "[[gslb.name.policy]]\nmatch = { region = %q }\npool = %q\n", region, pool)
	}
	b.WriteString("\n[[gslb.name]]\nname = \"geo.gslb.test\"\necs = true\n")
	for _, r := range []string{"a", "b", "c", "d"} {
		policy(r, "p"+r)
	}
	policy("lo", "plo")
	policy("", "g")
	b.WriteString("\n[[gslb.name]]\nname = \"hash.gslb.test\"\necs = true\n")
	policy("", "h")
	b.WriteString("\n[[gslb.name]]\nname = \"lr.gslb.test\"\necs = true\n")
	policy("a", "pa")
	policy("b", "down")
	b.WriteString("\n[[gslb.name]]\nname = \"ind.gslb.test\"\necs = true\n")
	policy("", "g")
	for _, n := range []struct{ prefix, region string }{
		{"10.2.0.0/16", "a"}, {"10.1.0.0/16", "b"}, {"192.0.2.0/24", "c"}, {"2001:db8:1::/48", "d"}, {"127.0.0.0/8", "lo"},
	} {
		fmt.Fprintf(&b, "\n[[gslb.topology.net]]\nprefix = %q\nlabels = { region = %q }\n", n.prefix, n.region)
	}
	cfg, err := configs.Parse([]byte(b.String()), "regions.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startRegions starts a Responder serving regionsConfig with every
// member up but those of pool down, and returns it with its address.
func startRegions(t *testing.T) (*Responder, string) {
	t.Helper()
	clock := time.Unix(1_800_000_000, 0)
	r := NewResponder(ResponderOptions{Now: func() time.Time { return clock }})
	t.Cleanup(func() { r.Stop(context.Background()) })
	cfg := regionsConfig(t)
	statuses := map[monitor.Key]monitor.TargetStatus{}
	for _, p := range cfg.GSLB.Pools {
		for _, m := range p.Members {
			st := health.Up
			if p.Name == "down" {
				st = health.Down
			}
			k := gslb.MonitorKey(p.Name, m.Name, "c")
			statuses[k] = monitor.TargetStatus{Key: k, Health: health.Status{State: st}}
		}
	}
	if err := r.Update(cfg, gslb.Evaluate(cfg, statuses, clock)); err != nil {
		t.Fatal(err)
	}
	return r, r.Addrs()[0].String()
}

// ecsData is the raw Client Subnet option of prefix p (masked): FAMILY 2
// for an IPv6 prefix, IPv4-mapped ones included.
func ecsData(p netip.Prefix) []byte {
	p = p.Masked()
	fam := byte(1)
	if p.Addr().Is6() {
		fam = 2
	}
	return append([]byte{0, fam, byte(p.Bits()), 0}, p.Addr().AsSlice()[:(p.Bits()+7)/8]...)
}

// udpConn is one UDP socket to addr: every query from it reaches the same
// reader.
func udpConn(t *testing.T, addr string) *dns.Conn {
	t.Helper()
	c, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// over sends m on c and returns the reply.
func over(t *testing.T, c *dns.Conn, m *dns.Msg) *dns.Msg {
	t.Helper()
	m.Id = dns.Id()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	r, err := c.ReadMsg()
	if err != nil {
		t.Fatalf("%v: %v", m.Question, err)
	}
	if r.Id != m.Id {
		t.Fatalf("reply id %d, want %d", r.Id, m.Id)
	}
	return r
}

// replyOf is a reply's answer records as strings, sorted (a last
// resort's rotation aside, the same set), and its ECS scope (-1: none).
func replyOf(r *dns.Msg) (string, int) {
	var rrs []string
	for _, rr := range r.Answer {
		rrs = append(rrs, rr.String())
	}
	slices.Sort(rrs)
	scope := -1
	if e := ecsOf(r); e != nil {
		scope = int(e.SourceScope)
	}
	return dns.RcodeToString[r.Rcode] + " " + strings.Join(rrs, ", "), scope
}

// TestWireDifferential asks the same questions, with Client Subnet
// prefixes drawn at random (IPv4, IPv6, IPv4-mapped, SOURCE 0, the
// mapped /96), of the UDP reader (twice), of TCP, and of lbctl gslb explain: the same rcode, records and
// ECS scope from all four, and every scope within the option's family
// (for a mapped prefix 0 or at least 96).
func TestWireDifferential(t *testing.T) {
	r, addr := startRegions(t)
	c := udpConn(t, addr)
	rng := rand.New(rand.NewPCG(25, 1))
	v4 := func() netip.Addr {
		if rng.IntN(4) == 0 {
			return netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(256))})
		}
		return netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(256)), byte(rng.IntN(256))})
	}
	prefix := func() netip.Prefix {
		switch k := rng.IntN(10); {
		case k < 3:
			return netip.PrefixFrom(v4(), 8+rng.IntN(25)).Masked()
		case k < 5:
			a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(rng.IntN(3)), byte(rng.IntN(256)), byte(rng.IntN(256))}
			return netip.PrefixFrom(netip.AddrFrom16(a), 32+rng.IntN(33)).Masked()
		case k < 8:
			return netip.PrefixFrom(netip.AddrFrom16(v4().As16()), 104+rng.IntN(25)).Masked()
		case k < 9:
			return netip.PrefixFrom(netip.AddrFrom16(netip.IPv4Unspecified().As16()), 96)
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	names := []string{"geo", "hash", "lr", "ind", "static"}
	seen := map[string]bool{}
	for i := range 400 {
		name := names[rng.IntN(len(names))] + ".gslb.test."
		p := prefix()
		m := func() *dns.Msg { return withECS(query(name, dns.TypeA, 1232), ecsData(p)) }
		udp1, s1 := replyOf(over(t, c, m()))
		udp2, s2 := replyOf(over(t, c, m()))
		tcp, s3 := replyOf(exchange(t, addr, "tcp", m()))
		rep, err := r.Explain(context.Background(), control.GSLBExplainRequest{Name: name, ECS: p.String(), Client: "127.0.0.1"})
		if err != nil {
			t.Fatalf("explain %s %s: %v", name, p, err)
		}
		slices.Sort(rep.Answer)
		exp := rep.Rcode + " " + strings.Join(rep.Answer, ", ")
		if udp1 != udp2 || udp1 != tcp || udp1 != exp || s1 != s2 || s1 != s3 || s1 != rep.Scope {
			t.Fatalf("query %d %s ECS %s:\nudp   %s scope %d\nudp   %s scope %d (again)\ntcp   %s scope %d\nexplain %s scope %d",
				i, name, p, udp1, s1, udp2, s2, tcp, s3, exp, rep.Scope)
		}
		if max := p.Addr().BitLen(); s1 < 0 || s1 > max || (p.Addr().Is4In6() && s1 != 0 && s1 < 96) {
			t.Fatalf("query %d %s ECS %s: scope %d, want 0..%d (and 0 or at least 96 for a mapped prefix)", i, name, p, s1, max)
		}
		seen[fmt.Sprint(p.Addr().Is4In6(), p.Addr().Is4())] = true
	}
	if len(seen) != 3 {
		t.Errorf("families drawn: %v, want IPv4, IPv6 and mapped", seen)
	}
}

// rawQuery is a query of ID 7 whose question is the name's wire form
// followed by tail (its type and class, or less).
func rawQuery(name string, tail ...byte) []byte {
	b := []byte{0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range dns.SplitDomainName(name) {
		b = append(append(b, byte(len(l))), l...)
	}
	return append(append(b, 0), tail...)
}

// TestCutShortQuestion: a question that stops after its name, or after
// its type, or one octet into its class, is FORMERR with no question
// (never one of class 0 the client did not send), over UDP (the
// readers) and TCP (miekg/dns); the same with its class is answered.
func TestCutShortQuestion(t *testing.T) {
	_, addr := startRegions(t)
	for _, c := range []struct {
		name  string
		tail  []byte
		rcode int
	}{
		{"name only", nil, dns.RcodeFormatError},
		{"name and type", []byte{0, 1}, dns.RcodeFormatError},
		{"one octet of class", []byte{0, 1, 0}, dns.RcodeFormatError},
		{"whole", []byte{0, 1, 0, 1}, dns.RcodeSuccess},
	} {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(c.name+"/"+network, func(t *testing.T) {
				b := rawQuery("static.gslb.test.", c.tail...)
				conn, err := net.DialTimeout(network, addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				if network == "tcp" {
					b = append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)
				}
				if _, err := conn.Write(b); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 4096)
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				out := buf[:n]
				if network == "tcp" {
					if n < 2 || int(binary.BigEndian.Uint16(out)) != n-2 {
						t.Fatalf("tcp reply %x", out)
					}
					out = out[2:]
				}
				var m dns.Msg
				if err := m.Unpack(out); err != nil {
					t.Fatalf("reply %x: %v", out, err)
				}
				qd := binary.BigEndian.Uint16(out[4:])
				if m.Id != 7 || !m.Response || m.Rcode != c.rcode {
					t.Fatalf("reply %v, want %s", &m, dns.RcodeToString[c.rcode])
				}
				if c.rcode == dns.RcodeFormatError && (qd != 0 || len(m.Question) != 0 || len(m.Answer) != 0) {
					t.Errorf("FORMERR with question %v (QDCOUNT %d) answer %v, want none", m.Question, qd, m.Answer)
				}
				if c.rcode == dns.RcodeSuccess && (qd != 1 || m.Question[0].Qclass != dns.ClassINET || len(m.Answer) != 1) {
					t.Errorf("whole question: %v", &m)
				}
			})
		}
	}
}

// TestAnyWire: qtype ANY over UDP and TCP gets the RFC 8482 answer: one
// HINFO "RFC8482" "" with the name's TTL, authoritative, ECS scope 0.
func TestAnyWire(t *testing.T) {
	_, addr := startRegions(t)
	for _, c := range []struct{ qname, want string }{
		{"geo.gslb.test.", "geo.gslb.test.\t30\tIN\tHINFO\t\"RFC8482\" \"\""},
		{"static.gslb.test.", "static.gslb.test.\t3600\tIN\tHINFO\t\"RFC8482\" \"\""},
	} {
		for _, network := range []string{"udp", "tcp"} {
			m := withECS(query(c.qname, dns.TypeANY, 1232), ecsData(netip.MustParsePrefix("10.1.2.0/24")))
			r := exchange(t, addr, network, m)
			e := ecsOf(r)
			if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 1 || r.Answer[0].String() != c.want || e == nil || e.SourceScope != 0 {
				t.Errorf("ANY %s over %s: %v, want %q, scope 0", c.qname, network, r, c.want)
			}
		}
	}
}

// TestECSSourceZeroWire: ECS with SOURCE PREFIX-LENGTH 0 (FAMILY 1, 2, or
// 0) is answered as without ECS, by the packet's source (127.0.0.1,
// region lo), with scope 0 echoed; over UDP and TCP.
func TestECSSourceZeroWire(t *testing.T) {
	_, addr := startRegions(t)
	for _, data := range [][]byte{{0, 1, 0, 0}, {0, 2, 0, 0}, {0, 0, 0, 0}} {
		for _, network := range []string{"udp", "tcp"} {
			r := exchange(t, addr, network, withECS(query("geo.gslb.test.", dns.TypeA, 1232), data))
			e := ecsOf(r)
			if len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), "\t198.51.100.5") || e == nil || e.SourceScope != 0 || e.SourceNetmask != 0 {
				t.Errorf("ECS %v over %s: %v, want region lo's 198.51.100.5 (by the source), scope 0", data, network, r)
			}
		}
	}
}
