package intent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	good := `{"version":1,"overrides":[{"resolver":"bind-1","action":"drain","reason":"disk","set":"2026-11-29T10:00:00Z","by":"uid 0"},{"resolver":"bind-1","pool":"main","action":"disable","set":"2026-11-29T10:00:00Z"}]}`
	st, err := Parse([]byte(good))
	if err != nil || len(st.Overrides) != 2 || st.Overrides[0].Reason != "disk" || st.Overrides[0].By != "uid 0" || st.Overrides[1].Pool != "main" {
		t.Fatalf("Parse(good) = %+v, %v", st, err)
	}
	for name, tc := range map[string]struct{ doc, want string }{
		"syntax":        {`{"version":1,`, "parse"},
		"unknown field": {`{"version":1,"overides":[]}`, `unknown field "overides"`},
		"unknown kind":  {`{"version":1,"overrides":[],"switches":[]}`, `unknown field "switches"`},
		"version":       {`{"version":2,"overrides":[]}`, "version 2 is not 1"},
		"no version":    {`{"overrides":[]}`, "version 0 is not 1"},
		"action":        {`{"version":1,"overrides":[{"resolver":"a","action":"enable","set":"2026-11-29T10:00:00Z"}]}`, `overrides[0]: action "enable" is not drain or disable`},
		"resolver":      {`{"version":1,"overrides":[{"action":"drain","set":"2026-11-29T10:00:00Z"}]}`, "overrides[0]: resolver missing"},
		"both scopes":   {`{"version":1,"overrides":[{"resolver":"a","pool":"p","vip":"v","action":"drain","set":"2026-11-29T10:00:00Z"}]}`, "overrides[0]: both pool and vip are set"},
		"duplicate":     {`{"version":1,"overrides":[{"resolver":"a","action":"drain","set":"2026-11-29T10:00:00Z"},{"resolver":"a","action":"disable","set":"2026-11-29T10:00:00Z"}]}`, "overrides[1]: a second override of a in all pools"},
		"trailing":      {`{"version":1,"overrides":[]} {}`, "parse: data after the JSON object"},
		"empty file":    {``, "parse"},
	} {
		if _, err := Parse([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}

// TestGoldenV1: files written by lbdnsd before the intent package existed
// (testdata/overrides-v1*.json, made by its saveOverrides) load unchanged
// and are written back byte for byte.
func TestGoldenV1(t *testing.T) {
	set := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for file, want := range map[string][]Override{
		"overrides-v1.json": {
			{Resolver: "bind-1", Action: ActionDrain, Reason: "disk full", Set: set, By: "uid 0"},
			{Resolver: "unbound-1", Pool: "main", Action: ActionDisable, Reason: `upgrade "9.18" <b>`, Set: set.Add(90*time.Second + 123456789), By: "uid 1000"},
			{Resolver: "knot-1", VIP: "v4", Action: ActionDrain, Set: set.Add(time.Hour)},
		},
		"overrides-v1-empty.json": nil,
	} {
		t.Run(file, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, FileName), golden, 0o600); err != nil {
				t.Fatal(err)
			}
			s := NewFileStore(dir, FileOptions{})
			ctx := context.Background()
			stored, err := s.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st := stored.State
			if stored.Revision != 0 {
				t.Errorf("a file written before revisions loads at revision %d, want 0", stored.Revision)
			}
			if len(st.Overrides) != len(want) {
				t.Fatalf("loaded %+v, want %+v", st.Overrides, want)
			}
			for i := range want {
				got := st.Overrides[i]
				if !got.Set.Equal(want[i].Set) {
					t.Errorf("overrides[%d].Set = %v, want %v", i, got.Set, want[i].Set)
				}
				got.Set = want[i].Set
				if got != want[i] {
					t.Errorf("overrides[%d] = %+v, want %+v", i, got, want[i])
				}
			}
			if rev, err := s.Save(ctx, st, 0); err != nil || rev != 1 {
				t.Fatalf("Save at revision 0 = %d, %v; want revision 1", rev, err)
			}
			// Saved back, the file is the same with its revision.
			withRev := bytes.Replace(golden, []byte("\"version\": 1,\n"), []byte("\"version\": 1,\n  \"revision\": 1,\n"), 1)
			if b, _ := os.ReadFile(s.Path()); !bytes.Equal(b, withRev) {
				t.Errorf("saved back:\n%s\nwant (testdata/%s with its revision):\n%s", b, file, withRev)
			}
			if b, _ := Marshal(State{Overrides: want}); !bytes.Equal(b, golden) {
				t.Errorf("Marshal:\n%s\nwant:\n%s", b, golden)
			}
		})
	}
}

