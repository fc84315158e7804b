package responder

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/gslb"
)

// miekgReply is the reply miekg/dns's server path gives to the bytes b
// (the reader's ECS marking, its header checks and unpacking, FORMERR
// for what does not unpack, Respond), packed: what reply must give.
func miekgReply(s *Server, b []byte, src netip.Addr, tcp bool) []byte {
	b = dropCutQuestion(slices.Clone(b)) // as the readers take it
	markECS(b)
	if len(b) < 12 {
		return nil
	}
	if accept(dns.Header{Bits: binary.BigEndian.Uint16(b[2:])}) == dns.MsgIgnore {
		return nil
	}
	req := new(dns.Msg)
	if err := req.Unpack(b); err != nil {
		req.SetRcodeFormatError(req)
		req.Zero = false
		req.Ns, req.Answer, req.Extra = nil, nil, nil
		out, err := req.Pack()
		if err != nil {
			return nil
		}
		return out
	}
	resp := s.Respond(req, src, tcp)
	if resp == nil {
		return nil
	}
	out, err := resp.Pack()
	if err != nil {
		return nil
	}
	return out
}

// replySeeds are seeds() and the shapes parseQuery takes or leaves to
// miekg/dns: cookies and padding, three options, a compressed name, a
// name to escape, trailing bytes, a second OPT, a 512-byte client with
// ECS and a big answer.
func replySeeds() [][]byte {
	out := seeds()
	add := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	m := withECS(query("geo."+zone, dns.TypeA, 1232), []byte{0, 1, 24, 0, 192, 0, 2})
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}, &dns.EDNS0_PADDING{Padding: make([]byte, 9)})
	add(m)
	add(withECS(query("geo."+zone, dns.TypeA, 1232), []byte{0, 1, 24, 0, 192, 0, 2}, []byte{0, 1, 24, 0, 192, 0, 3}))
	add(withECS(query("big."+zone, dns.TypeA, 512), []byte{0, 2, 48, 0, 0x20, 1, 0xd, 0xb8, 0, 1}))
	add(withECS(query("big."+zone, dns.TypeA, 0), []byte{0, 0, 0, 0}))
	m = query("www."+zone, dns.TypeA, 1232)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
	add(m)
	add(query(`w\.w.`+zone, dns.TypeA, 0))
	add(query(`w\003w.`+zone, dns.TypeA, 0))
	m = query("www."+zone, dns.TypeA, 1232)
	m.Extra = append(m.Extra, m.Extra[0])
	add(m)
	// The reply shapes packReply writes, and some it leaves to miekg/dns.
	add(query("www."+zone, dns.TypeAAAA, 1232))
	add(query("www."+zone, dns.TypeMX, 0))                                   // NODATA
	add(query("nope."+zone, dns.TypeAAAA, 0))                                // NXDOMAIN
	add(query(zone, dns.TypeSOA, 4096))                                      // the apex
	add(query("www."+zone, dns.TypeTXT, 1232))                               // TXT: miekg/dns
	add(query("big."+zone, dns.TypeA, 4096))                                 // truncated
	add(query("www."+zone, dns.TypeA, 511))                                  // below 512
	add(withECS(query("www."+zone, dns.TypeAAAA, 1232), []byte{0, 2, 0, 0})) // SOURCE 0
	add(withECS(query("nope."+zone, dns.TypeA, 1232), []byte{0, 1, 32, 0, 192, 0, 2, 1}))
	b, _ := query("www."+zone, dns.TypeA, 0).Pack()
	out = append(out, append(b, 0, 0))
	// www, then a question pointing at it.
	b, _ = query("www."+zone, dns.TypeA, 0).Pack()
	b[5] = 2
	out = append(out, append(b, 0xC0, 12, 0, 1, 0, 1))
	return out
}

// FuzzReply checks the UDP readers' path against miekg/dns's: for any
// bytes, reply (parseQuery, or the unpacking it falls back to) gives the
// bytes that miekg/dns's server path gives, over UDP and TCP, with one
// scratch reused as a reader reuses it.
func FuzzReply(f *testing.F) {
	for _, b := range replySeeds() {
		f.Add(b)
	}
	s := &Server{}
	s.Swap(&fake{Scope: 16, Big: 100})
	fuzzSameAsMiekg(f, s, netip.MustParseAddr("192.0.2.1"))
}

