// Package dnstest runs a small authoritative DNS server on loopback for
// tests: the upstream that real resolvers (see internal/lab/vendors) forward to,
// and a target for probe tests.
//
// The server is authoritative for one zone, DefaultZone ("lbdns.example.")
// unless Server.Zone says otherwise. The default zone sits under the
// reserved example. name (RFC 2606), which no resolver product treats
// specially; a zone under test. would need `local-zone: "test." nodefault`
// in unbound, which internal/lab/vendors also sets, so either works.
//
// It answers, with the AA bit set:
//
//   - the records in Server.Records (by default A, AAAA and TXT for
//     "www.<zone>", see DefaultRecords) and the zone's SOA and NS at the apex;
//   - NODATA (NOERROR, no answer, SOA in authority) for a known name and an
//     unknown type;
//   - NXDOMAIN with the SOA in authority for any other name in the zone, so
//     resolvers cache the negative answer for Server.NegativeTTL;
//   - REFUSED for names outside the zone.
//
// UDP and TCP listen on the same 127.0.0.1 port, chosen by the OS. The test
// controls the server's behaviour while it runs: SetDelay adds a fixed delay
// before every answer, Freeze and Thaw stop and resume answering while the
// sockets stay open (an upstream that hangs), and Stop and Restart close and
// reopen the sockets on the same port (an upstream process killed and
// started again). Count reports how many queries arrived per name, for
// prefetch tests.
package dnstest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// DefaultZone is the zone a Server serves when Server.Zone is empty.
const DefaultZone = "lbdns.example."

// DefaultTTL is the TTL of the default records and of the SOA and NS when
// Server.TTL is zero.
const DefaultTTL = 60

// DefaultA is the address of the default A record (TEST-NET-1).
const DefaultA = "192.0.2.1"

// DefaultAAAA is the address of the default AAAA record (documentation
// prefix).
const DefaultAAAA = "2001:db8::1"

// DefaultTXT is the text of the default TXT record.
const DefaultTXT = "lbdns dnstest"

// ErrNotStarted is returned by methods that need a started server.
var ErrNotStarted = errors.New("dnstest: server not started")

// Server is an authoritative DNS server for one zone on 127.0.0.1. Set the
// exported fields, then call Start; do not change the fields afterwards (use
// the setter methods). The zero value serves DefaultZone with
// DefaultRecords.
type Server struct {
	// Zone is the zone's apex, for example "lbdns.example."; empty means
	// DefaultZone.
	Zone string
	// TTL is the TTL of the default records, the SOA and the NS; zero means
	// DefaultTTL. Records given in Records keep their own TTLs.
	TTL uint32
	// NegativeTTL is the SOA minimum, which resolvers use as the TTL of
	// negative answers; zero means the same as TTL.
	NegativeTTL uint32
	// Records are the records served; nil means DefaultRecords(Zone, TTL).
	// Every owner name must be in Zone.
	Records []dns.RR
	// Delay is a fixed delay added before every answer; see also SetDelay.
	Delay time.Duration

	// life serializes Start, Stop, Restart and Shutdown, which must not
	// hold mu while they wait for handlers (handlers take mu).
	life sync.Mutex

	mu      sync.Mutex // guards the fields below
	zone    string
	ttl     uint32
	records map[string][]dns.RR // by lower-case owner name
	soa     *dns.SOA
	ns      *dns.NS
	port    uint16
	udp     *dns.Server
	tcp     *dns.Server
	stopc   chan struct{} // closed by Stop and Shutdown to cut delays short
	counts  map[string]int
	closed  bool

	delay  atomic.Int64 // time.Duration
	frozen atomic.Bool
}

// NewServer starts a Server with the defaults and registers its Shutdown
// with t.Cleanup. It calls t.Fatal if the server cannot start.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	Run(t, s)
	return s
}

// Run starts s and registers its Shutdown with t.Cleanup. It calls t.Fatal if
// s cannot start.
func Run(t testing.TB, s *Server) {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatalf("dnstest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("dnstest: shutdown: %v", err)
		}
	})
}

// DefaultRecords returns the records a Server serves when Records is nil:
// an A (DefaultA), an AAAA (DefaultAAAA) and a TXT (DefaultTXT) record for
// "www.<zone>", each with the given TTL.
func DefaultRecords(zone string, ttl uint32) []dns.RR {
	name := "www." + dns.Fqdn(zone)
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	return []dns.RR{
		&dns.A{Hdr: hdr(dns.TypeA), A: net.ParseIP(DefaultA)},
		&dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.ParseIP(DefaultAAAA)},
		&dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: []string{DefaultTXT}},
	}
}