func TestFileStoreMissingFile(t *testing.T) {
	s := NewFileStore(t.TempDir(), FileOptions{})
	st, err := s.Load(context.Background())
	if err != nil || st.State.Overrides != nil || st.Revision != 0 {
		t.Fatalf("missing file: %+v %v", st, err)
	}
}

func TestFileStoreBadFile(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(dir, FileName)
	bad := []byte(`{"version":1,"overrides":[{"resolver":"bind-1","action":"disable"` + "\n")
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := NewFileStore(dir, FileOptions{Now: func() time.Time { return now }}).Load(ctx)
	var sfe *StateFileError
	if !errors.As(err, &sfe) || sfe.Path != path || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "-discard-bad-state") {
		t.Fatalf("bad file: err = %v, want a StateFileError naming %s and the flag", err, path)
	}
	if want := "state file " + path + " cannot be used: parse: unexpected EOF; it holds operator overrides (drain/disable) that must not be forgotten silently: " +
		"repair it, or start lbdnsd once with -discard-bad-state to move it aside (a copy is kept) and start without overrides"; err.Error() != want {
		t.Errorf("message:\n%s\nwant:\n%s", err, want)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, bad) {
		t.Fatal("the bad file was changed without DiscardBad")
	}

	var kept string
	var cause error
	s := NewFileStore(dir, FileOptions{DiscardBad: true, Now: func() time.Time { return now },
		OnDiscard: func(c string, err error) { kept, cause = c, err }})
	st, err := s.Load(ctx)
	if err != nil || st.State.Overrides != nil {
		t.Fatalf("discard: %+v %v", st, err)
	}
	if want := path + ".bad-20261129T100000Z"; kept != want || cause == nil {
		t.Fatalf("OnDiscard(%q, %v), want %q and the cause", kept, cause, want)
	}
	if b, err := os.ReadFile(kept); err != nil || !bytes.Equal(b, bad) {
		t.Fatalf("copy %s: %q %v", kept, b, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("bad file still at %s", path)
	}
}

// TestSaveFailsChangesNothing: when the store cannot write (a directory
// stands where the file goes), Save says so, and the state in force and
// on disk is the one before: Apply's result is only adopted once saved.
func TestSaveFailsChangesNothing(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := NewFileStore(dir, FileOptions{})
	if err := os.Mkdir(s.Path(), 0o750); err != nil {
		t.Fatal(err)
	}
	cur := State{Overrides: []Override{{Resolver: "bind-1", Action: ActionDrain}}}
	next, res, err := Apply(cur, Request{Action: ActionDisable, Resolver: "knot-1"}, &fakeView{cfg: testConfig()})
	if err != nil || !res.Changed {
		t.Fatalf("Apply: %+v %v", res, err)
	}
	_, err = s.Save(ctx, next, 0)
	if err == nil || !strings.Contains(err.Error(), s.Path()) {
		t.Fatalf("Save onto a directory: %v", err)
	}
	if len(cur.Overrides) != 1 || cur.Overrides[0].Action != ActionDrain {
		t.Fatalf("the state in force changed: %+v", cur)
	}
	if fi, err := os.Stat(s.Path()); err != nil || !fi.IsDir() {
		t.Fatalf("the directory in place of the file was replaced: %v", err)
	}
	for _, e := range must(os.ReadDir(dir)) {
		if n := e.Name(); n != FileName && n != FileName+".lock" {
			t.Errorf("file left behind: %s", n)
		}
	}
	// Load refuses it as well: it is not a state file.
	var sfe *StateFileError
	if _, err := s.Load(ctx); !errors.As(err, &sfe) {
		t.Errorf("Load of a directory: %v", err)
	}
}

