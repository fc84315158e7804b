package vip

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDryRunFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DryRunFileName)
	// A directory in the file's place makes the rename fail.
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	f := NewDryRunFile(path)
	if f.Written() || f.Path() != path {
		t.Fatalf("new file: written %v, path %q", f.Written(), f.Path())
	}
	t1 := Table{kU: {Key: kU, Scheduler: "wrr"}}
	if err := f.Update(t1, false); err == nil || !strings.HasPrefix(err.Error(), "vip: dry-run table: ") || f.Written() {
		t.Fatalf("Update over a directory: %v, written %v", err, f.Written())
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := f.Update(t1, false); err != nil || !f.Written() {
		t.Fatalf("retry: %v, written %v", err, f.Written())
	}
	if got, want := read(), FormatTable(t1, "DRY RUN: this table was NOT applied to the kernel"); got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	// Unchanged and written: left alone.
	t2 := Table{kT: {Key: kT, Scheduler: "rr"}}
	if err := f.Update(t2, false); err != nil || read() != FormatTable(t1, dryRunHeader) {
		t.Errorf("unchanged table rewritten: %v", err)
	}
	if err := f.Update(t2, true); err != nil || read() != FormatTable(t2, dryRunHeader) {
		t.Errorf("changed table not written: %v\n%s", err, read())
	}
}
