package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lbdns/internal/lab/dnstest"
	"lbdns/internal/lab/vendors"
	"lbdns/testkit/browser"
	"lbdns/vip"
)

const pageConfig = `
[daemon]
state_dir = %[1]q
control_socket = "%[1]s/ctl.sock"
status_listen = "127.0.0.1:0"

[[vip]]
name = "v4"
address = "192.0.2.53"
forwarding = "nat"
pool = "main"

[[pool]]
name = "main"
members = ["unbound-1", "dnsmasq-1"]
check = "rec"

[[resolver]]
name = "unbound-1"
address = %[2]q
vendor = "unbound"

[[resolver]]
name = "dnsmasq-1"
address = %[3]q
vendor = "dnsmasq"

[check.rec]
interval = "300ms"
timeout = "250ms"
rise = 1
fall = 2

[check.rec.dns]
zone = %[4]q
`

// memberRow matches one member row of the status page as the browser
// rendered it, capturing the resolver and its state.
var memberRow = regexp.MustCompile(`<tr class="member state-(\w+)"[^>]*data-resolver="([^"]+)"[^>]*data-state="(\w+)"`)

// pageStates loads the status page in headless Chromium and returns the
// state of every member row by resolver name.
func pageStates(t *testing.T, url string) (map[string]string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := browser.DumpDOM(ctx, url)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	out := map[string]string{}
	for _, m := range memberRow.FindAllStringSubmatch(dom, -1) {
		if m[1] != m[3] {
			t.Errorf("row of %s: class state-%s but data-state %s", m[2], m[1], m[3])
		}
		out[m[2]] = m[3]
	}
	return out, dom
}

// TestStatusPageInBrowser runs the daemon over real unbound and dnsmasq,
// loads the status page in Debian's Chromium (headless), and checks that
// the member rows and their states are rendered, and that they change when
// a back end is killed. Screenshots before and after are kept as
// artifacts.
func TestStatusPageInBrowser(t *testing.T) {
	browser.Require(t)
	up := dnstest.NewServer(t)
	unb := vendors.Start(t, vendors.Unbound, up.Addr())
	dm := vendors.Start(t, vendors.Dnsmasq, up.Addr())
	dir := t.TempDir()
	path := filepath.Join(dir, "lbdns.toml")
	conf := fmt.Sprintf(pageConfig, filepath.Join(dir, "state"), unb.Addr.String(), dm.Addr.String(), up.ZoneName())
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), TickInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "http://" + d.StatusAddr() + "/"
	arts := browser.ArtifactDir(t)

	wait := func(what string, ok func(map[string]string) bool) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			states, dom := pageStates(t, url)
			if ok(states) {
				return dom
			}
			if time.Now().After(deadline) {
				t.Fatalf("status page: %s not seen; rows %v; page:\n%s", what, states, dom)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	dom := wait("both back ends up", func(s map[string]string) bool {
		return len(s) == 2 && s["unbound-1"] == "up" && s["dnsmasq-1"] == "up"
	})
	for _, want := range []string{"unbound", "dnsmasq", "main", "192.0.2.53", unb.Addr.String(), dm.Addr.String()} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	shot := func(name string) {
		sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer scancel()
		p := filepath.Join(arts, name)
		if err := browser.Screenshot(sctx, url, p, 1400, 900); err != nil {
			t.Errorf("screenshot: %v", err)
			return
		}
		t.Logf("screenshot: %s", p)
	}
	shot("status-page-up.png")

	if err := unb.Kill(); err != nil {
		t.Fatal(err)
	}
	wait("unbound-1 down after it was killed, dnsmasq-1 still up", func(s map[string]string) bool {
		return s["unbound-1"] == "down" && s["dnsmasq-1"] == "up"
	})
	shot("status-page-unbound-killed.png")
}
