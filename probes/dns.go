package probes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/internal/dnswire"
)

// defaultTimeout is the probe budget when neither the context nor the check
// gives one.
const defaultTimeout = time.Second

// udpBufSize is the read buffer of one UDP exchange. We send no EDNS0 OPT,
// so a well-behaved server answers with at most 512 bytes; the full DNS
// message size is read anyway so that an oversized datagram is seen whole
// and judged, not cut short and reported as malformed.
const udpBufSize = dns.MaxMsgSize

// verdict is what validate or checkReply concluded about one reply.
type verdict int

const (
	// verdictFail: the reply is wrong; the detail says why.
	verdictFail verdict = iota
	// verdictOK: the reply is what the check expects.
	verdictOK
	// verdictTruncated: the reply answers our question but has TC set; the
	// caller retries over TCP (after UDP) or fails (after TCP).
	verdictTruncated
)

// dnsChecker is the checker of kind "dns" for one target, with the
// question and the judgement parsed from the profile once.
type dnsChecker struct {
	target netip.AddrPort
	// p, when set, runs UDP checks through its batch engine
	// (StartCheck; DNSProber).
	p *DNSProber
	// name is the fixed query name, or the zone when random is set.
	name    string
	random  bool
	qtype   uint16
	qclass  uint16
	rd, cd  bool
	network string
	// timeout is the budget when the context has no deadline.
	timeout time.Duration
	judge   judge

	// tmpl is the packed query of the batch engine, built on first use:
	// a probe copies it and patches the ID and the random label in place.
	tmplOnce sync.Once
	tmpl     queryTemplate

	// slot is the batch engine's state of the target, kept here so
	// that a probe looks nothing up (engine.start); under the engine's
	// lock.
	slot *slot
}

// queryTemplate is a checker's query packed once, with ID 0 and, for zone
// checks, a placeholder random label.
type queryTemplate struct {
	wire []byte
	// err is why the query does not pack ("bad check: pack query: ...").
	err error
	// fast reports that replies may be judged from the wire
	// (judgeWire): the check has no expect nor expect_regexp, and the
	// query name reads back from the wire exactly as configured, so that
	// comparing names on the wire decides as comparing them as text does.
	fast bool
}

// randomLabelAt is where the 16 hex digits of the random label start in a
// packed zone query: the header, the label's length byte and "lbdns-".
const randomLabelAt = 12 + 1 + len("lbdns-")

// template returns c's query template, building it on first use.
func (c *dnsChecker) template() *queryTemplate {
	c.tmplOnce.Do(func() {
		q := c.queryOf(0, 0)
		wire, err := q.Pack()
		if err != nil {
			c.tmpl.err = err
			return
		}
		c.tmpl.wire = wire
		name, _, err := dns.UnpackDomainName(wire, 12)
		c.tmpl.fast = err == nil && name == q.Question[0].Name &&
			!c.judge.expect.IsValid() && c.judge.re == nil
	})
	return &c.tmpl
}

// packQuery writes the query with id and random label value rnd into dst
// (at least as long as the template) from the template t, and returns it.
func (c *dnsChecker) packQuery(t *queryTemplate, dst []byte, id uint16, rnd uint64) []byte {
	dst = append(dst[:0], t.wire...)
	binary.BigEndian.PutUint16(dst, id)
	if c.random {
		putHex(dst[randomLabelAt:randomLabelAt+16], rnd)
	}
	return dst
}

// judge is how a valid reply is judged: its rcode and the answer section.
type judge struct {
	rcodes []int
	// expect is the address an A/AAAA answer must hold (valid when set).
	expect netip.Addr
	// re must match the text of an answer RR (nil when unset).
	re *regexp.Regexp
	// okText holds the Details of success, "NOERROR, answers 2", per
	// rcode (as rcodes) and count of answers below okTextMax, made once
	// (shared by the checkers of one DNSProber).
	okText []*[okTextMax]string
}

// okTextMax bounds the answer counts whose success Detail is made once.
const okTextMax = 8

// newOKTexts returns the success Details of rcode for 0 to okTextMax-1
// answers.
func newOKTexts(rcode int) *[okTextMax]string {
	var texts [okTextMax]string
	for n := range texts {
		texts[n] = rcodeName(rcode) + ", answers " + strconv.Itoa(n)
	}
	return &texts
}

