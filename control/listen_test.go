package control

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenUnixModes(t *testing.T) {
	dir := filepath.Join(shortDir(t), "run", "lbdns")
	path := filepath.Join(dir, "ctl.sock")
	ln, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != SocketDirMode {
		t.Errorf("created directory mode = %v; want %v", got, SocketDirMode)
	}
	fi, err = os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		t.Errorf("%s is %v; want a socket", path, fi.Mode())
	}
	if got := fi.Mode().Perm(); got != SocketMode {
		t.Errorf("socket mode = %v; want %v", got, SocketMode)
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	conn.Close()
	ln.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket file left after Close: %v", err)
	}
}

func TestListenUnixLeavesExistingDirAlone(t *testing.T) {
	dir := shortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := ListenUnix(filepath.Join(dir, "ctl.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o755 {
		t.Errorf("existing directory's mode changed to %v", got)
	}
}

func TestListenUnixReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "ctl.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close() // a crashed daemon's socket: the file stays, nobody listens
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not there: %v", err)
	}
	ln, err := ListenUnix(path)
	if err != nil {
		t.Fatalf("ListenUnix over a stale socket: %v", err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	conn.Close()
	if err := <-accepted; err != nil {
		t.Errorf("the new listener did not get the connection: %v", err)
	}
}

func TestListenUnixRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "ctl.sock")
	first, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := ListenUnix(path)
	if err == nil {
		second.Close()
		t.Fatal("a second ListenUnix on a live socket succeeded")
	}
	if want := "another lbdnsd is listening on " + path; !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q; want %q", err, want)
	}
	// The first daemon's socket is untouched.
	go func() {
		if c, err := first.Accept(); err == nil {
			c.Close()
		}
	}()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the first listener's socket is gone: %v", err)
	}
	conn.Close()
}

func TestListenUnixRefusesNonSocket(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "ctl.sock")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ln, err := ListenUnix(path); err == nil {
		ln.Close()
		t.Fatal("ListenUnix over a regular file succeeded")
	} else if !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("error = %q; want it to say the path is not a socket", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep me" {
		t.Errorf("the regular file was changed: %q, %v", b, err)
	}

	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ln, err := ListenUnix(filepath.Join(notDir, "ctl.sock")); err == nil {
		ln.Close()
		t.Fatal("ListenUnix under a regular file succeeded")
	} else if !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("error = %q; want it to say not a directory", err)
	}
}
