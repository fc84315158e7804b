package responder

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"lbdns/gslb"
)

// packDoc is pathDoc with the other shapes of a real snapshot: static
// records of the types packReply writes (and TXT, which it leaves to
// miekg/dns) and a whoami name.
func packDoc() string {
	return strings.Replace(pathDoc, "[gslb]\n", "[gslb]\nwhoami = \"whoami.bench.test\"\n", 1) + packRecords
}

// packRecords are packDoc's static records.
const packRecords = `
[[gslb.zone.record]]
name = "alias"
type = "CNAME"
value = "www.bench.test."
[[gslb.zone.record]]
name = "@"
type = "MX"
value = "10 mail.bench.test."
[[gslb.zone.record]]
name = "v6"
type = "AAAA"
value = "2001:db8::100"
[[gslb.zone.record]]
name = "txt"
type = "TXT"
value = "hello"
`

// packSeeds are queries of every reply shape of packDoc's snapshot.
func packSeeds() []*dns.Msg {
	ecs4 := []byte{0, 1, 24, 0, 10, 0, 7}
	ecs6 := []byte{0, 2, 48, 0, 0x20, 1, 0xd, 0xb8, 0, 1}
	return []*dns.Msg{
		query("dyn.bench.test.", dns.TypeA, 1232),
		query("DYN.bench.test.", dns.TypeAAAA, 1232),
		query("dyn.bench.test.", dns.TypeA, 0),
		withECS(query("dyn.bench.test.", dns.TypeA, 1232), ecs4),
		withECS(query("dyn.bench.test.", dns.TypeAAAA, 1232), ecs6),
		withECS(query("dyn.bench.test.", dns.TypeA, 1232), []byte{0, 1, 0, 0}),
		withECS(query("dyn.bench.test.", dns.TypeA, 1232), []byte{0, 0, 0, 0}),
		query("dyn.bench.test.", dns.TypeMX, 1232), // NODATA
		query("www.bench.test.", dns.TypeA, 1232),  // static
		query("www.bench.test.", dns.TypeAAAA, 0),  // NODATA
		query("v6.bench.test.", dns.TypeAAAA, 1232),
		query("alias.bench.test.", dns.TypeA, 1232),
		query("bench.test.", dns.TypeMX, 1232),
		query("bench.test.", dns.TypeSOA, 1232),
		query("bench.test.", dns.TypeNS, 0),
		query("nx.bench.test.", dns.TypeA, 1232), // NXDOMAIN
		withECS(query("nx.bench.test.", dns.TypeAAAA, 1232), ecs4),
		query("example.com.", dns.TypeA, 1232), // REFUSED
		query("txt.bench.test.", dns.TypeTXT, 1232),
		withECS(query("whoami.bench.test.", dns.TypeTXT, 1232), ecs4),
	}
}

// FuzzReplySnapshot is FuzzReply over a real snapshot (packDoc): reply
// gives the bytes of miekg/dns's server path for any query.
func FuzzReplySnapshot(f *testing.F) {
	for _, m := range packSeeds() {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	s := snapshotServer(f, packDoc())
	s.Swap(sorted{s.answerer.Load().Answerer})
	fuzzSameAsMiekg(f, s, netip.MustParseAddr("10.1.2.3"))
}

// sorted answers as its Answerer with the answer records sorted: the
// same reply for the same query, whatever the pools' rotation.
type sorted struct{ gslb.Answerer }

func (a sorted) Answer(q gslb.Query) gslb.Response {
	r := a.Answerer.Answer(q)
	r.Answer = slices.SortedFunc(slices.Values(r.Answer), func(x, y dns.RR) int { return strings.Compare(x.String(), y.String()) })
	return r
}

// TestPackReplyTaken checks that packReply writes the common replies
// itself (the fuzz tests check that what it writes is what miekg/dns
// packs), and leaves TXT to miekg/dns.
func TestPackReplyTaken(t *testing.T) {
	s := snapshotServer(t, packDoc())
	src := netip.MustParseAddr("10.1.2.3")
	sc := new(scratch)
	buf := make([]byte, dns.MaxMsgSize)
	for _, m := range packSeeds() {
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if !sc.parseQuery(wire) {
			t.Fatalf("%v: not parsed", m.Question)
		}
		if !s.build(sc, &sc.req, src, false) {
			t.Fatalf("%v: no reply", m.Question)
		}
		var subnet *dns.EDNS0_SUBNET
		if sc.echo {
			subnet = &sc.subnet
		}
		_, ok := packReply(buf, &sc.resp, subnet, sc.ede, sc.size, nameWriter{sc.question[0].Name, sc.qwire})
		if want := m.Question[0].Qtype != dns.TypeTXT; ok != want {
			t.Errorf("%v: packReply took it %v, want %v", m.Question, ok, want)
		}
	}
}

// TestPlainByte checks plainByte against its definition.
func TestPlainByte(t *testing.T) {
	for x := range 256 {
		want := x > ' ' && x <= '~' && !strings.ContainsRune(`.'@;()"\`, rune(x))
		if got := plainByte(byte(x)); got != want {
			t.Errorf("plainByte(%#x) = %v, want %v", x, got, want)
		}
	}
}
