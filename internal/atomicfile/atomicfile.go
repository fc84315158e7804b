// Package atomicfile replaces files so that a crash leaves either the old
// or the new content, never a mix: the state files of lbdnsd (operator
// intent, owned IPVS services, the dry-run table) are written through it.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tempPattern is the os.CreateTemp pattern of Write's temporary file for
// a file named name: ".NAME.tmp" and the random digits CreateTemp puts in
// place of the star.
func tempPattern(name string) string { return "." + name + ".tmp*" }

// isTemp reports whether entry is a temporary file Write makes for a file
// named name: ".NAME.tmp" followed by one or more digits.
func isTemp(entry, name string) bool {
	digits, ok := strings.CutPrefix(entry, strings.TrimSuffix(tempPattern(name), "*"))
	if !ok || digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// RemoveTemps removes from dir the temporary files that Write leaves
// behind when the process dies between creating and renaming one (kill
// -9, a power loss), for the files named names only: regular files named
// ".NAME.tmp" and digits. Nothing else is touched, and nothing while Write
// runs for one of those files, so call it at start, before writing. It
// returns the paths removed, and every error met, joined.
func RemoveTemps(dir string, names ...string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("atomicfile: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		for _, name := range names {
			if !isTemp(e.Name(), name) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if err := os.Remove(p); err != nil {
				errs = append(errs, fmt.Errorf("atomicfile: %w", err))
			} else {
				removed = append(removed, p)
			}
			break
		}
	}
	return removed, errors.Join(errs...)
}

// Write replaces path with data so that a crash leaves either the old
// or the new file: temp file in the same directory, fsync, rename, fsync of
// the directory.
func Write(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), tempPattern(filepath.Base(path)))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable only once the directory is on disk.
	dir, err := os.Open(filepath.Dir(path))
	if err == nil {
		err = dir.Sync()
		dir.Close()
	}
	if err != nil {
		return &DirSyncError{err: err}
	}
	return nil
}

// DirSyncError is Write's error when the new file is in place but
// the directory could not be synced: the change is made, its durability
// across a power loss is in doubt.
type DirSyncError struct{ err error }

func (e *DirSyncError) Error() string {
	if e.err == nil {
		return "sync of the directory after rename failed"
	}
	return "sync of the directory after rename: " + e.err.Error()
}

func (e *DirSyncError) Unwrap() error { return e.err }
