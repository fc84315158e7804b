package probes

import (
	"context"
	"errors"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"lbdns/check"
)

// httpBufSize is the first size of an http check's read buffer; it grows
// (to head and max_body) only for a response that needs it.
const httpBufSize = 4096

// httpRequest is the state of one plain-HTTP check in the connectEngine:
// its request's bytes sent so far, the response read so far and its
// parse, and the result once it is finished.
type httpRequest struct {
	c         *httpChecker
	connected bool
	sent      int
	buf       []byte
	resp      respCollector
	finished  bool
	res       check.Result
}

// httpReady is an http check with events to handle.
type httpReady struct {
	p      *connectProbe
	events uint32
}

// bufferPool keeps the read buffers of the http checks of one engine's
// goroutine, which alone uses it, and what their responses' tries share.
type bufferPool struct {
	free    [][]byte
	scratch respScratch
}

// get returns an empty buffer of httpBufSize bytes' capacity.
func (b *bufferPool) get() []byte {
	if n := len(b.free); n > 0 {
		buf := b.free[n-1]
		b.free[n-1] = nil
		b.free = b.free[:n-1]
		return buf
	}
	return make([]byte, 0, httpBufSize)
}

// put keeps buf for another check, unless it grew.
func (b *bufferPool) put(buf []byte) {
	if cap(buf) == httpBufSize && len(b.free) < 1024 {
		b.free = append(b.free, buf[:0])
	}
}

// release gives r's buffer back.
func (r *httpRequest) release(bufs *bufferPool) {
	if r.buf != nil {
		bufs.put(r.buf)
		r.buf = nil
	}
}

// stepHTTP does the I/O that events allow for p, an http check: end the
// connect, write the request, read and parse the response. It reports
// whether p is finished (its result in p.http.res); p's socket is left
// open.
func (p *connectProbe) stepHTTP(events uint32, bufs *bufferPool) bool {
	r := p.http
	fd := int(p.fd)
	if !r.connected {
		if events&unix.EPOLLERR != 0 {
			if soErr, err := rawSoError(fd); err != nil {
				return p.finish(os.NewSyscallError("getsockopt", err), true)
			} else if soErr != 0 {
				return p.finish(os.NewSyscallError("connect", unix.Errno(soErr)), true)
			}
		}
		if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return false
		}
		r.connected = true
	}
	for req := r.c.wire; r.sent < len(req); {
		n, err := rawWrite(fd, req[r.sent:])
		switch {
		case errors.Is(err, unix.EAGAIN):
			return false
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return p.finish(p.opError("write", err), false)
		}
		r.sent += n
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
		return false // the response's arrival is the next edge
	}
	limit := rawLimit(r.c.maxBody)
	for {
		if r.buf == nil {
			r.buf = bufs.get()
		}
		if len(r.buf) == cap(r.buf) {
			if cap(r.buf) >= limit {
				return p.finish(errTooLong, false)
			}
			grown := make([]byte, len(r.buf), min(2*cap(r.buf), limit))
			copy(grown, r.buf)
			r.buf = grown
		}
		space := cap(r.buf) - len(r.buf)
		n, err := rawRead(fd, r.buf[len(r.buf):cap(r.buf)])
		switch {
		case errors.Is(err, unix.EAGAIN):
			return false
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return p.finish(p.opError("read", err), false)
		}
		r.buf = r.buf[:len(r.buf)+n]
		done, code, body, err := r.resp.feed(r.buf, n == 0, &bufs.scratch)
		switch {
		case err != nil:
			return p.finish(err, false)
		case done:
			r.finished = true
			detail, ok := r.c.verdict(code, body)
			r.res = check.Result{OK: ok, RTT: time.Since(p.start), Detail: detail}
			return true
		case n < space && events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0:
			// A short read emptied the socket: more data, or its end, is
			// the next edge.
			return false
		}
	}
}

// opError wraps a read or write error as net.Conn words it.
func (p *connectProbe) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Addr: net.TCPAddrFromAddrPort(p.addr), Err: os.NewSyscallError(op, err)}
}

// finish ends p, an http check, with err: connecting when dial, else
// reading the head or (once it is read) the body. It returns true.
func (p *connectProbe) finish(err error, dial bool) bool {
	r := p.http
	r.finished = true
	if dial {
		err = &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(p.addr), Err: err}
	}
	r.res = check.Result{RTT: time.Since(p.start), Detail: p.httpDetail(err), Cause: localCause(err, p.addr)}
	return true
}

// timedOut ends p, an http check, at its deadline.
func (p *connectProbe) timedOut() {
	p.http.finished = true
	p.done(check.Result{RTT: time.Since(p.start), Detail: p.httpDetail(os.ErrDeadlineExceeded)})
}

// httpDetail describes err as the http checker does: "read body: " first
// once the response's head is read.
func (p *connectProbe) httpDetail(err error) string {
	d := describeErr(context.Background(), err, p.deadline.Sub(p.start))
	if p.http.resp.headDone {
		return "read body: " + d
	}
	return d
}
