package mmsg

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Recv is the reused storage of one recvmmsg call: for each message a
// buffer, its iovec and room for the sender's address (IPv4 or IPv6).
// It lives as long as its reader; the kernel writes into it.
type Recv struct {
	// Hdrs are the message headers handed to the kernel. Callers may
	// set a header's control buffer (Hdr.Control, Hdr.SetControllen).
	Hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	bufs  [][]byte
}

// NewRecv returns the storage of a recvmmsg of len(bufs) messages, the
// i-th read into bufs[i] (not empty).
func NewRecv(bufs [][]byte) *Recv {
	n := len(bufs)
	r := &Recv{
		Hdrs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n),
		bufs:  bufs,
	}
	for i := range n {
		r.iovs[i].Base = &bufs[i][0]
		r.iovs[i].SetLen(len(bufs[i]))
		h := &r.Hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		h.Iov = &r.iovs[i]
		h.SetIovlen(1)
	}
	return r
}

// Call is recvmmsg(2) of up to len(r.Hdrs) messages on fd with flags
// (through unix.Syscall6: the thread may block in it). It resets what
// the last call wrote first: each header's address length, flags and
// message length (a control buffer's length is the caller's to reset).
func (r *Recv) Call(fd uintptr, flags int) (int, unix.Errno) {
	for i := range r.Hdrs {
		h := &r.Hdrs[i]
		h.Hdr.Namelen = unix.SizeofSockaddrInet6
		h.Hdr.Flags = 0
		h.Len = 0
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.Hdrs[0])), uintptr(len(r.Hdrs)), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// Data is message i of the last call.
func (r *Recv) Data(i int) []byte { return r.bufs[i][:r.Hdrs[i].Len] }

// Source is the sender of message i of the last call, unmapped, and
// whether the kernel told one (see AddrPort).
func (r *Recv) Source(i int) (netip.AddrPort, bool) {
	h := &r.Hdrs[i].Hdr
	return AddrPort(h.Name, h.Namelen)
}

// Send is sendmmsg(2) of hdrs on fd with flags: how many messages went
// out (sendmmsg stops at the first that fails), or the error of the
// first. hdrs is not empty.
func Send(fd uintptr, hdrs []unix.Mmsghdr, flags int) (int, unix.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// AddrPort decodes the socket address of namelen bytes at name (struct
// sockaddr_in or sockaddr_in6, as the kernel writes a message's
// sender): its address, unmapped, and port; false for another family or
// a length too short for its family. The IPv6 scope is not kept.
func AddrPort(name *byte, namelen uint32) (netip.AddrPort, bool) {
	if name == nil {
		return netip.AddrPort{}, false
	}
	sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(name))
	p := (*[2]byte)(unsafe.Pointer(&sa.Port)) // network byte order
	port := uint16(p[0])<<8 | uint16(p[1])
	switch {
	case sa.Family == unix.AF_INET && namelen >= unix.SizeofSockaddrInet4:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(name))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port), true
	case sa.Family == unix.AF_INET6 && namelen >= unix.SizeofSockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port), true
	}
	return netip.AddrPort{}, false
}

// FromSockaddr is the address and port of sa, unmapped, as AddrPort
// gives them for a raw address (the form golang.org/x/sys/unix's calls
// return: Recvmsg, Getsockname); false for another family.
func FromSockaddr(sa unix.Sockaddr) (netip.AddrPort, bool) {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port)), true
	}
	return netip.AddrPort{}, false
}