// Start binds UDP and TCP on the same free 127.0.0.1 port and returns once
// both listeners serve. A Server can be started once; use Stop and Restart
// to take it down and bring it back.
func (s *Server) Start() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.zone != "" {
		return errors.New("dnstest: server already started")
	}
	zone := strings.ToLower(dns.Fqdn(s.Zone))
	if s.Zone == "" {
		zone = DefaultZone
	}
	ttl := s.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	neg := s.NegativeTTL
	if neg == 0 {
		neg = ttl
	}
	s.ttl = ttl
	s.soa = &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      "ns." + zone,
		Mbox:    "hostmaster." + zone,
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  neg,
	}
	s.ns = &dns.NS{
		Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: ttl},
		Ns:  "ns." + zone,
	}
	recs := s.Records
	if recs == nil {
		recs = DefaultRecords(zone, ttl)
	}
	if err := s.setRecordsLocked(zone, recs); err != nil {
		return err
	}
	s.counts = make(map[string]int)
	s.delay.Store(int64(s.Delay))

	// A port below Linux's ephemeral range (32768-60999): a server that
	// is stopped and restarted on its port must not find it taken by an
	// outgoing connection of another test meanwhile (one picked with
	// port 0 is in that range).
	var err error
	for range 50 {
		var udp net.PacketConn
		var tcp net.Listener
		udp, tcp, err = listenPair(uint16(25000 + rand.IntN(7000)))
		if err == nil {
			s.zone = zone
			return s.serveLocked(udp, tcp)
		}
	}
	return fmt.Errorf("dnstest: find a free port for udp and tcp: %w", err)
}

// listenPair binds UDP and TCP on 127.0.0.1 with the given port (0: the OS
// picks the UDP port and TCP takes the same one).
func listenPair(port uint16) (net.PacketConn, net.Listener, error) {
	udp, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, nil, fmt.Errorf("listen udp: %w", err)
	}
	p := udp.LocalAddr().(*net.UDPAddr).Port
	tcp, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		udp.Close()
		return nil, nil, fmt.Errorf("listen tcp: %w", err)
	}
	return udp, tcp, nil
}

// serveLocked starts the two miekg servers on the given sockets and waits
// until both run. s.life and s.mu must be held; handlers that start
// meanwhile wait for s.mu, which is fine: nothing here waits for them.
func (s *Server) serveLocked(udp net.PacketConn, tcp net.Listener) error {
	mux := dns.NewServeMux()
	mux.HandleFunc(".", s.handle)
	s.port = uint16(udp.LocalAddr().(*net.UDPAddr).Port)
	s.stopc = make(chan struct{})
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	s.udp = &dns.Server{PacketConn: udp, Handler: mux, NotifyStartedFunc: notify}
	s.tcp = &dns.Server{Listener: tcp, Handler: mux, NotifyStartedFunc: notify}
	errc := make(chan error, 2)
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		go func() {
			if err := srv.ActivateAndServe(); err != nil {
				errc <- err
			}
		}()
	}
	for range 2 {
		select {
		case <-started:
		case err := <-errc:
			udp.Close()
			tcp.Close()
			return fmt.Errorf("dnstest: serve: %w", err)
		}
	}
	return nil
}

// Addr returns the address UDP and TCP listen on (127.0.0.1 and the port).
// It stays the same across Stop and Restart.
func (s *Server) Addr() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), s.port)
}

// ZoneName returns the apex of the served zone, lower case and fully
// qualified.
func (s *Server) ZoneName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.zone
}

// Name returns label + "." + the zone, for example Name("www") is
// "www.lbdns.example.".
func (s *Server) Name(label string) string {
	return label + "." + s.ZoneName()
}

// SetRecords replaces the served records. Every owner name must be in the
// zone. The SOA and NS at the apex stay.
func (s *Server) SetRecords(rrs ...dns.RR) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.zone == "" {
		return ErrNotStarted
	}
	return s.setRecordsLocked(s.zone, rrs)
}

func (s *Server) setRecordsLocked(zone string, rrs []dns.RR) error {
	m := make(map[string][]dns.RR, len(rrs))
	for _, rr := range rrs {
		name := strings.ToLower(rr.Header().Name)
		if !dns.IsSubDomain(zone, name) {
			return fmt.Errorf("dnstest: record %q is not in zone %q", rr.Header().Name, zone)
		}
		m[name] = append(m[name], dns.Copy(rr))
	}
	s.records = m
	return nil
}

