package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lbdns/testkit/sdtest"
)

const dryRunConfig = `
[daemon]
state_dir = %[1]q
control_socket = "%[1]s/ctl.sock"
status_listen = ""

[[vip]]
name    = "dns-v4"
address = "192.0.2.53"
pool    = "main"
forwarding = "nat"

[[pool]]
name    = "main"
members = ["bind-1", "unbound-1"]
check   = "recursive"

[[resolver]]
name    = "bind-1"
address = "127.0.0.1:1"
vendor  = "bind"

[[resolver]]
name    = "unbound-1"
address = "127.0.0.1:2"
vendor  = "unbound"

[check.recursive.dns]
zone = "probe.example.net"
`

// next waits for the next message that is not a watchdog ping.
func next(sock *sdtest.Socket, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for left := timeout; left > 0; left = time.Until(deadline) {
		if m := sock.Next(left); m != "WATCHDOG=1" {
			return m
		}
	}
	return ""
}

// TestRunUnderSystemd runs lbdnsd (dry run) as a Type=notify unit would,
// with a real NOTIFY_SOCKET and a watchdog: READY=1 once the loop runs,
// watchdog pings, RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on
// SIGTERM, and a clean exit.
func TestRunUnderSystemd(t *testing.T) {
	sock := sdtest.Listen(t, 8*time.Second) // pings every 2 s while the loop ticks (every 1 s)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, dryRunConfig, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := make(chan int, 1)
	go func() { code <- run([]string{"-config", cfg, "-dry-run"}, &stdout, &stderr) }()
	stopped := false
	t.Cleanup(func() {
		if stopped {
			return
		}
		select {
		case <-code: // exited on its own: its signal handlers are gone
		default:
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
			<-code
		}
	})

	if m := sock.Next(10 * time.Second); m != "READY=1\nSTATUS=running" {
		t.Fatalf("first message %q, want READY=1 (stderr: %s)", m, stderr.String())
	}
	ping := ""
	for deadline := time.Now().Add(5 * time.Second); ping != "WATCHDOG=1" && time.Now().Before(deadline); {
		ping = sock.Next(time.Until(deadline))
	}
	if ping != "WATCHDOG=1" {
		t.Fatalf("no watchdog ping within 5 s (last message %q)", ping)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if m := next(sock, 5*time.Second); !strings.HasPrefix(m, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Fatalf("after SIGHUP got %q, want RELOADING=1 with MONOTONIC_USEC", m)
	}
	if m := next(sock, 5*time.Second); m != "READY=1\nSTATUS=running" {
		t.Fatalf("after the reload got %q, want READY=1", m)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := next(sock, 5*time.Second); !strings.HasPrefix(m, "STOPPING=1") {
		t.Fatalf("after SIGTERM got %q, want STOPPING=1", m)
	}
	select {
	case c := <-code:
		stopped = true
		if c != 0 {
			t.Fatalf("lbdnsd exited %d; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lbdnsd did not exit within 10 s of SIGTERM")
	}
}
