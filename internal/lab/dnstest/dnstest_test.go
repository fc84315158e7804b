package dnstest

import (
	"context"
	"errors"
	"lbdns/testkit/leakcheck"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func exchange(t *testing.T, network, addr, name string, qtype uint16, timeout time.Duration) (*dns.Msg, error) {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: timeout}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, addr)
	return r, err
}

func TestAnswers(t *testing.T) {
	s := &Server{TTL: 42, NegativeTTL: 7}
	Run(t, s)
	addr := s.Addr().String()
	zone := s.ZoneName()
	if zone != DefaultZone {
		t.Fatalf("ZoneName() = %q, want %q", zone, DefaultZone)
	}
	tests := []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		answer  string // substring of the first answer, "" for none
		soaAuth bool
	}{
		{"A", "www." + zone, dns.TypeA, dns.RcodeSuccess, DefaultA, false},
		{"AAAA", "WWW." + strings.ToUpper(zone), dns.TypeAAAA, dns.RcodeSuccess, DefaultAAAA, false},
		{"TXT", "www." + zone, dns.TypeTXT, dns.RcodeSuccess, DefaultTXT, false},
		{"SOA apex", zone, dns.TypeSOA, dns.RcodeSuccess, "hostmaster", false},
		{"NS apex", zone, dns.TypeNS, dns.RcodeSuccess, "ns." + zone, false},
		{"NODATA", "www." + zone, dns.TypeMX, dns.RcodeSuccess, "", true},
		{"NXDOMAIN", "nope." + zone, dns.TypeA, dns.RcodeNameError, "", true},
		{"out of zone", "example.org.", dns.TypeA, dns.RcodeRefused, "", false},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range tests {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				r, err := exchange(t, network, addr, tc.qname, tc.qtype, 2*time.Second)
				if err != nil {
					t.Fatalf("exchange: %v", err)
				}
				if r.Rcode != tc.rcode {
					t.Fatalf("rcode = %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
				}
				if tc.answer == "" && len(r.Answer) != 0 {
					t.Fatalf("answer = %v, want none", r.Answer)
				}
				if tc.answer != "" {
					if len(r.Answer) == 0 || !strings.Contains(r.Answer[0].String(), tc.answer) {
						t.Fatalf("answer = %v, want one containing %q", r.Answer, tc.answer)
					}
					if got := r.Answer[0].Header().Ttl; got != 42 {
						t.Errorf("TTL = %d, want 42", got)
					}
				}
				if tc.soaAuth {
					if len(r.Ns) != 1 {
						t.Fatalf("authority = %v, want the SOA", r.Ns)
					}
					soa, ok := r.Ns[0].(*dns.SOA)
					if !ok || soa.Minttl != 7 {
						t.Fatalf("authority = %v, want SOA with minimum 7", r.Ns)
					}
				}
				if tc.rcode != dns.RcodeRefused && !r.Authoritative {
					t.Errorf("AA bit not set")
				}
			})
		}
	}
}

func TestCustomZoneAndRecords(t *testing.T) {
	s := &Server{Zone: "Sub.Test", Records: DefaultRecords("sub.test.", 5)}
	Run(t, s)
	if got := s.Name("www"); got != "www.sub.test." {
		t.Fatalf("Name(www) = %q", got)
	}
	r, err := exchange(t, "udp", s.Addr().String(), "www.sub.test.", dns.TypeA, 2*time.Second)
	if err != nil || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 5 {
		t.Fatalf("exchange = %v, %v; want one A with TTL 5", r, err)
	}
	a, err := dns.NewRR("other.sub.test. 9 IN A 192.0.2.9")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRecords(a); err != nil {
		t.Fatal(err)
	}
	r, err = exchange(t, "udp", s.Addr().String(), "www.sub.test.", dns.TypeA, 2*time.Second)
	if err != nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("after SetRecords, old name: %v, %v; want NXDOMAIN", r, err)
	}
	r, err = exchange(t, "udp", s.Addr().String(), "other.sub.test.", dns.TypeA, 2*time.Second)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("after SetRecords, new name: %v, %v; want one A", r, err)
	}
	bad, _ := dns.NewRR("x.example.org. 9 IN A 192.0.2.9")
	if err := s.SetRecords(bad); err == nil {
		t.Fatal("SetRecords with an out-of-zone record: no error")
	}
}

