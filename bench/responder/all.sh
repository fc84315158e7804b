#!/usr/bin/env bash
# bench/responder/all.sh: every figure of the responder's benchmark in one
# run, each with its goal and MEETS or MISSES: run.sh on the friendly,
# realistic and hostile mixes (CPU per query at fixed loads beside gdnsd
# at udp_threads 1 and 2 and the floor, all from one generator, full
# speed; each server's mean reply size), then mem.sh (peak RSS at 20,000
# and 100,000 names with 1,000,000 prefixes, and at 20,000 names with
# 100,000). The goals'
# lines of every part are printed again at the end.
#
#   bench/responder/all.sh
#   QUICK=1 bench/responder/all.sh        # a short form (scripts/bench.sh quick)
#
# Environment: QUICK (1: 2 rounds of 3 s at 30,000 qps, the realistic
# mix at 2,000 names only, memory at 20,000 names and 100,000 prefixes
# only), NAMES and PREFIXES (the realistic and hostile mixes' size,
# default 20,000 and 100,000); run.sh's and mem.sh's other variables
# (SOURCES, FOREIGN_MAX, RCODE_TOL, LBDNSD_B_SRC, ...; outside QUICK
# also LOADS, ROUNDS, LAT_DURATION) pass through. The goals' lines are printed again with the summaries'
# lines that say a load's figures were taken under foreign load.
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp /tmp/lbdns-bench-all.XXXXXX)
trap 'rm -f "$out"' EXIT
NAMES=${NAMES:-20000}
PREFIXES=${PREFIXES:-100000}
if [[ ${QUICK:-0} == 1 ]]; then
	echo "=== responder, realistic mix (2,000 names, 10,000 prefixes), short form"
	ROUNDS=2 LOADS=30000 LAT_DURATION=3 DURATION=3 MIX=realistic NAMES=2000 PREFIXES=10000 RELOAD=0 "$dir/run.sh" | tee -a "$out"
	echo "=== memory, short form"
	ROUNDS=1 SIZES="20000:100000" FORMS=service "$dir/mem.sh" | tee -a "$out"
else
	echo "=== responder, friendly mix (100 names, 10.R.0.0/16 per region)"
	MIX=friendly NAMES=100 PREFIXES=0 RELOAD=0 "$dir/run.sh" | tee -a "$out"
	for mix in realistic hostile; do
		echo "=== responder, $mix mix ($NAMES names, $PREFIXES prefixes)"
		MIX=$mix NAMES=$NAMES PREFIXES=$PREFIXES RELOAD=0 "$dir/run.sh" | tee -a "$out"
	done
	echo "=== memory"
	SIZES="20000:100000 20000:1000000 100000:1000000" FORMS="service list" "$dir/mem.sh" | tee -a "$out"
fi
echo "=== goals"
grep -E 'MEETS|MISSES|UNDER FOREIGN LOAD' "$out" || echo "no goal line printed"