// fixed is a snapshot that answers every query with R, allocating
// nothing.
type fixed struct{ R gslb.Response }

func (f *fixed) Answer(gslb.Query) gslb.Response { return f.R }

// TestReplyAllocs checks that a UDP reader answers a name it has seen,
// with and without ECS, without allocating.
func TestReplyAllocs(t *testing.T) {
	s := &Server{}
	a := &dns.A{Hdr: dns.RR_Header{Name: "www." + zone, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(192, 0, 2, 1)}
	s.Swap(&fixed{gslb.Response{Answer: []dns.RR{a}, Extra: []dns.RR{a}, Scope: 24}})
	src := netip.MustParseAddr("192.0.2.1")
	sc := new(scratch)
	buf := make([]byte, dns.MaxMsgSize)
	for _, m := range []*dns.Msg{
		query("www."+zone, dns.TypeA, 0),
		query("WWW."+zone, dns.TypeA, 1232),
		withECS(query("www."+zone, dns.TypeA, 1232), []byte{0, 1, 24, 0, 192, 0, 2}),
		withECS(query("www."+zone, dns.TypeAAAA, 1232), []byte{0, 2, 48, 0, 0x20, 1, 0xd, 0xb8, 0, 1}),
	} {
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		in := make([]byte, len(wire))
		run := func() {
			copy(in, wire)
			if s.reply(sc, buf, in, src, false) == nil {
				t.Fatal("no reply")
			}
		}
		run() // the name interned
		if n := testing.AllocsPerRun(100, run); n != 0 {
			t.Errorf("%v: %v allocations per query, want 0", m, n)
		}
	}
}

// TestUDPSockets checks that every listen address has its UDP sockets
// (one, read by a reader per CPU), that queries from many ports (spread
// over the readers by the kernel) are all answered, and that Shutdown
// closes them all: the port is free for a plain bind again.
func TestUDPSockets(t *testing.T) {
	if got, want := udpReaders(0), max(1, runtime.GOMAXPROCS(0)-1); got != want {
		t.Errorf("udpReaders(0) = %d, want %d (GOMAXPROCS but one, at least one)", got, want)
	}
	s := &Server{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, UDPReaders: 3}
	s.Swap(&fake{})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addrs()[0]
	s.mu.Lock()
	n := len(s.udp)
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d udp sockets, want 1", n)
	}
	for i := range 32 {
		m := query("www."+zone, dns.TypeA, 1232)
		if r := exchange(t, addr.String(), "udp", m); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("query %d: %v", i, r)
		}
	}
	// The readers asked for started (each counts itself before its
	// first read; 32 answers came from them).
	s.mu.Lock()
	u := s.udp[0]
	s.mu.Unlock()
	readers := u.readers.Load()
	for deadline := time.Now().Add(2 * time.Second); readers < 3 && time.Now().Before(deadline); readers = u.readers.Load() {
		runtime.Gosched()
	}
	if readers != 3 {
		t.Errorf("%d readers started, want UDPReaders 3", readers)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatalf("udp port still bound after Shutdown: %v", err)
	}
	pc.Close()
}

// TestWildcardSource checks that a server on a wildcard address answers
// from the address each query was sent to: a client's connected socket
// takes no reply from another. 127.0.0.2 is not the address the kernel
// would pick to reach 127.0.0.1.
func TestWildcardSource(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "[::]:0"} {
		t.Run(listen, func(t *testing.T) {
			s := &Server{Listen: []netip.AddrPort{netip.MustParseAddrPort(listen)}}
			s.Swap(&fake{})
			if err := s.Start(); err != nil {
				t.Skipf("cannot listen on %s: %v", listen, err)
			}
			t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
			port := s.Addrs()[0].Port()
			tos := []string{"127.0.0.1", "127.0.0.2"}
			if listen == "[::]:0" {
				tos = append(tos, "::1")
			}
			for _, to := range tos {
				c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
				if to != "::1" {
					c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.0.1")}}
				}
				r, _, err := c.Exchange(query("www."+zone, dns.TypeA, 1232), netip.AddrPortFrom(netip.MustParseAddr(to), port).String())
				if err != nil {
					t.Fatalf("query to %s: %v", to, err)
				}
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
					t.Errorf("query to %s: %v", to, r)
				}
			}
		})
	}
}

