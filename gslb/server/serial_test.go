package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lbdns/configs"
)

// TestSerialStore: the serial moves when the hash changes, stays when it
// does not, never goes backwards (a clock behind the last serial), and
// survives a restart through its file.
func TestSerialStore(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return clock }

	s := NewSerialStore(dir, now)
	if err := s.Load(); err != nil {
		t.Fatalf("Load without a file: %v", err)
	}
	s1, err := s.Next("a")
	if err != nil || s1 != 1_800_000_000 {
		t.Fatalf("first Next = %d, %v; want the clock's 1800000000", s1, err)
	}
	if got, _ := s.Next("a"); got != s1 {
		t.Errorf("Next with the same hash = %d, want %d", got, s1)
	}
	s2, _ := s.Next("b")
	if s2 != s1+1 {
		t.Errorf("Next with a new hash in the same second = %d, want %d", s2, s1+1)
	}
	data, err := os.ReadFile(filepath.Join(dir, SerialFile))
	if err != nil {
		t.Fatal(err)
	}
	var st serialState
	if err := json.Unmarshal(data, &st); err != nil || st != (serialState{Version: 1, Hash: "b", Serial: s2}) {
		t.Errorf("file %s = %+v (%v)", data, st, err)
	}

	// A restart with the clock set back: the serial is the file's, and
	// the next one is above it.
	clock = clock.Add(-time.Hour)
	r := NewSerialStore(dir, now)
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Next("b"); got != s2 || r.Serial() != s2 {
		t.Errorf("after restart, Next with the same hash = %d, want %d", got, s2)
	}
	if got, _ := r.Next("c"); got != s2+1 {
		t.Errorf("after restart with the clock behind, Next = %d, want %d", got, s2+1)
	}
	// A restart with the clock ahead: the clock's.
	clock = clock.Add(2 * time.Hour)
	r = NewSerialStore(dir, now)
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Next("d"); got != uint32(clock.Unix()) {
		t.Errorf("Next = %d, want the clock's %d", got, clock.Unix())
	}
}

func TestSerialStoreBadFile(t *testing.T) {
	for name, content := range map[string]string{"not json": "{", "version 2": `{"version":2,"hash":"x","serial":5}`} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, SerialFile), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			s := NewSerialStore(dir, func() time.Time { return time.Unix(1000, 0) })
			if err := s.Load(); err == nil {
				t.Fatal("Load of a bad file succeeded")
			}
			if got, err := s.Next("x"); err != nil || got != 1000 {
				t.Errorf("Next after a bad file = %d, %v; want the clock's 1000", got, err)
			}
		})
	}
	t.Run("unwritable", func(t *testing.T) {
		s := NewSerialStore(filepath.Join(t.TempDir(), "missing", "dir"), func() time.Time { return time.Unix(1000, 0) })
		if got, err := s.Next("x"); err == nil || got != 1000 {
			t.Errorf("Next into a missing directory = %d, %v; want 1000 and an error", got, err)
		}
	})
}

// TestConfigHash: the hash follows the served data, not where it is
// served.
func TestConfigHash(t *testing.T) {
	a := &configs.Config{GSLB: configs.GSLB{Pools: []configs.GSLBPool{{Name: "p", Members: []configs.GSLBMember{{Name: "m", Address: "192.0.2.1"}}}}}}
	b := *a
	b.GSLB.Server = configs.GSLBServer{Listen: []string{"127.0.0.1:53"}, UDPSize: 4096}
	c := *a
	c.GSLB.Pools = []configs.GSLBPool{{Name: "p", Members: []configs.GSLBMember{{Name: "m", Address: "192.0.2.2"}}}}
	if ConfigHash(a) != ConfigHash(&b) {
		t.Error("hash changed with [gslb.server]")
	}
	if ConfigHash(a) == ConfigHash(&c) {
		t.Error("hash did not change with a member's address")
	}
}
