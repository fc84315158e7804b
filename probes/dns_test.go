package probes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/check"
	"lbdns/configs"
)

const testTimeout = 200 * time.Millisecond

func fixedCheck() *configs.Check {
	return &configs.Check{
		Kind:    "dns",
		Timeout: configs.Duration{Duration: testTimeout},
		DNS: &configs.DNSCheck{
			QName:  "example.test",
			QType:  "A",
			QClass: "IN",
		},
	}
}

func zoneCheck() *configs.Check {
	c := fixedCheck()
	c.DNS.QName = ""
	c.DNS.Zone = "probe.test."
	return c
}

func withCheck(c *configs.Check, f func(*configs.Check)) *configs.Check {
	f(c)
	return c
}

func good(req *dns.Msg) *dns.Msg {
	return answer(req, dns.RcodeSuccess, "60 IN A 192.0.2.1", "60 IN AAAA 2001:db8::1")
}

func rcodeHandler(rcode int) handler {
	return func(req *dns.Msg) *dns.Msg { return answer(req, rcode) }
}

func mutate(f func(r *dns.Msg)) handler {
	return func(req *dns.Msg) *dns.Msg {
		r := good(req)
		f(r)
		return r
	}
}

func truncated(req *dns.Msg) *dns.Msg {
	r := answer(req, dns.RcodeSuccess)
	r.Truncated = true
	return r
}

func silent(*dns.Msg) *dns.Msg { return nil }

