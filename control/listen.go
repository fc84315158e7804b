package control

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Modes of the control socket and of the directory ListenUnix creates.
const (
	SocketMode    fs.FileMode = 0o600
	SocketDirMode fs.FileMode = 0o750
)

// ListenUnix listens on the control socket at path. It creates a missing
// parent directory with mode 0750 (an existing one is left alone),
// refuses a path another process is listening on, replaces a stale socket
// (one nobody listens on) but nothing that is not a socket, and leaves the
// socket with mode 0600. Closing the listener removes the socket file.
func ListenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	if err := clearStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket %s: listen: %w", path, err)
	}
	// The socket is created with the umask's mode and narrowed here;
	// the server also refuses peers that are neither root nor the
	// daemon's user, which covers the moment in between.
	if err := os.Chmod(path, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return ln, nil
}

// ensureDir creates dir with SocketDirMode when it is missing.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil:
		if !fi.IsDir() {
			return fmt.Errorf("control socket directory %s: not a directory", dir)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("control socket directory: %w", err)
	}
	if err := os.MkdirAll(dir, SocketDirMode); err != nil {
		return fmt.Errorf("control socket directory: %w", err)
	}
	// MkdirAll's mode is narrowed by the umask; set it exactly.
	if err := os.Chmod(dir, SocketDirMode); err != nil {
		return fmt.Errorf("control socket directory: %w", err)
	}
	return nil
}

// clearStale removes a socket file at path that nobody listens on. It
// fails when a process listens there or when path is not a socket.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control socket %s: exists and is not a socket (%s); remove it or choose another daemon.control_socket", path, fi.Mode().Type())
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return fmt.Errorf("another lbdnsd is listening on %s", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket %s: cannot tell whether it is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("control socket %s: remove stale socket: %w", path, err)
	}
	return nil
}
