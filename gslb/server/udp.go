package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The UDP side of the server is its own: per listen address, one socket
// per CPU (GOMAXPROCS) bound with SO_REUSEPORT, so that the kernel spreads
// the queries over them, and one long-lived reader goroutine per socket
// (serveUDP) that reads a batch of queries into its reused buffers
// (recvmmsg), answers each inline (reply: the same respond as TCP's
// ServeDNS) into another reused buffer and writes the batch of replies
// back (sendmmsg). No goroutine per query, and no allocation per query in
// the answer once its name is known (x/net's batch reads allocate the
// sender's address). Sockets bound to a wildcard address receive each
// query's destination address (IP_PKTINFO, IPV6_RECVPKTINFO) and answer
// from it.

// udpSockets is how many UDP sockets serve one listen address.
func udpSockets() int { return max(1, runtime.GOMAXPROCS(0)) }

// listenUDP opens a UDP socket on ap with SO_REUSEPORT (and, for a
// wildcard address, the options that tell each query's destination).
func listenUDP(ap netip.AddrPort) (*net.UDPConn, error) {
	wildcard := ap.Addr().IsUnspecified()
	lc := net.ListenConfig{Control: func(network, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil || !wildcard {
				return
			}
			if network == "udp6" {
				if serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1); serr != nil {
					return
				}
			}
			// On an IPv6 socket too: IPv4 queries of a dual-stack one.
			if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1); err != nil && network != "udp6" {
				serr = err
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	network := "udp4"
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		network = "udp6"
	}
	if ap.Addr().IsUnspecified() && ap.Addr().Is6() {
		network = "udp" // [::]: dual stack, as net.ListenUDP("udp", ...)
	}
	pc, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, fmt.Errorf("server: listen udp %s: %w", ap, err)
	}
	return pc.(*net.UDPConn), nil
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
