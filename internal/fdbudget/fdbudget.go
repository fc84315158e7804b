// Package fdbudget is the daemon's one descriptor budget: a reserve of
// descriptors below RLIMIT_NOFILE (soft) that the listeners for clients
// (the GSLB responder's TCP, the status endpoint, the control socket, the
// dnstap intake) may not take, so that the health probes, which need a
// descriptor per check, can always open theirs; and a Listener that
// enforces the reserve and a connection cap on any net.Listener.
//
// Descriptors are allocated lowest first, so a connection whose
// descriptor is numbered n means n descriptors below it are open: a new
// connection numbered at or above the ceiling (the limit less the reserve)
// is closed at once.
package fdbudget

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultReserve is the default number of descriptors kept for the rest
// of the daemon.
const DefaultReserve = 1024

// Reasons a Listener closes a new connection at once.
const (
	// ReasonLimit: the listener's connection cap was reached.
	ReasonLimit = "limit"
	// ReasonDescriptors: the process was within the reserve of its
	// descriptor limit.
	ReasonDescriptors = "descriptors"
)

// Budget is the descriptor reserve of one process. The zero value checks
// nothing.
type Budget struct {
	ceiling int
}

// New returns the budget that keeps reserve descriptors (DefaultReserve
// when not positive) below the process's RLIMIT_NOFILE soft limit, at
// most half of it; with no limit known, or none that matters (above
// 2^31), it checks nothing.
func New(reserve int) Budget {
	if reserve <= 0 {
		reserve = DefaultReserve
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur >= 1<<31 {
		return Budget{}
	}
	limit := int(rl.Cur)
	return Budget{ceiling: limit - min(reserve, limit/2)}
}

// Ceiling is the lowest descriptor number a new connection may not have;
// 0 when the budget checks nothing.
func (b Budget) Ceiling() int { return b.ceiling }

// Admits reports whether c may be kept: its descriptor is below the
// ceiling (or unknown, or the budget checks nothing).
func (b Budget) Admits(c net.Conn) bool {
	if b.ceiling <= 0 {
		return true
	}
	return FD(c) < b.ceiling
}

// FD returns the descriptor number of c, or -1 when it has none.
func FD(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return -1
	}
	return fd
}

// Listener is a net.Listener whose Accept closes at once, and counts, the
// connections beyond Max open at once or outside the Budget, and waits for
// the next; the connections it returns free their place when closed.
type Listener struct {
	net.Listener
	budget Budget
	slots  chan struct{}
	// refused is called with the reason of each connection closed at
	// once; nil: not counted.
	refused func(reason string)
	open    atomic.Int64
}

// NewListener returns ln bounded to max connections open at once (no cap
// when not positive) and by b; refused, when set, is called with the
// reason (ReasonLimit, ReasonDescriptors) of every connection closed at
// once.
func NewListener(ln net.Listener, max int, b Budget, refused func(reason string)) *Listener {
	l := &Listener{Listener: ln, budget: b, refused: refused}
	if max > 0 {
		l.slots = make(chan struct{}, max)
	}
	return l
}

// Accept returns the next connection the cap and the budget admit.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.budget.Admits(c) {
			l.refuse(c, ReasonDescriptors)
			continue
		}
		if l.slots == nil {
			l.open.Add(1)
			return &conn{Conn: c, l: l}, nil
		}
		select {
		case l.slots <- struct{}{}:
			l.open.Add(1)
			return &conn{Conn: c, l: l}, nil
		default:
			l.refuse(c, ReasonLimit)
		}
	}
}

// Open returns the connections accepted and not yet closed.
func (l *Listener) Open() int { return int(l.open.Load()) }

// refuse closes c, counted under reason.
func (l *Listener) refuse(c net.Conn, reason string) {
	if l.refused != nil {
		l.refused(reason) // counted before the client can tell
	}
	c.Close()
}

// conn is a connection of a Listener: closing it frees its place.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

// Close closes the connection and frees its place, once.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.l.slots != nil {
			<-c.l.slots
		}
	})
	return err
}

// Unwrap returns the connection the listener accepted (for a caller that
// needs its type: a *net.UnixConn's peer credentials).
func (c *conn) Unwrap() net.Conn { return c.Conn }
