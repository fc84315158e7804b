package probes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"lbdns/check"
	"lbdns/configs"
)

// udpChecker is the checker of kind "udp" for one target: one datagram
// sent and one reply awaited (and matched), parsed from the profile once.
type udpChecker struct {
	addr    string // host:port
	target  netip.AddrPort
	timeout time.Duration
	payload []byte
	expect  *regexp.Regexp // nil: any reply
}

// newUDPChecker is the Constructor of kind "udp".
func newUDPChecker(chk *configs.Check, target netip.AddrPort, _ Deps) (check.Checker, error) {
	s := chk.UDP
	if s == nil {
		return nil, errors.New("no udp settings")
	}
	ap, err := kindTarget(chk, target, s.Port)
	if err != nil {
		return nil, err
	}
	c := &udpChecker{addr: ap.String(), target: ap, timeout: chk.Timeout.Duration}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	if c.payload, err = s.PayloadBytes(); err != nil {
		return nil, fmt.Errorf("payload_hex: %w", err)
	}
	if s.Expect != "" {
		if c.expect, err = regexp.Compile(s.Expect); err != nil {
			return nil, fmt.Errorf("expect: %w", err)
		}
	}
	return c, nil
}

// ProbeAddr returns the address probed (check.Addressed).
func (c *udpChecker) ProbeAddr() netip.AddrPort { return c.target }

// Check probes the target once (check.Checker). An ICMP port unreachable
// in answer fails it with "connection refused"; silence fails it by
// timeout ("timeout after 1s: no reply"), which proves less: see
// CONFIGURATION.md.
func (c *udpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, deadline, cancel := bounded(ctx, c.timeout)
	defer cancel()
	budget := deadline.Sub(start)
	fail := func(detail string) Result { return Result{RTT: time.Since(start), Detail: detail} }
	failErr := func(detail string, err error) Result { return failure(start, detail, err, c.target) }

	conn, release, err := dialBound(ctx, "udp", c.addr, deadline)
	if err != nil {
		return failErr(describeErr(ctx, err, budget), err)
	}
	defer release()
	if _, err := conn.Write(c.payload); err != nil {
		return failErr("send: "+describeErr(ctx, err, budget), err)
	}
	buf := make([]byte, 64<<10)
	n, err := conn.Read(buf)
	if err != nil {
		detail := describeErr(ctx, err, budget)
		if strings.HasPrefix(detail, "timeout") {
			detail += ": no reply"
		}
		return fail(detail)
	}
	if c.expect != nil && !c.expect.Match(buf[:n]) {
		return fail(fmt.Sprintf("reply does not match /%s/: %d bytes %s", c.expect, n, quoteBytes(buf[:n])))
	}
	return Result{OK: true, RTT: time.Since(start), Detail: fmt.Sprintf("reply of %d bytes", n)}
}
