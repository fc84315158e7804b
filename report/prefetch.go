package report

import (
	"cmp"
	"slices"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/prefetch"
)

// Prefetch entry states, as the status and the prefetch_entries metric
// name them.
const (
	// prefetchParked: the resolver is down or disabled; the entry waits.
	prefetchParked = "parked"
	// prefetchExpired: a window entry's last re-fetch found it expired.
	prefetchExpired = "expired"
	// prefetchFailing: the last queries failed.
	prefetchFailing = "failing"
	// prefetchPending: no answer yet.
	prefetchPending = "pending"
	// prefetchOK: the last query was answered.
	prefetchOK = "ok"
)

// PrefetchEntries turns the prefetcher's entries into the API's, sorted by
// name, type, resolver and partition; nil when there are none.
func PrefetchEntries(entries []prefetch.Status) []control.PrefetchEntry {
	if len(entries) == 0 {
		return nil
	}
	out := make([]control.PrefetchEntry, 0, len(entries))
	for _, e := range entries {
		pe := control.PrefetchEntry{Name: e.Key.Name, Type: dns.TypeToString[e.Key.Type], Resolver: e.Key.Resolver, Partition: e.Key.Partition,
			Mode: e.Mode.String(), TTLSeconds: int(e.LastTTL / time.Second), RemainingSeconds: int(e.Remaining / time.Second),
			LastError: e.LastError, Failures: int(e.Counters.Failures), State: prefetchState(e),
			Fetches: int(e.Counters.Fetches), Expired: int(e.Counters.FoundExpired),
			GapMillis: millis(e.Gap), MaxGapMillis: millis(e.MaxGap)}
		if !e.LastRefresh.IsZero() {
			pe.LastRefresh = e.LastRefresh.UTC()
		}
		if !e.NextRun.IsZero() {
			pe.NextRun = e.NextRun.UTC()
		}
		out = append(out, pe)
	}
	slices.SortFunc(out, func(a, b control.PrefetchEntry) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Resolver, b.Resolver), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

func prefetchState(e prefetch.Status) string {
	switch {
	case !e.Healthy:
		return prefetchParked
	case e.ConsecutiveFailures > 0:
		return prefetchFailing
	case e.LastRefresh.IsZero():
		return prefetchPending
	case e.Expired:
		return prefetchExpired
	default:
		return prefetchOK
	}
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
