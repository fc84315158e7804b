package gslb_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/monitor"
	"lbdns/probes"
	"lbdns/report"
)

// lockedBuffer is a bytes.Buffer safe for the logger's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMonitorLogsProbedAddress: a tcp monitor of a member without a port
// probes the check's port, and its state change is logged with that
// address (addr=127.0.0.1:PORT), not the member's address with port 0.
func TestMonitorLogsProbedAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	cfg, err := configs.Parse(fmt.Appendf(nil, `
[check.web]
kind = "tcp"
interval = "200ms"
timeout = "150ms"
rise = 1
fall = 1
[check.web.tcp]
port = %d

[[gslb.pool]]
name = "www"
monitors = ["web"]

[[gslb.pool.member]]
name = "www-1"
address = "127.0.0.1"
`, port), "probeaddr.toml")
	if err != nil {
		t.Fatal(err)
	}
	targets, err := gslb.Targets(cfg, probes.NewBuilder(probes.Deps{}).Build)
	if err != nil || len(targets) != 1 {
		t.Fatalf("targets %v, err %v", targets, err)
	}
	want := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	if targets[0].Addr != want {
		t.Errorf("target addr %v, want %v", targets[0].Addr, want)
	}

	var logs lockedBuffer
	metrics, err := report.NewMetrics(prometheus.NewRegistry(), func(context.Context) report.Input { return report.Input{} })
	if err != nil {
		t.Fatal(err)
	}
	j := report.NewJournal(slog.New(slog.NewTextHandler(&logs, nil)), control.NewEventLog(16, nil), metrics)
	events := make(chan monitor.Event, 1)
	m := monitor.New(monitor.Options{OnEvent: func(ev monitor.Event) {
		select {
		case events <- ev:
		default:
		}
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	m.Update(targets)
	ev := <-events // the first verdict (up, or down: the address is the point)
	cancel()
	<-done
	j.StateChange(ev)
	line := logs.String()
	if !strings.Contains(line, "msg=\"backend state change\"") || !strings.Contains(line, "addr="+want.String()+" ") {
		t.Errorf("log line %q, want addr=%v", line, want)
	}
}