// TestUDPCloseBlockedReader checks that Close returns promptly while the
// socket's readers are blocked in recvmmsg, that they return, and that
// the port is free again.
func TestUDPCloseBlockedReader(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "[::1]:0", "0.0.0.0:0"} {
		t.Run(listen, func(t *testing.T) {
			u, err := listenUDP(netip.MustParseAddrPort(listen))
			if err != nil {
				t.Skipf("cannot listen on %s: %v", listen, err)
			}
			s := &Server{Logger: slog.New(slog.DiscardHandler)}
			s.Swap(&fake{})
			stopped := make(chan struct{})
			go func() {
				s.serveUDP(u, u.local.Addr().IsUnspecified())
				close(stopped)
			}()
			// One query answered: the reader is in its loop, and
			// blocks again in recvmmsg once it has replied.
			to := u.local
			if to.Addr().IsUnspecified() {
				to = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), to.Port())
			}
			if r := exchange(t, to.String(), "udp", query("www."+zone, dns.TypeA, 1232)); r.Rcode != dns.RcodeSuccess {
				t.Fatalf("query: %v", r)
			}
			closed := make(chan error, 1)
			go func() { closed <- u.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("Close: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not return with the reader blocked")
			}
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				t.Fatal("the reader did not return after Close")
			}
			if err := u.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(u.local))
			if err != nil {
				t.Fatalf("udp port still bound after Close: %v", err)
			}
			pc.Close()
		})
	}
}

// TestUDPCloseNoReader checks that a socket never read closes at once,
// and that a reader started after Close returns without reading.
func TestUDPCloseNoReader(t *testing.T) {
	u, err := listenUDP(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	s := &Server{Logger: slog.New(slog.DiscardHandler)}
	s.serveUDP(u, false) // returns: closed
}

// TestUDPPathAllocs checks that the UDP readers answer a name they have
// seen without allocating: the whole path, socket to socket (the
// client's reads and writes allocate nothing either).
func TestUDPPathAllocs(t *testing.T) {
	s := &Server{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}}
	a := &dns.A{Hdr: dns.RR_Header{Name: "www." + zone, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(192, 0, 2, 1)}
	s.Swap(&fixed{gslb.Response{Answer: []dns.RR{a}}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	wire, err := query("www."+zone, dns.TypeA, 1232).Pack()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1232)
	exchange := func() {
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 * udpReaders(0) * 10 { // every reader has seen the name
		exchange()
	}
	const n = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		exchange()
	}
	runtime.ReadMemStats(&after)
	if per := float64(after.Mallocs-before.Mallocs) / n; per >= 0.5 {
		t.Errorf("%.2f allocations per query over UDP, want 0", per)
	}
}

// fuzzSameAsMiekg fuzzes s's reply against miekg/dns's server path for
// queries from src: the same bytes over UDP and TCP, with one scratch
// reused as a reader reuses it and a 512-byte buffer (too small at
// times: reply grows it).
func fuzzSameAsMiekg(f *testing.F, s *Server, src netip.Addr) {
	sc := new(scratch)
	buf := make([]byte, 512)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, tcp := range []bool{false, true} {
			want := miekgReply(s, b, src, tcp)
			got := s.reply(sc, buf, slices.Clone(b), src, tcp)
			if !bytes.Equal(got, want) {
				var g, w dns.Msg
				_, _ = g.Unpack(got), w.Unpack(want)
				t.Fatalf("tcp %v: reply\n%x\n%v\nwant\n%x\n%v", tcp, got, &g, want, &w)
			}
		}
	})
}
