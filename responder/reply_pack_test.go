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
	// Question names of 32 and 33 labels: the most whose suffixes the
	// hand packer remembers, and one more (left to miekg/dns); their
	// NXDOMAIN's SOA names point into them.
	long := func(labels int) string { return strings.Repeat("a.", labels-2) + "bench.test." }
	seeds := append(packSeeds(), query(long(32), dns.TypeA, 1232), query(long(33), dns.TypeA, 1232),
		query(strings.ToUpper(long(33)), dns.TypeAAAA, 0))
	for _, m := range seeds {
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

// Lookup is the snapshot's (the readers' one-lookup path is fuzzed too).
func (a sorted) Lookup(name []byte) (gslb.Entry, bool) {
	return a.Answerer.(*gslb.Snapshot).Lookup(name)
}

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
		sc.nw.reset(sc.question[0].Name, sc.qwire)
		_, ok := packReply(buf, &sc.resp, subnet, sc.ede, sc.size, &sc.nw)
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

// TestReplyNamesCompressed checks the reply's names on the wire: an
// answer's owner is a pointer to the question's name, an NXDOMAIN's SOA
// points into it for its zone and compresses its own names, and the
// same query asked in another case keeps the client's case in the
// question while the records' owners (the zone's case) are written once
// and pointed to after.
func TestReplyNamesCompressed(t *testing.T) {
	s := snapshotServer(t, packDoc())
	src := netip.MustParseAddr("10.1.2.3")
	sc := new(scratch)
	buf := make([]byte, dns.MaxMsgSize)
	ask := func(m *dns.Msg) []byte {
		t.Helper()
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		out := s.reply(sc, buf, wire, src, false)
		if out == nil {
			t.Fatalf("%v: no reply", m.Question)
		}
		return slices.Clone(out)
	}
	// Header 12, question "dyn.bench.test." 16 + 4, then the answers.
	const qEnd = 12 + 16 + 4
	out := ask(query("dyn.bench.test.", dns.TypeA, 1232))
	var r dns.Msg
	if err := r.Unpack(out); err != nil || len(r.Answer) == 0 {
		t.Fatalf("reply %x: %v, %d answers", out, err, len(r.Answer))
	}
	for i := range r.Answer {
		at := qEnd + i*(2+10+4)
		if out[at] != 0xC0 || out[at+1] != 12 {
			t.Errorf("answer %d owner %x, want the pointer c00c", i, out[at:at+2])
		}
	}
	if want := qEnd + len(r.Answer)*16 + 11; len(out) != want {
		t.Errorf("A reply of %d answers is %d octets, want %d", len(r.Answer), len(out), want)
	}

	// NXDOMAIN: question "nx.bench.test." (15 octets from 12); the SOA's
	// owner bench.test. is at 12+3.
	out = ask(query("nx.bench.test.", dns.TypeA, 1232))
	if err := r.Unpack(out); err != nil || r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
		t.Fatalf("nx reply %v: %v", &r, err)
	}
	at := 12 + 15 + 4
	if out[at] != 0xC0 || out[at+1] != 15 {
		t.Errorf("SOA owner %x, want the pointer c00f", out[at:at+2])
	}
	soa := r.Ns[0].(*dns.SOA)
	rd := out[at+2+10 : at+2+10+int(soa.Hdr.Rdlength)]
	uncompressed := len(soa.Ns) + 1 + len(soa.Mbox) + 1 + 20
	if len(rd) >= uncompressed {
		t.Errorf("SOA rdata %d octets, want fewer than the %d of its names uncompressed", len(rd), uncompressed)
	}

	// Another case: the question as asked, the owner written once
	// (from region r0: two AAAA members).
	src = netip.MustParseAddr("10.0.2.3")
	out = ask(query("DYN.bench.test.", dns.TypeAAAA, 1232))
	if err := r.Unpack(out); err != nil || len(r.Answer) < 2 {
		t.Fatalf("AAAA reply %v: %v", &r, err)
	}
	if r.Question[0].Name != "DYN.bench.test." {
		t.Errorf("question %q, want the client's case", r.Question[0].Name)
	}
	second := qEnd + 4 + 2 + 10 + 16 // "dyn" label, pointer, fixed part, address
	if out[second] != 0xC0 || out[second+1] != qEnd {
		t.Errorf("second AAAA owner %x, want a pointer to the first owner at %d", out[second:second+2], qEnd)
	}
}

// TestReplyEntryPath: a query whose name the snapshot has, in lower
// case, takes the one-lookup path (the snapshot's entry found from the
// question's bytes); its reply says what Respond's says (the rcode, the
// records in any order, the ECS scope), and a name in another case or
// one the snapshot lacks goes the other way with the same result.
func TestReplyEntryPath(t *testing.T) {
	s := snapshotServer(t, packDoc())
	src := netip.MustParseAddr("10.1.2.3")
	sc := &scratch{reader: true}
	buf := make([]byte, dns.MaxMsgSize)
	took := 0
	for _, m := range packSeeds() {
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		sc.box, sc.entry = s.answerer.Load(), gslb.Entry{} // as reply does
		sc.parseQuery(wire)
		if sc.entry != (gslb.Entry{}) {
			took++
			if strings.ToLower(m.Question[0].Name) != m.Question[0].Name || sc.entry.Name() != m.Question[0].Name {
				t.Errorf("%v: entry %q", m.Question, sc.entry.Name())
			}
		}
		out := s.reply(sc, buf, slices.Clone(wire), src, false)
		var got dns.Msg
		if err := got.Unpack(out); err != nil {
			t.Fatalf("%v: %v", m.Question, err)
		}
		want := s.Respond(m, src, false)
		if got.Rcode != want.Rcode || sortedRRs(got.Answer) != sortedRRs(want.Answer) || sortedRRs(got.Ns) != sortedRRs(want.Ns) ||
			ecsText(&got) != ecsText(want) || got.Question[0] != want.Question[0] {
			t.Errorf("%v: reply\n%v\nwant\n%v", m.Question, &got, want)
		}
	}
	if took < len(packSeeds())/2 {
		t.Errorf("%d of %d queries took the entry path", took, len(packSeeds()))
	}
}

func sortedRRs(rrs []dns.RR) string {
	var s []string
	for _, rr := range rrs {
		s = append(s, rr.String())
	}
	slices.Sort(s)
	return strings.Join(s, "\n")
}

func ecsText(m *dns.Msg) string {
	if o := m.IsEdns0(); o != nil {
		for _, e := range o.Option {
			if e.Option() == dns.EDNS0SUBNET {
				return e.String()
			}
		}
	}
	return ""
}

// TestHasUpper checks hasUpper against its definition on every plain
// byte at every place of names of 1 to 24 bytes.
func TestHasUpper(t *testing.T) {
	for n := 1; n <= 24; n++ {
		for at := range n {
			for x := range 128 {
				if !plainByte(byte(x)) {
					continue
				}
				b := []byte(strings.Repeat("a", n))
				b[at] = byte(x)
				if got, want := hasUpper(b), x >= 'A' && x <= 'Z'; got != want {
					t.Fatalf("hasUpper(%q) = %v", b, got)
				}
			}
		}
	}
}
