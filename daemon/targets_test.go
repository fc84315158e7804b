package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/vip"
)

// unbuildableExtra is a GSLB pool whose monitor "web" is a tcp check; the
// member's address is a documentation address that no test probes (the
// checkers of these tests are fakes).
const unbuildableExtra = `
[check.web]
kind = "tcp"
interval = "100ms"
timeout = "50ms"

[check.web.tcp]
port = 80

[[gslb.pool]]
name = "www"
monitors = ["web"]

[[gslb.pool.member]]
name = "www-1"
address = "192.0.2.80"
weight = %d
`

// TestUnbuildableCheckRejected: a check whose checker cannot be built (a
// CA file without a certificate, no ICMP socket) stops the start and
// rejects a reload whole, the running configuration kept: a target is
// never left unchecked while the configuration says it is checked.
func TestUnbuildableCheckRejected(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, fmt.Sprintf(unbuildableExtra, 100))
	var broken atomic.Bool
	build := func(chk *configs.Check, addr netip.AddrPort) (check.Checker, error) {
		if chk.Name == "web" && broken.Load() {
			return nil, errors.New("ca_file /etc/lbdns/ca.pem: no PEM certificate in it")
		}
		return check.Func(func(context.Context) check.Result { return check.Result{OK: true, Detail: "fake"} }), nil
	}
	opts := Options{ConfigPath: path, Client: vip.NewMemClient(), Checkers: build, Identify: noIdentify, TickInterval: 50 * time.Millisecond}

	broken.Store(true)
	if _, err := New(opts); err == nil || !strings.Contains(err.Error(), "health checks cannot be built") || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("New with an unbuildable check: err = %v, want it refused naming the cause", err)
	}

	broken.Store(false)
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	broken.Store(true)
	if err := os.WriteFile(path, []byte(fmt.Sprintf(testConfig, dir+"/state", fmt.Sprintf(unbuildableExtra, 300))), 0o644); err != nil {
		t.Fatal(err)
	}
	err = d.Reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("reload with an unbuildable check: err = %v, want it rejected naming the cause", err)
	}
	if w := d.Config().GSLBPool("www").Members[0].Weight; w != 100 {
		t.Errorf("running config changed by a rejected reload: weight %d, want 100", w)
	}
	st, err := d.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Daemon.LastReloadError == "" {
		t.Error("status does not show the rejected reload")
	}

	broken.Store(false)
	if err := d.Reload(context.Background()); err != nil {
		t.Fatalf("reload once the check builds: %v", err)
	}
	if w := d.Config().GSLBPool("www").Members[0].Weight; w != 300 {
		t.Errorf("weight after a good reload: %d, want 300", w)
	}
}
