package probes

import (
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// rawServer is a loopback UDP DNS server whose script sees the n-th query
// (from 0) and sends any datagrams it likes back, in order.
type rawServer struct {
	pc   net.PacketConn
	wg   sync.WaitGroup
	Addr netip.AddrPort
}

// script returns the datagrams to send for the n-th query req.
type script func(n int, req *dns.Msg) []*dns.Msg

func startRaw(t *testing.T, sc script) *rawServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{pc: pc, Addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	s.wg.Go(func() {
		buf := make([]byte, 65535)
		for n := 0; ; n++ {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req := new(dns.Msg)
			if err := req.Unpack(buf[:k]); err != nil {
				continue
			}
			for _, m := range sc(n, req) {
				out, err := m.Pack()
				if err != nil {
					panic(err)
				}
				_, _ = pc.WriteTo(out, from)
			}
		}
	})
	t.Cleanup(s.stop)
	return s
}

func (s *rawServer) stop() {
	_ = s.pc.Close()
	s.wg.Wait()
}
