package responder

import (
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkUDPLoopback is the responder's UDP path on a real socket: one
// reader (recvmmsg, reply, sendmmsg) answering a client on loopback that
// keeps 32 queries in flight (dynamic-A of BenchmarkServerPath's
// snapshot). One op is one query answered; cpu-us/op is the process's
// CPU (the client's included) per query.
func BenchmarkUDPLoopback(b *testing.B) {
	s := snapshotServer(b, pathDoc)
	s.Listen = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}
	s.UDPReaders = 1
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(b.Context())
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addrs()[0]))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	wire, err := query("dyn.bench.test.", dns.TypeA, 1232).Pack()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, dns.MaxMsgSize)
	const window = 32
	send := func() {
		if _, err := c.Write(wire); err != nil {
			b.Fatal(err)
		}
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportAllocs()
	cpu0 := cpu()
	b.ResetTimer()
	inflight := 0
	for i := 0; i < b.N; {
		for inflight < window && i+inflight < b.N {
			send()
			inflight++
		}
		if err := c.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			b.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil {
			// A datagram lost on loopback: send it again.
			inflight--
			continue
		}
		if n < 12 || buf[3]&0x0f != dns.RcodeSuccess {
			b.Fatalf("reply of %d bytes, rcode %d", n, buf[3]&0x0f)
		}
		inflight--
		i++
	}
	b.StopTimer()
	b.ReportMetric(float64((cpu()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}
