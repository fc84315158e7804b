// Package prefetch keeps latency-sensitive names warm in the cache of every
// healthy back-end resolver, so that no client is ever the one who pays for
// a recursion when a cached answer expires.
//
// # Strategy
//
// The unit of work is an entry: one (name, type, resolver[, ECS
// partition]). The prefetcher queries each resolver directly, at its own
// address (not through the VIP, so every back end is warmed), with RD set,
// and reads the smallest TTL of the answer: the remaining life of that
// resolver's cache entry. Resolvers count TTLs in whole seconds on the
// host's clock, so a remaining TTL r read at time t means the entry reaches
// zero at the start of second floor(t)+r; the prefetcher keeps that
// estimated expiry E per entry, and the largest TTL seen as the original
// TTL (a freshly fetched answer carries it in full).
//
// How the next query is timed depends on how the product refreshes
// (configs: resolver.refresh, defaulting by vendor):
//
//   - window: the product re-fetches in the background when a query arrives
//     inside its refresh window before expiry (BIND "prefetch 2 9", on by
//     default: the last 2 s, for answers whose original TTL is at least
//     9 s; unbound "prefetch: yes": the last 10% of the TTL; PowerDNS
//     Recursor refresh-on-ttl-perc). The prefetcher queries in the middle
//     of the window, so the product refreshes while its entry is still
//     valid and no one ever sees it expire; then it reads the refreshed
//     entry (a cache hit) just after the old expiry to learn the new E.
//     Two queries per TTL, one upstream fetch.
//   - expiry: the product only re-fetches after expiry (dnsmasq; unbound,
//     PowerDNS Recursor and Knot Resolver with their prefetch off, which
//     is their default). The prefetcher queries ExpiryMargin (50 ms) plus
//     jitter after E, so the re-fetch is triggered by the daemon rather
//     than by a client. Products that still serve an entry through the
//     second its TTL reaches 0 (unbound, dnsmasq) answer such a query from
//     cache with TTL 0; the entry then learns to aim one second later.
//     One query and one upstream fetch per TTL.
//
// A window too small for whole seconds (for example 10% of a TTL below
// 10 s) or an answer below the product's minimum (BIND: 9 s) is handled as
// expiry, since the product will not refresh it early.
//
// Failures (SERVFAIL, REFUSED, timeouts) are counted and retried with
// exponential backoff from 1 s to 60 s, never hammered. There is at most
// one query in flight per entry. Resolvers that are down or disabled are
// parked and resume, at once, when the daemon says they are healthy again.
// A token bucket caps the total query rate (configs: prefetch.max_qps); it
// must cover about entries × 2 / TTL for window products and entries / TTL
// for expiry products, or entries fall behind.
//
// # Honest limits
//
//   - For an expiry product there is a gap between the expiry of the entry
//     and the moment the daemon's re-fetch has been answered by the
//     upstream: ExpiryMargin + jitter + the upstream's latency, plus one
//     second for products that keep serving through the zero second while
//     the entry learns that. A client query inside that gap waits for the
//     recursion too (it joins the daemon's in-flight fetch in most
//     products). No outside query can close it: before expiry the product
//     answers from cache and does not re-fetch. Measured with real dnsmasq
//     and unbound and an 80 ms upstream: 133–137 ms (Status.Gap), and
//     90–91% fewer client misses than without the prefetcher, at one client
//     query per name per second; the expected misses per expiry are about
//     the client rate per name × the gap, so names asked many times per gap
//     gain little (bench/prefetch/README.md has the full table).
//   - Found expired counts, for window entries, answers that show the
//     entry had expired before the prefetcher came (a full fresh TTL where
//     a cached remaining TTL was expected): the product did not refresh in
//     its window (wrong refresh setting, eviction, the rate cap).
//   - The original TTL is learned as the largest TTL seen; if the
//     authoritative lowers a record's TTL, the entry keeps the old value
//     until the next reload of its spec.
//   - ECS and unbound: unbound's subnet cache ignores "prefetch: yes" (it
//     logs a warning at start) and never refreshes an answer kept for a
//     client subnet early; window mode would meet every expiry there and
//     count each as found expired. Specs runs the ECS entries of unbound
//     resolvers in window mode in expiry mode instead (SubnetExpiry lists
//     them; the Service logs a warning at start and reload); where unbound
//     runs without the subnet cache, that costs the gap of an expiry
//     product. Status shows, per entry, the times found expired, whether
//     the last re-fetch was (Expired), and the last and longest gap.
//   - Fetches: partitions whose queries one cache entry answers (the
//     answer's ECS scope covers their addresses, or it has none) see the
//     same fetch; an entry's fresh answer within a second of a sibling's
//     counted fetch is not counted again. An answer without an ECS option
//     is taken as one entry for every client (the resolver ignored the
//     subnet, as products without ECS support do). The exception:
//     unbound's subnet cache, asking an upstream that answers without
//     ECS, caches nothing and fetches for every query; there partitions'
//     answers within a second of each other count as one fetch although
//     each was one.
//   - ECS: a partition's entry is only separate in resolvers that cache per
//     client subnet; in the others it is the same entry as without ECS.
//
// # Shape
//
// Scheduler is the pure core (no I/O, time passed in): entries, a timer
// heap, backoff, health parking, and Snapshot for status pages, lbctl and
// metrics. Runner drives it: one dispatch goroutine, the token bucket on
// an injected clock, and short-lived query goroutines using Query
// (miekg/dns). Specs derives the entries from a configs.Config.
package prefetch
