package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/responder"
	"lbdns/testkit/poll"
	"lbdns/testkit/testlog"
	"lbdns/vip"
)

// freePort returns a port free on 127.0.0.1 for UDP and TCP (at the time
// of asking).
func freePort(t testing.TB) int {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		pc.Close()
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port for udp and tcp")
	return 0
}

// counterValue sums the values of the series of family name in reg whose labels
// include label=value ("" matches every series).
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if label == "" || (l.GetName() == label && l.GetValue() == value) {
					sum += m.GetCounter().GetValue()
					break
				}
			}
		}
	}
	return sum
}

// serialOf reads the configuration version of the responder's serial
// file in dir.
func serialOf(dir string) (uint32, error) {
	data, err := os.ReadFile(filepath.Join(dir, "state", responder.SerialFile))
	if err != nil {
		return 0, err
	}
	var st struct {
		ConfigVersion uint32 `json:"config_version"`
	}
	err = json.Unmarshal(data, &st)
	return st.ConfigVersion, err
}

// TestGSLBResponderWired: with [gslb.server] listen set, the daemon serves
// DNS there (UDP and TCP), rebuilds the answer snapshot when a GSLB
// member's state changes, moves the persisted SOA serial on a reload that
// changes the served data, and closes the listeners when it stops.
func TestGSLBResponderWired(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	listen := fmt.Sprintf("\n[gslb.server]\nlisten = [\"127.0.0.1:%d\"]\n", port)
	write := func(weight int) string {
		return writeConfig(t, dir, fmt.Sprintf(gslbExtra, "www.example.", weight)+listen)
	}
	path := write(100)
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	h := start(t, path, vip.NewMemClient(), fp)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	ask := func(network string) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion("www.gslb.example.", dns.TypeA)
		c := &dns.Client{Net: network, Timeout: time.Second}
		r, _, err := c.Exchange(m, addr)
		return r, err
	}
	poll.Until(t, 5*time.Second, "the responder answering over udp", func() (bool, string) {
		r, err := ask("udp")
		if err != nil {
			return false, err.Error()
		}
		// Until the selection's snapshot is plugged in
		// (responder.DefaultBuilders), every name is REFUSED.
		return r.Rcode == dns.RcodeRefused, dns.RcodeToString[r.Rcode]
	})
	if r, err := ask("tcp"); err != nil || r.Rcode != dns.RcodeRefused {
		t.Errorf("over tcp: %v, %v", r, err)
	}

	reg := h.d.Registry()
	waitMember(t, h.d, "up")
	poll.Until(t, 5*time.Second, "a snapshot rebuilt for www-1 up", func() (bool, string) {
		n := counterValue(t, reg, "lbdns_gslb_snapshot_builds_total", "result", "ok")
		return n >= 2, fmt.Sprintf("%v builds", n)
	})
	if n := counterValue(t, reg, "lbdns_gslb_queries_total", "rcode", "REFUSED"); n < 2 {
		t.Errorf("%v REFUSED queries counted, want at least 2", n)
	}

	s1, err := serialOf(dir)
	if err != nil || s1 == 0 {
		t.Fatalf("serial file: %d, %v", s1, err)
	}
	write(250)
	if err := h.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "the serial moved by the reload", func() (bool, string) {
		s2, err := serialOf(dir)
		return err == nil && s2 > s1, fmt.Sprintf("serial %d (was %d), %v", s2, s1, err)
	})

	h.stop()
	if _, err := ask("udp"); err == nil {
		t.Error("still answering after the daemon stopped")
	}
}

// TestConfigWarningsLogged: a configuration with a key that has no
// effect ([gslb.server] reply_cache) starts the daemon and reloads, and
// each load logs the warning with the file, the key's line and the key.
func TestConfigWarningsLogged(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "\n[gslb.server]\nreply_cache = true\n")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := 1 + strings.Count(string(doc[:strings.Index(string(doc), "reply_cache")]), "\n")
	var buf testlog.Buffer
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify,
		TickInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`level=WARN msg="config warning" config=%s line=%d key=gslb.server.reply_cache value=true warning="has no effect; the reply cache was removed"`, path, line)
	if n := strings.Count(buf.String(), want); n != 1 {
		t.Fatalf("the warning logged %d times at start, want once (%s):\n%s", n, want, buf.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), want); n != 2 {
		t.Errorf("the warning logged %d times after a reload, want twice:\n%s", n, buf.String())
	}
}
