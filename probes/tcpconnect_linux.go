package probes

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lbdns/check"
	"lbdns/internal/timerheap"
)

// connectTick is the longest the engine's goroutine waits in epoll_wait,
// so the latest it ends a check past its deadline.
const connectTick = 10 * time.Millisecond

// connectIdle is how long the engine's goroutine waits with no connection
// in flight before it ends (and closes its epoll instance).
const connectIdle = time.Second

// epollET is EPOLLET as a uint32 (unix.EPOLLET is a negative int).
const epollET = 1 << 31

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
//
// It runs the plain-HTTP checks of the Builder too (startHTTP; see
// httpengine_linux.go): connect, write the request rendered once, read
// the response into a bounded buffer and judge it, all on the same
// goroutine, the socket registered once, edge-triggered, for both
// directions: socket, connect, epoll_ctl, write, read and close per check
// (gdnsd's http_status costs as much), where the net/http path cost a
// net.Conn, a context, a timer and the parking of the check's goroutine
// at each read.
type connectEngine struct {
	mu   sync.Mutex
	epfd int // -1 while the goroutine is not running
	// inflight holds the checks in flight by socket number (nil where
	// none is): the numbers are small and reused at once, so a slice
	// costs less than a map, and nothing per check.
	inflight []*connectProbe
	byDue    timerheap.Heap[*connectProbe]
}

// connectProbe is one connection in flight.
type connectProbe struct {
	fd       int32
	addr     netip.AddrPort
	start    time.Time
	deadline time.Time
	done     func(check.Result)
	idx      int          // in connectEngine.byDue
	expired  bool         // its deadline passed (the engine's goroutine)
	events   uint32       // what epoll reported for a connect-only check
	http     *httpRequest // an http check; nil: connect only
}

// newConnectEngine returns an engine with nothing in flight.
func newConnectEngine() *connectEngine {
	return &connectEngine{epfd: -1}
}

// async reports whether addr can be checked by the engine: IPv4, or IPv6
// without a zone.
func (e *connectEngine) async(addr netip.AddrPort) bool {
	return e != nil && addr.Addr().Zone() == ""
}

// start starts one connect to addr that ends by deadline; done gets its
// result, once, from the engine's goroutine or before start returns.
func (e *connectEngine) start(addr netip.AddrPort, deadline time.Time, done func(check.Result)) {
	p := &connectProbe{addr: addr, start: time.Now(), deadline: deadline, done: done}
	switch connected, err := p.connect(); {
	case err != nil:
		p.end(err)
	case connected: // at once, as loopback may
		rawClose(int(p.fd))
		p.end(nil)
	default:
		if err := e.add(p, unix.EPOLLOUT); err != nil {
			rawClose(int(p.fd))
			p.end(err)
		}
	}
}

// startHTTP starts one plain-HTTP check of c at addr that ends by
// deadline: connect, send c's request, read and judge the response, on
// the engine's goroutine; done gets its result, once.
func (e *connectEngine) startHTTP(addr netip.AddrPort, c *httpChecker, deadline time.Time, done func(check.Result)) {
	// One allocation for both.
	hp := &struct {
		connectProbe
		req httpRequest
	}{connectProbe: connectProbe{addr: addr, start: time.Now(), deadline: deadline, done: done}}
	p := &hp.connectProbe
	p.http, hp.req.c = &hp.req, c
	p.http.resp.reset(c)
	if _, err := p.connect(); err != nil {
		p.end(err)
		return
	}
	// Edge-triggered, for both directions at once: the connection made
	// (or made already: epoll reports it at once), then the response.
	if err := e.add(p, unix.EPOLLIN|unix.EPOLLOUT|unix.EPOLLRDHUP|epollET); err != nil {
		rawClose(int(p.fd))
		p.end(err)
	}
}

// connect opens p's nonblocking socket and starts connecting it to
// p.addr; connected reports a connection made at once. On an error the
// socket is closed.
func (p *connectProbe) connect() (connected bool, err error) {
	family := unix.AF_INET
	if !p.addr.Addr().Unmap().Is4() {
		family = unix.AF_INET6
	}
	fd, err := rawSocket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return false, os.NewSyscallError("socket", err)
	}
	p.fd = int32(fd)
	switch err := rawConnect(fd, p.addr); {
	case err == nil:
		return true, nil
	case !errors.Is(err, unix.EINPROGRESS):
		rawClose(fd)
		return false, os.NewSyscallError("connect", err)
	}
	return false, nil
}

