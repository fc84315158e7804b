#!/usr/bin/env bash
# bench/engine/run.sh: lbdnsd's health engine side by side with dnsdist's.
#
# Both daemons health-check the same TARGETS loopback DNS back ends (one UDP
# port each on 127.0.0.1, served by bench/health/responder) with a DNS query
# every INTERVAL seconds: lbdnsd -dry-run with a zone check (random labels,
# NXDOMAIN expected, timeout 500 ms), dnsdist with checkName
# probe.bench.test. and checkInterval INTERVAL. They run one after the other,
# ROUNDS times each, alternating; each run measures DURATION seconds after a
# warm-up and prints CPU (% of one core, from /proc/PID/stat), the checks per
# second counted at the responder, CPU per check, and peak RSS (VmHWM); the
# end prints the ratio lbdnsd / dnsdist of the mean CPU per check. Then the
# same at BIG_TARGETS back ends checked every BIG_INTERVAL seconds (one
# round each; BIG_TARGETS=0 skips it).
#
# Usage: bench/engine/run.sh
#        DURATION=5 ROUNDS=2 BIG_TARGETS=0 bench/engine/run.sh   (quick)
# Env: TARGETS (5000), INTERVAL (1), DURATION (30), WARM (5), ROUNDS (2),
#      BIG_TARGETS (20000), BIG_INTERVAL (4), KEEP=1 keeps the work directory,
#      BASE_SRC (a checkout whose lbdnsd also runs each round, as "base").
# Needs dnsdist (apt-get install dnsdist). Nothing leaves 127.0.0.1.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"

TARGETS=${TARGETS:-5000}
INTERVAL=${INTERVAL:-1}
DURATION=${DURATION:-30}
WARM=${WARM:-5}
ROUNDS=${ROUNDS:-2}
BIG_TARGETS=${BIG_TARGETS:-20000}
BIG_INTERVAL=${BIG_INTERVAL:-4}

bench_start engine

command -v dnsdist >/dev/null || die "dnsdist not installed (apt-get install dnsdist)"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

echo "== build"
(cd "$ROOT" && go build -o "$WORK/lbdnsd" ./cmd/lbdnsd && go build -o "$WORK/responder" ./bench/health/responder)
if [[ -n ${BASE_SRC:-} ]]; then
	(cd "$BASE_SRC" && go build -o "$WORK/lbdnsd-base" ./cmd/lbdnsd)
	echo "base: lbdnsd from $BASE_SRC ($(git -C "$BASE_SRC" describe --always --dirty 2>/dev/null || echo unknown))"
fi
echo "lbdnsd from $ROOT ($(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)); $(dnsdist --version 2>/dev/null | head -1)"

HZ=$(getconf CLK_TCK)

# queries: the responders' count of datagrams received so far.
queries() {
	local i before total=0
	for i in "${!RESP_PIDS[@]}"; do
		before=$(grep -c '^queries' "$WORK/resp$i.out" || true)
		kill -USR1 "${RESP_PIDS[$i]}"
		for _ in $(seq 1 100); do
			(($(grep -c '^queries' "$WORK/resp$i.out" || true) > before)) && break
			sleep 0.02
		done
		total=$((total + $(grep '^queries' "$WORK/resp$i.out" | tail -1 | cut -d' ' -f2)))
	done
	echo "$total"
}

# setup N IV: starts a responder for N back ends and writes both configs.
setup() {
	local n=$1 iv=$2 base pool npools p j members
	base=$((n <= 12000 ? 20000 : 10000))
	((base + n - 1 <= 32767)) || die "$n back ends do not fit below port 32768"
	pool=$(((n + 499) / 500))
	((pool >= 4)) || pool=4
	npools=$(((n + pool - 1) / pool))
	# One responder per 5,000 ports: each socket is a descriptor, and the
	# limit per process may be as low as 20,000.
	RESP_PIDS=()
	local lo i=0
	for ((lo = base; lo < base + n; lo += 5000)); do
		"$WORK/responder" -ports "$lo-$((lo + 4999 < base + n - 1 ? lo + 4999 : base + n - 1))" >"$WORK/resp$i.out" 2>"$WORK/resp$i.err" &
		RESP_PIDS+=($!)
		PIDS+=($!)
		i=$((i + 1))
	done
	for i in "${!RESP_PIDS[@]}"; do
		for _ in $(seq 1 100); do
			grep -q '^ready' "$WORK/resp$i.out" 2>/dev/null && break
			kill -0 "${RESP_PIDS[$i]}" 2>/dev/null || die "responder: $(cat "$WORK/resp$i.err")"
			sleep 0.1
		done
		grep -q '^ready' "$WORK/resp$i.out" || die "responder not ready"
	done
	{
		cat <<TOML
[daemon]
state_dir = "$WORK/state"
log_level = "info"
control_socket = "$WORK/state/lbdns.sock"
status_listen = ""

[check.bench]
interval = "${iv}s"
timeout  = "500ms"
rise     = 2
fall     = 3

[check.bench.dns]
zone     = "probe.bench.test"

TOML
		for ((p = 0; p < npools; p++)); do
			members=()
			for ((j = p * pool; j < (p + 1) * pool && j < n; j++)); do members+=("\"r$j\""); done
			if ((p < 254)); then vip="192.0.2.$((p + 1))"; else vip="198.51.100.$((p - 253))"; fi
			printf '[[vip]]\nname = "v%d"\naddress = "%s"\nforwarding = "nat"\npool = "p%d"\n\n' "$p" "$vip" "$p"
			printf '[[pool]]\nname = "p%d"\ncheck = "bench"\nmembers = [%s]\n\n' "$p" "$(IFS=,; echo "${members[*]}")"
		done
		for ((j = 0; j < n; j++)); do
			printf '[[resolver]]\nname = "r%d"\naddress = "127.0.0.1:%d"\nvendor = "bind"\n\n' "$j" $((base + j))
		done
	} >"$WORK/lbdns.toml"
	"$WORK/lbdnsd" -check-config "$WORK/lbdns.toml" >/dev/null
	{
		echo "setSecurityPollSuffix('')"
		echo "setLocal('127.0.0.1:$((base - 1))')"
		echo "setMaxUDPOutstanding(64)"
		for ((j = 0; j < n; j++)); do
			echo "newServer({address='127.0.0.1:$((base + j))', checkName='probe.bench.test.', checkInterval=$iv, rise=2, maxCheckFailures=3, checkTimeout=500})"
		done
	} >"$WORK/dnsdist.conf"
}

