package probes

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"lbdns/configs"
)

// wireJudgeChecks are the checks whose replies TestJudgeWire and
// FuzzJudgeWire judge both ways.
func wireJudgeChecks() []*configs.Check {
	return []*configs.Check{
		fixedCheck(),
		zoneCheck(),
		withCheck(zoneCheck(), func(c *configs.Check) { c.DNS.Rcodes = []string{"noerror", "NXDOMAIN"} }),
		withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.QName = "MiXeD.Example.TEST" }),
		withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.QType = "txt"; c.DNS.QClass = "CH" }),
		withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.RD = new(false); c.DNS.CD = true }),
		withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Rcodes = []string{"SERVFAIL", "REFUSED", "NOERROR"} }),
		withCheck(zoneCheck(), func(c *configs.Check) { c.DNS.Zone = "." }),
		// Not judged from the wire (expect, a name that does not read
		// back as written): judgeWire must leave every reply undecided.
		withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Expect = "192.0.2.1" }),
		withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.ExpectRegexp = "A" }),
		withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.QName = `\101xample.test` }),
	}
}

// misbehavingReplies are the replies of the misbehaving-server cases
// (TestDNS, TestCheckReply) and more, to the query q.
func misbehavingReplies(t testing.TB, q *dns.Msg) [][]byte {
	t.Helper()
	h := []handler{
		good,
		rcodeHandler(dns.RcodeSuccess),
		rcodeHandler(dns.RcodeServerFailure),
		rcodeHandler(dns.RcodeRefused),
		rcodeHandler(dns.RcodeNameError),
		truncated,
		mutate(func(r *dns.Msg) { r.Id++ }),
		mutate(func(r *dns.Msg) { r.Response = false }),
		mutate(func(r *dns.Msg) { r.Opcode = dns.OpcodeNotify }),
		mutate(func(r *dns.Msg) { r.Question[0].Name = "other.test." }),
		mutate(func(r *dns.Msg) { r.Question[0].Name = "ExAmPlE.TeSt." }),
		mutate(func(r *dns.Msg) { r.Question[0].Name = "lbdns-.probe.test." }),
		mutate(func(r *dns.Msg) { r.Question[0].Qtype = dns.TypeAAAA }),
		mutate(func(r *dns.Msg) { r.Question[0].Qclass = dns.ClassCHAOS }),
		mutate(func(r *dns.Msg) { r.Question = nil }),
		mutate(func(r *dns.Msg) { r.Question = append(r.Question, r.Question[0]) }),
		mutate(func(r *dns.Msg) { r.Compress = true }),
		mutate(func(r *dns.Msg) { r.Authoritative, r.RecursionAvailable = true, true }),
		mutate(func(r *dns.Msg) { r.SetEdns0(1232, false) }),
		mutate(func(r *dns.Msg) { r.SetEdns0(1232, false); r.Rcode = dns.RcodeBadVers }),
		func(req *dns.Msg) *dns.Msg {
			return answer(req, dns.RcodeSuccess, "60 IN CNAME a.example.", "60 IN NS ns.example.",
				"60 IN PTR p.example.", "60 IN TXT \"x\"", "60 IN MX 10 mx.example.")
		},
		func(req *dns.Msg) *dns.Msg {
			r := answer(req, dns.RcodeNameError)
			soa, err := dns.NewRR(req.Question[0].Name + " 60 IN SOA ns.test. host.test. 1 2 3 4 5")
			if err != nil {
				panic(err)
			}
			r.Ns = []dns.RR{soa}
			r.Compress = true
			return r
		},
		func(req *dns.Msg) *dns.Msg {
			r := answer(req, dns.RcodeSuccess, "60 IN A 192.0.2.1")
			r.Extra = []dns.RR{&dns.AAAA{Hdr: dns.RR_Header{Name: "x.", Rrtype: dns.TypeAAAA, Class: dns.ClassINET}, AAAA: netip.MustParseAddr("2001:db8::2").AsSlice()}}
			return r
		},
	}
	var out [][]byte
	for _, f := range h {
		r := f(q.Copy())
		wire, err := r.Pack()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, wire)
	}
	// Hand-made damage: counts that overstate, trailing bytes, bad
	// RDATA lengths, a pointer loop, reserved label types.
	base := out[0]
	edit := func(f func(b []byte) []byte) {
		out = append(out, f(append([]byte(nil), base...)))
	}
	edit(func(b []byte) []byte { b[7] = 9; return b })        // ancount 9
	edit(func(b []byte) []byte { b[11] = 3; return b })       // arcount 3
	edit(func(b []byte) []byte { return append(b, 0, 0, 0) }) // trailing bytes
	edit(func(b []byte) []byte { return append(b, 0xc0) })    // trailing half pointer
	edit(func(b []byte) []byte { b[5] = 0; return b })        // qdcount 0
	edit(func(b []byte) []byte { return b[:12] })             // header only
	edit(func(b []byte) []byte { b[len(q.Question[0].Name)+13] = 0xc0; return b })
	edit(func(b []byte) []byte { b[12] = 0x40; return b })       // reserved label type
	edit(func(b []byte) []byte { b[len(b)-17] = 3; return b })   // rdlength cut
	edit(func(b []byte) []byte { b[len(b)-17] = 200; return b }) // rdlength past the end
	return out
}