func TestDNS(t *testing.T) {
	tests := []struct {
		name       string
		chk        *configs.Check
		udp, tcp   handler
		wantOK     bool
		wantDetail string // substring of Detail
	}{
		{name: "correct answer", chk: fixedCheck(), udp: good, wantOK: true, wantDetail: "NOERROR, answers 2"},
		{name: "wrong id", chk: fixedCheck(), udp: mutate(func(r *dns.Msg) { r.Id++ }), wantDetail: "id mismatch"},
		{name: "qr unset", chk: fixedCheck(), udp: mutate(func(r *dns.Msg) { r.Response = false }), wantDetail: "not a response"},
		{name: "wrong opcode", chk: fixedCheck(), udp: mutate(func(r *dns.Msg) { r.Opcode = dns.OpcodeNotify }), wantDetail: "opcode mismatch: got NOTIFY"},
		{name: "wrong question name", chk: fixedCheck(),
			udp:        mutate(func(r *dns.Msg) { r.Question[0].Name = "other.test." }),
			wantDetail: "question mismatch: got other.test. IN A"},
		{name: "wrong qtype", chk: fixedCheck(),
			udp:        mutate(func(r *dns.Msg) { r.Question[0].Qtype = dns.TypeAAAA }),
			wantDetail: "question mismatch: got example.test. IN AAAA"},
		{name: "wrong qclass", chk: fixedCheck(),
			udp:        mutate(func(r *dns.Msg) { r.Question[0].Qclass = dns.ClassCHAOS }),
			wantDetail: "question mismatch: got example.test. CH A"},
		{name: "no question", chk: fixedCheck(),
			udp:        mutate(func(r *dns.Msg) { r.Question = nil }),
			wantDetail: "question mismatch: got 0 questions"},
		{name: "two questions", chk: fixedCheck(),
			udp:        mutate(func(r *dns.Msg) { r.Question = append(r.Question, r.Question[0]) }),
			wantDetail: "question mismatch: got 2 questions"},
		{name: "question name case differs", chk: fixedCheck(),
			udp:    mutate(func(r *dns.Msg) { r.Question[0].Name = "ExAmPlE.TeSt." }),
			wantOK: true},
		{name: "servfail", chk: fixedCheck(), udp: rcodeHandler(dns.RcodeServerFailure), wantDetail: "rcode SERVFAIL"},
		{name: "refused", chk: fixedCheck(), udp: rcodeHandler(dns.RcodeRefused), wantDetail: "rcode REFUSED"},
		{name: "nxdomain for fixed name", chk: fixedCheck(), udp: rcodeHandler(dns.RcodeNameError), wantDetail: "rcode NXDOMAIN"},
		{name: "zone nxdomain expected", chk: zoneCheck(), udp: rcodeHandler(dns.RcodeNameError), wantOK: true, wantDetail: "NXDOMAIN"},
		{name: "zone noerror unexpected", chk: zoneCheck(), udp: good, wantDetail: "rcode NOERROR"},
		{name: "explicit rcodes list", chk: withCheck(zoneCheck(), func(c *configs.Check) { c.DNS.Rcodes = []string{"noerror", "NXDOMAIN"} }),
			udp: good, wantOK: true},
		{name: "silence", chk: fixedCheck(), udp: silent, wantDetail: "timeout after 200ms"},
		{name: "truncated then tcp ok", chk: fixedCheck(), udp: truncated, tcp: good,
			wantOK: true, wantDetail: "NOERROR, answers 2, via tcp after truncation"},
		{name: "truncated then tcp refused", chk: fixedCheck(), udp: truncated,
			wantDetail: "truncated over udp; tcp: connection refused"},
		{name: "truncated then tcp servfail", chk: fixedCheck(), udp: truncated, tcp: rcodeHandler(dns.RcodeServerFailure),
			wantDetail: "truncated over udp; tcp: rcode SERVFAIL"},
		{name: "truncated then tcp silent", chk: fixedCheck(), udp: truncated, tcp: silent,
			wantDetail: "truncated over udp; tcp: timeout after 200ms"},
		{name: "truncated over tcp transport", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Transport = "tcp" }),
			tcp: truncated, wantDetail: "truncated over tcp"},
		{name: "expect v4 present", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Expect = "192.0.2.1" }),
			udp: good, wantOK: true},
		{name: "expect v6 present", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Expect = "2001:db8::1" }),
			udp: good, wantOK: true},
		{name: "expect absent", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Expect = "192.0.2.99" }),
			udp: good, wantDetail: "expected address 192.0.2.99 not in answer"},
		{name: "expect with empty answer", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Expect = "192.0.2.1" }),
			udp: rcodeHandler(dns.RcodeSuccess), wantDetail: "expected address 192.0.2.1 not in answer"},
		{name: "expect_regexp match", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.ExpectRegexp = `\tA\t192\.0\.2\.1$` }),
			udp: good, wantOK: true},
		{name: "expect_regexp no match", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.ExpectRegexp = `198\.51\.100\.` }),
			udp: good, wantDetail: `no answer RR matches "198\\.51\\.100\\."`},
		{name: "tcp transport", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Transport = "tcp" }),
			udp: rcodeHandler(dns.RcodeServerFailure), tcp: good, wantOK: true, wantDetail: "NOERROR"},
		{name: "tcp transport silent", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Transport = "tcp" }),
			tcp: silent, wantDetail: "timeout after 200ms"},
		{name: "rd default on", chk: fixedCheck(), udp: flagsHandler(true, false), wantOK: true},
		{name: "rd off", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.RD = new(false) }), udp: flagsHandler(false, false), wantOK: true},
		{name: "rd on explicit, cd on", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.RD = new(true); c.DNS.CD = true }), udp: flagsHandler(true, true), wantOK: true},
		{name: "qtype and qclass from check", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.QType = "txt"; c.DNS.QClass = "CH" }),
			udp: func(req *dns.Msg) *dns.Msg {
				if q := req.Question[0]; q.Qtype != dns.TypeTXT || q.Qclass != dns.ClassCHAOS {
					return answer(req, dns.RcodeRefused)
				}
				return answer(req, dns.RcodeSuccess)
			}, wantOK: true},
		{name: "bad qtype", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.QType = "NOPE" }), udp: good, wantDetail: `bad check: unknown qtype "NOPE"`},
		{name: "bad transport", chk: withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Transport = "sctp" }), udp: good, wantDetail: `bad check: unknown transport "sctp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, tt.udp, tt.tcp)
			p := NewDNSProber()
			defer p.Close()
			// DNS, then the prober's batch engine twice (Linux): they
			// must judge alike.
			for i, probe := range append([]Func{DNS}, batchProbes(p)...) {
				res := probe(context.Background(), srv.Addr, tt.chk)
				if res.OK != tt.wantOK {
					t.Errorf("probe %d: OK = %v, want %v (detail %q)", i, res.OK, tt.wantOK, res.Detail)
				}
				if !strings.Contains(res.Detail, tt.wantDetail) {
					t.Errorf("probe %d: Detail = %q, want it to contain %q", i, res.Detail, tt.wantDetail)
				}
				if res.RTT <= 0 {
					t.Errorf("probe %d: RTT = %v, want > 0", i, res.RTT)
				}
			}
		})
	}
}

// flagsHandler answers correctly only if RD and CD are as wanted.
func flagsHandler(rd, cd bool) handler {
	return func(req *dns.Msg) *dns.Msg {
		if req.RecursionDesired != rd || req.CheckingDisabled != cd {
			return answer(req, dns.RcodeRefused)
		}
		return good(req)
	}
}

func TestDNSConnectionRefused(t *testing.T) {
	// Take a free UDP port and release it: nothing listens there now.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()

	res := DNS(context.Background(), addr, fixedCheck())
	if res.OK || res.Detail != "connection refused" {
		t.Errorf("got %+v, want failure %q", res, "connection refused")
	}
	if res.RTT <= 0 {
		t.Errorf("RTT = %v, want > 0", res.RTT)
	}
}

// recorder is a handler that keeps every request it sees.
type recorder struct {
	mu   sync.Mutex
	reqs []*dns.Msg
	h    handler
}

func (r *recorder) handle(req *dns.Msg) *dns.Msg {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.h(req)
}

func TestDNSRandomLabelsAndIDs(t *testing.T) {
	rec := &recorder{h: rcodeHandler(dns.RcodeNameError)}
	srv := startServer(t, rec.handle, nil)
	const n = 5
	for i := 0; i < n; i++ {
		if res := DNS(context.Background(), srv.Addr, zoneCheck()); !res.OK {
			t.Fatalf("probe %d: %+v", i, res)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) != n {
		t.Fatalf("server saw %d queries, want %d", len(rec.reqs), n)
	}
	label := regexp.MustCompile(`^lbdns-[0-9a-f]{16}\.probe\.test\.$`)
	names := map[string]bool{}
	ids := map[uint16]bool{}
	for _, req := range rec.reqs {
		name := req.Question[0].Name
		if !label.MatchString(name) {
			t.Errorf("query name %q is not a random label under probe.test.", name)
		}
		names[name] = true
		ids[req.Id] = true
	}
	if len(names) != n {
		t.Errorf("got %d distinct names in %d probes, want all distinct: %v", len(names), n, names)
	}
	if len(ids) < 2 {
		t.Errorf("all %d probes used the same message id %v", n, ids)
	}
}

func TestRandomName(t *testing.T) {
	tests := []struct{ zone, suffix string }{
		{"probe.test.", ".probe.test."},
		{"probe.test", ".probe.test."},
		{".", ""},
	}
	for _, tt := range tests {
		t.Run(tt.zone, func(t *testing.T) {
			got := randomNameOf(tt.zone, rand.Uint64())
			want := regexp.MustCompile(`^lbdns-[0-9a-f]{16}` + regexp.QuoteMeta(tt.suffix) + `\.?$`)
			if !want.MatchString(got) || !dns.IsFqdn(got) || strings.Contains(got, "..") {
				t.Errorf("randomNameOf(%q) = %q", tt.zone, got)
			}
			if _, ok := dns.IsDomainName(got); !ok {
				t.Errorf("randomNameOf(%q) = %q is not a domain name", tt.zone, got)
			}
		})
	}
}

func TestDNSContextDeadline(t *testing.T) {
	srv := startServer(t, silent, silent)
	for _, transport := range []string{"udp", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			chk := withCheck(fixedCheck(), func(c *configs.Check) {
				c.Timeout = configs.Duration{Duration: time.Hour} // ctx wins
				c.DNS.Transport = transport
			})
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			done := make(chan Result, 1)
			go func() { done <- DNS(ctx, srv.Addr, chk) }()
			select {
			case res := <-done:
				// The budget is the deadline less the time the probe took
				// to start: a loaded machine can take a millisecond.
				d, err := time.ParseDuration(strings.TrimPrefix(res.Detail, "timeout after "))
				if res.OK || !strings.HasPrefix(res.Detail, "timeout after ") || err != nil || d > testTimeout || d < testTimeout-10*time.Millisecond {
					t.Errorf("got %+v, want a timeout after the context's 200ms (less the probe's start)", res)
				}
			case <-time.After(2 * time.Second):
				// Behaviour, not speed: the probe ignored its deadline.
				t.Fatal("probe did not return by its context deadline")
			}
		})
	}
}

func TestDNSCheckTimeoutWithoutContextDeadline(t *testing.T) {
	srv := startServer(t, silent, nil)
	chk := withCheck(fixedCheck(), func(c *configs.Check) { c.Timeout = configs.Duration{Duration: 150 * time.Millisecond} })
	done := make(chan Result, 1)
	go func() { done <- DNS(context.Background(), srv.Addr, chk) }()
	select {
	case res := <-done:
		if res.OK || res.Detail != "timeout after 150ms" {
			t.Errorf("got %+v, want timeout after 150ms", res)
		}
		if res.RTT < 150*time.Millisecond {
			t.Errorf("RTT = %v, want at least the budget", res.RTT)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("probe did not return by chk.Timeout")
	}
}

func TestDNSCanceled(t *testing.T) {
	srv := startServer(t, silent, nil)
	chk := withCheck(fixedCheck(), func(c *configs.Check) { c.Timeout = configs.Duration{Duration: time.Hour} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result, 1)
	go func() { done <- DNS(ctx, srv.Addr, chk) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case res := <-done:
		if res.OK || res.Detail != "canceled" {
			t.Errorf("got %+v, want canceled", res)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("probe did not return after cancel")
	}
}

func TestRoundBudget(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{999*time.Millisecond + 700*time.Microsecond, "1s"},
		{time.Second, "1s"},
		{199*time.Millisecond + 990*time.Microsecond, "200ms"},
		{1503 * time.Millisecond, "1.5s"},
	}
	for _, tt := range tests {
		t.Run(tt.in.String(), func(t *testing.T) {
			if got := roundBudget(tt.in).String(); got != tt.want {
				t.Errorf("roundBudget(%v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestBuilder(t *testing.T) {
	a, b := NewBuilder(Deps{}), NewBuilder(Deps{})
	a.kinds["fake"] = func(*configs.Check, netip.AddrPort, Deps) (check.Checker, error) {
		return check.Func(func(context.Context) Result { return Result{} }), nil
	}
	if _, err := b.Build(&configs.Check{Name: "f", Kind: "fake"}, netip.AddrPort{}); err == nil {
		t.Error("NewBuilder returns a shared table")
	}
	if _, err := a.Build(&configs.Check{Name: "f", Kind: "fake"}, netip.AddrPort{}); err != nil {
		t.Errorf("Build of an added kind: %v", err)
	}
	srv := startServer(t, good, nil)
	c, err := b.Build(fixedCheck(), srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if res := c.Check(context.Background()); !res.OK {
		t.Errorf("dns checker failed: %+v", res)
	}
}

// TestBuildParsesOnce: a profile's names, types, rcodes and expressions
// are parsed when the checker is built; a bad one is a Build error, not a
// failure of every probe.
func TestBuildParsesOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(c *configs.Check)
		wantErr string
	}{
		{"no dns settings", func(c *configs.Check) { c.DNS = nil }, "no dns settings"},
		{"unknown kind", func(c *configs.Check) { c.Kind = "gopher" }, `unknown kind "gopher"`},
		{"qtype", func(c *configs.Check) { c.DNS.QType = "NOPE" }, `unknown qtype "NOPE"`},
		{"qclass", func(c *configs.Check) { c.DNS.QClass = "NOPE" }, `unknown qclass "NOPE"`},
		{"transport", func(c *configs.Check) { c.DNS.Transport = "sctp" }, `unknown transport "sctp"`},
		{"rcode", func(c *configs.Check) { c.DNS.Rcodes = []string{"NOPE"} }, `unknown rcode "NOPE"`},
		{"expect", func(c *configs.Check) { c.DNS.Expect = "nope" }, `expect "nope"`},
		{"expect_regexp", func(c *configs.Check) { c.DNS.ExpectRegexp = "(" }, "expect_regexp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chk := withCheck(fixedCheck(), tc.change)
			chk.Name = "c"
			_, err := NewBuilder(Deps{}).Build(chk, netip.MustParseAddrPort("127.0.0.1:53"))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), `probes: check "c": `) {
				t.Fatalf("Build error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	chk := withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.ExpectRegexp = `IN\s+A` })
	c, err := buildDNSChecker(chk, netip.MustParseAddrPort("127.0.0.1:53"))
	if err != nil {
		t.Fatal(err)
	}
	re := c.judge.re
	if re == nil || re.String() != `IN\s+A` {
		t.Fatalf("regexp not compiled at build: %v", re)
	}
	chk.DNS.ExpectRegexp = "changed"
	if c.judge.re != re {
		t.Error("the checker's regexp changed after build")
	}
}

func ExampleDNS() {
	chk := &configs.Check{Kind: "dns", Timeout: configs.Duration{Duration: time.Second},
		DNS: &configs.DNSCheck{QName: "example.test.", QType: "A"}}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	target := netip.MustParseAddrPort("127.0.0.1:53")
	res := DNS(ctx, target, chk)
	_ = res.OK // false: nothing answers example.test. on a test machine
	fmt.Println("probed")
	// Output: probed
}
