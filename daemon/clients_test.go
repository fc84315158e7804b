package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/intent"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/netns"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

const clientsTable = "lbdns_dtest"

// clientsDaemon starts a daemon of path whose client actions are
// enforced in the namespace fd.
func clientsDaemon(t *testing.T, path string, fd int) *harness {
	t.Helper()
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	return startOpts(t, Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, ClientsNetNS: fd}, fp)
}

// clientEntries lists the client actions /status shows, as
// "ACTION CLIENT RATE enforced?".
func clientEntries(t *testing.T, d *Daemon) (*control.ClientsStatus, []string) {
	t.Helper()
	st, err := d.Status(context.Background())
	if err != nil || st.Clients == nil {
		t.Fatalf("status: %v (clients %v)", err, st)
	}
	var out []string
	for _, e := range st.Clients.Entries {
		s := e.Action + " " + e.Client
		if e.Rate > 0 {
			s += " " + strconv.Itoa(e.Rate) + "/s"
		}
		if e.Enforced {
			s += " enforced"
		}
		out = append(out, s)
	}
	return st.Clients, out
}

// TestClientActions: lbctl limit and block through the daemon: refused
// for a shared prefix without force and for the VIP, persisted and
// enforced in the namespace's nftables table, shown in /status and the
// events, a stale write refused; a block ends at its expiry; a restart
// keeps the limit and reconciles the table; one that ended while the
// daemon was stopped is gone after the restart; unblock removes the
// table.
func TestClientActions(t *testing.T) {
	ns := netns.New(t, "d-clients")
	fd := ns.FD()
	nft := func() string {
		out, _ := ns.Command("nft", "list", "table", "inet", clientsTable).CombinedOutput()
		return string(out)
	}
	dir := t.TempDir()
	path := writeConfig(t, dir, "\n[actions]\nnft_table = \""+clientsTable+"\"\nshared = [\"100.64.0.0/10\"]\ndefault_limit_qps = 40\n")
	h := clientsDaemon(t, path, fd)
	d, ctx := h.d, context.Background()

	rep, err := d.clients.SetClient(ctx, control.ClientRequest{Action: control.ClientLimit, Client: "203.0.113.0/24", ForSeconds: 600, Reason: "launch storm"}, "uid 0")
	if err != nil || !rep.Changed || !strings.Contains(rep.Message, "limited 203.0.113.0/24 to 40 packets/s") {
		t.Fatalf("limit: %+v %v", rep, err)
	}
	if len(rep.Clients.Entries) != 1 || !rep.Clients.Entries[0].Enforced || !rep.Clients.Enforced {
		t.Errorf("limit reply: %+v", rep.Clients)
	}
	if out := nft(); !strings.Contains(out, "203.0.113.0/24") || !strings.Contains(out, "limit rate 40/second") || !strings.Contains(out, "accept") {
		t.Errorf("the namespace's table after the limit:\n%s", out)
	}
	var ce *control.Error
	for _, bad := range []struct {
		req  control.ClientRequest
		want string
	}{
		{control.ClientRequest{Action: control.ClientBlock, Client: "100.64.1.1", ForSeconds: 60, Reason: "x"}, "limit it instead"},
		{control.ClientRequest{Action: control.ClientBlock, Client: "192.0.2.53", ForSeconds: 60, Reason: "x"}, "touches VIP v4"},
		{control.ClientRequest{Action: control.ClientBlock, Client: "203.0.113.9", ForSeconds: 60, Reason: "x"}, "overlaps 203.0.113.0/24"},
	} {
		if _, err := d.clients.SetClient(ctx, bad.req, "uid 0"); !errors.As(err, &ce) || ce.Code != http.StatusConflict || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want a 409 with %q", bad.req, err, bad.want)
		}
	}

	// Another writer of the store saved meanwhile: refused, then the
	// retry is decided on its revision.
	other := intent.NewFileStore(filepath.Join(dir, "state"), intent.FileOptions{})
	cur, err := other.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Save(ctx, cur.State, cur.Revision); err != nil {
		t.Fatal(err)
	}
	block := control.ClientRequest{Action: control.ClientBlock, Client: "198.51.100.7", ForSeconds: 2, Reason: "flood"}
	if _, err := d.clients.SetClient(ctx, block, "uid 0"); !errors.As(err, &ce) || ce.Code != http.StatusConflict || !strings.Contains(err.Error(), "changed meanwhile") {
		t.Fatalf("stale block: %v, want a 409 saying the intent changed meanwhile", err)
	}
	if rep, err := d.clients.SetClient(ctx, block, "uid 0"); err != nil || !rep.Changed {
		t.Fatalf("retried block: %+v %v", rep, err)
	}
	if _, got := clientEntries(t, d); strings.Join(got, "|") != "limit 203.0.113.0/24 40/s enforced|block 198.51.100.7 enforced" {
		t.Errorf("status: %q", got)
	}
	if out := nft(); !strings.Contains(out, "198.51.100.7") {
		t.Errorf("the namespace's table after the block:\n%s", out)
	}
	// The 2 s block ends on its own.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, got := clientEntries(t, d)
		if len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 2s block is still listed after 10s: %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := nft(); strings.Contains(out, "198.51.100.7") {
		t.Errorf("the ended block is still in the table:\n%s", out)
	}
	for {
		evs, _, _ := d.Events().Since(0)
		var words []string
		for _, ev := range evs {
			if ev.Kind == control.EventClient {
				words = append(words, ev.Message)
			}
		}
		all := strings.Join(words, "\n")
		if strings.Contains(all, "block of 198.51.100.7 ended at its expiry") {
			if !strings.Contains(all, "limited 203.0.113.0/24") || !strings.Contains(all, "(reason: launch storm) by uid 0") {
				t.Errorf("client events:\n%s", all)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event tells the block's end:\n%s", all)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A block that ends while the daemon is stopped; a restart.
	if _, err := d.clients.SetClient(ctx, control.ClientRequest{Action: control.ClientBlock, Client: "198.51.100.8", ForSeconds: 1, Reason: "flood"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	h.stop()
	time.Sleep(1100 * time.Millisecond)
	if out, err := ns.Command("nft", "delete", "table", "inet", clientsTable).CombinedOutput(); err != nil {
		t.Fatalf("nft delete table: %v: %s", err, out)
	}
	h = clientsDaemon(t, path, fd)
	d = h.d
	deadline = time.Now().Add(10 * time.Second)
	for {
		cs, got := clientEntries(t, d)
		if strings.Join(got, "|") == "limit 203.0.113.0/24 40/s enforced" && cs.Enforced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %q, want the limit alone, enforced", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := nft(); !strings.Contains(out, "203.0.113.0/24") || strings.Contains(out, "198.51.100.8") {
		t.Errorf("the table after the restart (deleted by hand before it):\n%s", out)
	}
	stored, err := intent.NewFileStore(filepath.Join(dir, "state"), intent.FileOptions{}).Load(ctx)
	if err != nil || len(stored.State.Clients) != 1 {
		t.Errorf("stored after the restart: %+v %v, want the limit alone", stored.State.Clients, err)
	}

	if rep, err := d.clients.SetClient(ctx, control.ClientRequest{Action: control.ClientUnblock, Client: "203.0.113.0/24"}, "uid 0"); err != nil || !rep.Changed {
		t.Fatalf("unblock: %+v %v", rep, err)
	}
	if out, err := ns.Command("nft", "list", "table", "inet", clientsTable).CombinedOutput(); err == nil {
		t.Errorf("the table is still there after the last unblock:\n%s", out)
	}
}

// TestClientActionsNotEnforced: when the table cannot be written, the
// action is kept in the intent all the same, and /status says it is not
// enforced and why.
func TestClientActionsNotEnforced(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "\n[actions]\nnft_table = \""+clientsTable+"\"\n")
	h := clientsDaemon(t, path, 1<<20) // no such descriptor: no namespace to enforce in
	rep, err := h.d.clients.SetClient(context.Background(), control.ClientRequest{Action: control.ClientBlock, Client: "198.51.100.9", ForSeconds: 600, Reason: "flood"}, "uid 0")
	if err != nil || !rep.Changed {
		t.Fatalf("block: %+v %v", rep, err)
	}
	cs, got := clientEntries(t, h.d)
	if strings.Join(got, "|") != "block 198.51.100.9" || cs.Enforced || cs.Error == "" {
		t.Errorf("status %q, enforced %v, error %q: want the block kept, not enforced, and why", got, cs.Enforced, cs.Error)
	}
	evs, _, _ := h.d.Events().Since(0)
	found := false
	for _, ev := range evs {
		found = found || ev.Kind == control.EventClient && ev.Error && strings.Contains(ev.Message, "not enforced")
	}
	if !found {
		t.Error("no event says the client actions are not enforced")
	}
}

// TestFleetClientActions: with [fleet], a block set on one node is in
// force and enforced on a node of another cluster (client actions are
// the whole fleet's), and its unblock there goes everywhere.
func TestFleetClientActions(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	more := "\n[actions]\nnft_table = \"" + clientsTable + "\"\n"
	nsA, nsB := netns.New(t, "d-fleet-a"), netns.New(t, "d-fleet-b")
	a := clientsDaemon(t, fleetConfig(t, c, cr, "a", "c1", more), nsA.FD())
	b := clientsDaemon(t, fleetConfig(t, c, cr, "b", "c2", more), nsB.FD())
	ctx := context.Background()
	if _, err := a.d.clients.SetClient(ctx, control.ClientRequest{Action: control.ClientBlock, Client: "203.0.113.66", ForSeconds: 600, Reason: "fleet flood"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	listed := func(ns *netns.Host) string {
		out, _ := ns.Command("nft", "list", "table", "inet", clientsTable).CombinedOutput()
		return string(out)
	}
	poll.Until(t, 10*time.Second, "b to enforce a's block", func() (bool, string) {
		_, got := clientEntries(t, b.d)
		return strings.Join(got, "|") == "block 203.0.113.66 enforced" && strings.Contains(listed(nsB), "203.0.113.66"), fmt.Sprint(got)
	})
	if _, err := b.d.clients.SetClient(ctx, control.ClientRequest{Action: control.ClientUnblock, Client: "203.0.113.66"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "a to remove the block b lifted", func() (bool, string) {
		_, got := clientEntries(t, a.d)
		out := listed(nsA)
		return len(got) == 0 && !strings.Contains(out, "203.0.113.66"), fmt.Sprint(got) + "\n" + out
	})
}

// TestClientExpiryStoreDown: an action ended, but the store cannot take
// its removal: the action is out of force at once, and the store is not
// asked again on every tick (an unreachable etcd would hold the loop up
// for its timeout each time).
func TestClientExpiryStoreDown(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "\n[actions]\nnft_table = \""+clientsTable+"\"\n")
	ended := intent.ClientAction{Client: netip.MustParsePrefix("198.51.100.10/32"), Action: intent.ActionBlock, Until: time.Now().Add(-time.Second),
		Reason: "old", Set: time.Now().Add(-time.Hour)}
	store := &memStore{st: intent.State{Clients: []intent.ClientAction{ended}}, rev: 1, fail: errors.New("etcd unreachable")}
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	h := startOpts(t, Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Store: store, ClientsNetNS: 1 << 20}, fp)
	time.Sleep(500 * time.Millisecond) // ten ticks
	if _, got := clientEntries(t, h.d); len(got) != 0 {
		t.Errorf("the ended action is listed: %q", got)
	}
	store.mu.Lock()
	tries := store.tries
	store.mu.Unlock()
	if tries != 1 {
		t.Errorf("the failing store was asked %d times in ten ticks, want once", tries)
	}
}
