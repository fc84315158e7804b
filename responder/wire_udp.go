package responder

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"lbdns/internal/mmsg"

	"golang.org/x/sys/unix"
)

// The UDP side of the server is its own: per listen address, one
// blocking socket (SO_REUSEPORT) read by long-lived reader goroutines
// (by default one per CPU but one: udpReaders; serveUDP), each on its
// own thread, that reads a
// batch of queries into its reused buffers (recvmmsg), answers each
// inline (reply, the path TCP connections answer by too) into another reused
// buffer and writes the batch of replies back (sendmmsg). The socket is
// outside Go's netpoller: the readers wait in recvmmsg in the kernel, as
// gdnsd's threads do, and no query wakes the netpoller. The kernel wakes
// one waiting reader per query, so whichever reader is free takes the
// next one: no reader idles while another has a queue (with a socket per
// reader, SO_REUSEPORT's hash of the clients' ports may give one reader
// most of them). No goroutine per query, and no allocation per query
// once its name is known. Sockets bound to a wildcard address receive
// each query's destination address (IP_PKTINFO, IPV6_RECVPKTINFO) and
// answer from it.

// udpReaders is how many readers read one UDP socket: n, or by default
// one per P of the Go runtime (GOMAXPROCS) but one, at least one. The P
// left over keeps the runtime from finding every P parked in recvmmsg:
// then its monitor thread hands the readers' Ps off every 20 us and
// wakes for it, and each reader takes a P back as its call returns.
// On the 2-CPU benchmark host, one reader with a P to spare answered at
// 3.2-4.1 us of CPU per query where two readers (with or without a spare
// P) took 4.8-6.5 us, and one reader without one 3.4-4.9 us
// (bench/README.md, "2026-11-30 (session 16): the reply cache, one
// reader with a P to spare").
func udpReaders(n int) int {
	if n > 0 {
		return n
	}
	return max(1, runtime.GOMAXPROCS(0)-1)
}

// udpSocket is one blocking UDP socket of a listen address, read by one
// serveUDP (and its readers). Close wakes the readers (shutdown(2)) and
// closes the descriptor once they are done with it.
type udpSocket struct {
	local netip.AddrPort

	// readers counts the readers started on the socket.
	readers atomic.Int32

	mu      sync.Mutex
	fd      int // -1 once closed
	reading bool
	closing bool
	done    chan struct{} // closed when the readers stop
}

// listenUDP opens a blocking UDP socket on ap with SO_REUSEPORT (and, for
// a wildcard address, the options that tell each query's destination).
// [::] is dual stack, as net.ListenUDP("udp", ...).
func listenUDP(ap netip.AddrPort) (*udpSocket, error) {
	fd, err := openUDP(ap)
	if err != nil {
		return nil, fmt.Errorf("server: listen udp %s: %w", ap, err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("server: listen udp %s: getsockname: %w", ap, err)
	}
	local := ap
	if bound, ok := mmsg.FromSockaddr(sa); ok {
		local = netip.AddrPortFrom(ap.Addr(), bound.Port())
	}
	return &udpSocket{local: local, fd: fd, done: make(chan struct{})}, nil
}

// openUDP is listenUDP's socket, bound.
func openUDP(ap netip.AddrPort) (int, error) {
	addr := ap.Addr().Unmap()
	if !addr.IsValid() {
		return -1, errors.New("no address")
	}
	wildcard := addr.IsUnspecified()
	var family int
	var sa unix.Sockaddr
	if addr.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: addr.As4()}
	} else {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: addr.As16(), ZoneId: zoneID(addr.Zone())}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	opts := []sockopt{{unix.SOL_SOCKET, unix.SO_REUSEPORT, true}}
	if family == unix.AF_INET6 {
		// Dual stack on [::]; IPv6 only on any other address.
		v6only := 1
		if wildcard {
			v6only = 0
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("setsockopt IPV6_V6ONLY: %w", err)
		}
	}
	if wildcard {
		if family == unix.AF_INET6 {
			opts = append(opts, sockopt{unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, true})
		}
		// On an IPv6 socket too: IPv4 queries of a dual-stack one.
		opts = append(opts, sockopt{unix.IPPROTO_IP, unix.IP_PKTINFO, family == unix.AF_INET})
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, 1); err != nil && o.must {
			unix.Close(fd)
			return -1, fmt.Errorf("setsockopt %d/%d: %w", o.level, o.opt, err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	return fd, nil
}

// sockopt is a socket option set to 1, which must succeed or not.
type sockopt struct {
	level, opt int
	must       bool
}

// zoneID is the interface index of an IPv6 zone (0 for none or unknown).
func zoneID(zone string) uint32 {
	if zone == "" {
		return 0
	}
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n)
	}
	return 0
}

// LocalAddr is the address the socket is bound to.
func (u *udpSocket) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(u.local) }

// acquire hands the descriptor to serveUDP: false once closing, or
// when it already has it.
func (u *udpSocket) acquire() (int, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closing || u.reading {
		return -1, false
	}
	u.reading = true
	return u.fd, true
}

// closed reports whether Close was called.
func (u *udpSocket) closed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.closing
}

// release is the readers' end: Close, waiting, closes the descriptor.
func (u *udpSocket) release() {
	close(u.done)
}

// Close stops the readers (shutdown(2) wakes them all from recvmmsg),
// waits for them, and closes the socket.
func (u *udpSocket) Close() error {
	u.mu.Lock()
	if u.closing {
		u.mu.Unlock()
		return nil
	}
	u.closing = true
	reading := u.reading
	if reading {
		// An unconnected UDP socket answers ENOTCONN but is shut
		// down all the same: its blocked readers return.
		if err := unix.Shutdown(u.fd, unix.SHUT_RD); err != nil && !errors.Is(err, unix.ENOTCONN) {
			u.mu.Unlock()
			return fmt.Errorf("shutdown: %w", err)
		}
	}
	u.mu.Unlock()
	if reading {
		<-u.done
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	fd := u.fd
	u.fd = -1
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// replyPktinfo appends to dst the control message that sends a reply
// from the destination address of the query whose control messages are
// oob (none when oob tells no destination).
func replyPktinfo(dst, oob []byte) []byte {
	hl := unix.CmsgLen(0)
	for len(oob) >= hl {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hl || l > len(oob) {
			return dst
		}
		data := oob[hl:l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo: ifindex, spec_dst, addr (the header's
			// destination); sent: spec_dst is the source.
			var pi unix.Inet4Pktinfo
			copy(pi.Spec_dst[:], data[8:12])
			return appendCmsg(dst, unix.IPPROTO_IP, unix.IP_PKTINFO, (*[unix.SizeofInet4Pktinfo]byte)(unsafe.Pointer(&pi))[:])
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			// struct in6_pktinfo: addr, ifindex (kept: link-local
			// addresses need it).
			return appendCmsg(dst, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, data[:unix.SizeofInet6Pktinfo])
		}
		oob = oob[min(unix.CmsgSpace(l-hl), len(oob)):]
	}
	return dst
}

// appendCmsg appends a control message of level and typ carrying data.
func appendCmsg(dst []byte, level, typ int32, data []byte) []byte {
	start := len(dst)
	dst = slices.Grow(dst, unix.CmsgSpace(len(data)))[:start+unix.CmsgSpace(len(data))]
	clear(dst[start:])
	h := (*unix.Cmsghdr)(unsafe.Pointer(&dst[start]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(dst[start+unix.CmsgLen(0):], data)
	return dst
}
