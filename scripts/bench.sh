#!/usr/bin/env bash
# bench.sh prints lbdns's benchmark figures (see bench/README.md). Figures
# are printed, never judged by timing; the benchmarks that check a count
# (netlink writes for one change) fail when the count is wrong.
#
# Usage: scripts/bench.sh [quick|full]
#   quick: short runs (CI); full: the durations bench/README.md quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
mode=${1:-full}
case $mode in
quick) benchtime=20x; health_duration=20; gslb_env=(DURATION=10 WARMUP=3) ;;
full) benchtime=1s; health_duration=60; gslb_env=(DURATION=60) ;;
*) echo "usage: $0 [quick|full]" >&2; exit 2 ;;
esac

echo "=== bench: IPVS diff, 2,000 services x 20 destinations, one change"
go test -run '^$' -bench 'BenchmarkDiff2000x20OneChange' -benchmem -benchtime "$benchtime" ./vip

echo "=== bench: one DNS probe on loopback"
go test -run '^$' -bench 'BenchmarkDNSProbe' -benchmem -benchtime "$benchtime" ./probes

echo "=== bench: fleet over a real etcd: intent propagation, assignments moved on a join, a killed node's lease"
if [ "$mode" = quick ]; then LBDNS_BENCH_ROUNDS=20 bench/fleet/run.sh; else bench/fleet/run.sh; fi
echo "=== bench: BGP announcer against BIRD 2: verdict to withdrawal, kill -9, silent host (hold time, BFD)"
go test -tags bgpbench -count=1 -v ./bench/bgp | grep -E '^(bgp:|--- |ok|FAIL)'

echo "=== bench: IPVS in a VM: full sync of 1,000 x 10 vs ipvsadm -R; one change"
scripts/ipvs-vm.sh ./bench/ipvs -test.v -test.timeout 10m

if ! command -v jq >/dev/null 2>&1; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends jq
fi
if [ -x bench/health/run.sh ]; then
	echo "=== bench: health engine, 5,000 targets at 1 s for ${health_duration}s"
	DURATION=$health_duration bench/health/run.sh
fi
# The peers measured side by side: gdnsd (GSLB monitors) and dnsdist
# (health checks). Their packages must not start a service (policy-rc.d).
if ! command -v gdnsd >/dev/null 2>&1 || ! command -v dnsdist >/dev/null 2>&1; then
	policy=/usr/sbin/policy-rc.d added_policy=0
	if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added_policy=1; fi
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gdnsd dnsdist
	if [ "$added_policy" = 1 ]; then rm -f "$policy"; fi
fi
if [ -x bench/gslb/run.sh ]; then
	# Members swept: 300 and 3,000 that gdnsd monitors too (TCP + HTTP,
	# 2:1), as many ICMP members as HTTP ones for lbdnsd alone.
	for size in "200 100" "2000 1000"; do
		read -r n_tcp n_http <<<"$size"
		[ "$mode" = quick ] && [ "$n_tcp" != 200 ] && continue
		echo "=== bench: GSLB monitors (tcp, http, icmp) against gdnsd at equal check rates: $((n_tcp + n_http)) members; ${gslb_env[*]}"
		env "${gslb_env[@]}" N_TCP="$n_tcp" N_HTTP="$n_http" N_ICMP="$n_http" bench/gslb/run.sh
	done
fi
if [ -x bench/engine/run.sh ]; then
	echo "=== bench: health engine side by side with dnsdist (CPU per check)"
	if [ "$mode" = quick ]; then
		DURATION=5 WARM=2 ROUNDS=2 BIG_TARGETS=0 bench/engine/run.sh
	else
		bench/engine/run.sh
	fi
fi
if [ -x bench/responder/run.sh ]; then
	echo "=== bench: GSLB responder against gdnsd and a floor, CPU per query at fixed loads, three mixes, memory; reload of 10,000 names while dnsperf runs"
	if ! command -v dnsperf >/dev/null 2>&1; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dnsperf
	fi
	go test -run '^$' -bench 'BenchmarkServerPath' -benchmem -benchtime "$benchtime" ./responder
	if [ "$mode" = quick ]; then
		QUICK=1 bench/responder/all.sh
		COMPARE=0 RELOAD_DURATION=6 BIG_NAMES=1000 BIG_MEMBERS=5000 BIG_PREFIXES=100000 BIG_INTERVAL=5 bench/responder/run.sh
	else
		bench/responder/all.sh
		COMPARE=0 bench/responder/run.sh
	fi
fi
