#!/bin/sh
# Prints the prefetch figures: the real-vendor miss table for 60 s
# (prefetch.TestVendors) and the runner's CPU for 1,000 names x 5 resolvers
# at TTL 30 s (fake resolvers in a child process). About 3 minutes.
set -eu
cd "$(dirname "$0")/../.."
echo "== real resolvers, 60 s client loop =="
LBDNS_PREFETCH_SECONDS=${LBDNS_PREFETCH_SECONDS:-60} go test -count=1 -timeout 5m -run 'TestVendors$' -v ./prefetch | grep -v '^=== RUN'
echo "== runner CPU, 1,000 names x 5 resolvers, TTL 30 s =="
LBDNS_BENCH_PREFETCH=1 go test -count=1 -timeout 5m -run 'TestCPU$' -v ./bench/prefetch | grep -v '^=== RUN'
echo "== scheduler micro-benchmark =="
go test -run '^$' -bench 'Scheduler' -benchmem ./prefetch
