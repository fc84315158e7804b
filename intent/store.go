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
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lbdns/internal/atomicfile"
)

// Revision numbers the versions of the stored intent: every Save makes
// the next one; 0 is a store that was never written (or a file written
// before revisions were kept).
type Revision uint64

// Stored is one revision of the stored intent.
type Stored struct {
	State    State
	Revision Revision
}

// Store keeps the State in force where it survives a restart. Nothing in
// it assumes a file: a store shared by a fleet of LB hosts (etcd)
// implements the same three methods, with its own revisions.
type Store interface {
	// Load returns the stored state and its revision; a store that
	// holds nothing yet returns the zero State at revision 0. An error
	// means the stored intent cannot be used: the caller must not start
	// as if there were none.
	Load(ctx context.Context) (Stored, error)
	// Save replaces the stored state with st if the stored revision is
	// still expected, and returns the new revision. When the store holds
	// another revision it changes nothing and returns a *ConflictError.
	// When it returns any other error, the change is not in force,
	// unless errors.As finds a *atomicfile.DirSyncError in it: the new
	// state is then stored (at the returned revision), only its
	// durability across a power loss is in doubt.
	Save(ctx context.Context, st State, expected Revision) (Revision, error)
	// Watch delivers every revision saved after the call, in order,
	// by this process or by another writer sharing the store. The
	// channel is closed when ctx is done.
	Watch(ctx context.Context) <-chan Stored
}

// ConflictError is Save's error when the store was written meanwhile:
// the request was decided on a revision that is no longer the stored
// one. Nothing was changed; load again and retry.
type ConflictError struct {
	// Expected is the revision the write was decided on; Actual the
	// stored one, whose state is Current.
	Expected, Actual Revision
	Current          State
}

// Error says in one line what changed meanwhile and what to do.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("the operator intent changed meanwhile (revision %d, now %d: %s); nothing was changed: check it and retry",
		e.Expected, e.Actual, e.Current.Summary())
}

// Summary says in a few words what st holds: "2 overrides, 1
// emergency switch, 0 TTL raises".
func (st State) Summary() string {
	plural := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	return plural(len(st.Overrides), "override", "overrides") + ", " +
		plural(len(st.Emergencies), "emergency switch", "emergency switches") + ", " +
		plural(len(st.TTLRaises), "TTL raise", "TTL raises") + clientsSummary(len(st.Clients))
}

// clientsSummary is Summary's part for n client actions ("" for none,
// so that the words of a state without them stay as they were).
func clientsSummary(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return ", 1 client action"
	}
	return fmt.Sprintf(", %d client actions", n)
}

// FileName is the name of the FileStore's file in its directory.
const FileName = "overrides.json"

// FileVersion is the version of the file's format. Kinds of intent added
// later are new omitempty fields of State: a file without them keeps its
// bytes and this version.
const FileVersion = 1

// document is the file: the version, the revision (absent before the
// first Save that kept one), then the State's fields.
type document struct {
	Version  int      `json:"version"`
	Revision Revision `json:"revision,omitempty"`
	State
}

// Parse decodes a stored document strictly (unknown fields, a second
// value or another version are errors) and checks every entry: an entry
// the daemon would have to guess about is an error, never skipped.
func Parse(b []byte) (State, error) {
	st, _, err := parseDocument(b)
	return st, err
}

