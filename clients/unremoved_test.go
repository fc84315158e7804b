package clients

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lbdns/clientfw"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/hub"
	"lbdns/intent"
)

// memChanger runs changes of the intent on the hub alone: apply,
// publish (no store).
type memChanger struct {
	mu  sync.Mutex
	hub *hub.Hub
}

func (m *memChanger) Change(_ context.Context, c intent.Change) (intent.Changed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, _ := m.hub.Intent.Load()
	next, res, err := c.Apply(cur.State)
	if err != nil {
		return intent.Changed{}, err
	}
	if !res.Changed {
		return intent.Changed{State: cur.State, Revision: intent.Revision(cur.Revision), Result: res}, nil
	}
	in := hub.Intent{State: next, Revision: cur.Revision + 1}
	m.hub.Intent.Publish(in)
	if c.Applied != nil {
		c.Applied(intent.Changed{State: next, Revision: intent.Revision(in.Revision), Result: res})
	}
	return intent.Changed{State: next, Revision: intent.Revision(in.Revision), Result: res}, nil
}

// nopJournal hears nothing.
type nopJournal struct{}

func (nopJournal) Client(control.ClientRequest, string, intent.Result) {}
func (nopJournal) ClientsEnforce(string, error)                        {}
func (nopJournal) ClientsExpired([]intent.ClientAction)                {}

// switchKernel is a kernel in memory whose calls fail while fail is
// set, as netlink's do for a daemon without CAP_NET_ADMIN.
type switchKernel struct {
	mu    sync.Mutex
	fail  error
	table clientfw.Actual
}

func (k *switchKernel) failing() error {
	if k.fail != nil {
		return fmt.Errorf("netlink receive: %w", k.fail)
	}
	return nil
}

func (k *switchKernel) Read(string) (clientfw.Actual, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.failing(); err != nil {
		return clientfw.Actual{}, err
	}
	if !k.table.Present {
		return clientfw.Actual{Rules: -1}, nil
	}
	return k.table, nil
}

func (k *switchKernel) Replace(_ string, _ bool, want clientfw.Ruleset, _ int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.failing(); err != nil {
		return err
	}
	k.table = clientfw.Actual{Rules: -1}
	if !want.Empty() {
		k.table = clientfw.Actual{Present: true, Sets: want.Sets, Rules: want.Rules()}
	}
	return nil
}

func (k *switchKernel) Fill(string) ([]clientfw.SetFill, error) { return nil, k.failing() }

// holds reports whether the kernel's table holds client.
func (k *switchKernel) holds(client string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.table.Sets {
		for _, e := range s.Elems {
			if intent.ClientText(e.Prefix) == client {
				return true
			}
		}
	}
	return false
}

// TestUnblockNotRemoved: an unblock the kernel could not carry out (its
// netlink calls refused) says so in its reply, and the action stays in
// the status, marked unremoved, until its expiry; once the kernel takes
// writes again a resync removes it.
func TestUnblockNotRemoved(t *testing.T) {
	cfg, err := configs.Load("../configs/minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := hub.New(func() hub.Facts { return nil })
	h.Config.Publish(cfg)
	h.Intent.Publish(hub.Intent{})
	k := &switchKernel{}
	p, err := New(Options{Table: "lbdns", Kernel: k, Hub: h, Changer: &memChanger{hub: h}, Journal: nopJournal{}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rep, err := p.SetClient(ctx, control.ClientRequest{Action: control.ClientBlock, Client: "198.51.100.9", ForSeconds: 600, Reason: "flood"}, "uid 0")
	if err != nil || !rep.Changed || !rep.Clients.Enforced || !k.holds("198.51.100.9") {
		t.Fatalf("block: %+v %v, kernel holds it %v", rep, err, k.holds("198.51.100.9"))
	}

	k.mu.Lock()
	k.fail = unix.EPERM
	k.mu.Unlock()
	rep, err = p.SetClient(ctx, control.ClientRequest{Action: control.ClientUnblock, Client: "198.51.100.9"}, "uid 0")
	if err != nil || !rep.Changed {
		t.Fatalf("unblock: %+v %v", rep, err)
	}
	if !k.holds("198.51.100.9") {
		t.Fatal("the refusing kernel lost the element")
	}
	if strings.Contains(rep.Message, "no longer dropped") || !strings.Contains(rep.Message, "NOT REMOVED from the kernel") ||
		!strings.Contains(rep.Message, "until 2026-12-03T12:10:00Z") {
		t.Errorf("unblock reply %q: want it to say the element is not removed and until when", rep.Message)
	}
	if c := rep.Clients; c.Enforced || !strings.Contains(c.Error, "CAP_NET_ADMIN") {
		t.Errorf("unblock reply's clients: enforced %v, error %q", c.Enforced, c.Error)
	}
	entries := func() string {
		var s []string
		for _, e := range p.Status(cfg, p.intent()).Entries {
			s = append(s, fmt.Sprintf("%s %s enforced=%v unremoved=%v", e.Action, e.Client, e.Enforced, e.Unremoved))
		}
		return strings.Join(s, "|")
	}
	if got := entries(); got != "block 198.51.100.9 enforced=false unremoved=true" {
		t.Errorf("status after the unblock: %q, want the block shown as unremoved", got)
	}
	if len(p.intent().ClientsAt(clock())) != 0 {
		t.Errorf("the intent still holds the block: %+v", p.intent().Clients)
	}
	mu.Lock()
	now = t0.Add(599 * time.Second)
	mu.Unlock()
	p.Enforce() // a resync, still refused
	if got := entries(); got != "block 198.51.100.9 enforced=false unremoved=true" {
		t.Errorf("status a second before the expiry: %q", got)
	}
	mu.Lock()
	now = t0.Add(600 * time.Second)
	mu.Unlock()
	if got := entries(); got != "" {
		t.Errorf("status at the expiry, the element timed out: %q", got)
	}

	// Another block, unblocked while refused, then the kernel takes
	// writes again: the resync removes it and the status is clear.
	k.mu.Lock()
	k.fail = nil
	k.mu.Unlock()
	if _, err := p.SetClient(ctx, control.ClientRequest{Action: control.ClientLimit, Client: "203.0.113.0/24", Rate: 20, ForSeconds: 600, Reason: "storm"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	k.fail = unix.EPERM
	k.mu.Unlock()
	rep, err = p.SetClient(ctx, control.ClientRequest{Action: control.ClientUnblock, Client: "203.0.113.0/24"}, "uid 0")
	if err != nil || !strings.Contains(rep.Message, "may still limit it") {
		t.Fatalf("unblock of the limit: %+v %v", rep, err)
	}
	k.mu.Lock()
	k.fail = nil
	k.mu.Unlock()
	p.Enforce()
	if got := entries(); got != "" || k.holds("203.0.113.0/24") {
		t.Errorf("after the kernel took the write: status %q, kernel holds the limit %v", got, k.holds("203.0.113.0/24"))
	}
}
