package probes

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// handler answers one request; nil means send nothing.
type handler func(req *dns.Msg) *dns.Msg

// testServer is a deliberately simple loopback DNS server that lets a test
// misbehave on purpose: each reply is whatever the handler builds, packed
// as is. Stopped by t.Cleanup, which waits for every goroutine it started.
type testServer struct {
	udp   net.PacketConn
	tcp   net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	// Addr is where the server listens (UDP and/or TCP on the same port).
	Addr netip.AddrPort
}

// startServer starts a server on 127.0.0.1 with a UDP handler and/or a TCP
// handler (nil: no listener of that transport, so that port is closed for
// it). With both, UDP and TCP share one port. It returns when the server is
// ready to receive.
func startServer(t testing.TB, udpH, tcpH handler) *testServer {
	t.Helper()
	s := &testServer{conns: map[net.Conn]struct{}{}}
	switch {
	case udpH != nil && tcpH != nil:
		// Find a port free for both; a few tries cover a race with other
		// processes on the same port.
		for i := 0; i < 20 && s.tcp == nil; i++ {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", pc.LocalAddr().String())
			if err != nil {
				pc.Close()
				continue
			}
			s.udp, s.tcp = pc, ln
		}
		if s.tcp == nil {
			t.Fatal("no port free for both udp and tcp")
		}
	case udpH != nil:
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.udp = pc
	case tcpH != nil:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.tcp = ln
	default:
		t.Fatal("startServer: no handler")
	}
	if s.udp != nil {
		s.Addr = s.udp.LocalAddr().(*net.UDPAddr).AddrPort()
		s.wg.Add(1)
		go s.serveUDP(udpH)
	} else {
		s.Addr = s.tcp.Addr().(*net.TCPAddr).AddrPort()
	}
	if s.tcp != nil {
		s.wg.Add(1)
		go s.serveTCP(tcpH)
	}
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) stop() {
	if s.udp != nil {
		s.udp.Close()
	}
	if s.tcp != nil {
		s.tcp.Close()
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *testServer) serveUDP(h handler) {
	defer s.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, from, err := s.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := respond(h, buf[:n]); out != nil {
			_, _ = s.udp.WriteTo(out, from)
		}
	}
}

func (s *testServer) serveTCP(h handler) {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			// Out of descriptors (the exhaustion tests): wait, as
			// net/http does, rather than stop serving.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			for {
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				req := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, req); err != nil {
					return
				}
				out := respond(h, req)
				if out == nil {
					continue
				}
				framed := binary.BigEndian.AppendUint16(nil, uint16(len(out)))
				if _, err := c.Write(append(framed, out...)); err != nil && !errors.Is(err, net.ErrClosed) {
					return
				}
			}
		}()
	}
}

func respond(h handler, raw []byte) []byte {
	req := new(dns.Msg)
	if err := req.Unpack(raw); err != nil {
		return nil
	}
	r := h(req)
	if r == nil {
		return nil
	}
	out, err := r.Pack()
	if err != nil {
		return nil
	}
	return out
}

// answer builds a correct reply to req with the given RRs (text form; the
// owner "@" is replaced by the question name).
func answer(req *dns.Msg, rcode int, rrs ...string) *dns.Msg {
	r := new(dns.Msg)
	r.SetRcode(req, rcode)
	for _, s := range rrs {
		rr, err := dns.NewRR(req.Question[0].Name + " " + s)
		if err != nil {
			panic(err)
		}
		r.Answer = append(r.Answer, rr)
	}
	return r
}
