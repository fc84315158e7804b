package probes

import (
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The connect engine's system calls, made without telling the Go
// scheduler (unix.RawSyscall): they never block (nonblocking sockets;
// close without SO_LINGER), so the goroutine keeps its P through them.
// Through unix.Syscall each one marks the P as in a system call, and one
// that lasts past a sysmon tick (a loopback connect runs the whole
// handshake in the call) while the other Ps are busy has its P handed to
// another thread: thread wake-ups and context switches. Measured against
// the library's wrappers (unix.Connect, unix.Close, ...), the raw calls
// keep lbdnsd's CPU per TCP or HTTP check at 30-33 us against 35-38 us
// (bench/README.md, "2026-12-01: one copy of each low-level piece").
// Only the engine's epoll_wait, which does block, goes through
// unix.Syscall (epollWaiter).

// errnoErr returns e as an error, nil for 0.
func errnoErr(e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// rawSocket is socket(2).
func rawSocket(family, typ, proto int) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), uintptr(typ), uintptr(proto))
	return int(fd), errnoErr(e)
}

// rawConnect is connect(2) to addr (an IPv4, IPv4-mapped or zoneless
// IPv6 address).
func rawConnect(fd int, addr netip.AddrPort) error {
	ip := addr.Addr().Unmap()
	port := addr.Port()
	if ip.Is4() {
		sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ip.As4()}
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet4)
		return errnoErr(e)
	}
	sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ip.As16()}
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port)
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet6)
	return errnoErr(e)
}

// rawClose is close(2).
func rawClose(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

// rawEpollAdd is epoll_ctl(2) EPOLL_CTL_ADD.
func rawEpollAdd(epfd, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), unix.EPOLL_CTL_ADD, uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	return errnoErr(e)
}

// rawSoError is getsockopt(2) of SO_ERROR.
func rawSoError(fd int) (int, error) {
	var v int32
	l := uint32(4)
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_ERROR, uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0)
	return int(v), errnoErr(e)
}

// rawWrite is write(2) of b, which is not empty.
func rawWrite(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawRead is read(2) into b, which is not empty.
func rawRead(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// epollWaiter waits on the connect engine's epoll instance in the Go
// runtime's network poller (an epoll instance is itself pollable): the
// engine's goroutine parks instead of blocking its thread in epoll_wait.
// A thread blocked in a system call keeps its P out of the idle set, so
// sysmon never sleeps deeply and, once the call lasts 10 ms (between two
// rounds of checks), takes the P back and wakes another thread: 12% of
// the daemon's CPU in the GSLB bench was sysmon (bench/README.md,
// "2026-11-30, round 2 (branch `gslb2`)").
type epollWaiter struct {
	epfd int
	f    *os.File        // owns epfd; nil when epfd could not be made nonblocking
	rc   syscall.RawConn // nil: not pollable, wait in epoll_wait
}

// newEpollWaiter returns a waiter on epfd, which it owns (close).
func newEpollWaiter(epfd int) *epollWaiter {
	w := &epollWaiter{epfd: epfd}
	if unix.SetNonblock(epfd, true) != nil {
		return w
	}
	w.f = os.NewFile(uintptr(epfd), "epoll")
	if rc, err := w.f.SyscallConn(); err == nil && w.f.SetReadDeadline(time.Time{}) == nil {
		w.rc = rc
	}
	return w
}

// wait returns the number of events it put in events, waiting up to d
// for the first (not at all when d is not positive).
func (w *epollWaiter) wait(events []unix.EpollEvent, d time.Duration) int {
	if d <= 0 {
		return rawEpollPoll(w.epfd, events)
	}
	if w.rc == nil {
		// Rounded up: a wait of 0 ms would spin until the deadline.
		n, err := unix.EpollWait(w.epfd, events, int((d+time.Millisecond-1)/time.Millisecond))
		if err != nil {
			return 0 // EINTR; nothing else is expected
		}
		return n
	}
	if w.f.SetReadDeadline(time.Now().Add(d)) != nil {
		return rawEpollPoll(w.epfd, events)
	}
	n := 0
	// The error is the deadline's (n is 0 then).
	_ = w.rc.Read(func(fd uintptr) bool {
		n = rawEpollPoll(int(fd), events)
		return n > 0
	})
	return n
}

// close closes the epoll instance.
func (w *epollWaiter) close() {
	if w.f != nil {
		w.f.Close()
		return
	}
	unix.Close(w.epfd)
}

// rawEpollPoll is epoll_pwait(2) without waiting; 0 on an error.
func rawEpollPoll(epfd int, events []unix.EpollEvent) int {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0
	}
	return int(n)
}
