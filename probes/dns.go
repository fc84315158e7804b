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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
)

// defaultTimeout is the probe budget when neither the context nor the check
// gives one.
const defaultTimeout = time.Second

// udpBufSize is the read buffer of one UDP exchange. We send no EDNS0 OPT,
// so a well-behaved server answers with at most 512 bytes; the full DNS
// message size is read anyway so that an oversized datagram is seen whole
// and judged, not cut short and reported as malformed.
const udpBufSize = dns.MaxMsgSize

// verdict is what checkReply concluded about one reply.
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

// DNS sends one DNS query built from chk to target and judges the reply.
//
// The query name is chk.QName, or, when chk.Zone is set, a fresh random
// label under the zone ("lbdns-<16 hex>.zone.") so that the probe measures
// the recursion path rather than the resolver's cache. The budget is the
// deadline of ctx; when ctx has none, chk.Timeout (1s if zero).
//
// A reply counts only if its ID matches, QR is set, its opcode is QUERY and
// its question section is exactly the question asked; then its rcode must be
// one of chk.Rcodes (NOERROR, or NXDOMAIN with a zone, when empty), and
// chk.Expect / chk.ExpectRegexp must be met by the answer section. A UDP
// reply with TC set is retried over TCP within the same deadline.
//
// RTT runs from the start of the probe (including the TCP handshake for
// TCP) to the reply, or to giving up.
//
// DNS opens a fresh socket per probe; DNSProber.Probe is the same probe
// with UDP sockets reused.
func DNS(ctx context.Context, target netip.AddrPort, chk *configs.Check) Result {
	return probeDNS(ctx, nil, target, chk)
}

// probeDNS is DNS, with UDP sockets from p when p is not nil.
func probeDNS(ctx context.Context, p *DNSProber, target netip.AddrPort, chk *configs.Check) Result {
	start := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		timeout := chk.Timeout.Duration
		if timeout <= 0 {
			timeout = defaultTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()

	q, err := buildQuery(chk)
	if err != nil {
		return Result{RTT: time.Since(start), Detail: "bad check: " + err.Error()}
	}
	wire, err := q.Pack()
	if err != nil {
		return Result{RTT: time.Since(start), Detail: "bad check: pack query: " + err.Error()}
	}

	network := strings.ToLower(chk.Transport)
	switch network {
	case "":
		network = "udp"
	case "udp", "tcp":
	default:
		return Result{RTT: time.Since(start), Detail: fmt.Sprintf("bad check: unknown transport %q", chk.Transport)}
	}

	var reply []byte
	if p != nil && network == "udp" {
		reply, err = p.exchangeUDP(ctx, target, q, wire)
	} else {
		reply, err = exchange(ctx, network, target, wire)
	}
	if err != nil {
		return Result{RTT: time.Since(start), Detail: describeErr(ctx, err, deadline.Sub(start))}
	}
	v, detail := checkReply(q, reply, chk)
	if v == verdictTruncated && network == "udp" {
		// Like a stub resolver: ask the same question again over TCP,
		// within what is left of the same deadline.
		reply, err = exchange(ctx, "tcp", target, wire)
		if err != nil {
			return Result{RTT: time.Since(start), Detail: "truncated over udp; tcp: " + describeErr(ctx, err, deadline.Sub(start))}
		}
		v, detail = checkReply(q, reply, chk)
		switch v {
		case verdictOK:
			detail += ", via tcp after truncation"
		case verdictTruncated:
			detail = "truncated over udp; truncated over tcp too"
		default:
			detail = "truncated over udp; tcp: " + detail
		}
	} else if v == verdictTruncated {
		detail = "truncated over tcp"
	}
	return Result{OK: v == verdictOK, RTT: time.Since(start), Detail: detail}
}

// buildQuery makes the query message of chk with a random ID and, for zone
// checks, a random label.
func buildQuery(chk *configs.Check) (*dns.Msg, error) {
	var name string
	switch {
	case chk.Zone != "":
		name = randomName(chk.Zone)
	case chk.QName != "":
		name = dns.Fqdn(chk.QName)
	default:
		return nil, errors.New("neither qname nor zone set")
	}
	qtype, err := lookupType(chk.QType)
	if err != nil {
		return nil, err
	}
	qclass, err := lookupClass(chk.QClass)
	if err != nil {
		return nil, err
	}
	q := new(dns.Msg)
	q.Id = uint16(rand.Uint32())
	q.Opcode = dns.OpcodeQuery
	q.RecursionDesired = chk.RD == nil || *chk.RD
	q.CheckingDisabled = chk.CD
	q.Question = []dns.Question{{Name: name, Qtype: qtype, Qclass: qclass}}
	return q, nil
}

// randomName returns a fresh random label under zone: "lbdns-<16 hex>."
// and zone as a fully qualified name without a leading dot. It builds the
// name in one allocation, as it runs once per probe.
func randomName(zone string) string {
	const hexDigits = "0123456789abcdef"
	zone = strings.TrimPrefix(zone, ".") // ".zone" and "." alike
	var b strings.Builder
	b.Grow(len("lbdns-") + 16 + 2 + len(zone))
	b.WriteString("lbdns-")
	v := rand.Uint64()
	for shift := 60; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[v>>uint(shift)&0xF])
	}
	b.WriteByte('.')
	b.WriteString(zone)
	if zone != "" && !dns.IsFqdn(zone) {
		b.WriteByte('.')
	}
	return b.String()
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

