package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/internal/lab/dnstest"
	"lbdns/prefetch"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

const prefetchConfig = `
[daemon]
state_dir = %[1]q
control_socket = "%[1]s/ctl.sock"
status_listen = "127.0.0.1:0"

[[vip]]
name = "v4"
address = "192.0.2.53"
forwarding = "nat"
pool = "main"

[[pool]]
name = "main"
members = ["a", "b"]
check = "rec"

[[resolver]]
name = "a"
address = %q
vendor = "other"

[[resolver]]
name = "b"
address = %q
vendor = "dnsmasq"

[check.rec]
interval = "100ms"
timeout = "50ms"
rise = 1
fall = 1

[check.rec.dns]
zone = "lbdns.test"

[prefetch]
jitter = "10ms"

[[prefetch.domain]]
name = %q
types = [%s]
`

// waitPrefetch polls the daemon's prefetch snapshot until ok accepts it.
func waitPrefetch(t *testing.T, d *Daemon, what string, ok func(map[string]prefetch.Status) bool) map[string]prefetch.Status {
	t.Helper()
	var m map[string]prefetch.Status
	poll.Until(t, 5*time.Second, "prefetch: "+what, func() (bool, string) {
		m = map[string]prefetch.Status{}
		for _, st := range prefetchStatus(d) {
			m[st.Key.String()] = st
		}
		return ok(m), fmt.Sprintf("snapshot %+v", m)
	})
	return m
}

func TestPrefetchWiring(t *testing.T) {
	auth := &dnstest.Server{TTL: 1}
	dnstest.Run(t, auth)
	other := &dnstest.Server{TTL: 1}
	dnstest.Run(t, other)
	name := auth.Name("www")
	dir := t.TempDir()
	path := filepath.Join(dir, "lbdns.toml")
	write := func(types string) {
		doc := fmt.Sprintf(prefetchConfig, filepath.Join(dir, "state"), auth.Addr().String(), other.Addr().String(), name, types)
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`"A", "AAAA"`)
	bAddr := other.Addr().String()
	fp := &fakeProbe{down: map[netip.AddrPort]bool{netip.MustParseAddrPort(bAddr): true}}
	h := start(t, path, vip.NewMemClient(), fp)

	ka, kb := name+"/A@a", name+"/A@b"
	m := waitPrefetch(t, h.d, "healthy resolver queried", func(m map[string]prefetch.Status) bool {
		return len(m) == 4 && m[ka].Counters.Fetches >= 2
	})
	if st := m[kb]; st.Healthy || st.Counters.Queries != 0 {
		t.Errorf("down resolver b queried or not parked: %+v", st)
	}
	if n := other.Count(name); n != 0 {
		t.Errorf("down resolver b got %d prefetch queries", n)
	}

	t.Run("status and metrics show the entries", func(t *testing.T) {
		st, err := h.d.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var pa, pb *control.PrefetchEntry
		for i, pe := range st.Prefetch {
			if pe.Name == name && pe.Type == "A" {
				switch pe.Resolver {
				case "a":
					pa = &st.Prefetch[i]
				case "b":
					pb = &st.Prefetch[i]
				}
			}
		}
		if len(st.Prefetch) != 4 || pa == nil || pb == nil {
			t.Fatalf("status prefetch entries: %+v", st.Prefetch)
		}
		if pa.State != "ok" || pa.LastRefresh.IsZero() || pa.TTLSeconds != 1 || pa.Mode == "" {
			t.Errorf("entry at a: %+v", *pa)
		}
		if pb.State != "parked" {
			t.Errorf("entry at the down resolver b: state %q, want parked", pb.State)
		}
		mfs, err := h.d.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch {
				case m.GetCounter() != nil:
					got[mf.GetName()] += m.GetCounter().GetValue()
				case m.GetGauge() != nil && mf.GetName() == "lbdns_prefetch_entries":
					for _, l := range m.GetLabel() {
						got[mf.GetName()+"/"+l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		if got["lbdns_prefetch_queries_total"] < 2 || got["lbdns_prefetch_fetches_total"] < 2 {
			t.Errorf("prefetch counters: %v", got)
		}
		if _, ok := got["lbdns_prefetch_failures_total"]; !ok {
			t.Errorf("no lbdns_prefetch_failures_total: %v", got)
		}
		if _, ok := got["lbdns_prefetch_expired_total"]; !ok {
			t.Errorf("no lbdns_prefetch_expired_total: %v", got)
		}
		if got["lbdns_prefetch_entries/parked"] != 2 {
			t.Errorf("parked entries gauge = %v, want 2 (b's A and AAAA)", got["lbdns_prefetch_entries/parked"])
		}
	})

	t.Run("recovered resolver resumes", func(t *testing.T) {
		fp.set(bAddr, false)
		waitPrefetch(t, h.d, "b resumed", func(m map[string]prefetch.Status) bool {
			return m[kb].Healthy && m[kb].Counters.Fetches >= 1
		})
	})

	t.Run("reload keeps unchanged entries", func(t *testing.T) {
		before := prefetchStatus(h.d)
		write(`"A"`)
		if err := h.d.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		m := waitPrefetch(t, h.d, "AAAA entries gone", func(m map[string]prefetch.Status) bool { return len(m) == 2 })
		for _, st := range before {
			if st.Key.String() == ka && m[ka].Counters.Queries < st.Counters.Queries {
				t.Errorf("entry %s lost its counters on reload: %d < %d", ka, m[ka].Counters.Queries, st.Counters.Queries)
			}
		}
	})
}

// prefetchStatus is the state of every prefetch entry of d.
func prefetchStatus(d *Daemon) []prefetch.Status {
	st, _ := d.pf.Status()
	return st
}
