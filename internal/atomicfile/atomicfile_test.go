package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRemoveTemps: the temporary files Write leaves when it dies before
// its rename are removed, only for the names given; the files themselves,
// other names, other suffixes and directories stay.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	// What Write leaves when the process is killed between CreateTemp and
	// Rename: the temp files of its own pattern.
	var left []string
	for _, name := range []string{"overrides.json", "overrides.json", "dry-run-table.txt"} {
		f, err := os.CreateTemp(dir, tempPattern(name))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		left = append(left, f.Name())
	}
	keep := []string{
		"overrides.json",
		".overrides.json.tmp",            // no digits
		".overrides.json.tmp12ab",        // not CreateTemp's
		".overrides.json.bad-20261201",   // not a temp file
		"x.overrides.json.tmp123",        // another prefix
		".someone-else.json.tmp123",      // a name not given
		".dry-run-table.txt.tmp123.keep", // a longer name
	}
	for _, n := range keep {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".overrides.json.tmp42"), 0o700); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, ".overrides.json.tmp42")
	if err := Write(filepath.Join(dir, "ipvs-owned.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, "ipvs-owned.json")

	removed, err := RemoveTemps(dir, "overrides.json", "dry-run-table.txt", "ipvs-owned.json")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(left)
	if !slices.Equal(removed, left) {
		t.Errorf("removed %q, want %q", removed, left)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	slices.Sort(keep)
	if !slices.Equal(names, keep) {
		t.Errorf("left in the directory %q, want %q", names, keep)
	}
	if _, err := RemoveTemps(filepath.Join(dir, "missing"), "overrides.json"); err == nil {
		t.Error("RemoveTemps of a missing directory: no error")
	}
}
