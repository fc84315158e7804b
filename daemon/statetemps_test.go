package daemon

import (
	"bytes"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStartRemovesStateTemps: the temporary files a kill -9 left in the
// state directory, while lbdnsd wrote its overrides or its dry-run table,
// are removed at start (and logged); nothing else in the directory is.
func TestStartRemovesStateTemps(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o750); err != nil {
		t.Fatal(err)
	}
	left := []string{".overrides.json.tmp2718281828", ".dry-run-table.txt.tmp31415", ".ipvs-owned.json.tmp1", ".gslb-serial.json.tmp42"}
	keep := []string{".overrides.json.tmpx", ".notes.txt.tmp12", "operator-notes.txt"}
	for _, n := range append(slices.Clone(left), keep...) {
		if err := os.WriteFile(filepath.Join(state, n), []byte("half written"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	_, err := New(Options{ConfigPath: writeConfig(t, dir, ""), DryRun: true, Probe: fp.probe, Identify: noIdentify,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if slices.Contains(left, e.Name()) {
			t.Errorf("%s left in the state directory", e.Name())
		}
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(state, n)); err != nil {
			t.Errorf("%s removed: %v", n, err)
		}
	}
	for _, n := range left {
		if !strings.Contains(logs.String(), filepath.Join(state, n)) {
			t.Errorf("removal of %s not logged:\n%s", n, logs.String())
		}
	}
}
