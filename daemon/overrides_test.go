package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/intent"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

func destWeights(c *vip.MemClient) map[string]uint32 {
	out := map[string]uint32{}
	for a, d := range c.Table()[svcUDP].Dests {
		out[a.String()] = d.Weight
	}
	return out
}

func waitWeights(t *testing.T, c *vip.MemClient, want map[string]uint32) {
	t.Helper()
	poll.Until(t, 5*time.Second, fmt.Sprintf("weights %v", want), func() (bool, string) {
		got := destWeights(c)
		return maps.Equal(got, want), fmt.Sprint(got)
	})
}

func TestOverridesApplyPersistAndSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	h := start(t, path, mc, fp)
	all := map[string]uint32{"127.0.0.1:5301": 100, "127.0.0.1:5302": 100, "127.0.0.1:5303": 100}
	waitWeights(t, mc, all)
	ctx := context.Background()

	rep, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: "drain", Resolver: "bind-1", Reason: "disk full"}, "uid 0")
	if err != nil || !rep.Changed || len(rep.Overrides) != 1 || rep.Overrides[0].Reason != "disk full" || rep.Overrides[0].By != "uid 0" {
		t.Fatalf("drain: %+v, %v", rep, err)
	}
	// Applied at once: the reply comes after the reconcile.
	if w := destWeights(mc); w["127.0.0.1:5301"] != 0 || len(w) != 3 {
		t.Fatalf("after drain, weights = %v", w)
	}
	if _, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "upgrade"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 0, "127.0.0.1:5302": 100})

	// Unknown names are refused with a 404 and a suggestion.
	_, err = h.d.SetOverride(ctx, control.OverrideRequest{Action: "drain", Resolver: "bind-2"}, "uid 0")
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != http.StatusNotFound || !strings.Contains(ce.Message, `unknown resolver "bind-2" (did you mean "bind-1"?)`) {
		t.Fatalf("unknown resolver: %v", err)
	}
	_, err = h.d.SetOverride(ctx, control.OverrideRequest{Action: "drain", Resolver: "bind-1", Pool: "nope"}, "uid 0")
	if !errors.As(err, &ce) || ce.Code != http.StatusNotFound || !strings.Contains(ce.Message, `unknown pool "nope"`) {
		t.Fatalf("unknown pool: %v", err)
	}
	// Draining the last resolver that takes new queries is refused.
	_, err = h.d.SetOverride(ctx, control.OverrideRequest{Action: "drain", Resolver: "unbound-1"}, "uid 0")
	if !errors.As(err, &ce) || ce.Code != http.StatusConflict || !strings.Contains(ce.Message, "no destination taking new queries") {
		t.Fatalf("last taker: %v", err)
	}
	if w := destWeights(mc); w["127.0.0.1:5302"] != 100 {
		t.Fatalf("refused drain changed the table: %v", w)
	}

	// The overrides survive a restart (the daemon is stopped, as kill -9
	// would: nothing is written at stop).
	h.stop()
	b, err := os.ReadFile(filepath.Join(dir, "state", intent.FileName))
	if err != nil || !strings.Contains(string(b), `"disk full"`) || !strings.Contains(string(b), `"upgrade"`) {
		t.Fatalf("overrides file: %s %v", b, err)
	}
	h2 := start(t, path, mc, fp)
	st, err := h2.d.Status(ctx)
	if err != nil || len(st.Overrides) != 2 {
		t.Fatalf("status after restart: %+v %v", st, err)
	}
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 0, "127.0.0.1:5302": 100})
	rep, err = h2.d.SetOverride(ctx, control.OverrideRequest{Action: "enable", Resolver: "knot-1"}, "uid 0")
	if err != nil || !rep.Changed {
		t.Fatalf("enable: %+v %v", rep, err)
	}
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 0, "127.0.0.1:5302": 100, "127.0.0.1:5303": 100})

	// An override never puts a failing resolver into traffic: bind-1 is
	// drained and then fails; it leaves the table.
	fp.set("127.0.0.1:5301", true)
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5302": 100, "127.0.0.1:5303": 100})
}