teardown() {
	local p
	for p in "${RESP_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${RESP_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}

# measure NAME: runs one daemon, prints its line and appends
# "NAME us_per_check" to $WORK/figures.
measure() {
	local name=$1 pid t0 t1 c0 c1 q0 q1 hwm bin
	rm -rf "$WORK/state"
	case $name in
	lbdnsd | base)
		bin=$WORK/lbdnsd
		[[ $name == base ]] && bin=$WORK/lbdnsd-base
		"$bin" -dry-run -config "$WORK/lbdns.toml" -log-format json 2>"$WORK/lbdnsd.log" &
		pid=$!
		PIDS+=("$pid")
		for _ in $(seq 1 600); do
			grep -q '"warm-up over' "$WORK/lbdnsd.log" && break
			kill -0 "$pid" 2>/dev/null || die "lbdnsd exited: $(tail -3 "$WORK/lbdnsd.log")"
			sleep 0.1
		done
		;;
	dnsdist)
		dnsdist --supervised --disable-syslog -C "$WORK/dnsdist.conf" >"$WORK/dnsdist.log" 2>&1 &
		pid=$!
		PIDS+=("$pid")
		sleep 2
		kill -0 "$pid" 2>/dev/null || die "dnsdist exited: $(tail -3 "$WORK/dnsdist.log")"
		;;
	esac
	sleep "$WARM"
	c0=$(cpu_ticks "$pid") q0=$(queries) t0=$(now_ns)
	sleep "$DURATION"
	c1=$(cpu_ticks "$pid") q1=$(queries) t1=$(now_ns)
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
	kill -TERM "$pid"
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	awk -v n="$name" -v c=$((c1 - c0)) -v hz="$HZ" -v q=$((q1 - q0)) -v t=$((t1 - t0)) -v h="$hwm" -v la="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
		s = t / 1e9; cpu = c / hz
		printf "%-8s CPU %5.1f%% of one core  checks/s %7.0f  CPU per check %6.1f us  peak RSS %6.1f MB  (load %s)\n",
			n, 100 * cpu / s, q / s, (q > 0 ? 1e6 * cpu / q : 0), h / 1024, la
	}'
	awk -v n="$name" -v c=$((c1 - c0)) -v hz="$HZ" -v q=$((q1 - q0)) 'BEGIN { if (q > 0) printf "%s %f\n", n, 1e6 * c / hz / q }' >>"$WORK/figures"
}

ratio() {
	awk '{ s[$1] += $2; k[$1]++ } END {
		if (k["lbdnsd"] && k["dnsdist"]) {
			a = s["lbdnsd"] / k["lbdnsd"]; b = s["dnsdist"] / k["dnsdist"]
			printf "mean CPU per check: lbdnsd %.1f us, dnsdist %.1f us; ratio lbdnsd/dnsdist %.2f (goal <= 1.0)\n", a, b, a / b
			if (k["base"]) printf "base (BASE_SRC) %.1f us per check: ratio base/dnsdist %.2f\n", s["base"] / k["base"], s["base"] / k["base"] / b
		}
	}' "$WORK/figures"
}

echo "== $TARGETS back ends, a check every $INTERVAL s, $ROUNDS rounds of $DURATION s each after ${WARM} s warm-up ($(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg))"
setup "$TARGETS" "$INTERVAL"
: >"$WORK/figures"
for ((r = 0; r < ROUNDS; r++)); do
	measure lbdnsd
	measure dnsdist
	[[ -z ${BASE_SRC:-} ]] || measure base
done
ratio
teardown

if ((BIG_TARGETS > 0)); then
	echo "== $BIG_TARGETS back ends, a check every $BIG_INTERVAL s, one round"
	setup "$BIG_TARGETS" "$BIG_INTERVAL"
	: >"$WORK/figures"
	measure lbdnsd
	# dnsdist keeps a socket per back end: it needs that many descriptors.
	if (($(ulimit -n) > BIG_TARGETS + 500)); then
		measure dnsdist
	else
		echo "dnsdist  skipped: $BIG_TARGETS back ends need more descriptors than the limit of $(ulimit -n)"
	fi
	ratio
	teardown
fi
