package mmsg

import (
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSendRecv sends two datagrams from each of an IPv4 and an IPv6
// loopback socket with Send and reads them with Recv: the data, and the
// senders as AddrPort decodes them.
func TestSendRecv(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1"
			if network == "udp6" {
				host = "[::1]"
			}
			srv, err := net.ListenPacket(network, host+":0")
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer srv.Close()
			cli, err := net.ListenPacket(network, host+":0")
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			dst := srv.LocalAddr().(*net.UDPAddr).AddrPort()
			src := cli.LocalAddr().(*net.UDPAddr).AddrPort()

			var name unix.RawSockaddrInet6
			var namelen uint32
			p := (*[2]byte)(unsafe.Pointer(&name.Port))
			p[0], p[1] = byte(dst.Port()>>8), byte(dst.Port())
			if dst.Addr().Is4() {
				sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&name))
				sa4.Family, sa4.Addr, namelen = unix.AF_INET, dst.Addr().As4(), unix.SizeofSockaddrInet4
			} else {
				name.Family, name.Addr, namelen = unix.AF_INET6, dst.Addr().As16(), unix.SizeofSockaddrInet6
			}
			msgs := [][]byte{[]byte("first"), []byte("second")}
			hdrs := make([]unix.Mmsghdr, len(msgs))
			iovs := make([]unix.Iovec, len(msgs))
			for i, m := range msgs {
				iovs[i].Base = &m[0]
				iovs[i].SetLen(len(m))
				hdrs[i].Hdr.Iov = &iovs[i]
				hdrs[i].Hdr.SetIovlen(1)
				hdrs[i].Hdr.Name, hdrs[i].Hdr.Namelen = (*byte)(unsafe.Pointer(&name)), namelen
			}
			if got, ok := AddrPort(hdrs[0].Hdr.Name, namelen); !ok || got != dst {
				t.Fatalf("AddrPort of the destination = %v, %v; want %v", got, ok, dst)
			}
			if _, ok := AddrPort(hdrs[0].Hdr.Name, namelen-1); ok {
				t.Error("AddrPort took a length too short for the family")
			}
			cfd := fd(t, cli)
			if n, errno := Send(cfd, hdrs, 0); errno != 0 || n != len(msgs) {
				t.Fatalf("Send = %d, %v; want %d", n, errno, len(msgs))
			}

			bufs := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}
			r := NewRecv(bufs)
			got := 0
			sfd := fd(t, srv)
			for got < len(msgs) {
				n, errno := r.Call(sfd, unix.MSG_WAITFORONE)
				if errno == unix.EINTR {
					continue
				}
				if errno != 0 {
					t.Fatalf("Call: %v", errno)
				}
				for i := range n {
					if string(r.Data(i)) != string(msgs[got]) {
						t.Errorf("message %d = %q, want %q", got, r.Data(i), msgs[got])
					}
					if from, ok := r.Source(i); !ok || from != src {
						t.Errorf("source of message %d = %v, %v; want %v", got, from, ok, src)
					}
					got++
				}
			}
		})
	}
}

// fd is c's descriptor, which Recv.Call and Send use as they are.
func fd(t *testing.T, c net.PacketConn) uintptr {
	t.Helper()
	rc, err := c.(*net.UDPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var out uintptr
	if err := rc.Control(func(fd uintptr) { out = fd }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFromSockaddr decodes the socket addresses golang.org/x/sys/unix
// returns as AddrPort decodes raw ones: mapped IPv6 addresses unmapped.
func TestFromSockaddr(t *testing.T) {
	for _, c := range []struct {
		sa   unix.Sockaddr
		want string
		ok   bool
	}{
		{&unix.SockaddrInet4{Port: 53, Addr: [4]byte{192, 0, 2, 1}}, "192.0.2.1:53", true},
		{&unix.SockaddrInet6{Port: 5353, Addr: netip.MustParseAddr("2001:db8::1").As16()}, "[2001:db8::1]:5353", true},
		{&unix.SockaddrInet6{Port: 1, Addr: netip.MustParseAddr("::ffff:192.0.2.7").As16()}, "192.0.2.7:1", true},
		{&unix.SockaddrUnix{Name: "/x"}, "invalid AddrPort", false},
	} {
		got, ok := FromSockaddr(c.sa)
		if ok != c.ok || got.String() != c.want {
			t.Errorf("FromSockaddr(%v) = %v, %v; want %s, %v", c.sa, got, ok, c.want, c.ok)
		}
	}
}
