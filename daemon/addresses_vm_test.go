//go:build ipvsvm

package daemon_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/ipvsvm"
	"lbdns/vip"
)

// withoutVIP returns the world's configuration text cfg without the
// [[vip]] named name.
func withoutVIP(t *testing.T, cfg, name string) string {
	t.Helper()
	start := strings.Index(cfg, "[[vip]]\nname = \""+name+"\"\n")
	if start < 0 {
		t.Fatalf("no VIP %s in the configuration", name)
	}
	end := start + strings.Index(cfg[start:], "pool = ")
	end += strings.Index(cfg[end:], "\n") + 1
	return cfg[:start] + cfg[end:]
}

// vipLine returns cfg with the line key = "old" of the world's VIP at
// address addr (its address line or the lines after it) replaced.
func vipLine(t *testing.T, cfg, addr, key, old, value string) string {
	t.Helper()
	start := strings.Index(cfg, "address = \""+addr+"\"\n")
	if start < 0 {
		t.Fatalf("no VIP at %s in the configuration", addr)
	}
	from := fmt.Sprintf("%s = %q\n", key, old)
	i := strings.Index(cfg[start:], from)
	if i < 0 {
		t.Fatalf("VIP at %s has no line %q", addr, from)
	}
	i += start
	return cfg[:i] + fmt.Sprintf("%s = %q\n", key, value) + cfg[i+len(from):]
}

// hasAddr reports whether interface ifname holds host address a, as ip
// (an independent tool) lists it.
func hasAddr(t *testing.T, ifname string, a netip.Addr) bool {
	t.Helper()
	out := ipvsvm.Run(t, "ip", "addr", "show", "dev", ifname)
	return strings.Contains(out, " "+netip.PrefixFrom(a, a.BitLen()).String()+" ")
}

// wantAddrs fails t unless each "IFNAME ADDR" of want is on its interface
// exactly when its value is true.
func wantAddrs(t *testing.T, what string, want map[string]bool) {
	t.Helper()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		ifname, addr, _ := strings.Cut(k, " ")
		if got := hasAddr(t, ifname, netip.MustParseAddr(addr)); got != want[k] {
			t.Errorf("%s: %s on %s is %v, want %v\n%s", what, addr, ifname, got, want[k], ipvsvm.Run(t, "ip", "addr", "show"))
		}
	}
}

// wantRecord fails t unless the daemon's record of the addresses it added
// holds exactly want ("IFNAME ADDR").
func (w *vmWorld) wantRecord(t *testing.T, what string, want ...string) {
	t.Helper()
	owned, err := vip.LoadOwnedAddresses(filepath.Join(w.stateDir, vip.AddressesFile))
	if err != nil {
		t.Errorf("%s: record: %v", what, err)
		return
	}
	var got []string
	for _, a := range owned.List() {
		got = append(got, a.Interface+" "+a.Addr.String())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: record holds %q, want %q", what, got, want)
	}
}

