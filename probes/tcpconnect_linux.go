package probes

import (
	"container/heap"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"lbdns/check"
)

// connectTick is the longest the engine's goroutine waits in epoll_wait,
// so the latest it ends a check past its deadline.
const connectTick = 10 * time.Millisecond

// connectIdle is how long the engine's goroutine waits with no connection
// in flight before it ends (and closes its epoll instance).
const connectIdle = time.Second

// connectEngine runs the connect-only tcp checks of one Builder (those
// without tls, send or expect) without a goroutine, a context or a timer
// per check: a nonblocking socket per check, one epoll instance and one
// goroutine that waits on it for the connections and their deadlines,
// started with the first check in flight and ended after connectIdle with
// none, so the engine needs no Close. A check costs socket, connect,
// epoll_ctl, getsockopt and close (what gdnsd's tcp_connect costs); a
// check through net.Dialer also costs getsockname, getpeername, a
// setsockopt, an epoll_ctl, the parking and waking of its goroutine and
// some thirty allocations.
type connectEngine struct {
	mu       sync.Mutex
	epfd     int // -1 while the goroutine is not running
	inflight map[int32]*connectProbe
	byDue    connectHeap
}

// connectProbe is one connection in flight.
type connectProbe struct {
	fd       int32
	addr     netip.AddrPort
	start    time.Time
	deadline time.Time
	done     func(check.Result)
	idx      int // in connectEngine.byDue
}

// newConnectEngine returns an engine with nothing in flight.
func newConnectEngine() *connectEngine {
	return &connectEngine{epfd: -1, inflight: make(map[int32]*connectProbe)}
}

// async reports whether addr can be checked by the engine: IPv4, or IPv6
// without a zone.
func (e *connectEngine) async(addr netip.AddrPort) bool {
	return e != nil && addr.Addr().Zone() == ""
}

// start starts one connect to addr that ends by deadline; done gets its
// result, once, from the engine's goroutine or before start returns.
func (e *connectEngine) start(addr netip.AddrPort, deadline time.Time, done func(check.Result)) {
	start := time.Now()
	p := &connectProbe{addr: addr, start: start, deadline: deadline, done: done}
	ip := addr.Addr().Unmap()
	var (
		sa     syscall.Sockaddr
		family = syscall.AF_INET
	)
	if ip.Is4() {
		sa = &syscall.SockaddrInet4{Port: int(addr.Port()), Addr: ip.As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: int(addr.Port()), Addr: ip.As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		p.end(os.NewSyscallError("socket", err))
		return
	}
	p.fd = int32(fd)
	switch err := syscall.Connect(fd, sa); {
	case err == nil: // at once, as loopback may
		syscall.Close(fd)
		p.end(nil)
		return
	case !errors.Is(err, syscall.EINPROGRESS):
		syscall.Close(fd)
		p.end(os.NewSyscallError("connect", err))
		return
	}
	if err := e.add(p); err != nil {
		syscall.Close(fd)
		p.end(err)
	}
}

// add puts p in flight, starting the goroutine when it is not running.
func (e *connectEngine) add(p *connectProbe) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.epfd < 0 {
		epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return os.NewSyscallError("epoll_create1", err)
		}
		e.epfd = epfd
		go e.loop(epfd)
	}
	e.inflight[p.fd] = p
	heap.Push(&e.byDue, p)
	ev := syscall.EpollEvent{Events: syscall.EPOLLOUT, Fd: p.fd}
	if err := syscall.EpollCtl(e.epfd, syscall.EPOLL_CTL_ADD, int(p.fd), &ev); err != nil {
		delete(e.inflight, p.fd)
		heap.Remove(&e.byDue, p.idx)
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// loop waits for connections and deadlines on epfd until nothing has
// been in flight for connectIdle.
func (e *connectEngine) loop(epfd int) {
	events := make([]syscall.EpollEvent, 128)
	var ended []*connectProbe
	idleSince := time.Now()
	for {
		// At most connectTick, so that a check started meanwhile with an
		// earlier deadline is timed out at most that late.
		e.mu.Lock()
		wait := connectTick
		if len(e.byDue) > 0 {
			wait = min(wait, time.Until(e.byDue[0].deadline))
		}
		e.mu.Unlock()
		// Rounded up: a wait of 0 ms would spin until the deadline. A
		// deadline passed already still polls, without waiting, so that
		// a connection that was made by then counts.
		ms := int((max(wait, 0) + time.Millisecond - 1) / time.Millisecond)
		n, err := syscall.EpollWait(epfd, events, ms)
		if err != nil {
			n = 0 // EINTR; nothing else is expected
		}
		now := time.Now()
		ended = ended[:0]
		e.mu.Lock()
		for _, ev := range events[:n] {
			if p := e.inflight[ev.Fd]; p != nil {
				e.removeLocked(p)
				ended = append(ended, p)
			}
		}
		connected := len(ended)
		for len(e.byDue) > 0 && !e.byDue[0].deadline.After(now) {
			p := e.byDue[0]
			e.removeLocked(p)
			ended = append(ended, p)
		}
		if len(e.inflight) > 0 || len(ended) > 0 {
			idleSince = now
		} else if now.Sub(idleSince) >= connectIdle {
			e.epfd = -1
			e.mu.Unlock()
			syscall.Close(epfd)
			return
		}
		e.mu.Unlock()
		for i, p := range ended {
			var err error
			if i < connected {
				if soErr, gerr := syscall.GetsockoptInt(int(p.fd), syscall.SOL_SOCKET, syscall.SO_ERROR); gerr != nil {
					err = os.NewSyscallError("getsockopt", gerr)
				} else if soErr != 0 {
					err = os.NewSyscallError("connect", syscall.Errno(soErr))
				}
			} else {
				err = os.ErrDeadlineExceeded
			}
			syscall.Close(int(p.fd)) // also out of the epoll set
			p.end(err)
			ended[i] = nil
		}
	}
}

// removeLocked takes p out of flight; e.mu is held.
func (e *connectEngine) removeLocked(p *connectProbe) {
	delete(e.inflight, p.fd)
	heap.Remove(&e.byDue, p.idx)
}

// end reports p's result: connected when err is nil.
func (p *connectProbe) end(err error) {
	rtt := time.Since(p.start)
	if err == nil {
		p.done(Result{OK: true, RTT: rtt, Detail: "connected"})
		return
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		// As net.Dialer words it: "dial tcp 192.0.2.1:80: connect: ...".
		err = &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(p.addr), Err: err}
	}
	p.done(Result{RTT: rtt, Detail: describeErr(context.Background(), err, p.deadline.Sub(p.start))})
}

// connectHeap orders connections in flight by deadline.
type connectHeap []*connectProbe

func (h connectHeap) Len() int           { return len(h) }
func (h connectHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h connectHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

// Push adds x (heap.Interface).
func (h *connectHeap) Push(x any) {
	p := x.(*connectProbe)
	p.idx = len(*h)
	*h = append(*h, p)
}

// Pop removes the last element (heap.Interface).
func (h *connectHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.idx = -1
	return p
}
