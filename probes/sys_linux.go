package probes

import (
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The connect engine's system calls, through golang.org/x/sys/unix. None
// of them blocks (nonblocking sockets; close without SO_LINGER) but the
// engine's epoll_wait, which waits in the runtime's poller instead
// (epollWaiter).

// connectTo is connect(2) of fd to addr (an IPv4, IPv4-mapped or
// zoneless IPv6 address).
func connectTo(fd int, addr netip.AddrPort) error {
	ip := addr.Addr().Unmap()
	if ip.Is4() {
		return unix.Connect(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: ip.As4()})
	}
	return unix.Connect(fd, &unix.SockaddrInet6{Port: int(addr.Port()), Addr: ip.As16()})
}

// soError is the socket's pending error (SO_ERROR).
func soError(fd int) (int, error) {
	return unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
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
		return epollPoll(w.epfd, events)
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
		return epollPoll(w.epfd, events)
	}
	n := 0
	// The error is the deadline's (n is 0 then).
	_ = w.rc.Read(func(fd uintptr) bool {
		n = epollPoll(int(fd), events)
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

// epollPoll is epoll_wait(2) without waiting; 0 on an error.
func epollPoll(epfd int, events []unix.EpollEvent) int {
	n, err := unix.EpollWait(epfd, events, 0)
	if err != nil {
		return 0
	}
	return n
}
