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

	"lbdns/responder"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// TestFleetSerialLateJoiner: in a fleet the SOA serial is the version
// the fleet allocated for the served data plus the intent revision: a
// host with a history of its own (its state file at version 7), a host
// with an empty state directory and a third that joins later with an
// empty one answer the same serial, the first host's history included
// (the fleet's version moves up to it, never back); the same change of
// the served data on every host moves them all up alike.
func TestFleetSerialLateJoiner(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	type host struct {
		path, addr string
		h          *harness
	}
	newHost := func(name string, history bool) *host {
		port := freePort(t)
		path := fleetConfig(t, c, cr, name, "c1", fmt.Sprintf(twoMembers, "100ms", port)+manyNames(3)+staticName)
		if history {
			state := filepath.Join(filepath.Dir(path), "state")
			if err := os.MkdirAll(state, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(state, responder.SerialFile), []byte(`{"version":2,"hash":"before","config_version":7,"serial":7}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return &host{path: path, addr: fmt.Sprintf("127.0.0.1:%d", port), h: start(t, path, vip.NewMemClient(), &fakeProbe{down: map[netip.AddrPort]bool{}})}
	}
	serialOf := func(h *host) uint32 {
		if len(h.h.d.gslb.Addrs()) == 0 {
			return 0
		}
		return soaSerial(t, h.addr)
	}
	same := func(what string, hosts []*host, want func(uint32) bool) uint32 {
		t.Helper()
		var got uint32
		poll.Until(t, 15*time.Second, what, func() (bool, string) {
			var s []uint32
			for _, h := range hosts {
				s = append(s, serialOf(h))
			}
			got = s[0]
			for _, x := range s {
				if x != s[0] || x == 0 {
					return false, fmt.Sprint(s)
				}
			}
			return want(s[0]), fmt.Sprint(s)
		})
		return got
	}
	a, b := newHost("a", true), newHost("b", false)
	rev := func() uint64 { in, _ := a.h.d.Hub().Intent.Load(); return in.Revision }
	first := same("a and b on one serial", []*host{a, b}, func(s uint32) bool { return s == 8+uint32(rev()) })
	late := newHost("late", false)
	if s := same("the late joiner on the fleet's serial", []*host{a, b, late}, func(uint32) bool { return true }); s != first {
		t.Errorf("with the late joiner: serial %d, want %d", s, first)
	}

	for _, h := range []*host{late, a, b} { // a rolling change, in any order
		cfg, err := os.ReadFile(h.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.path, []byte(strings.Replace(string(cfg), `static = ["198.51.100.7"]`, `static = ["198.51.100.8"]`, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := h.h.d.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	same("the change moves every host up alike", []*host{a, b, late}, func(s uint32) bool { return s == first+1 })
}