func TestBadStateFileStopsStart(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o750); err != nil {
		t.Fatal(err)
	}
	sf := filepath.Join(dir, "state", intent.FileName)
	if err := os.WriteFile(sf, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	_, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify})
	var sfe *StateFileError
	if !errors.As(err, &sfe) || !strings.Contains(err.Error(), sf) {
		t.Fatalf("New with a bad state file: %v", err)
	}
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify, DiscardBadState: true})
	if err != nil {
		t.Fatalf("New with -discard-bad-state: %v", err)
	}
	d.ctlLn.Close()
	if d.statusLn != nil {
		d.statusLn.Close()
	}
	matches, _ := filepath.Glob(sf + ".bad-*")
	if len(matches) != 1 {
		t.Fatalf("copies of the bad file: %v", matches)
	}
	evs, _, _ := d.Events().Since(0)
	if len(evs) == 0 || !strings.Contains(evs[0].Message, "moved aside") {
		t.Errorf("no event about the discarded state file: %+v", evs)
	}
}

func TestOrphanedOverrideKeptAcrossReload(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	h := start(t, path, mc, fp)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
	ctx := context.Background()
	if _, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "rma"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	// The operator removes knot-1 from the config and reloads.
	cfg, _ := os.ReadFile(path)
	without := strings.Replace(strings.Replace(string(cfg), `, "knot-1"]`, `]`, 1), "[[resolver]]\nname = \"knot-1\"\naddress = \"127.0.0.1:5303\"\nvendor = \"knot\"\n", "", 1)
	if without == string(cfg) {
		t.Fatal("test config did not change")
	}
	if err := os.WriteFile(path, []byte(without), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ := h.d.Status(ctx)
	if len(st.Overrides) != 1 || !st.Overrides[0].Orphaned || st.Overrides[0].Reason != "rma" {
		t.Fatalf("overrides after reload: %+v", st.Overrides)
	}
	// It comes back: the override applies again.
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = h.d.Status(ctx)
	if len(st.Overrides) != 1 || st.Overrides[0].Orphaned {
		t.Fatalf("overrides after the resolver came back: %+v", st.Overrides)
	}
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302")
}

// TestOverrideNeverAddsFailingResolver: a disable that would put the pool
// below min_healthy would make it fail open and send queries to a resolver
// the checks keep out; it is refused, and nothing changes.
func TestOverrideNeverAddsFailingResolver(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{netip.MustParseAddrPort("127.0.0.1:5301"): true}}
	mc := vip.NewMemClient()
	h := start(t, path, mc, fp)
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5302": 100, "127.0.0.1:5303": 100})
	ctx := context.Background()
	if _, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "unbound-1"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5303": 100})
	_, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "rma"}, "uid 0")
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != http.StatusConflict || !strings.Contains(ce.Message, "bind-1 (127.0.0.1:5301)") || !strings.Contains(ce.Message, "fail open") {
		t.Fatalf("disable of the last healthy member: %v", err)
	}
	if w := destWeights(mc); len(w) != 1 || w["127.0.0.1:5303"] != 100 {
		t.Fatalf("refused override changed the table: %v", w)
	}
	st, _ := h.d.Status(ctx)
	if len(st.Overrides) != 1 {
		t.Fatalf("refused override was stored: %+v", st.Overrides)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "state", intent.FileName))
	if strings.Contains(string(b), "knot-1") {
		t.Fatalf("refused override was persisted:\n%s", b)
	}

	// A scoped enable that does not match says which override is left.
	_, err = h.d.SetOverride(ctx, control.OverrideRequest{Action: "enable", Resolver: "unbound-1", Pool: "main"}, "uid 0")
	if !errors.As(err, &ce) || ce.Code != http.StatusConflict || !strings.Contains(ce.Message, "still disabled in all pools") {
		t.Fatalf("scoped enable under a wider override: %v", err)
	}
}

// TestReloadKeepsStateDir: daemon.state_dir takes effect at the next
// restart; a reload that changes it keeps persisting where the state in
// force was loaded from.
func TestReloadKeepsStateDir(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	h := start(t, path, mc, fp)
	waitDests(t, mc, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303")
	cfg, _ := os.ReadFile(path)
	moved := strings.Replace(string(cfg), `state_dir = "`+filepath.Join(dir, "state")+`"`, `state_dir = "`+filepath.Join(dir, "elsewhere")+`"`, 1)
	if moved == string(cfg) {
		t.Fatal("test config did not change")
	}
	if err := os.WriteFile(path, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := h.d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: "drain", Resolver: "bind-1"}, "uid 0"); err != nil {
		t.Fatalf("drain after a reload that moved state_dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", intent.FileName)); err != nil {
		t.Errorf("override not persisted in the state dir in force: %v", err)
	}
}

