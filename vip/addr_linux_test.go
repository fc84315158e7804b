//go:build linux

package vip

import (
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
)

// inNewNetns runs f on a goroutine locked to an OS thread that has been
// moved into a fresh network namespace, made by this test and seen by
// nothing else. The thread is never unlocked, so it dies with the goroutine
// instead of returning to the scheduler in the wrong namespace.
func inNewNetns(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	skip := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
			skip <- "cannot make a network namespace: " + err.Error()
			return
		}
		f(t)
	}()
	<-done
	select {
	case why := <-skip:
		t.Skip(why)
	default:
	}
}

func TestEnsureAddressInNetns(t *testing.T) {
	inNewNetns(t, func(t *testing.T) {
		for _, p := range []string{"192.0.2.53/32", "2001:db8::53/128"} {
			pfx := netip.MustParsePrefix(p)
			added, err := EnsureAddress("lo", pfx)
			if err != nil || !added {
				t.Errorf("first EnsureAddress(%s) = %v, %v; want added", p, added, err)
				continue
			}
			added, err = EnsureAddress("lo", pfx)
			if err != nil || added {
				t.Errorf("second EnsureAddress(%s) = %v, %v; want present", p, added, err)
			}
			if !loHas(t, pfx.Addr()) {
				t.Errorf("%s not on lo", p)
			}
			removed, err := RemoveAddress("lo", pfx)
			if err != nil || !removed {
				t.Errorf("RemoveAddress(%s) = %v, %v", p, removed, err)
			}
			removed, err = RemoveAddress("lo", pfx)
			if err != nil || removed {
				t.Errorf("second RemoveAddress(%s) = %v, %v", p, removed, err)
			}
			if loHas(t, pfx.Addr()) {
				t.Errorf("%s still on lo", p)
			}
		}
		if _, err := EnsureAddress("no-such-if0", netip.MustParsePrefix("192.0.2.1/32")); err == nil {
			t.Error("missing interface accepted")
		}
		// An interface that is gone holds no address: nothing to remove.
		if removed, err := RemoveAddress("no-such-if0", netip.MustParsePrefix("192.0.2.1/32")); err != nil || removed {
			t.Errorf("RemoveAddress on a missing interface = %v, %v; want false, nil", removed, err)
		}
		if _, err := EnsureAddress("lo", netip.MustParsePrefix("192.0.2.0/24")); err == nil {
			t.Error("non-host prefix accepted")
		}
	})
}

func loHas(t *testing.T, a netip.Addr) bool {
	t.Helper()
	ifi, err := net.InterfaceByName("lo")
	if err != nil {
		t.Error(err) // not Fatal: this runs off the test goroutine
		return false
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		t.Error(err)
		return false
	}
	for _, x := range addrs {
		if n, ok := x.(*net.IPNet); ok {
			if b, ok := netip.AddrFromSlice(n.IP); ok && b.Unmap() == a {
				return true
			}
		}
	}
	return false
}
