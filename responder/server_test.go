package responder

import (
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/gslb"
)

// TestWire asks a real server over UDP and TCP with miekg's client and
// checks the protocol around the snapshot's answers.
func TestWire(t *testing.T) {
	f := &fake{Scope: 16, Big: 100}
	_, addr := start(t, f)

	t.Run("A and AAAA, AA set, RA clear", func(t *testing.T) {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			for _, network := range []string{"udp", "tcp"} {
				m := query("www."+zone, qt, 0)
				m.RecursionDesired = true
				r := exchange(t, addr, network, m)
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != qt {
					t.Fatalf("%s %s over %s: %v", dns.TypeToString[qt], m.Question[0].Name, network, r)
				}
				if !r.Authoritative || r.RecursionAvailable || !r.RecursionDesired || !r.Response {
					t.Errorf("flags aa=%v ra=%v rd=%v qr=%v, want aa, no ra, rd copied, qr", r.Authoritative, r.RecursionAvailable, r.RecursionDesired, r.Response)
				}
				if r.IsEdns0() != nil {
					t.Errorf("OPT in the reply to a query without EDNS")
				}
			}
		}
	})
	t.Run("NODATA and NXDOMAIN carry the SOA", func(t *testing.T) {
		for name, want := range map[string]int{"www." + zone: dns.RcodeSuccess, "nope." + zone: dns.RcodeNameError} {
			r := exchange(t, addr, "udp", query(name, dns.TypeMX, 0))
			if r.Rcode != want || len(r.Answer) != 0 || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA || !r.Authoritative {
				t.Errorf("%s MX: %v", name, r)
			}
		}
	})
	t.Run("REFUSED outside the zones, and for other classes and transfers", func(t *testing.T) {
		r := exchange(t, addr, "udp", query("example.com.", dns.TypeA, 0))
		if r.Rcode != dns.RcodeRefused || r.Authoritative || len(r.Answer) != 0 {
			t.Errorf("outside: %v", r)
		}
		m := query("version.bind.", dns.TypeTXT, 0)
		m.Question[0].Qclass = dns.ClassCHAOS
		if r := exchange(t, addr, "udp", m); r.Rcode != dns.RcodeRefused {
			t.Errorf("CH TXT version.bind: rcode %s", dns.RcodeToString[r.Rcode])
		}
		if r := exchange(t, addr, "tcp", query(zone, dns.TypeAXFR, 0)); r.Rcode != dns.RcodeRefused {
			t.Errorf("AXFR: rcode %s", dns.RcodeToString[r.Rcode])
		}
	})
	t.Run("question echoed with its case, looked up lower-cased", func(t *testing.T) {
		r := exchange(t, addr, "udp", query("wWw.ExAmPlE.TeSt.", dns.TypeA, 0))
		if len(r.Question) != 1 || r.Question[0].Name != "wWw.ExAmPlE.TeSt." {
			t.Errorf("question %v, want the case kept", r.Question)
		}
		if got := f.lastQuery(); got.Name != "www.example.test." || got.Type != dns.TypeA || got.Source != netip.MustParseAddr("127.0.0.1") || got.ECS.IsValid() {
			t.Errorf("query to the snapshot %+v", got)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Errorf("reply %v", r)
		}
	})
	t.Run("EDNS echoed with our payload size, DO copied", func(t *testing.T) {
		m := query("www."+zone, dns.TypeA, 4096)
		m.IsEdns0().SetDo()
		r := exchange(t, addr, "udp", m)
		opt := r.IsEdns0()
		if opt == nil || opt.UDPSize() != DefaultUDPSize || opt.Version() != 0 || !opt.Do() || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("reply %v, want OPT with udp %d and do", r, DefaultUDPSize)
		}
		if ecsOf(r) != nil {
			t.Error("ECS in a reply to a query without it")
		}
	})
	t.Run("BADVERS for EDNS version 1", func(t *testing.T) {
		m := query("www."+zone, dns.TypeA, 1232)
		m.IsEdns0().SetVersion(1)
		r := exchange(t, addr, "udp", m)
		if r.Rcode != dns.RcodeBadVers || r.IsEdns0() == nil || r.IsEdns0().Version() != 0 || len(r.Answer) != 0 {
			t.Errorf("reply %v, want BADVERS with our OPT (version 0)", r)
		}
	})
	t.Run("FORMERR", func(t *testing.T) {
		none := new(dns.Msg)
		none.Id = dns.Id()
		two := query("www."+zone, dns.TypeA, 0)
		two.Question = append(two.Question, dns.Question{Name: "geo." + zone, Qtype: dns.TypeA, Qclass: dns.ClassINET})
		twoOPT := query("www."+zone, dns.TypeA, 1232)
		twoOPT.Extra = append(twoOPT.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: 1232}})
		badOPT := query("www."+zone, dns.TypeA, 1232)
		badOPT.IsEdns0().Hdr.Name = "example."
		qtOPT := query("www."+zone, dns.TypeOPT, 0)
		for name, m := range map[string]*dns.Msg{"no question": none, "two questions": two, "two OPT": twoOPT, "OPT not at the root": badOPT, "qtype OPT": qtOPT} {
			r := exchange(t, addr, "udp", m)
			if r.Rcode != dns.RcodeFormatError || len(r.Answer) != 0 {
				t.Errorf("%s: reply %v, want FORMERR", name, r)
			}
		}
	})
	t.Run("NOTIMP for opcodes other than QUERY", func(t *testing.T) {
		for _, op := range []int{dns.OpcodeNotify, dns.OpcodeUpdate, dns.OpcodeStatus, dns.OpcodeIQuery} {
			m := query(zone, dns.TypeSOA, 0)
			m.Opcode = op
			r := exchange(t, addr, "udp", m)
			if r.Rcode != dns.RcodeNotImplemented || r.Opcode != op {
				t.Errorf("opcode %s: rcode %s opcode %d", dns.OpcodeToString[op], dns.RcodeToString[r.Rcode], r.Opcode)
			}
		}
	})
	t.Run("TC over UDP, whole over TCP", func(t *testing.T) {
		for _, udp := range []uint16{0, 4096} { // 512 without EDNS; ours (1232) with a larger one
			r := exchange(t, addr, "udp", query("big."+zone, dns.TypeA, udp))
			if !r.Truncated || len(r.Answer) >= 100 || r.Rcode != dns.RcodeSuccess {
				t.Errorf("udp (edns %d): tc=%v with %d answers", udp, r.Truncated, len(r.Answer))
			}
			if max := max(int(udp), 512); udp > 0 {
				max = DefaultUDPSize
				if r.IsEdns0() == nil {
					t.Errorf("udp (edns %d): OPT lost in truncation", udp)
				}
				r.Compress = true // as it was sent
				if n := r.Len(); n > max {
					t.Errorf("udp (edns %d): reply of %d bytes, over %d", udp, n, max)
				}
			}
		}
		r := exchange(t, addr, "tcp", query("big."+zone, dns.TypeA, 1232))
		if r.Truncated || len(r.Answer) != 100 || len(r.Extra) != 2 {
			t.Errorf("tcp: tc=%v with %d answers and %d extra, want all", r.Truncated, len(r.Answer), len(r.Extra))
		}
	})
	t.Run("responses are not answered", func(t *testing.T) {
		m := query("www."+zone, dns.TypeA, 0)
		m.Response = true
		c := &dns.Client{Net: "udp", Timeout: 300_000_000}
		if r, _, err := c.Exchange(m, addr); err == nil {
			t.Errorf("a response was answered: %v", r)
		}
	})
}