func TestCounts(t *testing.T) {
	s := NewServer(t)
	name := s.Name("www")
	for range 3 {
		if _, err := exchange(t, "udp", s.Addr().String(), name, dns.TypeA, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exchange(t, "tcp", s.Addr().String(), strings.ToUpper(name), dns.TypeTXT, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := s.Count(strings.TrimSuffix(name, ".")); got != 4 {
		t.Fatalf("Count = %d, want 4", got)
	}
	if got := s.Counts(); len(got) != 1 || got[name] != 4 {
		t.Fatalf("Counts = %v", got)
	}
	s.ResetCounts()
	if got := s.Count(name); got != 0 {
		t.Fatalf("Count after reset = %d", got)
	}
}

func TestDelay(t *testing.T) {
	s := &Server{Delay: 150 * time.Millisecond}
	Run(t, s)
	if _, err := exchange(t, "udp", s.Addr().String(), s.Name("www"), dns.TypeA, 50*time.Millisecond); err == nil {
		t.Fatal("answer within 50 ms despite a 150 ms delay")
	}
	if _, err := exchange(t, "udp", s.Addr().String(), s.Name("www"), dns.TypeA, 2*time.Second); err != nil {
		t.Fatalf("delayed exchange: %v", err)
	}
	s.SetDelay(0)
	if _, err := exchange(t, "udp", s.Addr().String(), s.Name("www"), dns.TypeA, 2*time.Second); err != nil {
		t.Fatalf("exchange without delay: %v", err)
	}
}

func TestFreezeThaw(t *testing.T) {
	s := NewServer(t)
	addr, name := s.Addr().String(), s.Name("www")
	s.Freeze()
	for _, network := range []string{"udp", "tcp"} {
		_, err := exchange(t, network, addr, name, dns.TypeA, 200*time.Millisecond)
		var nerr net.Error
		if !errors.As(err, &nerr) || !nerr.Timeout() {
			t.Fatalf("%s while frozen: err = %v, want a timeout", network, err)
		}
	}
	if got := s.Count(name); got != 2 {
		t.Errorf("Count while frozen = %d, want 2", got)
	}
	s.Thaw()
	for _, network := range []string{"udp", "tcp"} {
		if _, err := exchange(t, network, addr, name, dns.TypeA, 2*time.Second); err != nil {
			t.Fatalf("%s after thaw: %v", network, err)
		}
	}
}

func TestStopRestart(t *testing.T) {
	s := NewServer(t)
	addr, name := s.Addr(), s.Name("www")
	// Keep a TCP connection open across the stop, as resolvers do.
	conn, err := dns.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	if err := conn.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadMsg(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if err := s.Stop(); err != nil {
			t.Fatalf("round %d: Stop: %v", round, err)
		}
		if err := s.Stop(); err != nil {
			t.Fatalf("round %d: second Stop: %v", round, err)
		}
		for _, network := range []string{"udp", "tcp"} {
			_, err := exchange(t, network, addr.String(), name, dns.TypeA, 500*time.Millisecond)
			if err == nil {
				t.Fatalf("round %d: %s answered while stopped", round, network)
			}
			var nerr net.Error
			if errors.As(err, &nerr) && nerr.Timeout() {
				t.Fatalf("round %d: %s while stopped: timeout, want refused: %v", round, network, err)
			}
		}
		if err := s.Restart(); err != nil {
			t.Fatalf("round %d: Restart: %v", round, err)
		}
		if s.Addr() != addr {
			t.Fatalf("round %d: Addr after restart = %v, want %v", round, s.Addr(), addr)
		}
		for _, network := range []string{"udp", "tcp"} {
			if _, err := exchange(t, network, addr.String(), name, dns.TypeA, 2*time.Second); err != nil {
				t.Fatalf("round %d: %s after restart: %v", round, network, err)
			}
		}
	}
}

func TestShutdown(t *testing.T) {
	s := &Server{}
	if err := s.Shutdown(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Shutdown before Start = %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("second Start: no error")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Restart after Shutdown = %v", err)
	}
}

// TestMain fails the package if server goroutines are still running after
// all tests shut their servers down.
func TestMain(m *testing.M) {
	leakcheck.Main(m, "miekg/dns.(*Server)", "dnstest.(*Server)")
}

// TestStopUnderLoad stops and restarts the server while clients keep
// querying it: Stop must not wait on handlers that wait on Stop.
func TestStopUnderLoad(t *testing.T) {
	s := NewServer(t)
	addr, name := s.Addr().String(), s.Name("www")
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c := &dns.Client{Timeout: 100 * time.Millisecond}
			q := new(dns.Msg)
			q.SetQuestion(name, dns.TypeA)
			for range 2000 {
				select {
				case <-done:
					return
				default:
				}
				c.Exchange(q, addr)
			}
		})
	}
	defer func() {
		close(done)
		wg.Wait()
	}()
	for round := range 20 {
		time.Sleep(10 * time.Millisecond)
		if err := s.Stop(); err != nil {
			t.Fatalf("round %d: Stop under load: %v", round, err)
		}
		if err := s.Restart(); err != nil {
			t.Fatalf("round %d: Restart under load: %v", round, err)
		}
	}
	if got := s.Count(name); got == 0 {
		t.Fatal("no queries reached the server")
	}
}