// memStore is an intent.Store in memory whose Save fails on demand and
// whose Watch delivers what is sent on changes (changes made elsewhere):
// a change sent there becomes the stored state at the next revision.
type memStore struct {
	mu      sync.Mutex
	st      intent.State
	rev     intent.Revision
	fail    error
	saves   int
	tries   int // Save calls, failed ones included
	changes chan intent.State
}

func (s *memStore) Load(context.Context) (intent.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return intent.Stored{State: s.st.Clone(), Revision: s.rev}, nil
}

func (s *memStore) Save(_ context.Context, st intent.State, expected intent.Revision) (intent.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.fail != nil {
		return 0, s.fail
	}
	if expected != s.rev {
		return 0, &intent.ConflictError{Expected: expected, Actual: s.rev, Current: s.st.Clone()}
	}
	s.st, s.rev, s.saves = st.Clone(), s.rev+1, s.saves+1
	return s.rev, nil
}

func (s *memStore) Watch(ctx context.Context) <-chan intent.Stored {
	ch := make(chan intent.Stored)
	go func() {
		defer close(ch)
		for {
			select {
			case st := <-s.changes:
				s.mu.Lock()
				s.st, s.rev = st.Clone(), s.rev+1
				stored := intent.Stored{State: st, Revision: s.rev}
				s.mu.Unlock()
				select {
				case ch <- stored:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// TestOverrideNotPersistedChangesNothing: the daemon loads the operator
// intent from the store it is given (Options.Store), persists before
// applying, and when the store cannot save, refuses: nothing changes in
// the table, in status or in the store.
func TestOverrideNotPersistedChangesNothing(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	store := &memStore{st: intent.State{Overrides: []intent.Override{{Resolver: "bind-1", Action: intent.ActionDrain, Reason: "disk"}}}}
	h := startWithStore(t, path, store)
	d, mc, ctx := h.d, h.client, context.Background()
	var err error
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 0, "127.0.0.1:5302": 100, "127.0.0.1:5303": 100})

	store.mu.Lock()
	store.fail = errors.New("store unreachable")
	store.mu.Unlock()
	_, err = d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "rma"}, "uid 0")
	if err == nil || err.Error() != "cannot persist the override, nothing changed: store unreachable" {
		t.Fatalf("disable with a failing store: %v", err)
	}
	if w := destWeights(mc); len(w) != 3 || w["127.0.0.1:5303"] != 100 {
		t.Fatalf("an override that was not saved changed the table: %v", w)
	}
	st, _ := d.Status(ctx)
	if len(st.Overrides) != 1 || st.Overrides[0].Resolver != "bind-1" {
		t.Fatalf("an override that was not saved is in force: %+v", st.Overrides)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", intent.FileName)); !os.IsNotExist(err) {
		t.Errorf("the daemon wrote the state file beside the store it was given: %v", err)
	}

	// Once the store saves again, the same request goes through.
	store.mu.Lock()
	store.fail = nil
	store.mu.Unlock()
	if rep, err := d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "rma"}, "uid 0"); err != nil || !rep.Changed {
		t.Fatalf("disable: %+v %v", rep, err)
	}
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 0, "127.0.0.1:5302": 100})
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.saves != 1 || len(store.st.Overrides) != 2 || store.st.Overrides[1].Resolver != "knot-1" {
		t.Errorf("store holds %+v after %d saves", store.st, store.saves)
	}
}

// TestIntentChangedElsewhere: a state the store's Watch delivers (changed
// by another host sharing the store) becomes the intent in force: its
// drain takes effect in the table, status lists it, and the event log
// says where it came from.
func TestIntentChangedElsewhere(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	store := &memStore{changes: make(chan intent.State)}
	h := startWithStore(t, path, store)
	d, mc, ctx := h.d, h.client, context.Background()
	var err error
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 100, "127.0.0.1:5302": 100, "127.0.0.1:5303": 100})

	store.changes <- intent.State{Overrides: []intent.Override{{Resolver: "unbound-1", Action: intent.ActionDrain, Reason: "upgrade", By: "lb-2"}}}
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 100, "127.0.0.1:5302": 0, "127.0.0.1:5303": 100})
	st, err := d.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Overrides) != 1 || st.Overrides[0].Resolver != "unbound-1" || st.Overrides[0].Action != intent.ActionDrain {
		t.Fatalf("overrides in force = %+v, want unbound-1's drain", st.Overrides)
	}
	found := false
	evs, _, _ := d.Events().Since(0)
	for _, ev := range evs {
		found = found || (ev.Kind == control.EventOverride && strings.Contains(ev.Message, "changed elsewhere"))
	}
	if !found {
		t.Errorf("no event says the intent changed elsewhere")
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.saves != 0 {
		t.Errorf("the daemon saved a state it was handed by the store (%d saves)", store.saves)
	}
}

