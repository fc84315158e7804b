package browser

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Require returns the Chromium binary's path for a test that needs it.
// Without Chromium it skips t, or fails it when LBDNS_REQUIRE_BROWSER=1
// (set where Chromium was just installed, as scripts/test.sh does).
func Require(t testing.TB) string {
	t.Helper()
	path, err := Find()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%v (%s=1)", err, EnvRequire)
		}
		t.Skipf("%v; set %s=1 to fail instead", err, EnvRequire)
	}
	return path
}

// ArtifactDir returns the directory tests keep their screenshots and other
// artifacts in, creating it: $LBDNS_ARTIFACTS (a relative path is taken
// from the repository root), else the artifacts directory at the
// repository root (the directory of go.mod above the working directory).
func ArtifactDir(t testing.TB) string {
	t.Helper()
	dir, err := artifactDir()
	if err != nil {
		t.Fatalf("browser: artifact dir: %v", err)
	}
	return dir
}

// artifactDir is ArtifactDir without the test.
func artifactDir() (string, error) {
	dir := os.Getenv(EnvArtifacts)
	if dir == "" || !filepath.IsAbs(dir) {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		if dir == "" {
			dir = "artifacts"
		}
		dir = filepath.Join(root, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// repoRoot returns the nearest directory at or above the working directory
// that holds a go.mod.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod at or above %s; set %s", wd, EnvArtifacts)
		}
	}
}
