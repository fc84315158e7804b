package responder

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/gslb"
	"lbdns/health"
)

// soaOf returns the SOA serial the responder at addr answers.
func soaOf(t *testing.T, addr string) uint32 {
	t.Helper()
	m := exchange(t, addr, "udp", query(zone, dns.TypeSOA, 0))
	if len(m.Answer) != 1 {
		t.Fatalf("SOA: %v", m)
	}
	return m.Answer[0].(*dns.SOA).Serial
}

// TestResponderSerialNeverUnsaved: the serial is the configuration
// version plus the intent revision; a new revision moves it without a
// new configuration; a configuration whose version cannot be saved (the
// state directory's file cannot be replaced) is refused by Accept and by
// Update, and the serial served stays the one saved: it never goes
// backwards after a restart.
func TestResponderSerialNeverUnsaved(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_800_000_000, 0)
	var rev uint64 = 3
	r := NewResponder(ResponderOptions{Now: func() time.Time { return clock }, Revision: func() uint64 { return rev }})
	defer r.Stop(context.Background())
	cfg := wwwConfig(t, dir, 30)
	if err := r.Accept(cfg); err != nil {
		t.Fatal(err)
	}
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Up), clock)); err != nil {
		t.Fatal(err)
	}
	addr := r.Addrs()[0].String()
	if got := soaOf(t, addr); got != 1+3 {
		t.Fatalf("serial %d, want 4 (configuration version 1, revision 3)", got)
	}
	rev = 4
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Up), clock)); err != nil {
		t.Fatal(err)
	}
	if got := soaOf(t, addr); got != 5 {
		t.Errorf("after a new revision: serial %d, want 5", got)
	}

	// The version file cannot be replaced: a directory stands in its way.
	path := filepath.Join(dir, SerialFile)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	next := wwwConfig(t, dir, 60)
	if err := r.Accept(next); err == nil || !strings.Contains(err.Error(), "never go backwards") {
		t.Errorf("Accept of a configuration whose version cannot be saved: %v", err)
	}
	if err := r.Update(next, gslb.Evaluate(next, upStatus(health.Up), clock)); err == nil {
		t.Error("Update of a configuration whose version cannot be saved succeeded")
	}
	if got := soaOf(t, addr); got != 5 {
		t.Errorf("after the refused configuration: serial %d, want 5 (the last saved)", got)
	}
	if st := r.Status(); st.LastBuildError == "" {
		t.Error("the refused build is not in the status")
	}
}

// TestLastResortGauge: lbdns_gslb_last_resort_names counts the names on
// each last resort, and goes back to 0 when they leave it.
func TestLastResortGauge(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_800_000_000, 0)
	reg := prometheus.NewRegistry()
	r := NewResponder(ResponderOptions{Now: func() time.Time { return clock }, Registerer: reg})
	defer r.Stop(context.Background())
	cfg := wwwConfig(t, dir, 30) // last_resort = "servfail"
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Down), clock)); err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, reg, "lbdns_gslb_last_resort_names", "servfail"); v != 1 {
		t.Errorf("lbdns_gslb_last_resort_names{servfail} = %v with every member down, want 1 (A: the member has no IPv6 address)", v)
	}
	if err := r.Update(cfg, gslb.Evaluate(cfg, upStatus(health.Up), clock)); err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, reg, "lbdns_gslb_last_resort_names", "servfail"); v != 0 {
		t.Errorf("lbdns_gslb_last_resort_names{servfail} = %v with the member up, want 0", v)
	}
}
