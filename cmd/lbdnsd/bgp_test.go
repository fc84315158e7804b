//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"lbdns/testkit/bird"
)

// drainConfig is a GSLB-only host whose responder listens on %[2]s
// (port %[3]d), announced to the router at %[4]s with drain_on_stop.
const drainConfig = `
[daemon]
state_dir = "%[1]s/state"
control_socket = "%[1]s/ctl.sock"
status_listen = ""

[check.web]
interval = "1s"
timeout = "100ms"

[check.web.dns]
qname = "www.example."

[[gslb.pool]]
name = "www"
monitors = ["web"]
algorithm = "all"

[[gslb.pool.member]]
name = "www-1"
address = "192.0.2.80"
probe_address = "127.0.0.9"

[[gslb.zone]]
name = "gslb.example"
ns = ["ns1.gslb.example."]

[[gslb.name]]
name = "www.gslb.example"

[[gslb.name.policy]]
pool = "www"

[gslb.server]
listen = ["%[2]s:%[3]d"]

[bgp]
router_id = %[2]q
local_as = 65001
listen_port = -1
communities_up = ["65001:100"]
drain_on_stop = true
drain_on_stop_delay = "2s"

[[bgp.peer]]
address = %[4]q
as = 65000
hold_time = "3s"
keepalive = "1s"
`

// TestSIGTERMDrains runs lbdnsd (its main's run, in this process) with
// [bgp] drain_on_stop against BIRD, and sends the process SIGTERM: at
// the router the route of the responder's listen address first gets
// GRACEFUL_SHUTDOWN (65535,0) while lbdnsd still runs, then goes, and
// lbdnsd exits 0 no sooner than drain_on_stop_delay (2 s).
func TestSIGTERMDrains(t *testing.T) {
	r := bird.Start(t, bird.Options{AS: 65000, PeerAS: 65001})
	addr := r.Host().RootAddrV4()
	pc, err := net.ListenPacket("udp4", addr.String()+":0") // a free port on the address
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	_ = pc.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, drainConfig, dir, addr, port, r.Host().AddrV4()), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := make(chan int, 1)
	go func() { code <- run([]string{"-config", cfg}, &stdout, &stderr) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			select {
			case <-code:
			default:
				_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
				<-code
			}
		}
		if t.Failed() {
			t.Logf("lbdnsd's stderr:\n%s", stderr.String())
		}
	})
	prefix := addr.String() + "/32"
	r.WaitRoute("the listen address announced", prefix, "100", "(65001,100)")

	start := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r.WaitRoute("SIGTERM: GRACEFUL_SHUTDOWN first", prefix, "100", "(65001,100) (65535,0)")
	select {
	case c := <-code:
		stopped = true
		t.Fatalf("lbdnsd exited (%d) while its route was still marked, %v after SIGTERM", c, time.Since(start))
	default:
	}
	select {
	case c := <-code:
		stopped = true
		if c != 0 {
			t.Fatalf("lbdnsd exited %d", c)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("lbdnsd did not exit within 15 s of SIGTERM")
	}
	took := time.Since(start)
	r.WaitGone("after the drain: withdrawn", prefix)
	if took < 2*time.Second {
		t.Errorf("lbdnsd exited %v after SIGTERM, before drain_on_stop_delay (2s)", took)
	}
	t.Logf("SIGTERM to exit with drain_on_stop_delay 2s: %v", took)
}
