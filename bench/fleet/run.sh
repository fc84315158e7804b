#!/bin/sh
# Prints the fleet figures on loopback against a real three-member etcd
# (see doc.go): intent propagation p50/p99 with 3 and 5 nodes (stores, then
# whole daemons answering it), assignments
# moved on a join (pure, and read from four daemons' monitors), a killed
# node's time to leave the view; with whole daemons: a member's death to
# the fleet verdict on every node, a prober cut off from etcd losing its
# votes, CPU and vote writes per node with 1,000 members.
# LBDNS_BENCH_ROUNDS sets the intent changes per fleet size (default 100),
# LBDNS_BENCH_DEATHS the member deaths (default 10), LBDNS_BENCH_MEMBERS
# the members of the CPU run (default 1000).
set -eu
cd "$(dirname "$0")/../.."
if ! out=$(LBDNS_BENCH_FLEET=1 go test -count=1 -timeout 10m -run 'TestPropagation|TestDaemonPropagation|TestMovedOnJoin|TestKilledNodeLeaves|TestVerdictOnDeath|TestCutOffProberVotes|TestVotesAtScale' -v ./bench/fleet 2>&1); then
	echo "$out"
	exit 1
fi
echo "$out" | grep '^fleet\|^ok'
