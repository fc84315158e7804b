package vip

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goldenOwned are the services of testdata/ipvs-owned.json, a file in the
// format the daemon wrote before OwnedSet existed.
func goldenOwned() []ServiceKey {
	return []ServiceKey{
		key("192.0.2.53:53", UDP), key("192.0.2.53:53", TCP),
		key("[2001:db8::53]:53", UDP), key("[2001:db8::53]:53", TCP),
	}
}

func TestLoadOwnedGolden(t *testing.T) {
	golden := filepath.Join("testdata", OwnedFile)
	s, err := LoadOwned(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenOwned()
	slices.SortFunc(want, ServiceKey.Compare)
	if got := s.Keys(); !slices.Equal(got, want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	if s.Unsaved() {
		t.Error("a set just loaded is unsaved")
	}
	// The same set saved anew gives the same bytes.
	fresh := NewOwnedSet()
	for _, k := range goldenOwned() {
		fresh.Add(k)
	}
	path := filepath.Join(t.TempDir(), OwnedFile)
	if err := fresh.Save(path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	wantB, _ := os.ReadFile(golden)
	if string(got) != string(wantB) {
		t.Errorf("saved\n%s\nwant\n%s", got, wantB)
	}
}

func TestOwnedSetLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), OwnedFile)
	s, err := LoadOwned(path)
	if err != nil || len(s.Keys()) != 0 || s.Unsaved() {
		t.Fatalf("missing file: %v, %v, unsaved %v; want an empty saved set", s.Keys(), err, s.Unsaved())
	}
	s.Add(kU)
	s.Add(kT)
	if !s.Has(kU) || s.Has(kX) || !s.Unsaved() {
		t.Fatalf("after adds: has kU %v kX %v unsaved %v", s.Has(kU), s.Has(kX), s.Unsaved())
	}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	if s.Unsaved() {
		t.Error("unsaved after Save")
	}
	// Adding and removing the same key leaves nothing to save.
	s.Add(kX)
	s.Prune(func(k ServiceKey) bool { return k != kX })
	if s.Unsaved() {
		t.Error("unsaved after a change that was undone")
	}
	s.Prune(func(k ServiceKey) bool { return k != kT })
	if !s.Unsaved() || s.Has(kT) {
		t.Fatal("prune not noted")
	}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadOwned(path)
	if err != nil || !slices.Equal(back.Keys(), []ServiceKey{kU}) {
		t.Errorf("reloaded %v, %v; want [%v]", back.Keys(), err, kU)
	}
}

func TestOwnedSaveFailureRetries(t *testing.T) {
	path := filepath.Join(t.TempDir(), OwnedFile)
	// A directory in the file's place makes the rename fail.
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	s := NewOwnedSet()
	s.Add(kU)
	if err := s.Save(path); err == nil || !strings.HasPrefix(err.Error(), "vip: owned services: ") {
		t.Fatalf("Save over a directory: %v", err)
	}
	if !s.Unsaved() {
		t.Fatal("a failed save counts as saved")
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(path); err != nil || s.Unsaved() {
		t.Fatalf("retry: %v, unsaved %v", err, s.Unsaved())
	}
}

func TestLoadOwnedBad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("unreadable", func(t *testing.T) {
		s, err := LoadOwned(dir) // a directory
		if err == nil || s == nil || len(s.Keys()) != 0 {
			t.Errorf("got %v, %v", s, err)
		}
	})
	t.Run("not json", func(t *testing.T) {
		s, err := LoadOwned(write("bad.json", "{"))
		if err == nil || s == nil || len(s.Keys()) != 0 {
			t.Errorf("got %v, %v", s, err)
		}
	})
	t.Run("a bad entry rejects the file", func(t *testing.T) {
		s, err := LoadOwned(write("entries.json", `{"version": 1, "services": ["udp/192.0.2.1:53", "sctp/192.0.2.1:53", "nonsense"]}`))
		if err == nil || !strings.Contains(err.Error(), `entry 1: unknown protocol "sctp"`) {
			t.Errorf("error %v does not name the first bad entry", err)
		}
		if len(s.Keys()) != 0 {
			t.Errorf("kept %v, want none", s.Keys())
		}
	})
}