// reload writes cfg and has d apply it; a reload applies the addresses
// before it returns.
func (w *vmWorld) reload(t *testing.T, d *vmDaemon, cfg string) {
	t.Helper()
	w.writeConfig(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.d.Reload(ctx); err != nil {
		t.Fatalf("Reload: %v", err)
	}
}

// onLo removes the addresses addrs from lo when t ends: a world's own
// interface takes its addresses with it, lo stays.
func onLo(t *testing.T, addrs ...netip.Addr) {
	t.Cleanup(func() {
		var del []string
		for _, a := range addrs {
			del = append(del, fmt.Sprintf("ip addr del %s dev lo 2>/dev/null", netip.PrefixFrom(a, a.BitLen())))
		}
		ipvsvm.Sh(t, strings.Join(del, "; ")+"; true")
	})
}

// TestVMDaemonAddresses runs the real daemon inside the VM and checks the
// VIP addresses it puts on interfaces (issue 25, item 5): recorded when it
// added them, taken off when their VIP leaves the configuration (at a
// reload, or at the start after it left while the daemon was down), when
// the VIP's address or interface changes; left in place at a stop and
// still its own after the restart; an operator's address on lo never
// touched; nothing removed on a record it cannot read.
func TestVMDaemonAddresses(t *testing.T) {
	ipvsvm.Require(t)

	t.Run("reload removes a VIP", func(t *testing.T) {
		w := newVMWorld(t, 40)
		d := w.ready(t, "reload-removes")
		v4, v6 := w.vip4.Addr().String(), w.vip6.Addr().String()
		wantAddrs(t, "started", map[string]bool{w.ifname + " " + v4: true, w.ifname + " " + v6: true})
		w.wantRecord(t, "started", w.ifname+" "+v4, w.ifname+" "+v6)
		w.reload(t, d, withoutVIP(t, w.config(false), "v6"))
		wantAddrs(t, "v6 removed", map[string]bool{w.ifname + " " + v4: true, w.ifname + " " + v6: false})
		w.wantRecord(t, "v6 removed", w.ifname+" "+v4)
		// A resync keeps it so: the address is not put back.
		time.Sleep(1500 * time.Millisecond)
		wantAddrs(t, "after a resync", map[string]bool{w.ifname + " " + v4: true, w.ifname + " " + v6: false})
		if !strings.Contains(d.logs.String(), "VIP address removed") {
			t.Errorf("no log line for the removal")
		}
		w.checkHand(t)
	})

	t.Run("address changed", func(t *testing.T) {
		w := newVMWorld(t, 41)
		d := w.ready(t, "address-changed")
		old, v6 := w.vip4.Addr().String(), w.vip6.Addr().String()
		moved := fmt.Sprintf("10.%d.0.54", w.n)
		w.reload(t, d, vipLine(t, w.config(false), old, "address", old, moved))
		wantAddrs(t, "v4 renumbered", map[string]bool{w.ifname + " " + old: false, w.ifname + " " + moved: true, w.ifname + " " + v6: true})
		w.wantRecord(t, "v4 renumbered", w.ifname+" "+moved, w.ifname+" "+v6)
	})

	t.Run("interface changed", func(t *testing.T) {
		w := newVMWorld(t, 42)
		onLo(t, w.vip4.Addr())
		d := w.ready(t, "interface-changed")
		v4 := w.vip4.Addr().String()
		onlo := vipLine(t, w.config(false), v4, "interface", w.ifname, "lo")
		w.reload(t, d, onlo)
		wantAddrs(t, "v4 moved to lo", map[string]bool{w.ifname + " " + v4: false, "lo " + v4: true})
		w.wantRecord(t, "v4 moved to lo", "lo "+v4, w.ifname+" "+w.vip6.Addr().String())
		w.reload(t, d, w.config(false))
		wantAddrs(t, "v4 moved back", map[string]bool{w.ifname + " " + v4: true, "lo " + v4: false})
		w.wantRecord(t, "v4 moved back", w.ifname+" "+v4, w.ifname+" "+w.vip6.Addr().String())
	})

	t.Run("removed while down", func(t *testing.T) {
		w := newVMWorld(t, 43)
		d1 := w.ready(t, "before")
		v4, v6 := w.vip4.Addr().String(), w.vip6.Addr().String()
		d1.stop(t)
		wantAddrs(t, "stopped", map[string]bool{w.ifname + " " + v4: true, w.ifname + " " + v6: true})
		w.writeConfig(t, withoutVIP(t, w.config(false), "v4"))
		d2 := w.start(t, "after")
		// New applies the addresses: no wait for the warm-up.
		wantAddrs(t, "restarted without v4", map[string]bool{w.ifname + " " + v4: false, w.ifname + " " + v6: true})
		w.wantRecord(t, "restarted without v4", w.ifname+" "+v6)
		d2.waitWarm(t)
		w.waitDests(t, w.keys6, w.all6)
		w.checkHand(t)
	})

	t.Run("stop leaves them, the restart keeps them its own", func(t *testing.T) {
		w := newVMWorld(t, 44)
		d1 := w.ready(t, "first")
		v4, v6 := w.vip4.Addr().String(), w.vip6.Addr().String()
		both := map[string]bool{w.ifname + " " + v4: true, w.ifname + " " + v6: true}
		d1.stop(t)
		time.Sleep(500 * time.Millisecond)
		wantAddrs(t, "stopped", both)
		w.wantRecord(t, "stopped", w.ifname+" "+v4, w.ifname+" "+v6)
		d2 := w.ready(t, "second")
		wantAddrs(t, "restarted", both)
		if strings.Contains(d2.logs.String(), "VIP address added") || strings.Contains(d2.logs.String(), "VIP address removed") {
			t.Errorf("the restarted daemon changed the addresses:\n%s", d2.logs)
		}
		// The record survived the restart: the first daemon's address is
		// still the daemon's, and goes with its VIP.
		w.reload(t, d2, withoutVIP(t, w.config(false), "v4"))
		wantAddrs(t, "v4 removed after the restart", map[string]bool{w.ifname + " " + v4: false, w.ifname + " " + v6: true})
		w.wantRecord(t, "v4 removed after the restart", w.ifname+" "+v6)
	})

	t.Run("an operator's own address on lo is never touched", func(t *testing.T) {
		w := newVMWorld(t, 45)
		v4, v6 := w.vip4.Addr().String(), w.vip6.Addr().String()
		other := fmt.Sprintf("10.%d.9.1", w.n)
		onLo(t, w.vip4.Addr(), w.vip6.Addr(), netip.MustParseAddr(other))
		// The operator's: the v4 VIP's address, and one of no VIP.
		ipvsvm.Sh(t, fmt.Sprintf("ip addr add %s/32 dev lo && ip addr add %s/32 dev lo", v4, other))
		onlo := vipLine(t, w.config(false), v4, "interface", w.ifname, "lo")
		onlo = vipLine(t, onlo, v6, "interface", w.ifname, "lo")
		w.writeConfig(t, onlo)
		d := w.ready(t, "operator")
		wantAddrs(t, "started", map[string]bool{"lo " + v4: true, "lo " + v6: true, "lo " + other: true})
		w.wantRecord(t, "started", "lo "+v6) // v4's was there before
		// Both VIPs move off lo: the daemon's address goes, the
		// operator's stay.
		w.reload(t, d, w.config(false))
		wantAddrs(t, "VIPs moved off lo", map[string]bool{"lo " + v4: true, "lo " + v6: false, "lo " + other: true, w.ifname + " " + v4: true, w.ifname + " " + v6: true})
		w.wantRecord(t, "VIPs moved off lo", w.ifname+" "+v4, w.ifname+" "+v6)
		// And through a stop and a start without the VIP.
		d.stop(t)
		w.writeConfig(t, withoutVIP(t, w.config(false), "v4"))
		w.start(t, "operator-again")
		wantAddrs(t, "restarted without v4", map[string]bool{"lo " + v4: true, "lo " + other: true, w.ifname + " " + v4: false})
	})

	t.Run("a record it cannot read removes nothing", func(t *testing.T) {
		w := newVMWorld(t, 46)
		d1 := w.ready(t, "first")
		v4, v6 := w.vip4.Addr().String(), w.vip6.Addr().String()
		d1.stop(t)
		path := filepath.Join(w.stateDir, vip.AddressesFile)
		bad := []byte(`{"version": 1, "addresses": [{"interface": "` + w.ifname + `", "address": "` + v6 + `"}, {"interface": `)
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		w.writeConfig(t, withoutVIP(t, w.config(false), "v6"))
		d2 := w.start(t, "second")
		wantAddrs(t, "restarted over a bad record", map[string]bool{w.ifname + " " + v4: true, w.ifname + " " + v6: true})
		if !strings.Contains(d2.logs.String(), "cannot read the record of the VIP addresses") {
			t.Errorf("no warning about the bad record:\n%s", d2.logs)
		}
		kept, _ := filepath.Glob(path + ".bad-*")
		if len(kept) != 1 {
			t.Fatalf("bad record kept as %v, want one %s.bad-TIME", kept, path)
		} else if b, err := os.ReadFile(kept[0]); err != nil || string(b) != string(bad) {
			t.Errorf("kept record %q, %v; want the bad bytes", b, err)
		}
		// What the damaged record named is no longer known as the
		// daemon's: it stays also when its VIP goes.
		w.reload(t, d2, withoutVIP(t, w.config(false), "v4"))
		wantAddrs(t, "v4 removed too", map[string]bool{w.ifname + " " + v4: true, w.ifname + " " + v6: true})
	})
}
