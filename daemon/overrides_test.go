package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/vip"
)

func TestParseOverrides(t *testing.T) {
	good := `{"version":1,"overrides":[{"resolver":"bind-1","action":"drain","reason":"disk","set":"2026-11-29T10:00:00Z","by":"uid 0"},{"resolver":"bind-1","pool":"main","action":"disable","set":"2026-11-29T10:00:00Z"}]}`
	list, err := parseOverrides([]byte(good))
	if err != nil || len(list) != 2 || list[0].Reason != "disk" || list[1].Pool != "main" {
		t.Fatalf("parseOverrides(good) = %+v, %v", list, err)
	}
	for name, tc := range map[string]struct{ doc, want string }{
		"syntax":        {`{"version":1,`, "parse"},
		"unknown field": {`{"version":1,"overides":[]}`, `unknown field "overides"`},
		"version":       {`{"version":2,"overrides":[]}`, "version 2 is not 1"},
		"no version":    {`{"overrides":[]}`, "version 0 is not 1"},
		"action":        {`{"version":1,"overrides":[{"resolver":"a","action":"enable","set":"2026-11-29T10:00:00Z"}]}`, `overrides[0]: action "enable"`},
		"resolver":      {`{"version":1,"overrides":[{"action":"drain","set":"2026-11-29T10:00:00Z"}]}`, "overrides[0]: resolver missing"},
		"both scopes":   {`{"version":1,"overrides":[{"resolver":"a","pool":"p","vip":"v","action":"drain","set":"2026-11-29T10:00:00Z"}]}`, "both pool and vip"},
		"duplicate":     {`{"version":1,"overrides":[{"resolver":"a","action":"drain","set":"2026-11-29T10:00:00Z"},{"resolver":"a","action":"disable","set":"2026-11-29T10:00:00Z"}]}`, "overrides[1]: a second override of a in all pools"},
		"trailing":      {`{"version":1,"overrides":[]} {}`, "data after"},
		"empty file":    {``, "parse"},
	} {
		if _, err := parseOverrides([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func TestLoadOverridesBadFile(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if list, kept, err := loadOverrides(dir, false, now); err != nil || list != nil || kept != "" {
		t.Fatalf("missing file: %v %q %v", list, kept, err)
	}
	path := filepath.Join(dir, overridesFile)
	bad := []byte(`{"version":1,"overrides":[{"resolver":"bind-1","action":"disable"` + "\n")
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := loadOverrides(dir, false, now)
	var sfe *StateFileError
	if !errors.As(err, &sfe) || sfe.Path != path || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "-discard-bad-state") {
		t.Fatalf("bad file: err = %v, want a StateFileError naming %s and the flag", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != string(bad) {
		t.Fatal("the bad file was changed without -discard-bad-state")
	}
	list, kept, err := loadOverrides(dir, true, now)
	if err != nil || list != nil {
		t.Fatalf("discard: %v %v", list, err)
	}
	if want := path + ".bad-20261129T100000Z"; kept != want {
		t.Fatalf("kept = %q, want %q", kept, want)
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != string(bad) {
		t.Fatalf("copy %s: %q %v", kept, b, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("bad file still at %s", path)
	}
}

func TestApplyOverride(t *testing.T) {
	drain := storedOverride{Resolver: "a", Action: control.ActionDrain, Reason: "r1"}
	poolDisable := storedOverride{Resolver: "a", Pool: "p", Action: control.ActionDisable}
	other := storedOverride{Resolver: "b", Action: control.ActionDisable}
	list := []storedOverride{drain, poolDisable, other}

	if _, msg, changed := applyOverride(list, drain); changed || !strings.Contains(msg, "already drained") {
		t.Errorf("same drain: changed=%v msg=%q", changed, msg)
	}
	next, msg, changed := applyOverride(list, storedOverride{Resolver: "a", Action: control.ActionDisable})
	if !changed || len(next) != 3 || next[0].Action != control.ActionDisable || !strings.Contains(msg, "(was drained)") {
		t.Errorf("drain -> disable: %v %q %+v", changed, msg, next)
	}
	if list[0].Action != control.ActionDrain {
		t.Error("applyOverride changed its input")
	}
	next, _, changed = applyOverride(list, storedOverride{Resolver: "a", Pool: "p", Action: control.ActionEnable})
	if !changed || len(next) != 2 || next[0] != drain || next[1] != other {
		t.Errorf("scoped enable: %v %+v", changed, next)
	}
	next, msg, changed = applyOverride(list, storedOverride{Resolver: "a", Action: control.ActionEnable})
	if !changed || len(next) != 1 || next[0] != other || !strings.Contains(msg, "removed drain in all pools, disable in pool p") {
		t.Errorf("enable: %v %q %+v", changed, msg, next)
	}
	if _, msg, changed := applyOverride(list, storedOverride{Resolver: "c", Action: control.ActionEnable}); changed || !strings.Contains(msg, "nothing changed") {
		t.Errorf("enable without override: %v %q", changed, msg)
	}
	next, _, changed = applyOverride(nil, storedOverride{Resolver: "a", VIP: "v", Action: control.ActionDrain})
	if !changed || len(next) != 1 || next[0].VIP != "v" {
		t.Errorf("VIP drain: %v %+v", changed, next)
	}
}

func TestOrphaned(t *testing.T) {
	dir := t.TempDir()
	cfg, err := configs.Load(writeConfig(t, dir, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    storedOverride
		want string
	}{
		{storedOverride{Resolver: "bind-1"}, ""},
		{storedOverride{Resolver: "bind-1", Pool: "main"}, ""},
		{storedOverride{Resolver: "bind-1", VIP: "v4"}, ""},
		{storedOverride{Resolver: "gone"}, "resolver gone is not in the configuration"},
		{storedOverride{Resolver: "bind-1", Pool: "old"}, "pool old is not in the configuration"},
		{storedOverride{Resolver: "bind-1", VIP: "old"}, "VIP old is not in the configuration"},
	} {
		if got := orphaned(cfg, tc.o); got != tc.want {
			t.Errorf("orphaned(%+v) = %q, want %q", tc.o, got, tc.want)
		}
	}
}

func destWeights(c *vip.MemClient) map[string]uint32 {
	out := map[string]uint32{}
	for a, d := range c.Table()[svcUDP].Dests {
		out[a.String()] = d.Weight
	}
	return out
}

func waitWeights(t *testing.T, c *vip.MemClient, want map[string]uint32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got map[string]uint32
	for time.Now().Before(deadline) {
		got = destWeights(c)
		if len(got) == len(want) {
			same := true
			for k, v := range want {
				if w, ok := got[k]; !ok || w != v {
					same = false
				}
			}
			if same {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("weights = %v, want %v", got, want)
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
	b, err := os.ReadFile(filepath.Join(dir, "state", overridesFile))
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
	sf := filepath.Join(dir, "state", overridesFile)
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
	evs, _ := d.Events().Since(0)
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
	if !errors.As(err, &ce) || ce.Code != http.StatusConflict || !strings.Contains(ce.Message, "127.0.0.1:5301") || !strings.Contains(ce.Message, "fail open") {
		t.Fatalf("disable of the last healthy member: %v", err)
	}
	if w := destWeights(mc); len(w) != 1 || w["127.0.0.1:5303"] != 100 {
		t.Fatalf("refused override changed the table: %v", w)
	}
	st, _ := h.d.Status(ctx)
	if len(st.Overrides) != 1 {
		t.Fatalf("refused override was stored: %+v", st.Overrides)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "state", overridesFile))
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
	if _, err := os.Stat(filepath.Join(dir, "state", overridesFile)); err != nil {
		t.Errorf("override not persisted in the state dir in force: %v", err)
	}
}
