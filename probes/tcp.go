package probes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// tcpChecker is the checker of kind "tcp" for one target: a connection,
// optionally a TLS handshake, optionally a request written and the first
// bytes of the reply matched, all parsed from the profile once.
type tcpChecker struct {
	addr    string // host:port dialed
	target  netip.AddrPort
	timeout time.Duration
	send    []byte
	expect  *regexp.Regexp // nil: connecting is the check
	maxRead int
	tls     *tls.Config // nil: plain TCP
}

// newTCPChecker is the Constructor of kind "tcp".
func newTCPChecker(chk *configs.Check, target netip.AddrPort, deps Deps) (check.Checker, error) {
	s := chk.TCP
	if s == nil {
		return nil, errors.New("no tcp settings")
	}
	ap, err := kindTarget(chk, target, s.Port)
	if err != nil {
		return nil, err
	}
	c := &tcpChecker{addr: ap.String(), target: ap, timeout: chk.Timeout.Duration, send: []byte(s.Send), maxRead: s.MaxRead}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	if c.maxRead <= 0 {
		c.maxRead = configs.DefaultTCPMaxRead
	}
	if s.Expect != "" {
		if c.expect, err = regexp.Compile(s.Expect); err != nil {
			return nil, fmt.Errorf("expect: %w", err)
		}
	}
	if s.TLS {
		if c.tls, err = tcpTLS(s, ap.Addr()); err != nil {
			return nil, err
		}
	}
	if c.connectOnly() && deps.tcp.async(ap) {
		return &tcpConnectChecker{tcpChecker: c, engine: deps.tcp}, nil
	}
	return c, nil
}

// ProbeAddr returns the address connected to (check.Addressed).
func (c *tcpChecker) ProbeAddr() netip.AddrPort { return c.target }

// tcpConnectChecker is a tcp checker that only connects, with StartCheck
// (monitor.AsyncChecker) through its Builder's connectEngine.
type tcpConnectChecker struct {
	*tcpChecker
	engine *connectEngine
}

// StartCheck starts one connect through the engine; done gets the result
// by deadline (plus the engine's tick).
func (c *tcpConnectChecker) StartCheck(deadline time.Time, done func(check.Result)) {
	c.engine.start(c.target, deadline, done)
}

// connectOnly reports whether connecting is the whole check.
func (c *tcpChecker) connectOnly() bool {
	return c.tls == nil && len(c.send) == 0 && c.expect == nil
}

// kindTarget returns the address a check of a connection kind probes:
// target, with its port replaced by port when port is set.
func kindTarget(chk *configs.Check, target netip.AddrPort, port int) (netip.AddrPort, error) {
	if port != 0 {
		target = netip.AddrPortFrom(target.Addr(), uint16(port))
	}
	if !target.Addr().IsValid() {
		return target, errors.New("no target address")
	}
	if target.Port() == 0 {
		return target, fmt.Errorf("no port: set port in [check.%s.%s] or give the target one", chk.Name, chk.Kind)
	}
	return target, nil
}

// tcpTLS builds the client TLS settings of a tcp check with tls: the
// server name defaults to the target's address.
func tcpTLS(s *configs.TCPCheck, addr netip.Addr) (*tls.Config, error) {
	name := s.ServerName
	if name == "" {
		name = addr.Unmap().String()
	}
	return clientTLS(tlsSettings{serverName: name, caFile: s.CAFile, insecure: s.InsecureSkipVerify})
}

