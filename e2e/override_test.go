package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lbdns/control"
)

// TestDrainDisableEnable: drain keeps the destination with weight 0 in
// every service, disable removes it, enable brings both back with their
// weights; status shows each override with its reason.
func TestDrainDisableEnable(t *testing.T) {
	t.Parallel()
	w := newWorld(t, twoPools())
	w.startReady()

	r := w.mustLbctl("drain", "r1", "--reason", "disk full")
	if !strings.Contains(r.stdout, "r1 drained") {
		t.Errorf("drain output %q does not say r1 was drained", r.stdout)
	}
	w.waitTable("r1 drained", w.wantTable([]string{"r1"}, nil))
	st := w.statusJSON()
	if m, _ := member(st, "main", "r1"); m.Override != "drain" || m.OverrideReason != "disk full" || !m.InTraffic || m.Weight != 0 {
		t.Errorf("drained member r1: %+v", m)
	}
	checkOverrides(t, st.Overrides, "r1 drain disk full")
	out := w.mustLbctl("status").stdout
	if row := rowOf(t, tableRows(t, out, memberColumns...), "RESOLVER", "r1"); row["OVERRIDE"] != "drain (disk full)" || row["WEIGHT"] != "0" {
		t.Errorf("status row of r1: %v", row)
	}
	if row := rowOf(t, tableRows(t, out, overrideColumns...), "RESOLVER", "r1"); row["ACTION"] != "drain" || row["REASON"] != "disk full" || row["BY"] != "uid 0" {
		t.Errorf("override row of r1: %v", row)
	}

	w.mustLbctl("disable", "r2", "--reason", "kernel upgrade")
	w.waitTable("r1 drained, r2 disabled", w.wantTable([]string{"r1"}, []string{"r2"}))
	st = w.statusJSON()
	if m, _ := member(st, "main", "r2"); m.Override != "disable" || m.OverrideReason != "kernel upgrade" || m.InTraffic {
		t.Errorf("disabled member r2: %+v", m)
	}
	checkOverrides(t, st.Overrides, "r1 drain disk full", "r2 disable kernel upgrade")
	checkOverridesFile(t, w, "r1 drain disk full", "r2 disable kernel upgrade")

	w.mustLbctl("enable", "r1")
	w.mustLbctl("enable", "r2")
	w.waitTable("r1 and r2 enabled", w.wantTable(nil, nil))
	st = w.statusJSON()
	for _, name := range []string{"r1", "r2"} {
		if m, _ := member(st, "main", name); m.Override != "none" || m.OverrideReason != "" || !m.InTraffic || m.Weight != uint32(w.layout.resolver(name).weight) {
			t.Errorf("enabled member %s: %+v", name, m)
		}
	}
	checkOverrides(t, st.Overrides)
	checkOverridesFile(t, w)
}

// TestOverrideRefusals: scoping errors, unknown names and draining the
// last destination taking queries are refused with a clear message and
// change nothing.
func TestOverrideRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t, twoPools())
	w.startReady()

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"pool the resolver is not in", []string{"drain", "r1", "--pool", "other"}, 1,
			[]string{"r1 is not a member of pool other", "it is in: main"}},
		{"vip of another pool", []string{"disable", "r1", "--vip", "v4b"}, 1,
			[]string{"r1 is not in pool other of VIP v4b"}},
		{"unknown pool", []string{"drain", "r1", "--pool", "nosuch"}, 1, []string{`unknown pool "nosuch"`}},
		{"pool and vip", []string{"drain", "r1", "--pool", "main", "--vip", "v4"}, 2, []string{"--pool or --vip, not both"}},
		{"unknown resolver", []string{"disable", "r9"}, 1, []string{`unknown resolver "r9"`}},
		{"no resolver", []string{"drain"}, 2, []string{"missing RESOLVER"}},
	} {
		r := w.lbctl(tc.args...)
		if r.code != tc.code {
			t.Errorf("%s: lbctl %q: exit %d, want %d\n%s", tc.name, tc.args, r.code, tc.code, r)
		}
		for _, s := range tc.want {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, s, r.stderr)
			}
		}
	}
	checkOverrides(t, w.statusJSON().Overrides)
	checkOverridesFile(t, w)

	// Pool "other" has r5 and r6: draining both would leave its services
	// with nobody taking new queries.
	w.mustLbctl("drain", "r5", "--pool", "other", "--reason", "first")
	w.waitTable("r5 drained", w.wantTable([]string{"r5"}, nil))
	for _, args := range [][]string{{"drain", "r6"}, {"disable", "r6", "--vip", "v4b"}} {
		r := w.lbctl(args...)
		if r.code != 1 || !strings.Contains(r.stderr, "no destination taking new queries") || !strings.Contains(r.stderr, "v4b") {
			t.Errorf("lbctl %q (the last taker): want exit 1 naming v4b and 'no destination taking new queries'; %s", args, r)
		}
	}
	checkOverrides(t, w.statusJSON().Overrides, "r5 pool=other drain first")
	checkOverridesFile(t, w, "r5 pool=other drain first")
	if tb, err := w.readTable(); err != nil || !tb.equal(w.wantTable([]string{"r5"}, nil)) {
		t.Errorf("the refusal changed the table (err %v):\n%s", err, tb)
	}

	// Once r5 takes queries again, r6 may go.
	w.mustLbctl("enable", "r5")
	w.mustLbctl("disable", "r6", "--vip", "v4b")
	w.waitTable("r6 disabled on v4b", w.wantTable(nil, []string{"r6"}))
	checkOverrides(t, w.statusJSON().Overrides, "r6 vip=v4b disable")
}