// TestOverrideStaleWriteRefused: another writer of the store (a second
// host) saved meanwhile, unseen: the override decided on the old revision
// is refused with a conflict (409) that says what changed and to retry;
// the daemon then takes the store's revision, so that the retry, decided
// on it, goes through and keeps the other writer's change.
func TestOverrideStaleWriteRefused(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	store := &memStore{}
	h := startWithStore(t, path, store)
	d, mc, ctx := h.d, h.client, context.Background()
	var err error
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 100, "127.0.0.1:5302": 100, "127.0.0.1:5303": 100})

	store.mu.Lock() // the other writer
	store.st, store.rev = intent.State{Overrides: []intent.Override{{Resolver: "bind-1", Action: intent.ActionDrain, Reason: "lb-2"}}}, store.rev+1
	store.mu.Unlock()

	_, err = d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "rma"}, "uid 0")
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != http.StatusConflict || !strings.Contains(err.Error(), "changed meanwhile (revision 0, now 1: 1 override") || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("stale write: %v, want a 409 saying what changed and to retry", err)
	}
	// The other writer's drain is now in force here; the retry keeps it.
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 0, "127.0.0.1:5302": 100, "127.0.0.1:5303": 100})
	if rep, err := d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "rma"}, "uid 0"); err != nil || !rep.Changed {
		t.Fatalf("retry: %+v %v", rep, err)
	}
	st, _ := store.Load(ctx)
	if st.Revision != 2 || len(st.State.Overrides) != 2 {
		t.Errorf("store after the retry: %+v, want revision 2 with both overrides", st)
	}
}

// TestOverrideAfterHandEditedFile: an operator replaced the state file by
// hand with one of a lower revision (an older copy, or one without a
// revision): the next change is refused once, the file's state is taken
// as it is, and the retry goes through on its revision.
func TestOverrideAfterHandEditedFile(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	mc := vip.NewMemClient()
	h := start(t, path, mc, fp)
	ctx := context.Background()
	waitWeights(t, mc, map[string]uint32{"127.0.0.1:5301": 100, "127.0.0.1:5302": 100, "127.0.0.1:5303": 100})
	for _, a := range []string{"drain", "enable"} { // revision 2
		if _, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: a, Resolver: "bind-1", Reason: "x"}, "uid 0"); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "state", intent.FileName)
	if err := os.WriteFile(file, []byte(`{"version": 1, "overrides": []}`+"\n"), 0o600); err != nil { // by hand: revision 0
		t.Fatal(err)
	}
	_, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "rma"}, "uid 0")
	if err == nil || !strings.Contains(err.Error(), "revision 2, now 0") {
		t.Fatalf("first change after the hand edit: %v, want a conflict from revision 2 to 0", err)
	}
	if rep, err := h.d.SetOverride(ctx, control.OverrideRequest{Action: "disable", Resolver: "knot-1", Reason: "rma"}, "uid 0"); err != nil || !rep.Changed {
		t.Fatalf("retry: %+v %v", rep, err)
	}
	st, err := intent.NewFileStore(filepath.Join(dir, "state"), intent.FileOptions{}).Load(ctx)
	if err != nil || st.Revision != 1 || len(st.State.Overrides) != 1 || st.State.Overrides[0].Resolver != "knot-1" {
		t.Errorf("file after the retry: %+v %v, want revision 1 with knot-1 only", st, err)
	}
}

// startWithStore runs the daemon of the configuration at path over a
// memory IPVS client and a fake probe (every target up), keeping its
// intent in store, until the test ends.
func startWithStore(t *testing.T, path string, store intent.Store) *harness {
	t.Helper()
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	return startOpts(t, Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Store: store}, fp)
}
