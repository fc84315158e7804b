package probes

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
)

// maxResponseHeader is the most bytes of status line and headers a check
// reads before it fails.
const maxResponseHeader = 64 << 10

// probeTransport is the http.RoundTripper of the http checks: one
// connection per request, dialed, written and read in the caller's
// goroutine, closed with the response body. It has no proxy, no
// connection pool, no compression and no HTTP/2, and it starts no
// goroutine (http.Transport starts three per connection: dial, read loop
// and write loop, which cost more than the check itself). Cancelling the
// request's context, or its deadline passing, ends any dial, handshake,
// read or write at once.
type probeTransport struct {
	tls     *tls.Config // https: the check's settings; nil: defaults
	readers sync.Pool   // *bufio.Reader
	// first is the URL of the check's own request (prepare), head the
	// bytes Request.Write makes of it, written as they are.
	first *url.URL
	head  []byte
}

// prepare renders req, the check's own request (no body; its URL and
// headers never change), once: a request with its URL is then written as
// these bytes, without formatting them or a bufio.Writer per check.
func (t *probeTransport) prepare(req *http.Request) {
	out := *req
	out.Close = true
	var b bytes.Buffer
	if err := out.Write(&b); err != nil {
		return // written per request, which then fails the same way
	}
	t.first, t.head = req.URL, b.Bytes()
}

// RoundTrip sends req on a new connection and reads the response head
// (http.RoundTripper); the body reads from the connection, and closing it
// closes the connection.
func (t *probeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	u := req.URL
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("unsupported request %v", u)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	hostPort := net.JoinHostPort(u.Hostname(), port)
	conn, err := dialAddr(ctx, "tcp", hostPort)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	stop := bindDeadline(ctx, conn, deadline)
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		return nil, err
	}
	var state *tls.ConnectionState
	if u.Scheme == "https" {
		conf := t.tls
		if conf == nil {
			conf = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if conf.ServerName == "" {
			conf = conf.Clone()
			conf.ServerName = u.Hostname()
		}
		tc := tls.Client(conn, conf)
		err := tc.HandshakeContext(ctx)
		cs := tc.ConnectionState()
		if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.TLSHandshakeDone != nil {
			trace.TLSHandshakeDone(cs, err)
		}
		if err != nil {
			return fail(err)
		}
		conn, state = tc, &cs
	}
	if req.URL == t.first && t.head != nil {
		if _, err := conn.Write(t.head); err != nil {
			return fail(err)
		}
	} else {
		out := *req // Connection: close, without changing the caller's request
		out.Close = true
		if err := out.Write(conn); err != nil {
			return fail(err)
		}
	}
	lr := &headLimit{r: conn, n: maxResponseHeader}
	br, _ := t.readers.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReader(lr)
	} else {
		br.Reset(lr)
	}
	resp, err := readFinalResponse(br, lr, req)
	if err != nil {
		br.Reset(nil)
		t.readers.Put(br)
		return fail(err)
	}
	resp.TLS = state
	resp.Body = &probeBody{ReadCloser: resp.Body,
		release: func() { stop(); conn.Close() },
		reuse:   func() { br.Reset(nil); t.readers.Put(br) },
	}
	return resp, nil
}

// headLimit reads from r until n bytes are read (n < 0: no limit).
type headLimit struct {
	r io.Reader
	n int64
}

// Read reads from the connection within the limit (io.Reader).
func (l *headLimit) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, errors.New("response head too long")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// probeBody is a response body whose Close closes the connection, then
// the body (which then cannot read on: closing a body not read to its end
// would otherwise read the rest, up to the deadline), then returns the
// reader to its pool, once.
type probeBody struct {
	io.ReadCloser
	once    sync.Once
	release func() // closes the connection
	reuse   func() // returns the reader
}

// Close ends the body and its connection (io.Closer).
func (b *probeBody) Close() error {
	b.once.Do(func() {
		b.release()
		_ = b.ReadCloser.Close()
		b.reuse()
	})
	return nil
}
