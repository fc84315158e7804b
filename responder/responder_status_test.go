package responder

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/monitor"
)

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

// TestResponderLastResortStatus: the status and the hub list the names
// on their last resort with since when (a change of last resort, or the
// end of the warm-up, starts it anew); names back on their pools leave
// the list; an unchanged rebuild keeps the times; off, nothing is listed.
func TestResponderLastResortStatus(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0).UTC()
	h := hub.New(func() hub.Facts { return nil })
	r := NewResponder(ResponderOptions{Hub: h, Now: func() time.Time { return clock }})
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
	names := func() []string {
		st, _ := h.Responder.Load()
		var out []string
		for _, n := range st.LastResort {
			out = append(out, fmt.Sprintf("%s %s warming=%v", n.Name, n.LastResort, n.Warming))
		}
		return out
	}

	update(health.Unknown, health.Unknown)
	if got, want := names(), []string{"fo.g.test. fail-open warming=true", "st.g.test. static warming=true", "sf.g.test. servfail warming=true"}; !slices.Equal(got, want) {
		t.Errorf("warming: hub lists %v, want %v", got, want)
	}
	clock = clock.Add(time.Minute)
	update(health.Up, health.Unknown)
	if st := r.Status(); len(st.LastResort) != 0 || len(names()) != 0 {
		t.Errorf("status with m1 up lists %+v (hub %v), want no name on its last resort", st.LastResort, names())
	}

	clock = clock.Add(time.Minute)
	down := clock
	update(health.Down, health.Down)
	// A rebuild that changes nothing on the last resorts (a reload) keeps
	// their times.
	clock = clock.Add(time.Minute)
	cfg = lastResortConfig(t, dir, false)
	update(health.Down, health.Down)

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

	// Off: no listener, nothing on its last resort.
	offCfg := lastResortConfig(t, t.TempDir(), true)
	if err := r.Update(offCfg, gslb.Evaluate(offCfg, nil, clock)); err != nil {
		t.Fatal(err)
	}
	st = r.Status()
	if st == nil || st.On || len(st.Listen) != 0 || len(st.LastResort) != 0 || len(names()) != 0 {
		t.Errorf("status off: %+v (hub %v), want off, no listener, no last resort", st, names())
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

// TestResponderFrontsStatus: the status lists the encrypted fronts
// serving, DoH's then DoT's, each with its bound addresses, paths, its
// connections open (counted as they open and close) and cap, and the
// certificate served with its expiry.
func TestResponderFrontsStatus(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := writeCert(t, dir, "gslb-status")
	doc := lastResortText(dir, false) + fmt.Sprintf(`
[gslb.tls]
doh_listen = ["127.0.0.1:0"]
dot_listen = ["127.0.0.1:0"]
cert_file = %q
key_file = %q
max_connections = 40
`, certFile, keyFile)
	cfg, err := configs.Parse([]byte(doc), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	r := NewResponder(ResponderOptions{Hub: hub.New(func() hub.Facts { return nil }), Now: func() time.Time { return clock }})
	defer r.Stop(context.Background())
	if err := r.Update(cfg, gslb.Evaluate(cfg, memberStates(health.Up, health.Up), clock)); err != nil {
		t.Fatal(err)
	}
	st := r.Status()
	if st == nil || len(st.Fronts) != 2 {
		t.Fatalf("status fronts %+v, want doh and dot", st)
	}
	doh, dot := st.Fronts[0], st.Fronts[1]
	if doh.Transport != "doh" || dot.Transport != "dot" || len(doh.Listen) != 1 || len(dot.Listen) != 1 {
		t.Fatalf("fronts %+v", st.Fronts)
	}
	for _, f := range st.Fronts {
		if f.Connections != 0 || f.MaxConnections != 40 || f.CertSubject != "CN=gslb-status" ||
			f.CertNotAfter.Before(clock.Add(23*time.Hour)) || f.CertNotAfter.After(clock.Add(25*time.Hour)) {
			t.Errorf("%s front before any connection: %+v", f.Transport, f)
		}
	}
	if doh.DoHPath != "/dns-query" || doh.JSONPath != "/resolve" || dot.DoHPath != "" {
		t.Errorf("paths: doh %q %q, dot %q", doh.DoHPath, doh.JSONPath, dot.DoHPath)
	}
	// Two DoT connections and one DoH connection, each handshaken.
	var conns []*tls.Conn
	for _, addr := range []string{dot.Listen[0], dot.Listen[0], doh.Listen[0]} {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	open := func() (int, int) {
		st := r.Status()
		return st.Fronts[0].Connections, st.Fronts[1].Connections
	}
	waitFor := func(wantDoH, wantDoT int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			gotDoH, gotDoT := open()
			if gotDoH == wantDoH && gotDoT == wantDoT {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("connections open: doh %d dot %d, want %d and %d", gotDoH, gotDoT, wantDoH, wantDoT)
			}
		}
	}
	waitFor(1, 2)
	conns[0].Close()
	conns[2].Close()
	waitFor(0, 1)
}