// add puts p in flight, starting the goroutine when it is not running.
func (e *connectEngine) add(p *connectProbe, events uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.epfd < 0 {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return os.NewSyscallError("epoll_create1", err)
		}
		e.epfd = epfd
		go e.loop(epfd)
	}
	if n := int(p.fd) + 1; n > len(e.inflight) {
		e.inflight = append(e.inflight, make([]*connectProbe, n-len(e.inflight))...)
	}
	e.inflight[p.fd] = p
	e.byDue.Push(p)
	ev := unix.EpollEvent{Events: events, Fd: p.fd}
	if err := rawEpollAdd(e.epfd, int(p.fd), &ev); err != nil {
		e.removeLocked(p)
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// loop waits for connections, responses and deadlines on epfd until
// nothing has been in flight for connectIdle.
func (e *connectEngine) loop(epfd int) {
	events := make([]unix.EpollEvent, 128)
	var (
		ended []*connectProbe // out of flight: connected, or past the deadline
		ready []httpReady     // http checks with I/O to do
		fin   []*connectProbe // http checks finished by that I/O
		bufs  bufferPool      // read buffers of the http checks
	)
	w := newEpollWaiter(epfd)
	idleSince := time.Now()
	for {
		// At most connectTick, so that a check started meanwhile with an
		// earlier deadline is timed out at most that late.
		e.mu.Lock()
		wait := connectTick
		if e.byDue.Len() > 0 {
			wait = min(wait, time.Until((*e.byDue.At(0)).deadline))
		}
		e.mu.Unlock()
		// A deadline passed already still polls, without waiting, so
		// that a connection that was made by then counts.
		n := w.wait(events, wait)
		now := time.Now()
		ended, ready, fin = ended[:0], ready[:0], fin[:0]
		e.mu.Lock()
		for _, ev := range events[:n] {
			var p *connectProbe
			if int(ev.Fd) < len(e.inflight) {
				p = e.inflight[ev.Fd]
			}
			switch {
			case p == nil:
			case p.http != nil: // stays in flight until its I/O ends it
				ready = append(ready, httpReady{p, ev.Events})
			default:
				e.removeLocked(p)
				p.events = ev.Events
				ended = append(ended, p)
			}
		}
		for e.byDue.Len() > 0 && !(*e.byDue.At(0)).deadline.After(now) {
			p := *e.byDue.At(0)
			e.removeLocked(p)
			p.expired = true
			ended = append(ended, p)
		}
		if e.byDue.Len() > 0 || len(ended) > 0 || len(ready) > 0 { // byDue: all in flight
			idleSince = now
		} else if now.Sub(idleSince) >= connectIdle {
			e.epfd = -1
			e.mu.Unlock()
			w.close()
			return
		}
		e.mu.Unlock()
		// The I/O of the http checks, outside the lock: only this
		// goroutine touches a check in flight.
		for _, r := range ready {
			if r.p.stepHTTP(r.events, &bufs) {
				fin = append(fin, r.p)
			}
		}
		if len(fin) > 0 {
			// Out of flight before its socket is closed: the number may
			// be another check's at once.
			e.mu.Lock()
			for _, p := range fin {
				if !p.expired {
					e.removeLocked(p)
				}
			}
			e.mu.Unlock()
			for i, p := range fin {
				rawClose(int(p.fd))
				p.http.release(&bufs)
				p.done(p.http.res)
				fin[i] = nil
			}
		}
		for i, p := range ended {
			ended[i] = nil
			if p.http != nil {
				if p.http.finished {
					continue // ended by its I/O above
				}
				rawClose(int(p.fd))
				p.http.release(&bufs)
				p.timedOut()
				continue
			}
			// Writable with no error or hang-up is connected: only a
			// failed connect needs SO_ERROR read.
			var err error
			if p.expired {
				err = os.ErrDeadlineExceeded
			} else if p.events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
				err = connectErr(int(p.fd))
			}
			rawClose(int(p.fd)) // also out of the epoll set
			p.end(err)
		}
		for i := range ready {
			ready[i] = httpReady{}
		}
	}
}

// connectErr returns the error of fd's connect, nil when it has none.
func connectErr(fd int) error {
	switch soErr, err := rawSoError(fd); {
	case err != nil:
		return os.NewSyscallError("getsockopt", err)
	case soErr != 0:
		return os.NewSyscallError("connect", unix.Errno(soErr))
	}
	return nil
}

// removeLocked takes p out of flight; e.mu is held.
func (e *connectEngine) removeLocked(p *connectProbe) {
	e.inflight[p.fd] = nil
	e.byDue.Remove(p.idx)
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
	p.done(Result{RTT: rtt, Detail: describeErr(context.Background(), err, p.deadline.Sub(p.start)), Cause: localCause(err, p.addr)})
}

// Before orders connections in flight by deadline (timerheap.Item).
func (p *connectProbe) Before(o *connectProbe) bool { return p.deadline.Before(o.deadline) }

// SetIndex records p's place in connectEngine.byDue (timerheap.Item).
func (p *connectProbe) SetIndex(i int) { p.idx = i }
