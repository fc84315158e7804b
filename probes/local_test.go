package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"lbdns/check"
)

// TestClassifyLocal: every errno of the prober's own trouble, as the
// system call and the dialer wrap it, is local with its cause; the
// target's evidence (refused, reset, timeouts) is not; an unreachable is
// local only when the local stack has no route.
func TestClassifyLocal(t *testing.T) {
	wrap := func(call string, errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError(call, errno)}
	}
	for _, tc := range []struct {
		name    string
		err     error
		noRoute bool
		want    check.Cause
	}{
		{"emfile socket", wrap("socket", syscall.EMFILE), false, check.CauseDescriptors},
		{"enfile socket", wrap("socket", syscall.ENFILE), false, check.CauseDescriptors},
		{"enobufs sendmmsg", os.NewSyscallError("sendmmsg", syscall.ENOBUFS), false, check.CauseMemory},
		{"enomem epoll_ctl", os.NewSyscallError("epoll_ctl", syscall.ENOMEM), false, check.CauseMemory},
		{"eaddrnotavail connect", wrap("connect", syscall.EADDRNOTAVAIL), false, check.CauseAddress},
		{"eperm sendto", os.NewSyscallError("sendto", syscall.EPERM), false, check.CauseForbidden},
		{"eacces connect", wrap("connect", syscall.EACCES), false, check.CauseForbidden},
		{"enetunreach no route", wrap("connect", syscall.ENETUNREACH), true, check.CauseNoRoute},
		{"ehostunreach no route", wrap("connect", syscall.EHOSTUNREACH), true, check.CauseNoRoute},
		{"ehostunreach routed (icmp, arp)", wrap("connect", syscall.EHOSTUNREACH), false, check.CauseTarget},
		{"enetunreach routed (icmp)", wrap("connect", syscall.ENETUNREACH), false, check.CauseTarget},
		{"wrapped by a batch engine", fmt.Errorf("batch engine: %w", os.NewSyscallError("socket", syscall.EMFILE)), false, check.CauseDescriptors},
		{"econnrefused", wrap("connect", syscall.ECONNREFUSED), true, check.CauseTarget},
		{"econnreset", wrap("read", syscall.ECONNRESET), true, check.CauseTarget},
		{"etimedout", wrap("connect", syscall.ETIMEDOUT), true, check.CauseTarget},
		{"deadline", os.ErrDeadlineExceeded, true, check.CauseTarget},
		{"context deadline", context.DeadlineExceeded, true, check.CauseTarget},
		{"no errno", errors.New("id mismatch"), true, check.CauseTarget},
		{"nil", nil, true, check.CauseTarget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyLocal(tc.err, func() bool { return tc.noRoute }); got != tc.want {
				t.Errorf("classifyLocal(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestLocalRouteCheck: an unreachable error for a target the local stack
// routes (loopback) is the target's.
func TestLocalRouteCheck(t *testing.T) {
	err := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}
	if got := localCause(err, netip.MustParseAddrPort("127.0.0.1:53")); got != check.CauseTarget {
		t.Errorf("EHOSTUNREACH to routed 127.0.0.1 = %v, want target", got)
	}
}

// TestResultLocal: only a failure with a local cause is Local.
func TestResultLocal(t *testing.T) {
	for _, tc := range []struct {
		r    check.Result
		want bool
	}{
		{check.Result{}, false},
		{check.Result{Cause: check.CauseDescriptors}, true},
		{check.Result{OK: true, Cause: check.CauseDescriptors}, false},
	} {
		if got := tc.r.Local(); got != tc.want {
			t.Errorf("%+v.Local() = %v, want %v", tc.r, got, tc.want)
		}
	}
}

// TestRefusedIsTarget: a refused connect through the connect engine (a
// closed loopback port) is the target's failure, not the prober's.
func TestRefusedIsTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	e := newConnectEngine()
	got := make(chan check.Result, 1)
	e.start(addr, time.Now().Add(time.Second), func(r check.Result) { got <- r })
	r := <-got
	if r.OK || r.Local() {
		t.Errorf("refused connect: %+v, want a failure of the target's", r)
	}
}
