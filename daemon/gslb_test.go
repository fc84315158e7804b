package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/gslb"
	"lbdns/monitor"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// gslbExtra is a GSLB pool whose member is judged by the dns check web,
// probed at its probe address 127.0.0.9 (port 53: kind dns).
const gslbExtra = `
[check.web]
interval = "100ms"
timeout = "50ms"
rise = 1
fall = 2

[check.web.dns]
qname = %q

[[gslb.pool]]
name = "www"
monitors = ["web"]

[[gslb.pool.member]]
name = "www-1"
address = "192.0.2.80"
probe_address = "127.0.0.9"
weight = %d
`

const gslbProbed = "127.0.0.9:53"

func writeGSLBConfig(t *testing.T, dir, qname string, weight int) string {
	t.Helper()
	return writeConfig(t, dir, fmt.Sprintf(gslbExtra, qname, weight))
}

// waitMember waits until the status shows member www/www-1 in state and
// returns it.
func waitMember(t *testing.T, d *Daemon, state string) control.GSLBMember {
	t.Helper()
	var m control.GSLBMember
	poll.Until(t, 5*time.Second, "gslb member www-1 "+state, func() (bool, string) {
		st, err := d.Status(context.Background())
		if err != nil {
			return false, err.Error()
		}
		if len(st.GSLB) != 1 || len(st.GSLB[0].Members) != 1 {
			return false, fmt.Sprintf("gslb = %+v", st.GSLB)
		}
		m = st.GSLB[0].Members[0]
		return m.State == state, fmt.Sprintf("%s: %s", m.State, m.Reason)
	})
	return m
}

func TestGSLBMemberHealth(t *testing.T) {
	dir := t.TempDir()
	path := writeGSLBConfig(t, dir, "www.example.", 100)
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	h := start(t, path, vip.NewMemClient(), fp)

	m := waitMember(t, h.d, "up")
	if m.Address != "192.0.2.80" || m.ProbeAddress != "127.0.0.9" || m.Weight != 100 || len(m.Monitors) != 1 {
		t.Errorf("member = %+v", m)
	}
	if mon := m.Monitors[0]; mon.Check != "web" || mon.Kind != "dns" || mon.State != "up" || mon.LastResult != "NXDOMAIN" || mon.LastProbe.IsZero() {
		t.Errorf("monitor = %+v", mon)
	}

	fp.set(gslbProbed, true)
	m = waitMember(t, h.d, "down")
	if want := "0 of 1 monitors up (all needed); down: web (rcode SERVFAIL)"; m.Reason != want {
		t.Errorf("reason = %q, want %q", m.Reason, want)
	}
	if mon := m.Monitors[0]; mon.State != "down" || mon.LastResult != "rcode SERVFAIL" {
		t.Errorf("monitor = %+v", mon)
	}

	// Both changes are events (lbctl events), named by the monitor key.
	// Status reads the monitor directly; the loop logs the event after, so
	// wait for it.
	subject := gslb.MonitorKey("www", "www-1", "web").String()
	poll.Until(t, 5*time.Second, "one up and one down event of "+subject, func() (bool, string) {
		var ups, downs int
		evs, _, _ := h.d.Events().Since(0)
		for _, ev := range evs {
			if ev.Kind != control.EventState || ev.Subject != subject {
				continue
			}
			switch {
			case strings.HasPrefix(ev.Message, "unknown -> up"):
				ups++
			case strings.HasPrefix(ev.Message, "up -> down: rcode SERVFAIL") && ev.Error:
				downs++
			}
		}
		return ups == 1 && downs == 1, fmt.Sprintf("%d up, %d down in %+v", ups, downs, evs)
	})
}

func TestGSLBReloadKeepsHealth(t *testing.T) {
	dir := t.TempDir()
	path := writeGSLBConfig(t, dir, "www.example.", 100)
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	h := start(t, path, vip.NewMemClient(), fp)
	before := waitMember(t, h.d, "up")
	key := gslb.MonitorKey("www", "www-1", "web")
	target := func() monitor.TargetStatus { return h.d.Monitor().Status()[key] }
	hb := target().Health

	t.Run("weight changed keeps health", func(t *testing.T) {
		writeGSLBConfig(t, dir, "www.example.", 250)
		if err := h.d.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		ha := target().Health
		if ha.State != hb.State || !ha.Since.Equal(hb.Since) {
			t.Errorf("monitor health reset: before %v since %v, after %v since %v", hb.State, hb.Since, ha.State, ha.Since)
		}
		st, err := h.d.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		m := st.GSLB[0].Members[0]
		if m.Weight != 250 || m.State != "up" || !m.Since.Equal(before.Since) || !m.Monitors[0].Since.Equal(before.Monitors[0].Since) {
			t.Errorf("after reload: %+v, want weight 250 and the state and since of before: %+v", m, before)
		}
	})

	t.Run("monitor spec changed resets health", func(t *testing.T) {
		reload := time.Now()
		writeGSLBConfig(t, dir, "other.example.", 250)
		if err := h.d.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		ha := target().Health
		if !ha.Since.After(reload) || ha.Since.Equal(hb.Since) {
			t.Errorf("monitor health kept across a spec change: %v since %v (reload at %v)", ha.State, ha.Since, reload)
		}
		m := waitMember(t, h.d, "up")
		if !m.Since.After(reload) {
			t.Errorf("member since %v, want after the reload %v", m.Since, reload)
		}
	})
}

// TestGSLBOnlyConfig: the shipped GSLB-only example (no VIP, no resolver
// pool) runs, with its intervals shortened.
func TestGSLBOnlyConfig(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../configs/gslb.toml")
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = \"127.0.0.1:0\"\n\n",
		filepath.Join(dir, "state"), filepath.Join(dir, "ctl.sock"))
	path := filepath.Join(dir, "gslb.toml")
	fast := strings.ReplaceAll(string(data), `timeout  = "1s"`, "")
	fast = strings.ReplaceAll(fast, `interval = "5s"`, "interval = \"200ms\"\ntimeout = \"100ms\"")
	if err := os.WriteFile(path, []byte(head+fast), 0o644); err != nil {
		t.Fatal(err)
	}
	fp := &fakeProbe{down: map[netip.AddrPort]bool{netip.MustParseAddrPort("192.0.2.10:53"): true}}
	h := start(t, path, vip.NewMemClient(), fp)
	poll.Until(t, 10*time.Second, "gslb verdicts", func() (bool, string) {
		st, err := h.d.Status(context.Background())
		if err != nil {
			return false, err.Error()
		}
		got := map[string]string{}
		for _, p := range st.GSLB {
			for _, m := range p.Members {
				got[p.Name+"/"+m.Name] = m.State
			}
		}
		want := map[string]string{"ns/ns-east": "down", "ns/ns-west": "up", "edge/edge-1": "up", "edge/edge-2": "up",
			"www/www-1": "up", "www/www-2": "up", "www/www-3": "up", "api/api-1": "up", "api/api-2": "up", "time/ntp-1": "up", "time/ntp-2": "up"}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
	})
}