// newDNSChecker is the Constructor of kind "dns".
func newDNSChecker(chk *configs.Check, target netip.AddrPort, deps Deps) (check.Checker, error) {
	c, err := buildDNSChecker(chk, target)
	if err != nil {
		return nil, err
	}
	if p := deps.DNS; p != nil {
		c.p = p
		for i, rcode := range c.judge.rcodes {
			c.judge.okText[i] = p.okTexts(rcode)
		}
	}
	return c, nil
}

// buildDNSChecker parses chk's dns settings into a checker of target.
func buildDNSChecker(chk *configs.Check, target netip.AddrPort) (*dnsChecker, error) {
	s := chk.DNS
	if s == nil {
		return nil, errors.New("no dns settings")
	}
	c := &dnsChecker{target: target, timeout: chk.Timeout.Duration, rd: s.RD == nil || *s.RD, cd: s.CD}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	switch {
	case s.Zone != "":
		c.name, c.random = s.Zone, true
	case s.QName != "":
		c.name = dns.Fqdn(s.QName)
	default:
		return nil, errors.New("neither qname nor zone set")
	}
	var err error
	if c.qtype, err = lookupType(s.QType); err != nil {
		return nil, err
	}
	if c.qclass, err = lookupClass(s.QClass); err != nil {
		return nil, err
	}
	switch c.network = strings.ToLower(s.Transport); c.network {
	case "":
		c.network = "udp"
	case "udp", "tcp":
	default:
		return nil, fmt.Errorf("unknown transport %q", s.Transport)
	}
	if c.judge, err = newJudge(s); err != nil {
		return nil, err
	}
	return c, nil
}

// newJudge parses the judgement settings of s.
func newJudge(s *configs.DNSCheck) (judge, error) {
	var j judge
	want := s.Rcodes
	if len(want) == 0 {
		if s.Zone != "" {
			want = []string{"NXDOMAIN"}
		} else {
			want = []string{"NOERROR"}
		}
	}
	for _, name := range want {
		c, ok := dns.StringToRcode[strings.ToUpper(name)]
		if !ok {
			return j, fmt.Errorf("unknown rcode %q", name)
		}
		j.rcodes = append(j.rcodes, c)
		j.okText = append(j.okText, newOKTexts(c))
	}
	if s.Expect != "" {
		a, err := netip.ParseAddr(s.Expect)
		if err != nil {
			return j, fmt.Errorf("expect %q: %w", s.Expect, err)
		}
		j.expect = a.Unmap()
	}
	if s.ExpectRegexp != "" {
		re, err := regexp.Compile(s.ExpectRegexp)
		if err != nil {
			return j, fmt.Errorf("expect_regexp: %w", err)
		}
		j.re = re
	}
	return j, nil
}

// DNS sends one DNS query built from chk to target and judges the reply.
// It parses chk on every call: a one-off probe. Health checks build a
// checker once per target (Builder.Build) and call its Check, which does
// the same.
//
// The query name is chk.DNS.QName, or, when chk.DNS.Zone is set, a fresh
// random label under the zone ("lbdns-<16 hex>.zone.") so that the probe
// measures the recursion path rather than the resolver's cache. The budget
// is the deadline of ctx; when ctx has none, chk.Timeout (1s if zero).
//
// A reply counts only if its ID matches, QR is set, its opcode is QUERY and
// its question section is exactly the question asked; then its rcode must be
// one of the check's rcodes (NOERROR, or NXDOMAIN with a zone, when empty),
// and expect / expect_regexp must be met by the answer section. A UDP
// reply with TC set is retried over TCP within the same deadline.
//
// RTT runs from the start of the probe (including the TCP handshake for
// TCP) to the reply, or to giving up.
//
// DNS opens a fresh socket per probe.
func DNS(ctx context.Context, target netip.AddrPort, chk *configs.Check) Result {
	start := time.Now()
	c, err := buildDNSChecker(chk, target)
	if err != nil {
		return Result{RTT: time.Since(start), Detail: "bad check: " + err.Error()}
	}
	return c.Check(ctx)
}