func TestParseServiceKey(t *testing.T) {
	for _, k := range []ServiceKey{
		{Addr: netip.MustParseAddr("192.0.2.1"), Port: 53, Proto: UDP},
		{Addr: netip.MustParseAddr("2001:db8::1"), Port: 5353, Proto: TCP},
	} {
		got, err := ParseServiceKey(k.String())
		if err != nil || got != k {
			t.Errorf("ParseServiceKey(%q) = %v, %v", k.String(), got, err)
		}
	}
	for _, bad := range []string{"", "udp", "sctp/192.0.2.1:53", "udp/192.0.2.1", "udp/x:53"} {
		if _, err := ParseServiceKey(bad); err == nil {
			t.Errorf("ParseServiceKey(%q) accepted", bad)
		}
	}
}

func TestFormatTable(t *testing.T) {
	tb := table(
		svc(kU, "wrr", dest("10.0.0.2:53", 100, DirectRoute), dest("10.0.0.1:53", 0, NAT)),
		svc(k6, "mh", dest("[2001:db8::2]:53", 7, Tunnel)),
		svc(kT, "wrr"),
	)
	want := `# DRY RUN: not applied
Prot LocalAddress:Port Scheduler
  -> RemoteAddress:Port Forward Weight
TCP  192.0.2.1:53 wrr
UDP  192.0.2.1:53 wrr
  -> 10.0.0.1:53                  nat    0
  -> 10.0.0.2:53                  dr     100
UDP  [2001:db8::1]:53 mh
  -> [2001:db8::2]:53             tunnel 7
`
	if got := FormatTable(tb, "DRY RUN: not applied"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := FormatTable(Table{}, "empty"); got != "# empty\nProt LocalAddress:Port Scheduler\n  -> RemoteAddress:Port Forward Weight\n" {
		t.Errorf("empty table: %q", got)
	}
}

func TestOwnedRestore(t *testing.T) {
	path := filepath.Join(t.TempDir(), OwnedFile)
	s := NewOwnedSet()
	s.Add(kU)
	if err := s.Restore(path); err != nil || !slices.Equal(s.Keys(), []ServiceKey{kU}) || !s.Unsaved() {
		t.Fatalf("missing file: %v, %v, unsaved %v; want [%v], unsaved", s.Keys(), err, s.Unsaved(), kU)
	}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	// A restart: the configured services, then the file's.
	s = NewOwnedSet()
	s.Add(kT)
	if err := s.Restore(path); err != nil {
		t.Fatal(err)
	}
	if want := []ServiceKey{kT, kU}; !slices.Equal(s.Keys(), want) || !s.Unsaved() {
		t.Errorf("restored %v, unsaved %v; want %v, unsaved", s.Keys(), s.Unsaved(), want)
	}
	// Only configured services that the file already has: nothing to save.
	s = NewOwnedSet()
	s.Add(kU)
	if err := s.Restore(path); err != nil || !slices.Equal(s.Keys(), []ServiceKey{kU}) || s.Unsaved() {
		t.Errorf("restored %v, %v, unsaved %v; want [%v], saved", s.Keys(), err, s.Unsaved(), kU)
	}
	// An unreadable file: the configured services stay, the error is told.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = NewOwnedSet()
	s.Add(kT)
	if err := s.Restore(path); err == nil || !s.Has(kT) {
		t.Errorf("bad file: err %v, has %v %v; want an error and the configured service", err, kT, s.Has(kT))
	}
}

func TestOwnedPruneAndSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), OwnedFile)
	s := NewOwnedSet()
	for _, k := range []ServiceKey{kU, kT, kX} {
		s.Add(k)
	}
	configured := Table{kU: {}}
	present := func(k ServiceKey) bool { return k == kT }
	if err := s.PruneAndSave(path, configured, present); err != nil {
		t.Fatal(err)
	}
	if want := []ServiceKey{kT, kU}; !slices.Equal(s.Keys(), want) || s.Unsaved() {
		t.Errorf("kept %v, unsaved %v; want %v, saved", s.Keys(), s.Unsaved(), want)
	}
	back, err := LoadOwned(path)
	if err != nil || !slices.Equal(back.Keys(), s.Keys()) {
		t.Errorf("file holds %v, %v; want %v", back.Keys(), err, s.Keys())
	}
	// Nothing changed: the file is not written again.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := s.PruneAndSave(path, configured, present); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("unchanged set written again: %v", err)
	}
}
