package probes

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"
)

// readDatagram reads the next datagram from the connected UDP socket conn,
// whole, into a buffer of exactly its size: it first peeks at the
// datagram's length (MSG_PEEK|MSG_TRUNC, which on Linux reports the full
// length whatever the buffer), then receives it. Two small system calls
// instead of one read into a 64 KiB buffer per probe, which at thousands of
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
		var one [1]byte
		n, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&one[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_TRUNC, 0, 0)
		switch errno {
		case 0:
		case syscall.EAGAIN, syscall.EINTR:
			return false // wait until readable (or the deadline)
		default:
			opErr = errno
			return true
		}
		buf = make([]byte, int(n))
		m, err := syscall.Read(int(fd), buf)
		switch err {
		case nil:
		case syscall.EAGAIN, syscall.EINTR:
			return false
		default:
			opErr = err
			return true
		}
		if m != len(buf) {
			opErr = fmt.Errorf("datagram of %d bytes read as %d", len(buf), m)
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
