// Package atomicfile replaces files so that a crash leaves either the old
// or the new content, never a mix: the state files of lbdnsd (operator
// intent, owned IPVS services, the dry-run table) are written through it.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data so that a crash leaves either the old
// or the new file: temp file in the same directory, fsync, rename, fsync of
// the directory.
func Write(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
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