// Check probes the target once (check.Checker).
func (c *tcpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, deadline, cancel := bounded(ctx, c.timeout)
	defer cancel()
	budget := deadline.Sub(start)
	fail := func(detail string) Result { return Result{RTT: time.Since(start), Detail: detail} }
	failErr := func(detail string, err error) Result { return failure(start, detail, err, c.target) }

	if c.connectOnly() {
		// Connecting is the check: no deadline to bind to a connection
		// closed at once.
		conn, err := dialAddr(ctx, "tcp", c.addr)
		if err != nil {
			return failErr(describeErr(ctx, err, budget), err)
		}
		conn.Close()
		return Result{OK: true, RTT: time.Since(start), Detail: "connected"}
	}
	conn, release, err := dialBound(ctx, "tcp", c.addr, deadline)
	if err != nil {
		return failErr(describeErr(ctx, err, budget), err)
	}
	defer release()
	what := "connected"
	if c.tls != nil {
		tc := tls.Client(conn, c.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(describeTLSErr(ctx, err, budget, start))
		}
		conn = tc
		what = "tls " + tls.VersionName(tc.ConnectionState().Version)
	}
	if len(c.send) > 0 {
		if _, err := conn.Write(c.send); err != nil {
			return failErr("send: "+describeErr(ctx, err, budget), err)
		}
	}
	if c.expect == nil {
		return Result{OK: true, RTT: time.Since(start), Detail: what}
	}
	buf := make([]byte, c.maxRead)
	n := 0
	for n < len(buf) {
		m, err := conn.Read(buf[n:])
		n += m
		if c.expect.Match(buf[:n]) {
			return Result{OK: true, RTT: time.Since(start), Detail: fmt.Sprintf("%s, expect matched in %d bytes", what, n)}
		}
		if err != nil {
			miss := c.missed(buf[:n])
			switch {
			case errors.Is(err, io.EOF):
				return fail(miss + " (connection closed)")
			case n == 0:
				return fail(describeErr(ctx, err, budget) + ": nothing read, expect /" + c.expect.String() + "/")
			}
			return fail(describeErr(ctx, err, budget) + ": " + miss)
		}
	}
	return fail(c.missed(buf[:n]))
}

// missed says that expect did not match got.
func (c *tcpChecker) missed(got []byte) string {
	return fmt.Sprintf("expect /%s/ did not match first %d bytes %s", c.expect, len(got), quoteBytes(got))
}

// quoteBytes quotes the start of b for a detail.
func quoteBytes(b []byte) string {
	const show = 32
	if len(b) > show {
		return fmt.Sprintf("%q...", b[:show])
	}
	return fmt.Sprintf("%q", b)
}

// bindDeadline sets conn's deadline to deadline and makes cancelling ctx
// end any read or write at once; the returned func stops the watch.
func bindDeadline(ctx context.Context, conn net.Conn, deadline time.Time) func() bool {
	_ = conn.SetDeadline(deadline)
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
}

// dialBound connects to addr over network ("tcp" or "udp") within ctx,
// the connection bound to deadline and to ctx's end (bindDeadline);
// release closes it.
func dialBound(ctx context.Context, network, addr string, deadline time.Time) (net.Conn, func(), error) {
	conn, err := dialAddr(ctx, network, addr)
	if err != nil {
		return nil, nil, err
	}
	stop := bindDeadline(ctx, conn, deadline)
	return conn, func() { stop(); conn.Close() }, nil
}

// dialAddr connects to addr (host:port) over network ("tcp" or "udp")
// within ctx, without TCP keep-alives: a probe's connection lives for one
// exchange, and setting them up is four system calls for nothing.
// (Dialer.DialTCP with a netip.AddrPort would skip parsing addr, but it
// binds the socket to the zero local address first, an explicit bind to
// port 0 that the kernel serves far more slowly than connect's own choice
// of port: with thousands of checks a second it took nine tenths of the
// daemon's CPU in bench/gslb: bench/README.md, "Where the CPU of a TCP or
// HTTP check went, and the figures after".)
func dialAddr(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{KeepAlive: -1}
	return d.DialContext(ctx, network, addr)
}

// describeTLSErr turns a TLS handshake error into a Detail that names
// why the server was not trusted.
func describeTLSErr(ctx context.Context, err error, budget time.Duration, now time.Time) string {
	var (
		unknown   x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		verifyErr *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &unknown):
		return "tls: x509: unknown authority"
	case errors.As(err, &hostname):
		return "tls: x509: certificate is not valid for " + hostname.Host
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired && invalid.Cert != nil:
		if now.After(invalid.Cert.NotAfter) {
			return fmt.Sprintf("tls: certificate expired %s ago", ago(now.Sub(invalid.Cert.NotAfter)))
		}
		return fmt.Sprintf("tls: certificate not valid before %s", invalid.Cert.NotBefore.UTC().Format(time.RFC3339))
	case errors.As(err, &invalid):
		return "tls: x509: " + invalid.Error()
	case errors.As(err, &verifyErr):
		return "tls: " + verifyErr.Err.Error()
	}
	return "tls handshake: " + describeErr(ctx, err, budget)
}

// ago renders a past duration coarsely ("3 days", "5h0m0s").
func ago(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return d.Round(time.Second).String()
}