// compareJudgements judges reply to the query of c with id and rnd both
// ways and fails when judgeWire decides otherwise than checkReply.
func compareJudgements(t testing.TB, c *dnsChecker, id uint16, rnd uint64, reply []byte) bool {
	t.Helper()
	tmpl := c.template()
	wire := c.packQuery(tmpl, make([]byte, 0, probeBufSize), id, rnd)
	v, detail, decided := c.judge.judgeWire(tmpl, wire, reply)
	if !decided {
		return false
	}
	q := c.queryOf(id, rnd)
	wantV, wantDetail := checkReply(q, reply, &c.judge)
	if v != wantV || detail != wantDetail {
		t.Fatalf("check %s %v: reply %x: judgeWire = %d %q, checkReply = %d %q",
			c.name, c.judge.rcodes, reply, v, detail, wantV, wantDetail)
	}
	return true
}

// TestJudgeWire: judging a reply from the wire concludes as validate and
// judge do, over the misbehaving replies, every cut of them, and random
// damage; and it does decide the plain answers.
func TestJudgeWire(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, chk := range wireJudgeChecks() {
		c, err := buildDNSChecker(chk, netip.MustParseAddrPort("127.0.0.1:53"))
		if err != nil {
			t.Fatal(err)
		}
		fast := c.template().fast
		id, rnd := uint16(0x1234), uint64(0xfeedc0ffee)
		q := c.queryOf(id, rnd)
		decided := 0
		for i, reply := range misbehavingReplies(t, q) {
			d := compareJudgements(t, c, id, rnd, reply)
			if d {
				decided++
			}
			if i == 0 && fast && !d {
				t.Errorf("check %s: the correct answer is left undecided", c.name)
			}
			for n := range len(reply) {
				if compareJudgements(t, c, id, rnd, reply[:n]) {
					decided++
				}
			}
			for range 200 {
				b := append([]byte(nil), reply...)
				for range 1 + rng.IntN(3) {
					b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
				}
				if compareJudgements(t, c, id, rnd, b) {
					decided++
				}
			}
		}
		if !fast && decided > 0 {
			t.Errorf("check %s: %d replies decided from the wire, want none (not fast)", c.name, decided)
		}
		if fast && decided < 10 {
			t.Errorf("check %s: only %d replies decided from the wire", c.name, decided)
		}
	}
}

// FuzzJudgeWire: for any reply, judging from the wire, when it decides,
// concludes as checkReply.
func FuzzJudgeWire(f *testing.F) {
	var checkers []*dnsChecker
	for _, chk := range wireJudgeChecks()[:3] {
		c, err := buildDNSChecker(chk, netip.MustParseAddrPort("127.0.0.1:53"))
		if err != nil {
			f.Fatal(err)
		}
		checkers = append(checkers, c)
	}
	for _, reply := range misbehavingReplies(f, checkers[0].queryOf(7, 0)) {
		f.Add(reply)
	}
	f.Fuzz(func(t *testing.T, reply []byte) {
		for _, c := range checkers {
			compareJudgements(t, c, 7, 0, reply)
		}
	})
}

// BenchmarkJudgeWire measures the judgement of one plain reply from the
// wire (BenchmarkCheckReply is the same through Unpack).
func BenchmarkJudgeWire(b *testing.B) {
	c, err := buildDNSChecker(fixedCheck(), netip.MustParseAddrPort("127.0.0.1:53"))
	if err != nil {
		b.Fatal(err)
	}
	tmpl := c.template()
	wire := c.packQuery(tmpl, make([]byte, 0, probeBufSize), 0x1234, 0)
	reply, err := good(c.queryOf(0x1234, 0)).Pack()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if v, d, ok := c.judge.judgeWire(tmpl, wire, reply); !ok || v != verdictOK {
			b.Fatal(d)
		}
	}
}
