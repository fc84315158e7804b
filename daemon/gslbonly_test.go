package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/poll"
)

// gslbOnly is a configuration without [[vip]], pools or resolvers: the
// GSLB responder alone (state directory %[1]s, responder port %[2]d).
const gslbOnly = `
[daemon]
state_dir = "%[1]s/state"
control_socket = "%[1]s/ctl.sock"
status_listen = "127.0.0.1:0"
`

// TestGSLBOnlyHostNeedsNoIPVS: a host without a VIP starts without IPVS
// and without -dry-run (this machine's kernel has no IPVS: opening a
// netlink client would fail), answers its GSLB names, and its status and
// page say "no VIPs configured", not DRY RUN; a reload that adds a VIP is
// refused, saying a restart is needed.
func TestGSLBOnlyHostNeedsNoIPVS(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	base := fmt.Sprintf(gslbOnly, dir) + fmt.Sprintf(twoMembers, "100ms", port) + manyNames(1)
	path := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(path, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("a GSLB-only host did not start without IPVS: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	addr := fmt.Sprintf("127.0.0.1:%d", port)
	poll.Until(t, 10*time.Second, "the GSLB name answered by its members", func() (bool, string) {
		got := askA(t, addr, "n0.gslb.example.")
		return slices.Equal(got, []string{"192.0.2.80", "192.0.2.81"}), fmt.Sprint(got)
	})
	st, err := d.Status(context.Background())
	if err != nil || st.Daemon.DryRun || len(st.VIPs) != 0 {
		t.Fatalf("status: dry run %v, VIPs %v (%v); want no dry run and no VIPs", st.Daemon.DryRun, st.VIPs, err)
	}
	resp, err := http.Get("http://" + d.StatusAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "no VIPs configured") || strings.Contains(string(page), "DRY RUN") {
		t.Errorf("the page does not say \"no VIPs configured\", or says DRY RUN")
	}

	withVIP := base + "\n[[vip]]\nname = \"v4\"\naddress = \"192.0.2.53\"\npool = \"main\"\n\n[[pool]]\nname = \"main\"\nmembers = [\"r1\"]\ncheck = \"rec\"\n\n[[resolver]]\nname = \"r1\"\naddress = \"127.0.0.1:53\"\nvendor = \"bind\"\n\n[check.rec]\n[check.rec.dns]\nqname = \"example.\"\n"
	if err := os.WriteFile(path, []byte(withVIP), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Errorf("reload adding a VIP to a host started without one: %v, want a refusal asking for a restart", err)
	}
}
