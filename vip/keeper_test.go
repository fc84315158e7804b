package vip

import (
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/testlog"
)

// TestNewAddressKeeper: a good record is the keeper's; one it cannot parse
// is moved aside as FILE.bad-TIME, with a warning, and the daemon starts
// from an empty record, so that it removes none of the addresses named.
func TestNewAddressKeeper(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 30, 0, 0, time.UTC)
	logs := &testlog.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	dir := t.TempDir()
	path := filepath.Join(dir, AddressesFile)

	a := NewAddressKeeper(path, log, now)
	if a.readOnly || len(a.owned.List()) != 0 || a.path != path {
		t.Fatalf("missing record: %+v, %v", a, a.owned.List())
	}
	lo := HostAddress{Interface: "lo", Addr: netip.MustParseAddr("192.0.2.53")}
	a.owned.Add(lo)
	if err := a.owned.Save(path); err != nil {
		t.Fatal(err)
	}
	if a := NewAddressKeeper(path, log, now); !slices.Equal(a.owned.List(), []HostAddress{lo}) || a.readOnly {
		t.Fatalf("saved record: %v, read-only %v", a.owned.List(), a.readOnly)
	}
	if logs.String() != "" {
		t.Errorf("logs for good records: %s", logs)
	}

	bad := []byte(`{"version": 1, "addresses": [{"interface": "lo", "address": "192.0.2.53"}, {"interface": `)
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	a = NewAddressKeeper(path, log, now)
	if len(a.owned.List()) != 0 || a.readOnly {
		t.Errorf("bad record: owned %v, read-only %v; want an empty record to write", a.owned.List(), a.readOnly)
	}
	kept := path + ".bad-20261201T113000Z"
	if b, err := os.ReadFile(kept); err != nil || string(b) != string(bad) {
		t.Errorf("kept %s: %q, %v; want the bad record", kept, b, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("bad record still in place: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "removing none of the addresses it names") || !strings.Contains(out, kept) {
		t.Errorf("warning: %s", out)
	}
}