func TestSaveHonoursContext(t *testing.T) {
	dir := t.TempDir()
	s := NewFileStore(dir, FileOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Save(ctx, State{}, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with a done context: %v", err)
	}
	if _, err := os.Stat(s.Path()); !os.IsNotExist(err) {
		t.Errorf("a file was written: %v", err)
	}
}

// TestFileStoreWatch: Watch delivers every revision saved after it was
// called, in order, also to a reader that reads late, and closes when
// its context is done.
func TestFileStoreWatch(t *testing.T) {
	s := NewFileStore(t.TempDir(), FileOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	ch := s.Watch(ctx)
	select {
	case st := <-ch:
		t.Fatalf("Watch delivered %+v before any Save", st)
	default:
	}
	var rev Revision
	for i := range 5 {
		var err error
		if rev, err = s.Save(ctx, State{Overrides: []Override{{Resolver: fmt.Sprint("r", i), Action: ActionDrain}}}, rev); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		st := <-ch
		if st.Revision != Revision(i+1) || st.State.Overrides[0].Resolver != fmt.Sprint("r", i) {
			t.Fatalf("delivery %d: %+v", i, st)
		}
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("Watch delivered after its context was done")
	}
}

// TestFileStoreConflict: two stores of one file (two writers) that loaded
// the same revision: the second Save is refused with a *ConflictError
// naming both revisions, and the file keeps the first writer's state.
func TestFileStoreConflict(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a, b := NewFileStore(dir, FileOptions{}), NewFileStore(dir, FileOptions{})
	la, _ := a.Load(ctx)
	lb, _ := b.Load(ctx)
	if _, err := a.Save(ctx, State{Overrides: []Override{{Resolver: "bind-1", Action: ActionDrain}}}, la.Revision); err != nil {
		t.Fatal(err)
	}
	_, err := b.Save(ctx, State{Overrides: []Override{{Resolver: "knot-1", Action: ActionDisable}}}, lb.Revision)
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Expected != 0 || ce.Actual != 1 || len(ce.Current.Overrides) != 1 {
		t.Fatalf("stale Save: %v, want a ConflictError from revision 0 to 1", err)
	}
	if want := "the operator intent changed meanwhile (revision 0, now 1: 1 override, 0 emergency switches, 0 TTL raises); nothing was changed: check it and retry"; err.Error() != want {
		t.Errorf("message:\n%s\nwant:\n%s", err, want)
	}
	got, err := b.Load(ctx)
	if err != nil || got.Revision != 1 || got.State.Overrides[0].Resolver != "bind-1" {
		t.Fatalf("after the refused write: %+v %v", got, err)
	}
	if _, err := b.Save(ctx, State{}, got.Revision); err != nil {
		t.Errorf("Save on the revision loaded again: %v", err)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	s := NewFileStore(t.TempDir(), FileOptions{})
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	next, _, err := Apply(State{}, Request{Action: ActionDrain, Resolver: "bind-1", Reason: "disk", By: "uid 0", At: at}, &fakeView{cfg: testConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, next, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx)
	if err != nil || got.Revision != 1 || len(got.State.Overrides) != 1 || got.State.Overrides[0] != next.Overrides[0] {
		t.Fatalf("Load = %+v %v, want %+v", got, err, next)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestFileStoreWatchKeepsNoMore: the store keeps the revisions a watcher
// has not taken yet, and drops them once every watcher took them; with
// no watcher it keeps none.
func TestFileStoreWatchKeepsNoMore(t *testing.T) {
	s := NewFileStore(t.TempDir(), FileOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rev, _ := s.Save(ctx, State{}, 0) // no watcher yet: nothing kept
	if len(s.saved) != 0 {
		t.Fatalf("%d revisions kept without a watcher", len(s.saved))
	}
	fast, slow := s.Watch(ctx), s.Watch(ctx)
	for range 3 {
		var err error
		if rev, err = s.Save(ctx, State{}, rev); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		<-fast
	}
	s.mu.Lock()
	kept := len(s.saved)
	s.mu.Unlock()
	if kept != 3 {
		t.Errorf("%d revisions kept while one watcher has taken none, want 3", kept)
	}
	for i := range 3 {
		if st := <-slow; st.Revision != Revision(i+2) {
			t.Fatalf("slow watcher got revision %d, want %d", st.Revision, i+2)
		}
	}
	poll := func() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.saved) }
	for range 1000 {
		if poll() == 0 {
			return
		}
		runtime.Gosched()
	}
	t.Errorf("%d revisions kept after every watcher took them", poll())
}