// overrideText is an override in the form the checks compare: "RESOLVER
// [pool=P] [vip=V] ACTION [REASON]".
func overrideText(resolver, pool, vip, action, reason string) string {
	f := []string{resolver}
	if pool != "" {
		f = append(f, "pool="+pool)
	}
	if vip != "" {
		f = append(f, "vip="+vip)
	}
	f = append(f, action)
	if reason != "" {
		f = append(f, reason)
	}
	return strings.Join(f, " ")
}

// checkOverrides compares the overrides in status with want (in order),
// and checks each was set by uid 0 and is not orphaned.
func checkOverrides(t *testing.T, got []control.Override, want ...string) {
	t.Helper()
	var texts []string
	for _, o := range got {
		texts = append(texts, overrideText(o.Resolver, o.Pool, o.VIP, o.Action, o.Reason))
		if o.By != "uid 0" || o.Set.IsZero() || o.Orphaned {
			t.Errorf("override %+v: want set by uid 0, with a time, not orphaned", o)
		}
	}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("overrides in status:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
}

// overridesDoc is the daemon's overrides file, as the tests read it.
type overridesDoc struct {
	Version int `json:"version"`
	// Revision is one more with every change saved.
	Revision  uint64 `json:"revision"`
	Overrides []struct {
		Resolver string `json:"resolver"`
		Pool     string `json:"pool"`
		VIP      string `json:"vip"`
		Action   string `json:"action"`
		Reason   string `json:"reason"`
		Set      string `json:"set"`
		By       string `json:"by"`
	} `json:"overrides"`
}

// checkOverridesFile checks that STATE/overrides.json is valid JSON, of
// version 1, holding want (in order); no want and no file is fine.
func checkOverridesFile(t *testing.T, w *world, want ...string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(w.stateDir, "overrides.json")); os.IsNotExist(err) && len(want) == 0 {
		return
	}
	doc := readOverridesFile(t, w)
	var texts []string
	for _, o := range doc.Overrides {
		texts = append(texts, overrideText(o.Resolver, o.Pool, o.VIP, o.Action, o.Reason))
	}
	if doc.Version != 1 || strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("overrides file (version %d):\n%s\nwant version 1 with:\n%s", doc.Version, strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
}

// readOverridesFile reads STATE/overrides.json strictly: it must be one
// JSON document with only the known fields.
func readOverridesFile(t *testing.T, w *world) overridesDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.stateDir, "overrides.json"))
	if err != nil {
		t.Fatalf("overrides file: %v", err)
	}
	var doc overridesDoc
	decodeStrict(t, string(b), &doc)
	return doc
}

// TestVIPScopedOverrideInStatus: an override scoped to a VIP changes only
// that VIP's services, and a member's in_traffic and weight in status say
// what those services hold (control.Member: "InTraffic is true when the
// member has a destination in the pool's services; Weight is its IPVS
// weight then (0 when drained)"). Each pool here has one VIP, so r4
// drained on v4 takes no new queries (weight 0) and r6 disabled on v4b is
// out of traffic. The pool's health counts are not changed (README).
func TestVIPScopedOverrideInStatus(t *testing.T) {
	t.Parallel()
	w := newWorld(t, twoPools())
	w.startReady()
	w.mustLbctl("drain", "r4", "--vip", "v4", "--reason", "vip drain")
	w.mustLbctl("disable", "r6", "--vip", "v4b", "--reason", "vip disable")
	w.waitTable("r4 drained on v4, r6 disabled on v4b", w.wantTable([]string{"r4"}, []string{"r6"}))

	st := w.statusJSON()
	checkOverrides(t, st.Overrides, "r4 vip=v4 drain vip drain", "r6 vip=v4b disable vip disable")
	if m, _ := member(st, "main", "r4"); !m.InTraffic || m.Weight != 0 {
		t.Errorf("r4, drained on v4 (pool main's only VIP): in_traffic %v weight %d, want true 0", m.InTraffic, m.Weight)
	}
	if m, _ := member(st, "other", "r6"); m.InTraffic {
		t.Errorf("r6, disabled on v4b (pool other's only VIP): in_traffic %v weight %d, want out of traffic", m.InTraffic, m.Weight)
	}
	if m, _ := member(st, "main", "r3"); !m.InTraffic || m.Weight != 30 {
		t.Errorf("r3, no override: in_traffic %v weight %d, want true 30", m.InTraffic, m.Weight)
	}
	if st.Pools[0].Healthy != 4 || st.Pools[1].Healthy != 2 {
		t.Errorf("healthy counts %d and %d, want 4 and 2 (VIP-scoped overrides do not change them)", st.Pools[0].Healthy, st.Pools[1].Healthy)
	}
	rows := tableRows(t, w.mustLbctl("status").stdout, memberColumns...)
	if r4, r6 := rowOf(t, rows, "RESOLVER", "r4"), rowOf(t, rows, "RESOLVER", "r6"); r4["WEIGHT"] != "0" || r6["WEIGHT"] != "-" {
		t.Errorf("lbctl status: r4 weight %q (want 0), r6 weight %q (want -)", r4["WEIGHT"], r6["WEIGHT"])
	}
}
