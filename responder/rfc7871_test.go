package responder

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestRFC7871 is the conformance table of the Client Subnet option for an
// authoritative server, over a real UDP socket (the option's raw bytes
// are sent as written and checked from the raw bytes received). The
// requirements of RFC 7871 sections 6 and 7 that apply to an
// authoritative server, and the rows that test them:
//
//   - §6 SOURCE PREFIX-LENGTH "in responses, it mirrors the same value
//     as in the queries"; §7.2.1 "the FAMILY, SOURCE PREFIX-LENGTH, and
//     ADDRESS in the response MUST match those in the query": every row
//     answered with the option (ipv4, ipv6, source 0, family 0, ...).
//   - §6 ADDRESS "MUST be truncated to the number of bits indicated by
//     the SOURCE PREFIX-LENGTH": the echo carries ceil(source/8) octets
//     (the echoed address is compared byte for byte).
//   - §6 "a server receiving an ECS option that uses either too few or
//     too many ADDRESS octets, or that has non-zero ADDRESS bits set
//     beyond SOURCE PREFIX-LENGTH, SHOULD return FORMERR": rows "too
//     many octets", "too few octets", "bits beyond source".
//   - §6 SCOPE PREFIX-LENGTH "in queries, it MUST be set to 0": a
//     sender's duty; a query breaking it is answered, the field ignored
//     (row "scope set in query").
//   - §7.1.2 requests with a wrongly formatted option (a bad FAMILY, a
//     SOURCE PREFIX-LENGTH longer than the family's addresses, an option
//     too short to hold its fields) are rejected with FORMERR, as
//     RFC 6891 says: rows "family 3", "ipv4 source 33", "ipv6 source
//     129", "short option"; two ECS options in one query are rejected too.
//   - §7.1.2 a SOURCE PREFIX-LENGTH of 0 gives no address: the answer
//     cannot depend on one, SCOPE 0 (rows "source 0", "family 0").
//   - §7.2.1 SCOPE is the prefix length over which the answer holds, as
//     the snapshot computed it (Response.Scope, never the source prefix
//     echoed back: row "ipv4" answers /24 with scope 16); SCOPE 0 when
//     the answer does not depend on the client (rows "independent",
//     "nxdomain"); at most the family's bits.
//   - §7.2.1/§7.1.2 the option is only in replies to queries that carried
//     it, and not in FORMERR replies: rows "no ecs", "too many octets".
//   - §6 FAMILY 2 with an IPv4-mapped ADDRESS: echoed as it came, the
//     scope in the option's family (row "ipv4-mapped"; what a real
//     snapshot answers for mapped prefixes, and that the prefixes of
//     different regions are kept apart, in TestRFC7871Mapped).
func TestRFC7871(t *testing.T) {
	f := &fake{Scope: 16}
	_, addr := start(t, f)
	v4 := []byte{0, 1}
	v6 := []byte{0, 2}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	type echo struct {
		family        uint16
		source, scope uint8
		addr          string
	}
	for _, c := range []struct {
		name  string
		qname string
		opts  [][]byte // raw ECS options; nil: none
		rcode int
		echo  *echo // nil: no ECS in the reply
		ecs   string
		scope int // the fake's scope for geo
	}{
		{name: "ipv4", qname: "geo.", opts: [][]byte{cat(v4, []byte{24, 0, 192, 0, 2})},
			echo: &echo{1, 24, 16, "192.0.2.0"}, ecs: "192.0.2.0/24", scope: 16},
		{name: "ipv6", qname: "geo.", opts: [][]byte{cat(v6, []byte{56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0x02})},
			echo: &echo{2, 56, 48, "2001:db8:1:200::"}, ecs: "2001:db8:1:200::/56", scope: 48},
		{name: "scope over the family's bits is capped", qname: "geo.", opts: [][]byte{cat(v4, []byte{24, 0, 192, 0, 2})},
			echo: &echo{1, 24, 32, "192.0.2.0"}, ecs: "192.0.2.0/24", scope: 40},
		{name: "ipv4 /32", qname: "geo.", opts: [][]byte{cat(v4, []byte{32, 0, 192, 0, 2, 77})},
			echo: &echo{1, 32, 16, "192.0.2.77"}, ecs: "192.0.2.77/32", scope: 16},
		{name: "independent", qname: "www.", opts: [][]byte{cat(v4, []byte{24, 0, 192, 0, 2})},
			echo: &echo{1, 24, 0, "192.0.2.0"}, ecs: "192.0.2.0/24", scope: 16},
		{name: "nxdomain", qname: "nope.", opts: [][]byte{cat(v4, []byte{24, 0, 192, 0, 2})}, rcode: dns.RcodeNameError,
			echo: &echo{1, 24, 0, "192.0.2.0"}, ecs: "192.0.2.0/24", scope: 16},
		{name: "ipv4-mapped", qname: "geo.", opts: [][]byte{cat(v6, []byte{120, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2})},
			echo: &echo{2, 120, 112, "::ffff:10.1.2.0"}, ecs: "::ffff:10.1.2.0/120", scope: 112},
		{name: "scope set in query", qname: "geo.", opts: [][]byte{cat(v4, []byte{24, 20, 192, 0, 2})},
			echo: &echo{1, 24, 16, "192.0.2.0"}, ecs: "192.0.2.0/24", scope: 16},
		{name: "source 0", qname: "geo.", opts: [][]byte{cat(v4, []byte{0, 0})},
			echo: &echo{1, 0, 0, "0.0.0.0"}, ecs: "0.0.0.0/0", scope: 16},
		{name: "ipv6 source 0", qname: "geo.", opts: [][]byte{cat(v6, []byte{0, 0})},
			echo: &echo{2, 0, 0, "::"}, ecs: "::/0", scope: 16},
		{name: "family 0", qname: "geo.", opts: [][]byte{{0, 0, 0, 0}},
			echo: &echo{0, 0, 0, ""}, ecs: "0.0.0.0/0", scope: 16},
		{name: "no ecs", qname: "geo.", scope: 16},
		{name: "too many octets", qname: "geo.", opts: [][]byte{cat(v4, []byte{24, 0, 192, 0, 2, 0})}, rcode: dns.RcodeFormatError},
		{name: "too few octets", qname: "geo.", opts: [][]byte{cat(v4, []byte{24, 0, 192, 0})}, rcode: dns.RcodeFormatError},
		{name: "bits beyond source", qname: "geo.", opts: [][]byte{cat(v4, []byte{23, 0, 192, 0, 3})}, rcode: dns.RcodeFormatError},
		{name: "bits beyond source ipv6", qname: "geo.", opts: [][]byte{cat(v6, []byte{12, 0, 0x20, 0x11})}, rcode: dns.RcodeFormatError},
		{name: "family 3", qname: "geo.", opts: [][]byte{{0, 3, 0, 0}}, rcode: dns.RcodeFormatError},
		{name: "family 0 with a source", qname: "geo.", opts: [][]byte{{0, 0, 8, 0, 10}}, rcode: dns.RcodeFormatError},
		{name: "ipv4 source 33", qname: "geo.", opts: [][]byte{cat(v4, []byte{33, 0, 192, 0, 2, 1, 0})}, rcode: dns.RcodeFormatError},
		{name: "ipv6 source 129", qname: "geo.", opts: [][]byte{cat(v6, []byte{129, 0}, make([]byte, 17))}, rcode: dns.RcodeFormatError},
		{name: "short option", qname: "geo.", opts: [][]byte{{0, 1, 24}}, rcode: dns.RcodeFormatError},
		{name: "two options", qname: "geo.", opts: [][]byte{cat(v4, []byte{24, 0, 192, 0, 2}), cat(v4, []byte{24, 0, 192, 0, 2})}, rcode: dns.RcodeFormatError},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.mu.Lock()
			f.Scope = c.scope
			f.mu.Unlock()
			m := query(c.qname+zone, dns.TypeA, 1232)
			if c.opts != nil {
				withECS(m, c.opts...)
			}
			r := exchange(t, addr, "udp", m)
			if r.Rcode != c.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
			}
			got := ecsOf(r)
			switch {
			case c.echo == nil && got != nil:
				t.Fatalf("ECS in the reply: %v", got)
			case c.echo == nil:
				return
			case got == nil:
				t.Fatalf("no ECS in the reply: %v", r)
			}
			wantAddr := net.IP(nil)
			if c.echo.addr != "" {
				wantAddr = net.IP(netip.MustParseAddr(c.echo.addr).AsSlice())
			}
			if got.Family != c.echo.family || got.SourceNetmask != c.echo.source || got.SourceScope != c.echo.scope ||
				(wantAddr != nil && !got.Address.Equal(wantAddr)) {
				t.Errorf("echo family %d source %d scope %d addr %v, want %+v", got.Family, got.SourceNetmask, got.SourceScope, got.Address, *c.echo)
			}
			if q := f.lastQuery(); q.ECS.String() != c.ecs {
				t.Errorf("Query.ECS %v, want %s", q.ECS, c.ecs)
			}
			// The echoed ADDRESS holds exactly ceil(source/8) octets.
			raw, err := r.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if want := 4 + (int(c.echo.source)+7)/8; !hasOption(raw, want) {
				t.Errorf("echoed option is not %d octets long", want)
			}
		})
	}
}

