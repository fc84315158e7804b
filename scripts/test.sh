#!/usr/bin/env bash
# test.sh runs the whole lbdns test suite on a fresh Debian 12 machine, as
# root (or with sudo for apt): it installs what the tests need, then runs
#
#   1. gofmt and go vet over the tree;
#   2. every Go test on the host with the race detector, including the
#      tests against real resolver products (unbound, BIND, Knot Resolver,
#      PowerDNS Recursor, dnsmasq from Debian's packages) on loopback and
#      the pages loaded in Debian's headless Chromium (screenshots are kept
#      in $LBDNS_ARTIFACTS, default artifacts/ at the repository root),
#      the GSLB monitor kinds against hosts in network namespaces
#      joined by veth pairs (links cut, tc netem loss), and the fleet's
#      shared intent and heartbeats against a three-member etcd cluster
#      (TLS, client-certificate auth) built from etcd's Go module;
#   3. the IPVS tests of package vip against Debian's own kernel with IPVS
#      in a qemu virtual machine (software emulation; no IPVS on the host
#      needed).
#
# Environment: LBDNS_SKIP_VM=1 skips step 3 (for a quick local run);
# the variables of scripts/ipvs-vm.sh apply to step 3.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
start=$(date +%s)
step() { echo; echo "=== test.sh: $* ($(( $(date +%s) - start ))s)"; }

step "installing test dependencies (resolver products, chromium, etcd)"
scripts/install-test-deps.sh

step "gofmt and go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
go vet -tags ipvsvm ./...

step "go test (host, race detector, real resolver products)"
# The resolver fixtures and the browser tests skip when a product or
# Chromium is missing, unless these are set: here they were just installed,
# so a missing one is a failure.
export LBDNS_REQUIRE_VENDORS=1
export LBDNS_REQUIRE_BROWSER=1
# The network-namespace tests (hosts behind veth pairs, tc netem) need
# root, which CI has: a skip there is a failure.
export LBDNS_REQUIRE_NETNS=1
# The service files (packaging/, monitoring/) are checked with
# systemd-analyze, dpkg-deb, lintian and promtool, just installed.
export LBDNS_REQUIRE_PACKAGING=1
# The fleet tests run a real etcd cluster (testkit/etcdtest), built by
# install-test-deps.sh: a skip there is a failure.
export LBDNS_REQUIRE_ETCD=1
export LBDNS_ARTIFACTS=${LBDNS_ARTIFACTS:-$PWD/artifacts}
echo "test.sh: test artifacts (screenshots) go to $LBDNS_ARTIFACTS"
go test -race -count=1 -timeout 15m ./...

if [ "${LBDNS_SKIP_VM:-0}" = 1 ]; then
	step "IPVS VM tests skipped (LBDNS_SKIP_VM=1)"
else
	step "IPVS tests against a real kernel in a qemu VM"
	scripts/ipvs-vm.sh ./vip -test.v -test.timeout 8m
	scripts/ipvs-vm.sh ./daemon -test.v -test.run TestVM -test.timeout 8m
fi
step "all tests passed; artifacts in $LBDNS_ARTIFACTS"