// TestSwap: a query is answered by the snapshot in force; before any,
// SERVFAIL.
func TestSwap(t *testing.T) {
	s, addr := start(t, nil)
	if r := exchange(t, addr, "udp", query("www."+zone, dns.TypeA, 0)); r.Rcode != dns.RcodeServerFailure || r.Authoritative {
		t.Errorf("before a snapshot: %v", r)
	}
	for _, tag := range []string{"one", "two"} {
		s.Swap(&fake{Tag: tag})
		r := exchange(t, addr, "udp", query("www."+zone, dns.TypeTXT, 0))
		if len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != tag {
			t.Errorf("after Swap(%s): %v", tag, r)
		}
	}
}

// TestRespondSharesNothing: the reply never writes into the snapshot's
// slices (snapshots are shared by concurrent queries).
func TestRespondSharesNothing(t *testing.T) {
	extra := make([]dns.RR, 1, 8)
	extra[0] = &dns.A{Hdr: dns.RR_Header{Name: "x." + zone, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: []byte{192, 0, 2, 3}}
	a := answerFunc(func(gslb.Query) gslb.Response { return gslb.Response{Extra: extra} })
	s := &Server{}
	s.Swap(a)
	for range 2 {
		r := s.Respond(query("x."+zone, dns.TypeA, 1232), netip.MustParseAddr("192.0.2.1"), false)
		if len(r.Extra) != 2 {
			t.Fatalf("extra %v", r.Extra)
		}
	}
	if extra[:2][1] != nil {
		t.Errorf("the snapshot's Extra was written to: %v", extra[:2])
	}
}

// answerFunc is an Answerer from a function.
type answerFunc func(gslb.Query) gslb.Response

func (f answerFunc) Answer(q gslb.Query) gslb.Response { return f(q) }

// TestSwapUnderLoad: queries answered while snapshots are swapped each
// get one whole answer from one snapshot.
func TestSwapUnderLoad(t *testing.T) {
	s, addr := start(t, &fake{Tag: "0"})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
			for range 50 {
				r, _, err := c.Exchange(query("www."+zone, dns.TypeTXT, 0), addr)
				if err != nil {
					t.Error(err)
					return
				}
				if len(r.Answer) != 1 || r.Rcode != dns.RcodeSuccess {
					t.Errorf("reply %v", r)
					return
				}
			}
		})
	}
	for i := range 200 {
		s.Swap(&fake{Tag: strconv.Itoa(i)})
	}
	wg.Wait()
}
