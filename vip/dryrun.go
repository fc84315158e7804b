package vip

import (
	"errors"
	"fmt"

	"lbdns/internal/atomicfile"
)

// DryRunFileName is the usual name of the dry-run table file, in the
// daemon's state directory.
const DryRunFileName = "dry-run-table.txt"

// dryRunHeader labels the table in a DryRunFile.
const dryRunHeader = "DRY RUN: this table was NOT applied to the kernel"

// DryRunFile is the file a dry run writes the table it would program to,
// in the spirit of ipvsadm -Ln (FormatTable), labelled as not applied. It
// knows whether it has been written. It is not safe for concurrent use.
type DryRunFile struct {
	path    string
	written bool
}

// NewDryRunFile returns the dry-run table file at path, not yet written.
func NewDryRunFile(path string) *DryRunFile { return &DryRunFile{path: path} }

// Path returns the file's path.
func (f *DryRunFile) Path() string { return f.path }

// Written reports whether the file has been written.
func (f *DryRunFile) Written() bool { return f.written }

// Update writes t to the file atomically (internal/atomicfile) when
// changed is set or the file was never written. On an error the file
// stays as it was and not Written, so the next Update tries again, except
// for an *atomicfile.DirSyncError: the file is then in place, only its
// durability is in doubt, and the error is not returned.
func (f *DryRunFile) Update(t Table, changed bool) error {
	if !changed && f.written {
		return nil
	}
	err := atomicfile.Write(f.path, []byte(FormatTable(t, dryRunHeader)))
	var ds *atomicfile.DirSyncError
	if err != nil && !errors.As(err, &ds) {
		return fmt.Errorf("vip: dry-run table: %w", err)
	}
	f.written = true
	return nil
}
