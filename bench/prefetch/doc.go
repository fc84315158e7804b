// Package prefetchbench measures the daemon-side cost of the cache-refresh
// prefetcher: the CPU a prefetch.Runner uses to keep 1,000 names × 5
// resolvers warm at TTL 30 s, against fake caching resolvers served by a
// child process (so that their CPU is not counted). It runs only when
// LBDNS_BENCH_PREFETCH=1; see README.md and run.sh, which also prints the
// real-vendor miss table of prefetch.TestVendors for 60 s.
package prefetchbench
