package probes

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peekSize is the buffer of the first look at a reply: the largest reply
// to a query without EDNS0 (RFC 1035 4.2.1), so one system call reads
// nearly every reply whole.
const peekSize = 512

// readDatagram reads the next datagram from the connected UDP socket conn,
// whole, into a buffer of exactly its size. It peeks at the datagram
// (MSG_PEEK|MSG_TRUNC, which on Linux reports the full length whatever the
// buffer): a datagram that fits the peek buffer is copied out and left in
// the socket, which the caller closes anyway; a larger one is then received
// into a buffer of its size. So one system call and one small allocation
// replace a read into a 64 KiB buffer per probe, which at thousands of
// probes a second made garbage collection the largest cost of probing.
// conn's deadline applies as to conn.Read.
func readDatagram(conn net.Conn) ([]byte, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return readDatagramFull(conn)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var (
		buf   []byte
		opErr error
	)
	err = rc.Read(func(fd uintptr) bool {
		var peek [peekSize]byte
		n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&peek[0])), peekSize,
			unix.MSG_PEEK|unix.MSG_TRUNC, 0, 0)
		switch errno {
		case 0:
		case unix.EAGAIN, unix.EINTR:
			return false // wait until readable (or the deadline)
		default:
			opErr = errno
			return true
		}
		if n <= peekSize {
			buf = append([]byte(nil), peek[:n]...)
			return true
		}
		buf = make([]byte, int(n))
		m, err := unix.Read(int(fd), buf)
		switch err {
		case nil:
			buf = buf[:m]
		case unix.EAGAIN, unix.EINTR:
			return false
		default:
			opErr = err
		}
		return true
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return nil, &net.OpError{Op: "read", Net: "udp", Source: conn.LocalAddr(), Addr: conn.RemoteAddr(), Err: err}
	}
	return buf, nil
}