// ProbeAddr returns the address queried (check.Addressed).
func (c *dnsChecker) ProbeAddr() netip.AddrPort { return c.target }

// Check probes the target once (check.Checker).
func (c *dnsChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, deadline, cancel := bounded(ctx, c.timeout)
	defer cancel()

	q := c.query()
	wire, err := q.Pack()
	if err != nil {
		return Result{RTT: time.Since(start), Detail: "bad check: pack query: " + err.Error()}
	}
	r, viaTCP, detail, cause := roundTrip(ctx, c.target, c.network, q, wire, deadline.Sub(start))
	if r == nil {
		return Result{RTT: time.Since(start), Detail: detail, Cause: cause}
	}
	ok, detail := c.judge.judge(r)
	if viaTCP {
		if ok {
			detail += ", via tcp after truncation"
		} else {
			detail = "truncated over udp; tcp: " + detail
		}
	}
	return Result{OK: ok, RTT: time.Since(start), Detail: detail}
}

// query makes the query message with a random ID and, for zone checks, a
// random label.
func (c *dnsChecker) query() *dns.Msg {
	return c.queryOf(uint16(rand.Uint32()), rand.Uint64())
}

// queryOf makes the query message with ID id and, for zone checks, the
// random label of value rnd.
func (c *dnsChecker) queryOf(id uint16, rnd uint64) *dns.Msg {
	name := c.name
	if c.random {
		name = randomNameOf(c.name, rnd)
	}
	q := new(dns.Msg)
	q.Id = id
	q.Opcode = dns.OpcodeQuery
	q.RecursionDesired = c.rd
	q.CheckingDisabled = c.cd
	q.Question = []dns.Question{{Name: name, Qtype: c.qtype, Qclass: c.qclass}}
	return q
}

// roundTrip is the one DNS exchange-and-validate core of health checks,
// Identify and Exchange: it sends wire (the packed q) to target over
// network (a fresh socket), validates the reply against q
// (validate), and asks again over TCP within the same deadline when a UDP
// reply is truncated. It returns the valid reply and whether it came over
// TCP after a truncation, or nil and why not ("timeout after 1s",
// "id mismatch: ...", "truncated over udp; tcp: ..."), with the failure's
// cause (check.CauseTarget unless a socket call failed for a local reason:
// localCause). budget is the whole deadline, for the timeout's text. The
// rcode and the answer are the caller's to judge.
func roundTrip(ctx context.Context, target netip.AddrPort, network string, q *dns.Msg, wire []byte, budget time.Duration) (*dns.Msg, bool, string, check.Cause) {
	raw, err := exchange(ctx, network, target, wire)
	if err != nil {
		return nil, false, describeErr(ctx, err, budget), localCause(err, target)
	}
	r, v, detail := validate(q, raw)
	switch {
	case v == verdictOK:
		return r, false, "", check.CauseTarget
	case v == verdictFail:
		return nil, false, detail, check.CauseTarget
	case network != "udp":
		return nil, false, "truncated over tcp", check.CauseTarget
	}
	// Like a stub resolver: ask the same question again over TCP, within
	// what is left of the same deadline.
	raw, err = exchange(ctx, "tcp", target, wire)
	if err != nil {
		return nil, false, "truncated over udp; tcp: " + describeErr(ctx, err, budget), localCause(err, target)
	}
	r, v, detail = validate(q, raw)
	switch v {
	case verdictOK:
		return r, true, "", check.CauseTarget
	case verdictTruncated:
		return nil, false, "truncated over udp; truncated over tcp too", check.CauseTarget
	}
	return nil, false, "truncated over udp; tcp: " + detail, check.CauseTarget
}

// randomNameOf returns a random label under zone: "lbdns-" and v in 16
// hex digits, then zone as a fully qualified name without a leading dot.
// It builds the name in one allocation, as it runs once per probe.
func randomNameOf(zone string, v uint64) string {
	zone = strings.TrimPrefix(zone, ".") // ".zone" and "." alike
	var b strings.Builder
	b.Grow(len("lbdns-") + 16 + 2 + len(zone))
	b.WriteString("lbdns-")
	var digits [16]byte
	putHex(digits[:], v)
	b.Write(digits[:])
	b.WriteByte('.')
	b.WriteString(zone)
	if zone != "" && !dns.IsFqdn(zone) {
		b.WriteByte('.')
	}
	return b.String()
}