// TestRFC7871Mapped is the conformance table's rows for IPv4-mapped
// prefixes (FAMILY 2, ADDRESS ::ffff:a.b.c.d), over a real snapshot and
// a UDP reader: a mapped prefix is located as the IPv4
// prefix it maps (its length less 96), and SCOPE PREFIX-LENGTH is said
// in the option's own family (RFC 7871 §6: the scope counts the
// ADDRESS's bits), so the IPv4 scope plus 96; 0 when the answer holds
// for every client; a mapped /96 (an IPv4 /0) is answered as SOURCE 0.
// The answer for one mapped prefix is never given to another region:
// asked one after another on one socket (one reader).
func TestRFC7871Mapped(t *testing.T) {
	_, addr := startRegions(t)
	c := udpConn(t, addr)
	for _, row := range []struct {
		name, qname, ecs string
		want             string // the answer's address
		scope            int
	}{
		{"mapped region a", "geo", "::ffff:10.2.3.0/120", "198.51.100.1", 16 + 96},
		{"mapped region a again", "geo", "::ffff:10.2.3.0/120", "198.51.100.1", 16 + 96},
		{"mapped region b after a", "geo", "::ffff:10.1.2.0/120", "198.51.100.2", 16 + 96},
		{"mapped region c", "geo", "::ffff:192.0.2.0/120", "198.51.100.3", 24 + 96},
		{"mapped /128", "geo", "::ffff:10.1.2.3/128", "198.51.100.2", 16 + 96},
		{"ipv4 region b", "geo", "10.1.2.0/24", "198.51.100.2", 16},
		{"ipv6 region d", "geo", "2001:db8:1:2::/64", "198.51.100.4", 48},
		{"mapped unmapped network", "geo", "::ffff:172.16.0.0/120", "198.51.100.9", 96 + 2}, // 128.0.0.0/2 holds no entry
		{"mapped /96 is source 0: by the source (lo)", "geo", "::ffff:0.0.0.0/96", "198.51.100.5", 0},
		{"mapped independent", "ind", "::ffff:10.1.2.0/120", "198.51.100.9", 0},
	} {
		t.Run(row.name, func(t *testing.T) {
			p := netip.MustParsePrefix(row.ecs)
			r := over(t, c, withECS(query(row.qname+".gslb.test.", dns.TypeA, 1232), ecsData(p)))
			e := ecsOf(r)
			if len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), "\t"+row.want) || e == nil {
				t.Fatalf("reply %v, want %s with ECS", r, row.want)
			}
			fam := uint16(1)
			if p.Addr().Is6() {
				fam = 2
			}
			if e.Family != fam || int(e.SourceNetmask) != p.Bits() || int(e.SourceScope) != row.scope ||
				!e.Address.Equal(net.IP(p.Masked().Addr().AsSlice())) {
				t.Errorf("echo family %d source %d scope %d addr %v, want family %d source %d scope %d addr %v",
					e.Family, e.SourceNetmask, e.SourceScope, e.Address, fam, p.Bits(), row.scope, p.Masked().Addr())
			}
		})
	}
}

// hasOption reports whether the packed message b ends with an ECS option
// of n octets (the OPT record is last, the ECS option its last option).
func hasOption(b []byte, n int) bool {
	for i := 0; i+4 <= len(b); i++ {
		if b[i] == 0 && b[i+1] == 8 && int(b[i+2])<<8|int(b[i+3]) == n && i+4+n == len(b) {
			return true
		}
	}
	return false
}
