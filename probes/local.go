package probes

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"

	"lbdns/check"
)

// A check fails for a reason local to the prober when the error of one of
// its system calls (socket, connect, sendmmsg, sendto, epoll_ctl) names a
// resource of the prober's own host, not the target: such a failure is
// marked with its check.Cause, and the health tracker abstains from it.
// ECONNREFUSED, ECONNRESET, timeouts and wrong answers are the target's.
//
// ENETUNREACH and EHOSTUNREACH are ambiguous: the local stack raises them
// synchronously when its routing table has no route (or an unreachable
// route) to the target, but a router on the way (an ICMP unreachable) or
// the last hop's failed neighbour resolution (a member down on the local
// segment) raises them too, after the SYN or the datagram went out: that
// is evidence about the target. The Go dialer reports both the same way,
// so an unreachable error is judged local only when the local stack
// confirms it: a UDP socket connected to the target (connect(2) on UDP
// sends nothing, it only looks the route up) fails too.

// localCause returns the cause of a check that failed with err probing
// target: CauseTarget unless err is one of the local errors above.
func localCause(err error, target netip.AddrPort) check.Cause {
	return classifyLocal(err, func() bool { return noLocalRoute(target) })
}

// classifyLocal is localCause with the route check injected: noRoute
// reports whether the local stack has no route to the target.
func classifyLocal(err error, noRoute func() bool) check.Cause {
	var errno syscall.Errno
	if err == nil || !errors.As(err, &errno) {
		return check.CauseTarget
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE:
		return check.CauseDescriptors
	case syscall.ENOBUFS, syscall.ENOMEM:
		return check.CauseMemory
	case syscall.EADDRNOTAVAIL:
		return check.CauseAddress
	case syscall.EPERM, syscall.EACCES:
		return check.CauseForbidden
	case syscall.ENETUNREACH, syscall.EHOSTUNREACH:
		if noRoute() {
			return check.CauseNoRoute
		}
	}
	return check.CauseTarget
}

// noLocalRoute reports whether the local stack refuses to route to
// target: a UDP socket connected to it fails with an unreachable (or a
// prohibit route's EACCES), or no socket can be opened to ask (the
// prober is out of descriptors or memory: its own trouble either way).
func noLocalRoute(target netip.AddrPort) bool {
	if !target.IsValid() {
		return false
	}
	port := target.Port()
	if port == 0 {
		port = 9 // discard: connect(2) on UDP needs a port, sends nothing
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(target.Addr(), port)))
	if err == nil {
		c.Close()
		return false
	}
	return classifyLocal(err, func() bool { return true }) != check.CauseTarget
}

// failure is the Result of a check started at start that failed with err
// (detail its text), marked local when err is (localCause).
func failure(start time.Time, detail string, err error, target netip.AddrPort) Result {
	return Result{RTT: time.Since(start), Detail: detail, Cause: localCause(err, target)}
}
