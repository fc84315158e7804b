package clientfw_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lbdns/clientfw"
	"lbdns/intent"
)

// fakeKernel holds a table in memory; while fail is set every call
// fails with it, as netlink does for a daemon without CAP_NET_ADMIN.
type fakeKernel struct {
	fail   error
	table  clientfw.Actual
	writes int
}

func (k *fakeKernel) Read(string) (clientfw.Actual, error) {
	if k.fail != nil {
		return clientfw.Actual{}, fmt.Errorf("netlink receive: %w", k.fail)
	}
	if !k.table.Present {
		return clientfw.Actual{Rules: -1}, nil
	}
	return k.table, nil
}

func (k *fakeKernel) Replace(_ string, _ bool, want clientfw.Ruleset, _ int) error {
	if k.fail != nil {
		return fmt.Errorf("write table: netlink receive: %w", k.fail)
	}
	k.writes++
	k.table = clientfw.Actual{Rules: -1}
	if want.Empty() {
		return nil
	}
	k.table = clientfw.Actual{Present: true, Sets: want.Sets, Rules: want.Rules()}
	for _, s := range want.Sets {
		if s.Rate > 0 {
			k.table.Meters = append(k.table.Meters, clientfw.MeterName(s.Name))
		}
	}
	return nil
}

func (k *fakeKernel) Fill(string) ([]clientfw.SetFill, error) { return nil, k.fail }

// clients names the clients of actions.
func clients(actions []intent.ClientAction) string {
	var s []string
	for _, a := range actions {
		s = append(s, a.Action+" "+intent.ClientText(a.Client))
	}
	return strings.Join(s, ",")
}

// TestUnremovedElements: when the kernel cannot be changed (no
// permission, a netlink error), an action taken out of the intent stays
// in the enforcer's status as unremoved until its expiry, and an Apply
// of no action at all is then an error, not "nothing to enforce"; an
// action that never reached the kernel is not reported; the first Apply
// of a restarted enforcer counts the intent it was given as possibly
// held (an earlier lbdnsd's table outlives it); an Apply that works
// clears them all.
func TestUnremovedElements(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	blockX := intent.ClientAction{Client: netip.MustParsePrefix("198.51.100.9/32"), Action: intent.ActionBlock, Until: t0.Add(10 * time.Minute), Reason: "flood"}
	blockY := intent.ClientAction{Client: netip.MustParsePrefix("198.51.100.10/32"), Action: intent.ActionBlock, Until: t0.Add(time.Hour), Reason: "flood"}

	t.Run("unblock while the kernel refuses", func(t *testing.T) {
		now = t0
		k := &fakeKernel{}
		enf := clientfw.New(clientfw.Options{Table: "lbdns", Kernel: k, Now: clock})
		if _, err := enf.Apply([]intent.ClientAction{blockX}); err != nil {
			t.Fatal(err)
		}
		k.fail = unix.EPERM
		// Y is added while the kernel refuses: it never reaches it.
		if _, err := enf.Apply([]intent.ClientAction{blockX, blockY}); !errors.Is(err, clientfw.ErrPermission) {
			t.Fatalf("Apply with the kernel refusing: %v, want ErrPermission", err)
		}
		if st := enf.Status(); len(st.Unremoved) != 0 {
			t.Errorf("unremoved %q while both actions are in force", clients(st.Unremoved))
		}
		// Both unblocked: X's element is still in the kernel, Y's never was.
		_, err := enf.Apply(nil)
		if !errors.Is(err, clientfw.ErrPermission) {
			t.Fatalf("Apply of no action, X's element still in the kernel: %v, want ErrPermission", err)
		}
		st := enf.Status()
		if st.Enforced || st.Error == "" || clients(st.Unremoved) != "block 198.51.100.9" {
			t.Errorf("status: enforced %v, error %q, unremoved %q; want not enforced, the error, X unremoved", st.Enforced, st.Error, clients(st.Unremoved))
		}
		if k.table.Present && len(k.table.Sets) > 0 && len(k.table.Sets[0].Elems) != 1 {
			t.Fatalf("the fake kernel changed while refusing: %+v", k.table)
		}
		now = t0.Add(10*time.Minute - time.Second)
		if got := clients(enf.Status().Unremoved); got != "block 198.51.100.9" {
			t.Errorf("a second before X's expiry, unremoved %q", got)
		}
		now = t0.Add(10 * time.Minute)
		if got := clients(enf.Status().Unremoved); got != "" {
			t.Errorf("at X's expiry (its element timed out in the kernel), unremoved %q", got)
		}
		if _, err := enf.Apply(nil); err != nil {
			t.Errorf("Apply of no action once X's element timed out: %v, want nothing to enforce", err)
		}
	})

	t.Run("recovery clears them", func(t *testing.T) {
		now = t0
		k := &fakeKernel{}
		enf := clientfw.New(clientfw.Options{Table: "lbdns", Kernel: k, Now: clock})
		if _, err := enf.Apply([]intent.ClientAction{blockX}); err != nil {
			t.Fatal(err)
		}
		k.fail = errors.New("netlink: connection refused")
		if _, err := enf.Apply(nil); err == nil || errors.Is(err, clientfw.ErrPermission) {
			t.Fatalf("Apply with netlink failing: %v", err)
		}
		if got := clients(enf.Status().Unremoved); got != "block 198.51.100.9" {
			t.Errorf("unremoved %q, want X", got)
		}
		k.fail = nil
		if wrote, err := enf.Apply(nil); err != nil || !wrote {
			t.Fatalf("Apply once netlink works: wrote %v, %v", wrote, err)
		}
		if st := enf.Status(); !st.Enforced || len(st.Unremoved) != 0 || k.table.Present {
			t.Errorf("after recovery: enforced %v, unremoved %q, table present %v", st.Enforced, clients(st.Unremoved), k.table.Present)
		}
	})

	t.Run("restart without permission", func(t *testing.T) {
		now = t0
		enf := clientfw.New(clientfw.Options{Table: "lbdns", Kernel: &fakeKernel{fail: unix.EPERM}, Now: clock})
		if _, err := enf.Apply([]intent.ClientAction{blockX}); err == nil {
			t.Fatal("Apply with the kernel refusing worked")
		}
		if _, err := enf.Apply(nil); !errors.Is(err, clientfw.ErrPermission) {
			t.Errorf("unblock after a restart: %v, want ErrPermission (an earlier table may hold X)", err)
		}
		if got := clients(enf.Status().Unremoved); got != "block 198.51.100.9" {
			t.Errorf("unremoved %q, want X", got)
		}
	})

	t.Run("never any action", func(t *testing.T) {
		now = t0
		enf := clientfw.New(clientfw.Options{Table: "lbdns", Kernel: &fakeKernel{fail: unix.EPERM}, Now: clock})
		if _, err := enf.Apply(nil); err != nil {
			t.Errorf("Apply of no action without permission, nothing ever enforced: %v", err)
		}
		if st := enf.Status(); !st.Enforced || len(st.Unremoved) != 0 {
			t.Errorf("status %+v", st)
		}
	})
}
