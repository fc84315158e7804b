package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/gslb"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// TestReloadRefusedChangesNothing: a reload that one component refuses
// (the responder: a topology file that is missing) while it also adds a
// GSLB member and changes the flood alarms changes nothing anywhere:
// the configuration in force, the monitor's targets, the flood alarms,
// the answers' serial; the same changes without the refused part are
// all applied (so that the test sees a change when there is one).
func TestReloadRefusedChangesNothing(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	base := fmt.Sprintf(twoMembers, "100ms", port) + manyNames(1)
	good := base + "\n[flood]\nenabled = true\nfloor = 1000\n"
	path := writeConfig(t, dir, good)
	h := start(t, path, vip.NewMemClient(), &fakeProbe{down: map[netip.AddrPort]bool{}})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	poll.Until(t, 5*time.Second, "the responder answering", poll.True(func() bool { return len(h.d.gslb.Addrs()) == 1 }))
	third := gslb.MonitorKey("www", "www-3", "web")
	cfgBefore, cfgVer := h.d.hub.Config.Load()
	floodBefore := h.d.Flood().Config()
	serial := soaSerial(t, addr)

	changed := strings.Replace(base, "[[gslb.zone]]", "[[gslb.pool.member]]\nname = \"www-3\"\naddress = \"192.0.2.82\"\nprobe_address = \"127.0.0.11\"\n\n[[gslb.zone]]", 1) +
		"\n[flood]\nenabled = true\nfloor = 5000\n"
	writeConfig(t, dir, changed+"\n[[gslb.topology.file]]\npath = \"nets/missing.txt\"\nlabels = { region = \"east\" }\n")
	if err := h.d.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Fatalf("reload with a missing topology file: %v, want it refused naming the file", err)
	}
	if cfg, ver := h.d.hub.Config.Load(); cfg != cfgBefore || ver != cfgVer {
		t.Errorf("the configuration in force moved (version %d → %d) after a refused reload", cfgVer, ver)
	}
	if _, ok := h.d.Monitor().Status()[third]; ok {
		t.Errorf("the refused reload's new member %s is monitored", third.Member)
	}
	if got := h.d.Flood().Config(); got.Alarms.Floor != floodBefore.Alarms.Floor {
		t.Errorf("flood floor %v after the refused reload, want %v", got.Alarms.Floor, floodBefore.Alarms.Floor)
	}
	if got := soaSerial(t, addr); got != serial {
		t.Errorf("serial %d after the refused reload, want %d", got, serial)
	}

	writeConfig(t, dir, changed)
	if err := h.d.Reload(context.Background()); err != nil {
		t.Fatalf("the same changes without the missing file: %v", err)
	}
	if _, ok := h.d.Monitor().Status()[third]; !ok {
		t.Errorf("the applied reload's new member %s is not monitored", third.Member)
	}
	if got := h.d.Flood().Config(); got.Alarms.Floor == floodBefore.Alarms.Floor {
		t.Errorf("flood floor %v after the applied reload, want it changed", got.Alarms.Floor)
	}
}

// TestReloadUnbindableListenRefused: a reload adding a GSLB listen
// address that cannot be bound (not on this host) is refused whole,
// naming it, and the responder keeps answering on the address it
// serves (it does not go off on every address).
func TestReloadUnbindableListenRefused(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	good := fmt.Sprintf(twoMembers, "100ms", port) + manyNames(1)
	path := writeConfig(t, dir, good)
	h := start(t, path, vip.NewMemClient(), &fakeProbe{down: map[netip.AddrPort]bool{}})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	poll.Until(t, 5*time.Second, "the responder answering", poll.True(func() bool { return len(h.d.gslb.Addrs()) == 1 }))
	serial := soaSerial(t, addr)
	bad := strings.Replace(good, fmt.Sprintf("listen = [\"127.0.0.1:%d\"]", port), fmt.Sprintf("listen = [\"127.0.0.1:%d\", \"192.0.2.253:%d\"]", port, port), 1)
	if bad == good {
		t.Fatal("the listen line was not found")
	}
	writeConfig(t, dir, bad)
	err := h.d.Reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), "192.0.2.253") || !strings.Contains(err.Error(), "cannot listen there") {
		t.Fatalf("reload adding an address not on this host: %v, want it refused naming the address", err)
	}
	if got := h.d.gslb.Addrs(); len(got) != 1 {
		t.Errorf("listening on %v after the refused reload, want the one address served", got)
	}
	if got := soaSerial(t, addr); got != serial {
		t.Errorf("serial %d after the refused reload, want %d (and an answer)", got, serial)
	}
}
