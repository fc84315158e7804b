package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadStateFile: a state file that cannot be parsed stops lbdnsd with
// an error naming the file and the way out; -discard-bad-state starts it
// without overrides, keeping the file's bytes aside.
func TestBadStateFile(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(2))
	if err := os.MkdirAll(w.stateDir, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(w.stateDir, "overrides.json")
	garbage := []byte("{\"version\": 1, \"overrides\": [{\"resolver\": \"r1\", \"action\": \"dis\x00able\"\n")
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}

	d := w.spawn()
	if code := d.waitExit(); code == 0 {
		t.Fatalf("lbdnsd started over a bad state file (exit 0):\n%s", d.stderr.String())
	}
	out := d.stderr.String()
	if !strings.Contains(out, path) || !strings.Contains(out, "-discard-bad-state") {
		t.Errorf("lbdnsd's error does not name %s and -discard-bad-state:\n%s", path, out)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, garbage) {
		t.Errorf("the refused start changed the state file (err %v)", err)
	}
	if _, err := os.Stat(w.socket); !os.IsNotExist(err) {
		t.Errorf("a control socket was left by the refused start (stat: %v)", err)
	}

	w.startReady("-discard-bad-state")
	kept, err := filepath.Glob(path + ".bad-*")
	if err != nil || len(kept) != 1 {
		t.Fatalf("copies of the bad file: %v (err %v), want one overrides.json.bad-*", kept, err)
	}
	if b, err := os.ReadFile(kept[0]); err != nil || !bytes.Equal(b, garbage) {
		t.Errorf("%s does not hold the original bytes (err %v)", kept[0], err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s still exists after it was discarded (stat: %v)", path, err)
	}
	st := w.statusJSON()
	checkOverrides(t, st.Overrides)
	found := false
	for _, ev := range w.events() {
		found = found || ev.Error && strings.Contains(ev.Message, kept[0])
	}
	if !found {
		t.Errorf("no error event names the copy %s", kept[0])
	}
}
