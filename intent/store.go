package intent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"lbdns/internal/atomicfile"
)

// Store keeps the State in force where it survives a restart. Nothing in
// it assumes a file: a store shared by a fleet of LB hosts implements the
// same three methods.
type Store interface {
	// Load returns the stored state; a store that holds nothing yet
	// returns the zero State. An error means the stored intent cannot be
	// used: the caller must not start as if there were none.
	Load(ctx context.Context) (State, error)
	// Save replaces the stored state with st. When it returns an error,
	// the change is not in force, unless errors.As finds a
	// *atomicfile.DirSyncError in it: the new state is then stored, only
	// its durability across a power loss is in doubt.
	Save(ctx context.Context, st State) error
	// Watch delivers the state each time it is changed by someone other
	// than this process's Save (another host of the fleet). The channel
	// is closed when ctx is done.
	Watch(ctx context.Context) <-chan State
}

// FileName is the name of the FileStore's file in its directory.
const FileName = "overrides.json"

// FileVersion is the version of the file's format. Kinds of intent added
// later are new omitempty fields of State: a file without them keeps its
// bytes and this version.
const FileVersion = 1

// document is the file: the version, then the State's fields.
type document struct {
	Version int `json:"version"`
	State
}

// Parse decodes a stored document strictly (unknown fields, a second
// value or another version are errors) and checks every entry: an entry
// the daemon would have to guess about is an error, never skipped.
func Parse(b []byte) (State, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc document
	if err := dec.Decode(&doc); err != nil {
		return State{}, fmt.Errorf("parse: %w", err)
	}
	if dec.More() {
		return State{}, errors.New("parse: data after the JSON object")
	}
	if doc.Version != FileVersion {
		return State{}, fmt.Errorf("version %d is not %d (a file written by another lbdnsd version?)", doc.Version, FileVersion)
	}
	for i, o := range doc.Overrides {
		switch {
		case o.Resolver == "":
			return State{}, fmt.Errorf("overrides[%d]: resolver missing", i)
		case o.Action != ActionDrain && o.Action != ActionDisable:
			return State{}, fmt.Errorf("overrides[%d]: action %q is not drain or disable", i, o.Action)
		case o.Pool != "" && o.VIP != "":
			return State{}, fmt.Errorf("overrides[%d]: both pool and vip are set", i)
		}
		for _, p := range doc.Overrides[:i] {
			if p.SameScope(o) {
				return State{}, fmt.Errorf("overrides[%d]: a second override of %s %s", i, o.Resolver, o.ScopeText())
			}
		}
	}
	if err := parseGSLB(doc.State); err != nil {
		return State{}, err
	}
	return doc.State, nil
}

// parseGSLB checks the emergency switches and TTL raises of a stored
// document: names canonical, one scope each, a known mode, a TTL in
// range, no scope twice.
func parseGSLB(st State) error {
	scopeOK := func(name, zone string) error {
		switch {
		case name != "" && zone != "":
			return errors.New("both name and zone are set")
		case name != canonical(name) || zone != canonical(zone):
			return errors.New("name or zone not canonical (lower case, final dot)")
		}
		return nil
	}
	for i, e := range st.Emergencies {
		if err := scopeOK(e.Name, e.Zone); err != nil {
			return fmt.Errorf("emergencies[%d]: %w", i, err)
		}
		if e.Mode != ModeStatic {
			return fmt.Errorf("emergencies[%d]: mode %q is not %q", i, e.Mode, ModeStatic)
		}
		for _, p := range st.Emergencies[:i] {
			if p.Name == e.Name && p.Zone == e.Zone {
				return fmt.Errorf("emergencies[%d]: a second switch of %s", i, e.ScopeText())
			}
		}
	}
	for i, t := range st.TTLRaises {
		if err := scopeOK(t.Name, t.Zone); err != nil {
			return fmt.Errorf("ttl_raises[%d]: %w", i, err)
		}
		if t.Seconds < 1 || t.Seconds > MaxTTLRaise {
			return fmt.Errorf("ttl_raises[%d]: seconds %d is not 1 to %d", i, t.Seconds, MaxTTLRaise)
		}
		for _, p := range st.TTLRaises[:i] {
			if p.Name == t.Name && p.Zone == t.Zone {
				return fmt.Errorf("ttl_raises[%d]: a second raise of %s", i, t.ScopeText())
			}
		}
	}
	return nil
}