// putHex writes v as 16 lower-case hex digits into dst[:16].
func putHex(dst []byte, v uint64) {
	const hexDigits = "0123456789abcdef"
	for i := range 16 {
		dst[i] = hexDigits[v>>uint(60-4*i)&0xF]
	}
}

func lookupType(s string) (uint16, error) {
	if s == "" {
		return dns.TypeA, nil
	}
	t, ok := dns.StringToType[strings.ToUpper(s)]
	if !ok {
		return 0, fmt.Errorf("unknown qtype %q", s)
	}
	return t, nil
}

func lookupClass(s string) (uint16, error) {
	if s == "" {
		return dns.ClassINET, nil
	}
	c, ok := dns.StringToClass[strings.ToUpper(s)]
	if !ok {
		return 0, fmt.Errorf("unknown qclass %q", s)
	}
	return c, nil
}

// exchange sends wire over a fresh connection to target and returns the
// first reply. The connection's deadline is ctx's; a cancellation of ctx
// moves the deadline to the past, which unblocks the I/O at once. No timer
// goroutine races the read.
//
// Over UDP exactly one datagram is read: the socket is connected, so the
// kernel delivers only datagrams from target's address and port, and a
// datagram from there that does not carry our ID is not stray traffic to
// wait past but a sign of a broken or spoofed path (or a resolver that
// mangles IDs). DNS therefore judges it as a failure ("id mismatch")
// instead of reading on until the deadline, which would hide the fault
// behind a timeout.
func exchange(ctx context.Context, network string, target netip.AddrPort, wire []byte) ([]byte, error) {
	conn, err := dial(ctx, network, target)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return nil, err
		}
	}
	stop := context.AfterFunc(ctx, func() {
		_ = conn.SetDeadline(time.Unix(1, 0))
	})
	defer stop()

	if network == "udp" {
		if _, err := conn.Write(wire); err != nil {
			return nil, err
		}
		return readDatagram(conn)
	}

	// TCP: two-byte length prefix (RFC 1035 4.2.2), sent in one write.
	out := make([]byte, 2+len(wire))
	binary.BigEndian.PutUint16(out, uint16(len(wire)))
	copy(out[2:], wire)
	if _, err := conn.Write(out); err != nil {
		return nil, err
	}
	var lenBuf [2]byte
	if _, err := io.ReadFull(conn, lenBuf[:]); err != nil {
		return nil, err
	}
	reply := make([]byte, binary.BigEndian.Uint16(lenBuf[:]))
	if _, err := io.ReadFull(conn, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// dial opens a connection of network to target. A UDP dial is a local
// connect(2) that never waits, so it skips the dialer's address parsing
// and dual-stack machinery; ctx matters only before it.
func dial(ctx context.Context, network string, target netip.AddrPort) (net.Conn, error) {
	if network != "udp" {
		var d net.Dialer
		return d.DialContext(ctx, network, target.String())
	}
	c, err := dialUDP(ctx, target)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// dialUDP opens a connected UDP socket to target unless ctx is done.
func dialUDP(ctx context.Context, target netip.AddrPort) (*net.UDPConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(target))
}

// readDatagramFull reads one datagram from conn into a buffer of the
// largest DNS message size, so that an oversized datagram is seen whole.
func readDatagramFull(conn net.Conn) ([]byte, error) {
	buf := make([]byte, udpBufSize)
	n, err := conn.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// describeErr turns an exchange error into a Detail.
func describeErr(ctx context.Context, err error, budget time.Duration) string {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return "canceled"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "timeout after " + roundBudget(budget).String()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before reply"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	}
	return err.Error()
}

// roundBudget rounds a probe budget for display: to the millisecond below
// one second, to 10ms above ("timeout after 1s", "timeout after 200ms").
func roundBudget(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// validate parses one raw reply and checks that it answers q: header (ID,
// QR, opcode) before any parsing, then the question section, then TC. It
// never panics on any input (FuzzCheckReply).
func validate(q *dns.Msg, reply []byte) (*dns.Msg, verdict, string) {
	if detail := checkHeader(q, reply); detail != "" {
		return nil, verdictFail, detail
	}
	r := new(dns.Msg)
	if err := r.Unpack(reply); err != nil {
		if reply[2]&0x02 != 0 {
			// TC set and the rest cut short: the TCP retry is judged in
			// full.
			return nil, verdictTruncated, "truncated"
		}
		return nil, verdictFail, "malformed reply: " + err.Error()
	}
	if detail := checkQuestion(q, r); detail != "" {
		return nil, verdictFail, detail
	}
	if r.Truncated {
		return nil, verdictTruncated, "truncated"
	}
	return r, verdictOK, ""
}

// judge judges a valid reply: rcode, then expect, then expect_regexp.
func (j *judge) judge(r *dns.Msg) (bool, string) {
	if !slices.Contains(j.rcodes, r.Rcode) {
		return false, "rcode " + rcodeName(r.Rcode)
	}
	if j.expect.IsValid() && !answerHasAddr(r, j.expect) {
		return false, fmt.Sprintf("expected address %s not in answer", j.expect)
	}
	if j.re != nil && !answerMatches(r, j.re) {
		return false, fmt.Sprintf("no answer RR matches %q", j.re.String())
	}
	return true, j.okDetail(r.Rcode, len(r.Answer))
}

// okDetail is the Detail of success with rcode and n answers.
func (j *judge) okDetail(rcode, n int) string {
	if i := slices.Index(j.rcodes, rcode); i >= 0 && i < len(j.okText) && n < okTextMax {
		return j.okText[i][n]
	}
	return rcodeName(rcode) + ", answers " + strconv.Itoa(n)
}

// judgeWire judges reply to the packed query q (as sent: its ID patched)
// from the wire, without unpacking it, when t.fast allows and the reply is
// plainly well formed; decided reports whether it concluded. When it did,
// the verdict and the Detail are those checkReply gives (TestJudgeWire
// compares both over the misbehaving replies; FuzzJudgeWire over any);
// anything unusual (a failed header or question check, TC, an OPT record,
// record types it does not know, anything that does not parse) is left
// undecided for validate and judge, which also write the Detail.
//
// What it requires mirrors how miekg/dns unpacks: the header and the
// question as sent (the name compared ASCII case-insensitively, as
// checkQuestion compares the text), then every record of the counts up to
// the end of the message (counts that overstate are cut there, as Unpack
// does), each with a valid owner name, its fixed fields, and RDATA of A,
// AAAA, CNAME, NS, PTR or SOA that unpacks to exactly its length (or
// none). Then the rcode is the header's (no OPT: no extended rcode) and
// the answers are the records of the answer section.
func (j *judge) judgeWire(t *queryTemplate, q, reply []byte) (v verdict, detail string, decided bool) {
	if !t.fast || len(reply) < len(q) || len(q) < 12+1+4 {
		return 0, "", false
	}
	// ID, QR, opcode QUERY, TC clear, one question.
	if reply[0] != q[0] || reply[1] != q[1] || reply[2]&0xFA != 0x80 ||
		binary.BigEndian.Uint16(reply[4:]) != 1 {
		return 0, "", false
	}
	nameEnd := len(q) - 4
	if !equalFoldASCII(reply[12:nameEnd], q[12:nameEnd]) || string(reply[nameEnd:len(q)]) != string(q[nameEnd:]) {
		return 0, "", false
	}
	off, answers := len(q), 0
	for sec := range 3 {
		count := int(binary.BigEndian.Uint16(reply[6+2*sec:]))
		for range count {
			if off == len(reply) {
				break // the count overstates: Unpack stops here too
			}
			var ok bool
			if off, ok = skipRR(reply, off); !ok {
				return 0, "", false
			}
			if sec == 0 {
				answers++
			}
		}
	}
	rcode := int(reply[3] & 0xF)
	if !slices.Contains(j.rcodes, rcode) {
		return verdictFail, "rcode " + rcodeName(rcode), true
	}
	return verdictOK, j.okDetail(rcode, answers), true
}

// equalFoldASCII reports whether a and b are equal but for the case of
// ASCII letters.
func equalFoldASCII(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i, c := range a {
		d := b[i]
		if c == d {
			continue
		}
		if c|0x20 != d|0x20 || c|0x20 < 'a' || c|0x20 > 'z' {
			return false
		}
	}
	return true
}

// skipRR returns the offset after the resource record at off in msg, or
// false where dns.UnpackRR fails or where the record is one judgeWire
// leaves to Unpack (OPT, types other than A, AAAA, CNAME, NS, PTR, SOA).
func skipRR(msg []byte, off int) (int, bool) {
	off, ok := dnswire.SkipName(msg, off)
	if !ok || off+10 > len(msg) {
		return 0, false
	}
	typ := binary.BigEndian.Uint16(msg[off:])
	off += 10
	end := off + int(binary.BigEndian.Uint16(msg[off-2:]))
	if end > len(msg) || typ == dns.TypeOPT {
		return 0, false
	}
	if end == off {
		return end, true // no RDATA: Unpack takes it as it is
	}
	rd := msg[:end] // Unpack reads the RDATA within its length
	switch typ {
	case dns.TypeA:
		return end, end-off == 4
	case dns.TypeAAAA:
		return end, end-off == 16
	case dns.TypeCNAME, dns.TypeNS, dns.TypePTR:
		o, ok := dnswire.SkipName(rd, off)
		return end, ok && o == end
	case dns.TypeSOA:
		// Two names, then up to five 32-bit fields: Unpack stops at
		// the end of the RDATA between fields.
		o, ok := dnswire.SkipName(rd, off)
		if !ok {
			return 0, false
		}
		if o == end {
			return end, true
		}
		if o, ok = dnswire.SkipName(rd, o); !ok {
			return 0, false
		}
		rest := end - o
		return end, rest%4 == 0 && rest <= 20
	}
	return 0, false
}

// checkHeader checks the fixed header bytes of reply, before any parsing of
// the sections, so that a wrong ID is reported as such even when the rest
// does not parse.
func checkHeader(q *dns.Msg, reply []byte) string {
	if len(reply) < 12 {
		return fmt.Sprintf("short reply: %d bytes", len(reply))
	}
	if id := binary.BigEndian.Uint16(reply); id != q.Id {
		return fmt.Sprintf("id mismatch: got %d, want %d", id, q.Id)
	}
	if reply[2]&0x80 == 0 {
		return "not a response"
	}
	if op := int(reply[2]>>3) & 0xF; op != dns.OpcodeQuery {
		return "opcode mismatch: got " + opcodeName(op)
	}
	return ""
}

// checkQuestion requires the question section of r to be exactly the one
// question of q (name compared case-insensitively, for 0x20 mixing).
func checkQuestion(q, r *dns.Msg) string {
	if len(r.Question) != 1 {
		return fmt.Sprintf("question mismatch: got %d questions", len(r.Question))
	}
	got, want := r.Question[0], q.Question[0]
	if !strings.EqualFold(got.Name, want.Name) || got.Qtype != want.Qtype || got.Qclass != want.Qclass {
		return fmt.Sprintf("question mismatch: got %s %s %s",
			got.Name, dns.Class(got.Qclass), dns.Type(got.Qtype))
	}
	return ""
}

func answerHasAddr(r *dns.Msg, want netip.Addr) bool {
	for _, rr := range r.Answer {
		var ip net.IP
		switch rr := rr.(type) {
		case *dns.A:
			ip = rr.A
		case *dns.AAAA:
			ip = rr.AAAA
		default:
			continue
		}
		if got, ok := netip.AddrFromSlice(ip); ok && got.Unmap() == want {
			return true
		}
	}
	return false
}

func answerMatches(r *dns.Msg, re *regexp.Regexp) bool {
	for _, rr := range r.Answer {
		if rr != nil && re.MatchString(rr.String()) {
			return true
		}
	}
	return false
}

func rcodeName(rcode int) string {
	if s, ok := dns.RcodeToString[rcode]; ok {
		return s
	}
	return fmt.Sprintf("RCODE%d", rcode)
}

func opcodeName(op int) string {
	if s, ok := dns.OpcodeToString[op]; ok {
		return s
	}
	return fmt.Sprintf("OPCODE%d", op)
}
