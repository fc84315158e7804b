//go:build !linux

package probes

import (
	"context"
	"net/netip"
	"time"

	"lbdns/check"
)

// connectEngine runs connect-only tcp checks without a goroutine each on
// Linux only; elsewhere they run synchronously.
type connectEngine struct{}

// newConnectEngine returns nil: no engine.
func newConnectEngine() *connectEngine { return nil }

// async reports false: no engine.
func (*connectEngine) async(netip.AddrPort) bool { return false }

// start is never called without an engine; it checks in a goroutine.
func (*connectEngine) start(addr netip.AddrPort, deadline time.Time, done func(check.Result)) {
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		c := &tcpChecker{addr: addr.String(), target: addr, timeout: time.Until(deadline)}
		done(c.Check(ctx))
	}()
}

// startHTTP is never called without an engine; it checks in a goroutine.
func (*connectEngine) startHTTP(_ netip.AddrPort, c *httpChecker, deadline time.Time, done func(check.Result)) {
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		done(c.Check(ctx))
	}()
}
