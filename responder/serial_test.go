package responder

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lbdns/configs"
)

// TestSerialStore: the configuration version moves by one when the hash
// changes, stays when it does not, survives a restart through its file,
// and a version 1 file (a clock-based serial) loads as its serial, so
// that the next serial is not lower than the one served before.
func TestSerialStore(t *testing.T) {
	dir := t.TempDir()
	s := NewSerialStore(dir)
	if err := s.Load(); err != nil {
		t.Fatalf("Load without a file: %v", err)
	}
	v1, err := s.Version("a")
	if err != nil || v1 != 1 {
		t.Fatalf("first Version = %d, %v; want 1", v1, err)
	}
	if got, _ := s.Version("a"); got != v1 {
		t.Errorf("Version with the same hash = %d, want %d", got, v1)
	}
	v2, _ := s.Version("b")
	if v2 != 2 {
		t.Errorf("Version with a new hash = %d, want 2", v2)
	}
	data, err := os.ReadFile(filepath.Join(dir, SerialFile))
	if err != nil {
		t.Fatal(err)
	}
	var st serialState
	if err := json.Unmarshal(data, &st); err != nil || st != (serialState{Version: 2, Hash: "b", ConfigVersion: 2}) {
		t.Errorf("file %s = %+v (%v)", data, st, err)
	}
	r := NewSerialStore(dir)
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Version("b"); got != v2 {
		t.Errorf("after restart, Version with the same hash = %d, want %d", got, v2)
	}
	if got, _ := r.Version("c"); got != v2+1 {
		t.Errorf("after restart, Version with a new hash = %d, want %d", got, v2+1)
	}
	if got := Serial(3, 7); got != 10 {
		t.Errorf("Serial(3, 7) = %d, want 10", got)
	}

	// A file written by the clock-based store.
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, SerialFile), []byte(`{"version":1,"hash":"x","serial":1800000000}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := NewSerialStore(old)
	if err := o.Load(); err != nil {
		t.Fatal(err)
	}
	if got, _ := o.Version("x"); got != 1_800_000_000 {
		t.Errorf("version 1 file, same hash: %d, want its serial 1800000000", got)
	}
	if got, _ := o.Version("y"); got != 1_800_000_001 {
		t.Errorf("version 1 file, new hash: %d, want 1800000001", got)
	}
}

// TestSerialStoreBadFile: a file that cannot be parsed is an error (the
// store must not count from nothing); a version that cannot be saved is
// not used: Version returns the last one and the error.
func TestSerialStoreBadFile(t *testing.T) {
	for name, content := range map[string]string{"not json": "{", "version 3": `{"version":3,"hash":"x","config_version":5}`} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, SerialFile), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := NewSerialStore(dir).Load(); err == nil {
				t.Fatal("Load of a bad file succeeded")
			}
		})
	}
	t.Run("unwritable", func(t *testing.T) {
		dir := t.TempDir()
		s := NewSerialStore(dir)
		if v, err := s.Version("x"); err != nil || v != 1 {
			t.Fatalf("Version = %d, %v", v, err)
		}
		if err := os.Remove(filepath.Join(dir, SerialFile)); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, SerialFile), 0o700); err != nil { // the file cannot be replaced
			t.Fatal(err)
		}
		if got, err := s.Version("y"); err == nil || got != 1 {
			t.Errorf("Version that cannot be saved = %d, %v; want the last, 1, and an error", got, err)
		}
		if got, _ := s.Version("x"); got != 1 {
			t.Errorf("Version of the last hash after a failed save = %d, want 1", got)
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

// TestSerialServe: the serial is the configuration version plus the
// revision, saved before it is served; a revision that goes back (a
// state file moved aside) moves the version up so that the serial is the
// last one plus 1, also after a restart; RFC 1982 order across the wrap.
func TestSerialServe(t *testing.T) {
	dir := t.TempDir()
	s := NewSerialStore(dir)
	if _, err := s.Version("a"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rev  uint64
		want uint32
	}{{5, 6}, {5, 6}, {7, 8}, {0, 9}, {1, 10}, {3, 12}} {
		if got, err := s.Serve(c.rev); err != nil || got != c.want {
			t.Fatalf("Serve(%d) = %d, %v; want %d", c.rev, got, err, c.want)
		}
	}
	r := NewSerialStore(dir)
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Serve(3); got != 12 {
		t.Errorf("after a restart, Serve(3) = %d, want 12", got)
	}
	if got, _ := r.Serve(0); got != 13 {
		t.Errorf("after a restart, a revision gone back: Serve(0) = %d, want 13", got)
	}
	if !serialAfter(1, 1<<32-1) || serialAfter(1<<32-1, 1) || serialAfter(5, 5) {
		t.Error("serialAfter does not follow RFC 1982 across the wrap")
	}
}

// TestConfigHashAsMarshal: the hash written name by name is the hash of
// json.Marshal's whole [gslb] table (so that no serial moves on an
// upgrade), for the shipped configurations, documents with and without
// names and services, and a TXT record whose text is the spliced key.
func TestConfigHashAsMarshal(t *testing.T) {
	old := func(cfg *configs.Config) string {
		g := cfg.GSLB
		g.Server = configs.GSLBServer{}
		data, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:])
	}
	var cfgs []*configs.Config
	files, err := filepath.Glob("../configs/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("shipped configs: %v %v", files, err)
	}
	for _, f := range files {
		cfg, err := configs.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cfgs = append(cfgs, cfg)
	}
	tricky := strings.Replace(algorithmsDoc(), "[[gslb.zone.record]]", "[[gslb.zone.record]]\nname = \"trick\"\ntype = \"TXT\"\nvalue = ',\"Names\":null,\"Names\":[]'\n\n[[gslb.zone.record]]", 1)
	for _, doc := range []string{algorithmsDoc(), serviceDoc(), asServices(serviceDoc()), tricky} {
		cfg, err := configs.Parse([]byte(doc), "doc.toml")
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	empty := *cfgs[len(cfgs)-1]
	empty.GSLB.Names = []configs.GSLBName{}
	none := *cfgs[len(cfgs)-1]
	none.GSLB.Names = nil
	cfgs = append(cfgs, &empty, &none, &configs.Config{})
	for i, cfg := range cfgs {
		if got, want := ConfigHash(cfg), old(cfg); got != want {
			t.Errorf("config %d: hash %s, json.Marshal's %s", i, got, want)
		}
	}
}
