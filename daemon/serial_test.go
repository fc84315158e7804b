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

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/control"
	"lbdns/intent"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// staticName is a name s.gslb.example. over pool www with the static
// set 198.51.100.7.
const staticName = `
[[gslb.name]]
name = "s.gslb.example"
static = ["198.51.100.7"]

[[gslb.name.policy]]
pool = "www"
`

// gaugeValue returns the value of the gauge name in reg (0 when absent).
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

// soaSerial asks the responder at addr for the SOA of gslb.example.
func soaSerial(t *testing.T, addr string) uint32 {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion("gslb.example.", dns.TypeSOA)
	r, err := dns.Exchange(m, addr)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("SOA from %s: %v %v", addr, r, err)
	}
	return r.Answer[0].(*dns.SOA).Serial
}

// TestSerialSameOnTwoHosts: two daemons with the same configuration and
// the same operator intent (the same state file) answer the same SOA
// serial; the same change of intent on both moves both alike; a restart
// keeps it; a reload that changes the served data moves it up.
func TestSerialSameOnTwoHosts(t *testing.T) {
	st := intent.State{Emergencies: []intent.Emergency{{Name: "s.gslb.example.", Mode: intent.ModeStatic, Reason: "drill"}}}
	type host struct {
		dir, path, addr string
		h               *harness
	}
	var hosts [2]*host
	for i := range hosts {
		dir := t.TempDir()
		port := freePort(t)
		path := writeConfig(t, dir, fmt.Sprintf(twoMembers, "100ms", port)+manyNames(3)+staticName)
		// The same intent, saved twice: the file is at revision 2 on each.
		store := intent.NewFileStore(filepath.Join(dir, "state"), intent.FileOptions{})
		if err := os.MkdirAll(filepath.Join(dir, "state"), 0o750); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Save(context.Background(), intent.State{}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Save(context.Background(), st, 1); err != nil {
			t.Fatal(err)
		}
		fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
		hosts[i] = &host{dir: dir, path: path, addr: fmt.Sprintf("127.0.0.1:%d", port), h: start(t, path, vip.NewMemClient(), fp)}
	}
	serials := func() (a, b uint32) {
		var s [2]uint32
		for i, h := range hosts {
			poll.Until(t, 5*time.Second, "the responder answering", func() (bool, string) {
				if len(h.h.d.gslb.Addrs()) == 0 {
					return false, "not listening"
				}
				return true, ""
			})
			s[i] = soaSerial(t, h.addr)
		}
		return s[0], s[1]
	}
	a, b := serials()
	if a != b || a != 1+2 {
		t.Fatalf("serials %d and %d, want both 3 (configuration version 1 + intent revision 2)", a, b)
	}

	// The same operator request on both: both move to revision 3.
	for _, h := range hosts {
		if _, err := (backend{h.h.d}).SetGSLB(context.Background(), control.GSLBRequest{Action: control.GSLBTTL, Name: "n1.gslb.example", Seconds: 600, Reason: "hot"}, "uid 0"); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := serials(); a != b || a != 4 {
		t.Errorf("after the same TTL raise on both: serials %d and %d, want both 4", a, b)
	}

	// A restart keeps it.
	hosts[0].h.stop()
	hosts[0].h = start(t, hosts[0].path, vip.NewMemClient(), &fakeProbe{down: map[netip.AddrPort]bool{}})
	if a, b := serials(); a != b || a != 4 {
		t.Errorf("after a restart: serials %d and %d, want both 4", a, b)
	}

	// A reload that changes the served data: the configuration version
	// moves, and the serial with it.
	cfg, err := os.ReadFile(hosts[1].path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hosts[1].path, []byte(strings.Replace(string(cfg), `static = ["198.51.100.7"]`, `static = ["198.51.100.8"]`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := hosts[1].h.d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "the serial moved by the reload", func() (bool, string) {
		s := soaSerial(t, hosts[1].addr)
		return s == 5, fmt.Sprint(s)
	})
}

// TestGSLBBuildErrorRejectsWhole: a reload naming a topology file that
// is missing is rejected whole (the running configuration and its
// answers stay, the reload metric says rejected), and a start with it
// fails with the file named.
func TestGSLBBuildErrorRejectsWhole(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	good := fmt.Sprintf(twoMembers, "100ms", port) + manyNames(1)
	path := writeConfig(t, dir, good)
	h := start(t, path, vip.NewMemClient(), &fakeProbe{down: map[netip.AddrPort]bool{}})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	poll.Until(t, 5*time.Second, "the responder answering", poll.True(func() bool { return len(h.d.gslb.Addrs()) == 1 }))
	before := soaSerial(t, addr)

	bad := good + "\n[[gslb.topology.file]]\npath = \"nets/missing.txt\"\nlabels = { region = \"east\" }\n"
	writeConfig(t, dir, bad)
	err := h.d.Reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Fatalf("reload with a missing topology file: %v, want it rejected naming the file", err)
	}
	if got := h.d.Config().GSLB.Topology.Files; len(got) != 0 {
		t.Errorf("the rejected configuration is in force: topology files %v", got)
	}
	if got := soaSerial(t, addr); got != before {
		t.Errorf("serial %d after the rejected reload, want %d", got, before)
	}
	if v := gaugeValue(t, h.d.Registry(), "lbdns_config_last_reload_successful"); v != 0 {
		t.Errorf("lbdns_config_last_reload_successful = %v after the rejected reload, want 0", v)
	}
	h.stop()

	_, err = New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: (&fakeProbe{}).probe, Identify: noIdentify})
	if err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("start with a missing topology file: %v, want a refusal naming the file", err)
	}
}
