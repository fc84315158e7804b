package vip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ownedFileVersion is the version of the files of the owned services and
// the owned addresses.
const ownedFileVersion = 1

// readOwnedFile is the one reader of the records of what the daemon owns
// (the owned services, the owned addresses): it decodes the file at path
// into rec, a pointer to the record, and checks that version (read from
// rec after decoding) is ownedFileVersion. what names the record in
// errors ("owned services").
//
// A missing file is no error: found is false (first start). Anything else
// that is not one whole record is an error: a file that cannot be read,
// that is not JSON or is cut short, a key the format does not have, data
// after the record, a version other than 1. The caller then takes none of
// the file's entries (nor, when an entry is bad, any of the others):
// nothing is guessed from a damaged record, and the worst outcome is that
// something the daemon owned is left alone.
func readOwnedFile(path, what string, rec any, version func() int) (found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("vip: %s: %w", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(rec); err != nil {
		return true, fmt.Errorf("vip: %s %s: %w", what, path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return true, fmt.Errorf("vip: %s %s: data after the record", what, path)
	}
	if v := version(); v != ownedFileVersion {
		return true, fmt.Errorf("vip: %s %s: version %d, want %d", what, path, v, ownedFileVersion)
	}
	return true, nil
}