// Marshal encodes st as Parse reads it: indented by two spaces, ending in
// a newline, with an empty list written as [].
func Marshal(st State) ([]byte, error) {
	if st.Overrides == nil {
		st.Overrides = []Override{}
	}
	b, err := json.MarshalIndent(document{Version: FileVersion, State: st}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return append(b, '\n'), nil
}

// StateFileError is Load's error when the stored file cannot be read or
// parsed. The daemon does not start on it: the file holds operator
// intent. FileOptions.DiscardBad moves such a file aside instead.
type StateFileError struct {
	Path string
	Err  error
}

// Error names the file, the problem and the two ways out.
func (e *StateFileError) Error() string {
	return fmt.Sprintf("state file %s cannot be used: %v; it holds operator overrides (drain/disable) that must not be forgotten silently: "+
		"repair it, or start lbdnsd once with -discard-bad-state to move it aside (a copy is kept) and start without overrides", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *StateFileError) Unwrap() error { return e.Err }

// FileOptions configure a FileStore.
type FileOptions struct {
	// DiscardBad, when set, makes Load move a file it cannot use aside
	// (renamed to FILE.bad-TIME, kept for the operator) and return an
	// empty State, instead of failing with a *StateFileError.
	DiscardBad bool
	// OnDiscard, when set, is told the copy's path and the problem each
	// time Load moves a file aside.
	OnDiscard func(copyPath string, cause error)
	// Now is the clock for the copy's name. Default time.Now.
	Now func() time.Time
}

// FileStore is the Store of one LB host: a JSON file in a directory
// (FileName), replaced atomically on every Save. Nobody else writes the
// file while lbdnsd runs, so its Watch never delivers.
type FileStore struct {
	path string
	opts FileOptions
	mu   sync.Mutex // serialises Load and Save
}

var _ Store = (*FileStore)(nil)

// NewFileStore returns the store of the file FileName in dir. The
// directory must exist when Load or Save is called.
func NewFileStore(dir string, opts FileOptions) *FileStore {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &FileStore{path: filepath.Join(dir, FileName), opts: opts}
}

// Path returns the file's path.
func (s *FileStore) Path() string { return s.path }

// Load reads the file. A missing file is the zero State. A file that
// cannot be read or parsed is a *StateFileError, or, with DiscardBad, is
// renamed to PATH.bad-TIME and the zero State returned.
func (s *FileStore) Load(ctx context.Context) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	var st State
	if err == nil {
		st, err = Parse(b)
	}
	if err == nil {
		return st, nil
	}
	if !s.opts.DiscardBad {
		return State{}, &StateFileError{Path: s.path, Err: err}
	}
	kept := s.path + ".bad-" + s.opts.Now().UTC().Format("20060102T150405Z")
	if rerr := os.Rename(s.path, kept); rerr != nil {
		return State{}, &StateFileError{Path: s.path, Err: fmt.Errorf("%w; moving it aside failed too: %w", err, rerr)}
	}
	if s.opts.OnDiscard != nil {
		s.opts.OnDiscard(kept, err)
	}
	return State{}, nil
}

// Save replaces the file with st atomically (temporary file, fsync,
// rename, fsync of the directory). A failed directory sync after the
// rename is returned wrapping the *atomicfile.DirSyncError: the file is
// replaced.
func (s *FileStore) Save(ctx context.Context, st State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := Marshal(st)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := atomicfile.Write(s.path, b); err != nil {
		return fmt.Errorf("save %s: %w", s.path, err)
	}
	return nil
}

// Watch returns a channel that never delivers (nobody else writes the
// file) and is closed when ctx is done.
func (s *FileStore) Watch(ctx context.Context) <-chan State {
	ch := make(chan State)
	context.AfterFunc(ctx, func() { close(ch) })
	return ch
}
