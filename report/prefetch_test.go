package report

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/prefetch"
)

func TestPrefetchEntries(t *testing.T) {
	if got := PrefetchEntries(nil); got != nil {
		t.Errorf("no entries: %+v, want nil (the field is left out)", got)
	}
	key := func(name string, typ uint16, res string) prefetch.Key {
		return prefetch.Key{Name: name, Type: typ, Resolver: res}
	}
	tests := []struct {
		name  string
		entry prefetch.Status
		state string
	}{
		{"parked", prefetch.Status{Key: key("a.example.", dns.TypeA, "r1"), Healthy: false, ConsecutiveFailures: 3, LastRefresh: t0}, "parked"},
		{"failing", prefetch.Status{Key: key("b.example.", dns.TypeA, "r1"), Healthy: true, ConsecutiveFailures: 1, LastRefresh: t0}, "failing"},
		{"pending", prefetch.Status{Key: key("c.example.", dns.TypeA, "r1"), Healthy: true}, "pending"},
		{"ok", prefetch.Status{Key: key("d.example.", dns.TypeA, "r1"), Healthy: true, LastRefresh: t0}, "ok"},
		{"expired", prefetch.Status{Key: key("e.example.", dns.TypeA, "r1"), Healthy: true, LastRefresh: t0, Expired: true}, "expired"},
		{"failing before expired", prefetch.Status{Key: key("e.example.", dns.TypeA, "r1"), Healthy: true, LastRefresh: t0, Expired: true, ConsecutiveFailures: 1}, "failing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PrefetchEntries([]prefetch.Status{tt.entry})
			if len(got) != 1 || got[0].State != tt.state {
				t.Errorf("got %+v, want state %q", got, tt.state)
			}
		})
	}
	t.Run("fields", func(t *testing.T) {
		e := prefetch.Status{Key: prefetch.Key{Name: "x.example.", Type: dns.TypeAAAA, Resolver: "r2", Partition: "eu"}, Mode: prefetch.Window,
			Healthy: true, LastRefresh: t0, LastTTL: 300*time.Second + 900*time.Millisecond, Remaining: 42 * time.Second,
			NextRun: t0.Add(time.Minute), LastError: "SERVFAIL", Counters: prefetch.Counters{Failures: 4, Fetches: 7, FoundExpired: 2},
			Gap: 133*time.Millisecond + 500*time.Microsecond, MaxGap: 2 * time.Second}
		got := PrefetchEntries([]prefetch.Status{e})[0]
		want := control.PrefetchEntry{Name: "x.example.", Type: "AAAA", Resolver: "r2", Partition: "eu", Mode: "window", State: "ok",
			TTLSeconds: 300, RemainingSeconds: 42, LastRefresh: t0.UTC(), NextRun: t0.Add(time.Minute).UTC(), LastError: "SERVFAIL", Failures: 4,
			Fetches: 7, Expired: 2, GapMillis: 133.5, MaxGapMillis: 2000}
		if got != want || got.LastRefresh.Location() != time.UTC {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
		if z := PrefetchEntries([]prefetch.Status{{Key: e.Key}})[0]; !z.LastRefresh.IsZero() || !z.NextRun.IsZero() {
			t.Errorf("zero times not kept zero: %+v", z)
		}
	})
	t.Run("sorted by name, type, resolver, partition", func(t *testing.T) {
		in := []prefetch.Status{
			{Key: prefetch.Key{Name: "b.", Type: dns.TypeA, Resolver: "r1"}},
			{Key: prefetch.Key{Name: "a.", Type: dns.TypeAAAA, Resolver: "r1"}},
			{Key: prefetch.Key{Name: "a.", Type: dns.TypeA, Resolver: "r2", Partition: "z"}},
			{Key: prefetch.Key{Name: "a.", Type: dns.TypeA, Resolver: "r2", Partition: "b"}},
			{Key: prefetch.Key{Name: "a.", Type: dns.TypeA, Resolver: "r1"}},
		}
		var got []string
		for _, e := range PrefetchEntries(in) {
			got = append(got, e.Name+" "+e.Type+" "+e.Resolver+" "+e.Partition)
		}
		want := []string{"a. A r1 ", "a. A r2 b", "a. A r2 z", "a. AAAA r1 ", "b. A r1 "}
		if len(got) != len(want) {
			t.Fatalf("got %q", got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("got %q, want %q", got, want)
				break
			}
		}
	})
	t.Run("in the status", func(t *testing.T) {
		in := testInput(t)
		in.Prefetch = []prefetch.Status{tests[0].entry, tests[3].entry}
		if st := Status(in); len(st.Prefetch) != 2 || st.Prefetch[0].State != "parked" || st.Prefetch[1].State != "ok" {
			t.Errorf("status prefetch: %+v", st.Prefetch)
		}
	})
}
