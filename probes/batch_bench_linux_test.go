package probes

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// startWireResponder starts a loopback UDP responder that answers each
// query from its bytes, without allocating: for rcode NOERROR it appends
// one A record (192.0.2.1) naming the question by a pointer, for NXDOMAIN
// one SOA record in the authority section, as resolvers answer. It stops
// with the test.
func startWireResponder(b testing.TB, rcode byte) *net.UDPConn {
	b.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 1024)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf[:512])
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			buf[2] |= 0x80 // QR
			buf[3] = 0x80 | rcode
			switch rcode {
			case 0:
				binary.BigEndian.PutUint16(buf[6:], 1)
				n += copy(buf[n:], []byte{0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1})
			default:
				binary.BigEndian.PutUint16(buf[8:], 1)
				n += copy(buf[n:], []byte{0xc0, 12, 0, 6, 0, 1, 0, 0, 0, 60, 0, 24,
					0xc0, 12, 0xc0, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5})
			}
			_, _ = conn.WriteToUDPAddrPort(buf[:n], from)
		}
	})
	b.Cleanup(func() {
		conn.Close()
		wg.Wait()
	})
	return conn
}

// BenchmarkBatchProbe measures one probe through the batch engine
// (StartCheck), one in flight at a time, against a responder that does not
// allocate: allocs/op are the engine's and the judgement's.
func BenchmarkBatchProbe(b *testing.B) {
	for _, bc := range []struct {
		name  string
		chk   *configs.Check
		rcode byte
	}{
		{"fixed", fixedCheck(), 0},
		{"zone", zoneCheck(), 3},
		{"fixed/expect", withCheck(fixedCheck(), func(c *configs.Check) { c.DNS.Expect = "192.0.2.1" }), 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := startWireResponder(b, bc.rcode)
			p := NewDNSProber()
			defer p.Close()
			c, err := buildDNSChecker(bc.chk, srv.LocalAddr().(*net.UDPAddr).AddrPort())
			if err != nil {
				b.Fatal(err)
			}
			c.p = p
			ch := make(chan check.Result, 1)
			done := func(r check.Result) { ch <- r }
			b.ReportAllocs()
			for b.Loop() {
				c.StartCheck(time.Now().Add(time.Second), done)
				if res := <-ch; !res.OK {
					b.Fatalf("probe failed: %+v", res)
				}
			}
		})
	}
}
