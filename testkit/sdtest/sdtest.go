// Package sdtest is a fake systemd for tests: a real NOTIFY_SOCKET
// datagram socket that collects what a process sends over sd_notify.
package sdtest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Socket is a NOTIFY_SOCKET the test listens on.
type Socket struct {
	t    testing.TB
	conn *net.UnixConn
}

// Listen creates a unixgram socket in a temporary directory and points
// NOTIFY_SOCKET at it (t.Setenv: the test must not be parallel). With
// watchdog > 0 it also sets WATCHDOG_USEC to it and WATCHDOG_PID to this
// process, as systemd does for a unit with WatchdogSec.
func Listen(t testing.TB, watchdog time.Duration) *Socket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify") // short: a socket path has ~100 bytes
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	if watchdog > 0 {
		t.Setenv("WATCHDOG_USEC", strconv.FormatInt(watchdog.Microseconds(), 10))
		t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	}
	return &Socket{t: t, conn: conn}
}

// Drain returns every message already received, oldest first, without
// waiting (usable in a testing/synctest bubble, where a read deadline
// would never come).
func (s *Socket) Drain() []string {
	s.t.Helper()
	raw, err := s.conn.SyscallConn()
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	buf := make([]byte, 4096)
	for {
		var n int
		var rerr error
		if err := raw.Control(func(fd uintptr) { n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT) }); err != nil {
			s.t.Fatal(err)
		}
		if errors.Is(rerr, unix.EAGAIN) {
			return out
		}
		if rerr != nil {
			s.t.Fatal(rerr)
		}
		out = append(out, string(buf[:n]))
	}
}

// Next waits up to timeout (real time) for the next message; "" when none
// came.
func (s *Socket) Next(timeout time.Duration) string {
	s.t.Helper()
	if err := s.conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		s.t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := s.conn.Read(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ""
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return string(buf[:n])
}
