package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteMemProfile: the allocs profile is written as pprof's gzipped
// protocol buffer, and a path that cannot be created is an error.
func TestWriteMemProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mem.prof")
	if err := writeMemProfile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile is not gzipped pprof data: % x", b[:min(len(b), 8)])
	}
	if err := writeMemProfile(filepath.Join(t.TempDir(), "no", "such", "dir", "mem.prof")); err == nil {
		t.Fatal("a profile in a missing directory: no error")
	}
}
