#!/usr/bin/env bash
# bench/responder/mem.sh: peak RSS (VmHWM) of lbdnsd's GSLB responder and
# of Debian's gdnsd on the same configuration, at several sizes. One
# description (bench/responder/tool config) gives both servers' files:
# NAMES dynamic names over REGIONS region pools and a global one, a
# network map of PREFIXES /24s (every location's scope /24), 100 static
# names. lbdnsd's names either repeat their policies (form "inline"), or
# share one [[gslb.service]], each a [[gslb.name]] with service (form
# "service") or all in the service's names list (form "list"); gdnsd's
# are one-line DYNA records of one geoip resource either way. Each server is started
# alone, must answer as with every member up, is left 3 s more (its
# monitors' first rounds, a rebuild), and its VmHWM and VmRSS are read
# from /proc. Figures are printed with their goals (lbdnsd at
# most 2x gdnsd's peak; 1,000,000 prefixes under 300 MB), never judged
# by the exit code: the script fails only when a run goes wrong.
#
#   bench/responder/mem.sh                              # the sizes below
#   SIZES="20000:100000" FORMS=service bench/responder/mem.sh
#
# Environment: ROUNDS (3: rounds of every server at every size, in turn;
# peak RSS moves with where the garbage collector runs, so the summary
# gives the median and the spread), SIZES (space-separated NAMES:PREFIXES; default
# "20000:100000 100000:1000000 20000:1000000"), FORMS (lbdnsd's forms,
# default "inline service list"), REGIONS (8), GDNSD (1: measure gdnsd, 0:
# not), LBDNSD_SRC (build lbdnsd from another checkout), KEEP=1, NETNS=0
# (see run.sh).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
export PATH=$PATH:/usr/local/go/bin

SIZES=${SIZES:-"20000:100000 100000:1000000 20000:1000000"}
FORMS=${FORMS:-"inline service list"}
REGIONS=${REGIONS:-8}
ROUNDS=${ROUNDS:-3}
GDNSD=${GDNSD:-1}
MON_PORT=8053
LB_PORT=5301
GD_PORT=5302

if [[ ${NETNS:-1} == 1 && -z ${LBDNS_BENCH_NETNS:-} ]]; then
	command -v unshare >/dev/null || die "unshare is not installed (NETNS=0 runs in this namespace)"
	bench_modules "${LBDNSD_SRC:-}"
	exec unshare -n env LBDNS_BENCH_NETNS=1 "$0" "$@"
fi
if [[ -n ${LBDNS_BENCH_NETNS:-} ]]; then
	ip link set lo up
	ip -6 route add local fd00::/64 dev lo
fi
need=(dig)
[[ $GDNSD == 1 ]] && need+=(gdnsd)
for c in "${need[@]}"; do command -v "$c" >/dev/null || die "$c is not installed"; done

bench_start mem

SRC=${LBDNSD_SRC:-$ROOT}
(cd "$SRC" && go build -o "$WORK/lbdnsd" ./cmd/lbdnsd)
(cd "$ROOT" && go build -o "$WORK/tool" ./bench/responder/tool)
echo "lbdnsd from $(git -C "$SRC" describe --always --dirty 2>/dev/null || echo unknown)$([[ $GDNSD == 1 ]] && echo "; $(gdnsd -c "$WORK" checkconf 2>&1 | grep -o 'gdnsd version [^ ]*' | head -1 || echo gdnsd)"); $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"

wait_for() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
"$WORK/tool" listen "[::]:$MON_PORT" >"$WORK/listen.out" 2>"$WORK/listen.err" &
PIDS+=($!)
wait_for 5 grep -q ready "$WORK/listen.out" || die "member listener: $(cat "$WORK/listen.err")"

answers() {
	dig +norec +short +time=1 +tries=1 @127.0.0.1 -p "$1" "$2" "$3" ${4:+"+subnet=$4"} 2>/dev/null | sort | paste -sd' '
}
# ready PORT PREFIXES: every member up, as both servers answer it.
ready() {
	local ecs=10.0.1.0/24
	(($2 > 0)) && ecs=1.0.0.0/24
	[[ $(answers "$1" dyn0.bench.test A "$ecs") == "127.10.0.1 127.10.0.2" ]] &&
		[[ $(answers "$1" dyn0.bench.test AAAA "$ecs") == "fd00::10:0:1 fd00::10:0:2" ]] &&
		[[ $(answers "$1" dyn0.bench.test A) == "127.11.0.1 127.11.0.2" ]] &&
		[[ $(answers "$1" s1.bench.test A) == "198.18.0.2" ]]
}
# kb PID FIELD: a /proc/PID/status field in kB.
kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }

# measure NAME PORT PREFIXES CMD...: starts CMD, waits until it answers,
# 3 s more, prints and records "NAME hwm_kb rss_kb ready_ms".
measure() {
	local name=$1 port=$2 prefixes=$3 pid t0 t1 hwm rss
	shift 3
	t0=$(now_ns)
	"$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
	pid=$!
	PIDS+=("$pid")
	if ! wait_for 300 ready "$port" "$prefixes"; then
		kill -0 "$pid" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.log")"
		die "$name: answers not as expected after 300 s: dyn0 A: $(answers "$port" dyn0.bench.test A)"
	fi
	t1=$(now_ns)
	sleep_s 3
	hwm=$(kb "$pid" VmHWM) rss=$(kb "$pid" VmRSS)
	stop "$pid"
	printf '  %-16s peak RSS %6s MB, RSS %6s MB, answering after %6d ms\n' "$name" "$(mb "$hwm")" "$(mb "$rss")" $(((t1 - t0) / 1000000))
	echo "$name $hwm $rss" >>"$WORK/results"
}

for size in $SIZES; do
	names=${size%%:*} prefixes=${size##*:}
	: >"$WORK/results"
	echo "== $names names, $prefixes prefixes, $REGIONS regions, $ROUNDS rounds"
	for form in $FORMS; do
		d="$WORK/$form"
		rm -rf "$d"
		"$WORK/tool" config -dir "$d" -names "$names" -prefixes "$prefixes" -regions "$REGIONS" -form "$form" \
			-lb-port "$LB_PORT" -gd-port "$GD_PORT" -mon-port "$MON_PORT"
		"$WORK/lbdnsd" -check-config "$d/lbdns.toml" >"$WORK/check.log" 2>&1 || die "lbdnsd -check-config ($form): $(tail -3 "$WORK/check.log")"
		echo "  lbdnsd $form: config $(du -h "$d/lbdns.toml" | cut -f1)"
	done
	gd="$WORK/$(echo "$FORMS" | awk '{ print $1 }')/gdnsd"
	if [[ $GDNSD == 1 ]]; then
		gdnsd -c "$gd" checkconf >"$WORK/gdnsd-checkconf.log" 2>&1 || die "gdnsd checkconf: $(tail -3 "$WORK/gdnsd-checkconf.log")"
	fi
	for ((r = 1; r <= ROUNDS; r++)); do
		for form in $FORMS; do
			measure "lbdnsd-$form" "$LB_PORT" "$prefixes" "$WORK/lbdnsd" -dry-run -config "$WORK/$form/lbdns.toml" -log-format json
		done
		[[ $GDNSD == 1 ]] && measure gdnsd "$GD_PORT" "$prefixes" gdnsd -c "$gd" start
	done
	# The median peak of each server, its spread, the ratio of medians
	# and the goals.
	sort -k1,1 -k2,2n "$WORK/results" | awk -v names="$names" -v prefixes="$prefixes" '
	{ n[$1]++; v[$1, n[$1]] = $2 }
	END {
		for (k in n) med[k] = v[k, int((n[k] + 1) / 2)]
		for (k in n) {
			line = sprintf("  %s: peak RSS median %.0f MB (%.0f..%.0f over %d rounds)", k, med[k] / 1024, v[k, 1] / 1024, v[k, n[k]] / 1024, n[k])
			if (k != "gdnsd" && med["gdnsd"] > 0) {
				line = line sprintf(", %.2fx gdnsd", med[k] / med["gdnsd"])
				if (names == 20000 && prefixes == 100000) line = line sprintf(" (goal <= 2x: %s)", (med[k] <= 2 * med["gdnsd"] ? "MEETS" : "MISSES"))
			}
			if (k != "gdnsd" && prefixes >= 1000000) line = line sprintf("; goal < 300 MB at 1,000,000 prefixes: %s", (med[k] < 300 * 1024 ? "MEETS" : "MISSES"))
			print line
		}
	}' | sort
done