// SetDelay sets the fixed delay added before every answer from now on.
func (s *Server) SetDelay(d time.Duration) { s.delay.Store(int64(d)) }

// Freeze makes the server stop answering: queries are read (and counted)
// and dropped, TCP connections stay open, and the sockets stay bound, like a
// hung process.
func (s *Server) Freeze() { s.frozen.Store(true) }

// Thaw makes a frozen server answer again.
func (s *Server) Thaw() { s.frozen.Store(false) }

// Count returns how many queries for name (any type, any class, UDP or TCP)
// the server received, including queries dropped while frozen. The name is
// compared case-insensitively and made fully qualified.
func (s *Server) Count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[strings.ToLower(dns.Fqdn(name))]
}

// Counts returns a copy of all per-name query counts, keyed by lower-case
// fully qualified name.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		m[k] = v
	}
	return m
}

// ResetCounts sets every per-name query count to zero.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = make(map[string]int)
}

// Stop closes both sockets, so that queries to the port are refused (ICMP
// port unreachable, TCP RST), like a killed process. Restart brings the
// server back on the same port. Stop on a stopped server does nothing.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.life.Lock()
	defer s.life.Unlock()
	return s.stop(ctx, false)
}

// stop shuts both listeners down, and marks the server closed for good if
// final is set. s.life must be held, s.mu must not be: the shutdown waits
// for handlers in flight, and they take s.mu.
func (s *Server) stop(ctx context.Context, final bool) error {
	s.mu.Lock()
	if s.zone == "" {
		s.mu.Unlock()
		return ErrNotStarted
	}
	s.closed = s.closed || final
	udp, tcp := s.udp, s.tcp
	if udp == nil {
		s.mu.Unlock()
		return nil
	}
	s.udp, s.tcp = nil, nil
	close(s.stopc)
	s.mu.Unlock()

	var errs []error
	for _, srv := range []*dns.Server{udp, tcp} {
		if err := srv.ShutdownContext(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dnstest: stop: %w", err)
	}
	return nil
}

// Restart binds UDP and TCP again on the port the server had and serves as
// before (records, counts, delay and frozen state are kept). Restart on a
// running server does nothing. It retries for up to a second if the port
// is still busy.
func (s *Server) Restart() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.zone == "" || s.closed {
		return ErrNotStarted
	}
	if s.udp != nil {
		return nil
	}
	var err error
	for range 20 {
		var udp net.PacketConn
		var tcp net.Listener
		udp, tcp, err = listenPair(s.port)
		if err == nil {
			return s.serveLocked(udp, tcp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("dnstest: restart on port %d: %w", s.port, err)
}

// Shutdown stops the server for good. It waits for answers in flight until
// ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.stop(ctx, true)
}

// handle answers one query.
func (s *Server) handle(w dns.ResponseWriter, req *dns.Msg) {
	if len(req.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeFormatError)
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)

	s.mu.Lock()
	s.counts[name]++
	stop := s.stopc
	zone, recs, soa, ns := s.zone, s.records[name], s.soa, s.ns
	s.mu.Unlock()

	if d := time.Duration(s.delay.Load()); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-stop:
			timer.Stop()
			return
		}
	}
	if s.frozen.Load() {
		return
	}

	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = false
	switch {
	case q.Qclass != dns.ClassINET || !dns.IsSubDomain(zone, name):
		m.Rcode = dns.RcodeRefused
	default:
		m.Authoritative = true
		if name == zone {
			switch q.Qtype {
			case dns.TypeSOA:
				m.Answer = append(m.Answer, soa)
			case dns.TypeNS:
				m.Answer = append(m.Answer, ns)
			}
		}
		for _, rr := range recs {
			if q.Qtype == rr.Header().Rrtype || q.Qtype == dns.TypeANY {
				m.Answer = append(m.Answer, rr)
			}
		}
		if len(m.Answer) == 0 {
			m.Ns = append(m.Ns, soa)
			if name != zone && len(recs) == 0 {
				m.Rcode = dns.RcodeNameError
			}
		}
	}
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = int(opt.UDPSize())
		m.SetEdns0(1232, false)
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		m.Truncate(max(size, dns.MinMsgSize))
	}
	w.WriteMsg(m)
}
