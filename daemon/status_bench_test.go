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

	"lbdns/vip"
)

// BenchmarkStatus measures one status snapshot (lbctl status, GET
// /status, the page) and one metrics gather (GET /metrics) of a daemon
// with 1,000 pools of 5 back ends (5,000 targets), all up, in dry-run.
func BenchmarkStatus(b *testing.B) {
	const pools, size = 1000, 5
	dir := b.TempDir()
	var s strings.Builder
	fmt.Fprintf(&s, "[daemon]\nstate_dir = %[1]q\ncontrol_socket = \"%[1]s/ctl.sock\"\nstatus_listen = \"\"\n\n", filepath.Join(dir, "state"))
	s.WriteString("[check.rec]\ninterval = \"1s\"\ntimeout = \"500ms\"\nrise = 1\nfall = 2\n\n[check.rec.dns]\nzone = \"lbdns.test\"\n\n")
	vendors := []string{"bind", "unbound", "powerdns", "knot", "dnsmasq"}
	for p := range pools {
		fmt.Fprintf(&s, "[[vip]]\nname = \"v%d\"\naddress = \"10.%d.%d.1\"\nforwarding = \"nat\"\npool = \"p%d\"\n\n", p, p/250, p%250, p)
		var members []string
		for j := range size {
			members = append(members, fmt.Sprintf("%q", fmt.Sprintf("r%d-%d", p, j)))
		}
		fmt.Fprintf(&s, "[[pool]]\nname = \"p%d\"\nmembers = [%s]\ncheck = \"rec\"\n\n", p, strings.Join(members, ", "))
		for j := range size {
			fmt.Fprintf(&s, "[[resolver]]\nname = \"r%d-%d\"\naddress = \"127.%d.%d.%d:53\"\nvendor = %q\n\n", p, j, 1+p/250, p%250, 1+j, vendors[j])
		}
	}
	path := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(path, []byte(s.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := d.Status(ctx)
		if err != nil {
			b.Fatal(err)
		}
		healthy := 0
		for _, p := range st.Pools {
			healthy += p.Healthy
		}
		if healthy == pools*size {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d back ends healthy after 30s", healthy, pools*size)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.Status(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("metrics", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.Registry().Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