// checkReply judges one raw reply to q against chk. It never panics on any
// input (FuzzCheckReply). The order of the checks decides the Detail:
// header (ID, QR, opcode), then the question section, then TC, then rcode,
// then the answer expectations.
func checkReply(q *dns.Msg, reply []byte, chk *configs.Check) (verdict, string) {
	if detail := checkHeader(q, reply); detail != "" {
		return verdictFail, detail
	}
	r := new(dns.Msg)
	if err := r.Unpack(reply); err != nil {
		if reply[2]&0x02 != 0 {
			// TC set and the rest cut short: the TCP retry is judged in
			// full.
			return verdictTruncated, "truncated"
		}
		return verdictFail, "malformed reply: " + err.Error()
	}
	if detail := checkQuestion(q, r); detail != "" {
		return verdictFail, detail
	}
	if r.Truncated {
		return verdictTruncated, "truncated"
	}
	if detail := checkRcode(r.Rcode, chk); detail != "" {
		return verdictFail, detail
	}
	if chk.Expect != "" {
		want, err := netip.ParseAddr(chk.Expect)
		if err != nil {
			return verdictFail, fmt.Sprintf("bad check: expect %q: %v", chk.Expect, err)
		}
		if !answerHasAddr(r, want.Unmap()) {
			return verdictFail, fmt.Sprintf("expected address %s not in answer", want)
		}
	}
	if chk.ExpectRegexp != "" {
		re, err := chk.ExpectRegexpCompiled()
		if err != nil {
			return verdictFail, fmt.Sprintf("bad check: expect_regexp: %v", err)
		}
		if !answerMatches(r, re) {
			return verdictFail, fmt.Sprintf("no answer RR matches %q", chk.ExpectRegexp)
		}
	}
	return verdictOK, rcodeName(r.Rcode) + ", answers " + strconv.Itoa(len(r.Answer))
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

// checkRcode requires rcode to be one of chk.Rcodes, or the default.
func checkRcode(rcode int, chk *configs.Check) string {
	want := chk.Rcodes
	if len(want) == 0 {
		if chk.Zone != "" {
			want = []string{"NXDOMAIN"}
		} else {
			want = []string{"NOERROR"}
		}
	}
	for _, s := range want {
		c, ok := dns.StringToRcode[strings.ToUpper(s)]
		if !ok {
			return fmt.Sprintf("bad check: unknown rcode %q", s)
		}
		if c == rcode {
			return ""
		}
	}
	return "rcode " + rcodeName(rcode)
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
