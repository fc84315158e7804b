package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/monitor"
)

// logLine is one log line as recordHandler saw it.
type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recordHandler is a slog.Handler that keeps every record.
type recordHandler struct {
	mu    sync.Mutex
	lines []logLine
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	l := logLine{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, l)
	h.mu.Unlock()
	return nil
}

func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// lastResortLines returns the lines about last resorts logged since the
// last call, as "LEVEL name type last_resort|was".
func (h *recordHandler) lastResortLines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.lines {
		if !strings.Contains(l.msg, "last resort") {
			continue
		}
		lr := l.attrs["last_resort"]
		if lr == "" {
			lr = "was " + l.attrs["was"]
		}
		if l.attrs["warming"] == "true" {
			lr += " warming"
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", l.level, l.attrs["name"], l.attrs["type"], lr))
	}
	h.lines = nil
	return out
}

// lastResortConfig serves zone g.test. with three names on pool p (m1,
// m2): fo (fail open), st (static records) and sf (servfail); listening
// on 127.0.0.1:0 unless off.
func lastResortConfig(t *testing.T, dir string, off bool) *configs.Config {
	t.Helper()
	cfg, err := configs.Parse([]byte(lastResortText(dir, off)), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// lastResortText is lastResortConfig's document.
func lastResortText(dir string, off bool) string {
	doc := fmt.Sprintf(`[daemon]
state_dir = %q

[check.c.dns]
qname = "example.com"

[[gslb.pool]]
name = "p"
monitors = ["c"]
[[gslb.pool.member]]
name = "m1"
address = "192.0.2.1"
[[gslb.pool.member]]
name = "m2"
address = "192.0.2.2"

[[gslb.zone]]
name = "g.test"
ns = ["ns1.g.test."]

[[gslb.name]]
name = "fo.g.test"
[[gslb.name.policy]]
pool = "p"

[[gslb.name]]
name = "st.g.test"
last_resort = "static"
static = ["198.51.100.9"]
[[gslb.name.policy]]
pool = "p"

[[gslb.name]]
name = "sf.g.test"
last_resort = "servfail"
[[gslb.name.policy]]
pool = "p"
`, dir)
	if !off {
		doc += "\n[gslb.server]\nlisten = [\"127.0.0.1:0\"]\n"
	}
	return doc
}

// memberStates are the monitor statuses of m1 and m2.
func memberStates(m1, m2 health.State) map[monitor.Key]monitor.TargetStatus {
	out := map[monitor.Key]monitor.TargetStatus{}
	for m, s := range map[string]health.State{"m1": m1, "m2": m2} {
		k := gslb.MonitorKey("p", m, "c")
		out[k] = monitor.TargetStatus{Key: k, Health: health.Status{State: s}}
	}
	return out
}

// TestResponderLastResortLoud: names starting to answer by their last
// resort are logged (Error for fail-open and servfail, Warn for static
// and while warming) and evented once each; those that stop are logged
// and evented once; an unchanged rebuild says nothing; the status lists
// the names on their last resort with since when.
func TestResponderLastResortLoud(t *testing.T) {
	h := &recordHandler{}
	clock := time.Unix(1_800_000_000, 0).UTC()
	evlog := control.NewEventLog(100, func() time.Time { return clock })
	r := NewResponder(ResponderOptions{Logger: slog.New(h), Events: evlog, Now: func() time.Time { return clock }})
	defer r.Stop(context.Background())
	if st := r.Status(); st != nil {
		t.Errorf("status before any update: %+v, want nil", st)
	}
	dir := t.TempDir()
	cfg := lastResortConfig(t, dir, false)
	update := func(m1, m2 health.State) {
		t.Helper()
		if err := r.Update(cfg, gslb.Evaluate(cfg, memberStates(m1, m2), clock)); err != nil {
			t.Fatal(err)
		}
	}
	var seen uint64
	events := func() []string {
		evs, next, _ := evlog.Since(seen)
		seen = next
		var out []string
		for _, ev := range evs {
			if ev.Kind != control.EventLastResort || !ev.Time.Equal(clock) {
				t.Errorf("event %+v: want kind %s at %v", ev, control.EventLastResort, clock)
			}
			out = append(out, fmt.Sprintf("%s error=%v: %s", ev.Subject, ev.Error, ev.Message))
		}
		return out
	}
	check := func(step string, gotLogs, wantLogs, gotEvs, wantEvs []string) {
		t.Helper()
		if !slices.Equal(gotLogs, wantLogs) {
			t.Errorf("%s: logs\n%s\nwant\n%s", step, strings.Join(gotLogs, "\n"), strings.Join(wantLogs, "\n"))
		}
		if !slices.Equal(gotEvs, wantEvs) {
			t.Errorf("%s: events\n%s\nwant\n%s", step, strings.Join(gotEvs, "\n"), strings.Join(wantEvs, "\n"))
		}
	}

	// Warming: every name on its last resort, each a warning.
	update(health.Unknown, health.Unknown)
	check("warming", h.lastResortLines(), []string{
		"WARN fo.g.test. A fail-open warming",
		"WARN st.g.test. A static warming",
		"WARN sf.g.test. A servfail warming",
	}, events(), []string{
		"fo.g.test./A error=false: fo.g.test. A answers by its last resort (fail-open) while its members are warming (no verdict yet)",
		"st.g.test./A error=false: st.g.test. A answers by its last resort (static) while its members are warming (no verdict yet)",
		"sf.g.test./A error=false: sf.g.test. A answers by its last resort (servfail) while its members are warming (no verdict yet)",
	})

	// m1 up: every name answers from its pool again.
	clock = clock.Add(time.Minute)
	update(health.Up, health.Unknown)
	check("m1 up", h.lastResortLines(), []string{
		"INFO fo.g.test. A was fail-open",
		"INFO st.g.test. A was static",
		"INFO sf.g.test. A was servfail",
	}, events(), []string{
		"fo.g.test./A error=false: fo.g.test. A no longer answers by its last resort (fail-open)",
		"st.g.test./A error=false: st.g.test. A no longer answers by its last resort (static)",
		"sf.g.test./A error=false: sf.g.test. A no longer answers by its last resort (servfail)",
	})
	if st := r.Status(); len(st.LastResort) != 0 {
		t.Errorf("status with m1 up lists %+v, want no name on its last resort", st.LastResort)
	}

	// Both down: fail-open and servfail are errors, static a warning.
	clock = clock.Add(time.Minute)
	down := clock
	update(health.Down, health.Down)
	check("all down", h.lastResortLines(), []string{
		"ERROR fo.g.test. A fail-open",
		"WARN st.g.test. A static",
		"ERROR sf.g.test. A servfail",
	}, events(), []string{
		"fo.g.test./A error=true: fo.g.test. A answers by its last resort (fail-open): no pool of its policies has a member up",
		"st.g.test./A error=false: st.g.test. A answers by its last resort (static): no pool of its policies has a member up",
		"sf.g.test./A error=true: sf.g.test. A answers by its last resort (servfail): no pool of its policies has a member up",
	})

	// A rebuild that changes nothing on the last resorts (a reload)
	// says nothing.
	clock = clock.Add(time.Minute)
	cfg = lastResortConfig(t, dir, false)
	update(health.Down, health.Down)
	check("reload", h.lastResortLines(), nil, events(), nil)

	st := r.Status()
	if !st.On || len(st.Listen) != 1 || st.Listen[0] != r.Addrs()[0].String() || st.ListenError != "" {
		t.Errorf("status listen: on %v %v %q, want on at %v", st.On, st.Listen, st.ListenError, r.Addrs())
	}
	if st.Serial != r.Serial() || st.Serial == 0 || !slices.Equal(st.Zones, []string{"g.test."}) {
		t.Errorf("status serial %d zones %v, want %d [g.test.]", st.Serial, st.Zones, r.Serial())
	}
	if !st.LastBuild.Equal(clock) || st.LastBuildError != "" {
		t.Errorf("status last build %v %q, want %v and no error", st.LastBuild, st.LastBuildError, clock)
	}
	want := []control.GSLBLastResort{
		{Name: "fo.g.test.", Type: "A", LastResort: "fail-open", Since: down},
		{Name: "st.g.test.", Type: "A", LastResort: "static", Since: down},
		{Name: "sf.g.test.", Type: "A", LastResort: "servfail", Since: down},
	}
	if !slices.Equal(st.LastResort, want) {
		t.Errorf("status last resort %+v, want %+v", st.LastResort, want)
	}

	// Off: no listener, nothing on its last resort, said nothing.
	offCfg := lastResortConfig(t, t.TempDir(), true)
	if err := r.Update(offCfg, gslb.Evaluate(offCfg, nil, clock)); err != nil {
		t.Fatal(err)
	}
	check("off", h.lastResortLines(), nil, events(), nil)
	st = r.Status()
	if st == nil || st.On || len(st.Listen) != 0 || len(st.LastResort) != 0 {
		t.Errorf("status off: %+v, want off, no listener, no last resort", st)
	}
}

// TestResponderStatusBuildError: a failed build is in the status, the
// last answers and their last resorts stay.
func TestResponderStatusBuildError(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0).UTC()
	fail := false
	def := DefaultBuilders()
	r := NewResponder(ResponderOptions{Now: func() time.Time { return clock }, Build: Builders{Snapshot: func(in SnapshotInput) (gslb.Answerer, error) {
		if fail {
			return nil, fmt.Errorf("boom")
		}
		return def.Snapshot(in)
	}}})
	defer r.Stop(context.Background())
	cfg := lastResortConfig(t, t.TempDir(), false)
	if err := r.Update(cfg, gslb.Evaluate(cfg, memberStates(health.Down, health.Down), clock)); err != nil {
		t.Fatal(err)
	}
	built := clock
	fail, clock = true, clock.Add(time.Minute)
	if err := r.Update(cfg, gslb.Evaluate(cfg, memberStates(health.Up, health.Down), clock)); err == nil {
		t.Fatal("update with a failing build: no error")
	}
	st := r.Status()
	if !st.LastBuild.Equal(built) || st.LastBuildError != "boom" || len(st.LastResort) != 3 {
		t.Errorf("status after a failed build: last build %v %q, %d names on last resort; want %v, boom, 3", st.LastBuild, st.LastBuildError, len(st.LastResort), built)
	}
}

// TestResponderLastResortGrouped: beyond lastResortEach names changing
// at once (the warm-up of a service's names), the responder logs and
// events once per type and last resort, with the count and the first
// names, while the status still lists every name.
func TestResponderLastResortGrouped(t *testing.T) {
	h := &recordHandler{}
	clock := time.Unix(1_800_000_000, 0).UTC()
	evlog := control.NewEventLog(100, func() time.Time { return clock })
	r := NewResponder(ResponderOptions{Logger: slog.New(h), Events: evlog, Now: func() time.Time { return clock }})
	defer r.Stop(context.Background())
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("%q", fmt.Sprintf("n%d.g.test", i)))
	}
	doc := "\n[[gslb.service]]\nname = \"many\"\nnames = [" + strings.Join(names, ", ") + "]\n[[gslb.service.policy]]\npool = \"p\"\n"
	cfg, err := configs.Parse([]byte(strings.Replace(lastResortText(t.TempDir(), false), "[gslb.server]", doc+"\n[gslb.server]", 1)), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	update := func(m1, m2 health.State) {
		t.Helper()
		if err := r.Update(cfg, gslb.Evaluate(cfg, memberStates(m1, m2), clock)); err != nil {
			t.Fatal(err)
		}
	}
	var seen uint64
	events := func() []string {
		evs, next, _ := evlog.Since(seen)
		seen = next
		var out []string
		for _, ev := range evs {
			out = append(out, fmt.Sprintf("%s error=%v: %s", ev.Subject, ev.Error, ev.Message))
		}
		return out
	}
	lines := func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		var out []string
		for _, l := range h.lines {
			if strings.Contains(l.msg, "last resort") {
				out = append(out, fmt.Sprintf("%s %s: %s %s %s %s first %s", l.level, l.msg, l.attrs["names"], l.attrs["type"], l.attrs["last_resort"]+l.attrs["was"], l.attrs["warming"], l.attrs["first"]))
			}
		}
		h.lines = nil
		return out
	}
	update(health.Unknown, health.Unknown)
	wantLogs := []string{
		"WARN gslb names answer by their last resort: 41 A fail-open true first fo.g.test.",
		"WARN gslb names answer by their last resort: 1 A static true first st.g.test.",
		"WARN gslb names answer by their last resort: 1 A servfail true first sf.g.test.",
	}
	wantEvs := []string{
		"41 names/A error=false: 41 names A answer by their last resort (fail-open) while their members are warming (no verdict yet): fo.g.test., n0.g.test., n1.g.test., n2.g.test., n3.g.test. and 36 more",
		"1 names/A error=false: 1 names A answer by their last resort (static) while their members are warming (no verdict yet): st.g.test.",
		"1 names/A error=false: 1 names A answer by their last resort (servfail) while their members are warming (no verdict yet): sf.g.test.",
	}
	if got := lines(); !slices.Equal(got, wantLogs) {
		t.Errorf("warming: logs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLogs, "\n"))
	}
	if got := events(); !slices.Equal(got, wantEvs) {
		t.Errorf("warming: events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantEvs, "\n"))
	}
	if st := r.Status(); len(st.LastResort) != 43 {
		t.Errorf("status lists %d names on their last resort, want 43", len(st.LastResort))
	}
	clock = clock.Add(time.Minute)
	update(health.Up, health.Up)
	wantLogs = []string{
		"INFO gslb names no longer answer by their last resort: 41 A fail-open  first fo.g.test.",
		"INFO gslb names no longer answer by their last resort: 1 A static  first st.g.test.",
		"INFO gslb names no longer answer by their last resort: 1 A servfail  first sf.g.test.",
	}
	if got := lines(); !slices.Equal(got, wantLogs) {
		t.Errorf("up: logs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLogs, "\n"))
	}
	if got := events(); len(got) != 3 || !strings.HasPrefix(got[0], "41 names/A error=false: 41 names A no longer answer by their last resort (fail-open): fo.g.test., n0.g.test.") {
		t.Errorf("up: events %q", got)
	}
}