// parseDocument is Parse that also returns the document's revision.
func parseDocument(b []byte) (State, Revision, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc document
	if err := dec.Decode(&doc); err != nil {
		return State{}, 0, fmt.Errorf("parse: %w", err)
	}
	if dec.More() {
		return State{}, 0, errors.New("parse: data after the JSON object")
	}
	if doc.Version != FileVersion {
		return State{}, 0, fmt.Errorf("version %d is not %d (a file written by another lbdnsd version?)", doc.Version, FileVersion)
	}
	for i, o := range doc.Overrides {
		switch {
		case o.Resolver == "":
			return State{}, 0, fmt.Errorf("overrides[%d]: resolver missing", i)
		case o.Action != ActionDrain && o.Action != ActionDisable:
			return State{}, 0, fmt.Errorf("overrides[%d]: action %q is not drain or disable", i, o.Action)
		case o.Pool != "" && o.VIP != "":
			return State{}, 0, fmt.Errorf("overrides[%d]: both pool and vip are set", i)
		}
		for _, p := range doc.Overrides[:i] {
			if p.SameScope(o) {
				return State{}, 0, fmt.Errorf("overrides[%d]: a second override of %s %s", i, o.Resolver, o.ScopeText())
			}
		}
	}
	if err := parseGSLB(doc.State); err != nil {
		return State{}, 0, err
	}
	if err := parseClients(doc.State); err != nil {
		return State{}, 0, err
	}
	return doc.State, doc.Revision, nil
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
func Marshal(st State) ([]byte, error) { return marshalDocument(st, 0) }

// marshalDocument is Marshal with the revision rev (left out when 0).
func marshalDocument(st State, rev Revision) ([]byte, error) {
	if st.Overrides == nil {
		st.Overrides = []Override{}
	}
	b, err := json.MarshalIndent(document{Version: FileVersion, Revision: rev, State: st}, "", "  ")
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
// (FileName), replaced atomically on every Save. The file carries its
// revision; Save checks it under an advisory lock (FileName + ".lock",
// flock), so that a second writer of the same file (another process, an
// operator's tool) is detected as a conflict, never overwritten. Watch
// delivers the revisions this store saves.
type FileStore struct {
	path string
	opts FileOptions
	mu   sync.Mutex // serialises Load and Save

	// saved are the revisions saved by this store that some watcher has
	// not taken yet, in order; base is the number of revisions saved
	// before saved[0]; watchers holds each watcher's next position
	// (counted from the first Save); changed is closed and replaced on
	// every Save (all under mu).
	saved    []Stored
	base     int
	watchers map[*int]struct{}
	changed  chan struct{}
}

var _ Store = (*FileStore)(nil)

// NewFileStore returns the store of the file FileName in dir. The
// directory must exist when Load or Save is called.
func NewFileStore(dir string, opts FileOptions) *FileStore {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &FileStore{path: filepath.Join(dir, FileName), opts: opts, watchers: map[*int]struct{}{}, changed: make(chan struct{})}
}

// Path returns the file's path.
func (s *FileStore) Path() string { return s.path }

// Load reads the file. A missing file is the zero State at revision 0,
// as is a file written before revisions were kept (its state loads
// unchanged). A file that cannot be read or parsed is a
// *StateFileError, or, with DiscardBad, is renamed to PATH.bad-TIME and
// the zero State returned.
func (s *FileStore) Load(ctx context.Context) (Stored, error) {
	if err := ctx.Err(); err != nil {
		return Stored{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, rev, err := s.read()
	if err == nil {
		return Stored{State: st, Revision: rev}, nil
	}
	if !s.opts.DiscardBad {
		return Stored{}, &StateFileError{Path: s.path, Err: err}
	}
	kept := s.path + ".bad-" + s.opts.Now().UTC().Format("20060102T150405Z")
	if rerr := os.Rename(s.path, kept); rerr != nil {
		return Stored{}, &StateFileError{Path: s.path, Err: fmt.Errorf("%w; moving it aside failed too: %w", err, rerr)}
	}
	if s.opts.OnDiscard != nil {
		s.opts.OnDiscard(kept, err)
	}
	return Stored{}, nil
}

// read reads and parses the file (a missing one is the zero State at
// revision 0).
func (s *FileStore) read() (State, Revision, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, 0, nil
	}
	if err != nil {
		return State{}, 0, err
	}
	return parseDocument(b)
}

// Save replaces the file with st atomically (temporary file, fsync,
// rename, fsync of the directory) at the next revision, when the file is
// at revision expected; else it returns a *ConflictError and changes
// nothing. A file that cannot be read or parsed is a *StateFileError: it
// is not replaced. A failed directory sync after the rename is returned
// wrapping the *atomicfile.DirSyncError: the file is replaced.
func (s *FileStore) Save(ctx context.Context, st State, expected Revision) (Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return 0, fmt.Errorf("save %s: %w", s.path, err)
	}
	defer unlock()
	cur, rev, err := s.read()
	if err != nil {
		return 0, &StateFileError{Path: s.path, Err: err}
	}
	if rev != expected {
		return 0, &ConflictError{Expected: expected, Actual: rev, Current: cur}
	}
	next := rev + 1
	b, err := marshalDocument(st, next)
	if err != nil {
		return 0, err
	}
	werr := atomicfile.Write(s.path, b)
	var ds *atomicfile.DirSyncError
	if werr != nil && !errors.As(werr, &ds) {
		return 0, fmt.Errorf("save %s: %w", s.path, werr)
	}
	if len(s.watchers) > 0 {
		s.saved = append(s.saved, Stored{State: st.Clone(), Revision: next})
	} else {
		s.base++ // nobody watches: nothing to keep
	}
	close(s.changed)
	s.changed = make(chan struct{})
	if werr != nil {
		return next, fmt.Errorf("save %s: %w", s.path, werr)
	}
	return next, nil
}

// Watch delivers, in order, every revision this store saves after the
// call; the channel is closed when ctx is done. A reader that is slow
// gets every revision all the same, later: the store keeps what some
// watcher has not taken yet, and no more.
func (s *FileStore) Watch(ctx context.Context) <-chan Stored {
	ch := make(chan Stored)
	s.mu.Lock()
	next := s.base + len(s.saved)
	pos := &next
	s.watchers[pos] = struct{}{}
	s.mu.Unlock()
	go func() {
		defer close(ch)
		defer func() {
			s.mu.Lock()
			delete(s.watchers, pos)
			s.trimLocked()
			s.mu.Unlock()
		}()
		for {
			s.mu.Lock()
			var st Stored
			ready := *pos < s.base+len(s.saved)
			if ready {
				st = s.saved[*pos-s.base]
			}
			changed := s.changed
			s.mu.Unlock()
			if !ready {
				select {
				case <-changed:
				case <-ctx.Done():
					return
				}
				continue
			}
			select {
			case ch <- st:
				s.mu.Lock()
				*pos++
				s.trimLocked()
				s.mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// trimLocked drops the saved revisions every watcher has taken; s.mu
// held.
func (s *FileStore) trimLocked() {
	low := s.base + len(s.saved)
	for p := range s.watchers {
		low = min(low, *p)
	}
	if n := low - s.base; n > 0 {
		s.saved = slices.Delete(s.saved, 0, n)
		s.base = low
	}
}

// lockFile takes an exclusive advisory lock (flock) on path, creating it,
// and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}
