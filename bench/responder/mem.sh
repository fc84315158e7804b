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
# from /proc. Figures are printed with their goals (lbdnsd at most 2x
# gdnsd's peak, 3x with names inline; 1,000,000 prefixes under 300 MB),
# never judged by the exit code: the script fails only when a run goes
# wrong.
#
#   bench/responder/mem.sh                              # the sizes below
#   SIZES="20000:100000" FORMS=service bench/responder/mem.sh
#   MODE=drop bench/responder/mem.sh                    # a dropped prefix file
#
# MODE=drop measures instead whether the memory of a prefix file that a
# reload drops goes back to the system: lbdnsd starts with DROP_NAMES
# names of one service and one prefix file of DROP_PREFIXES /24s (one
# region: every /24 its own entry, nothing merges), must answer from it
# and is left 3 s more; then its configuration is replaced by the same
# without the file (the region a /16 of its own) and SIGHUP reloads it.
# Its RSS is printed before, when the new configuration answers, and 10,
# 30 and 60 s after the SIGHUP, against a lbdnsd started with that
# configuration alone (measured as above): the share of the file's
# memory given back, the goal all of it (90 % or more) within a minute.
#
# Environment: ROUNDS (3: rounds of every server at every size, in turn;
# peak RSS moves with where the garbage collector runs, so the summary
# gives the median and the spread), SIZES (space-separated NAMES:PREFIXES; default
# "20000:100000 100000:1000000 20000:1000000"), FORMS (lbdnsd's forms,
# default "inline service list"), REGIONS (8), GDNSD (1: measure gdnsd, 0:
# not), LBDNSD_SRC (build lbdnsd from another checkout), KEEP=1, NETNS=0
# (see run.sh); MODE (sizes: the above; drop: a dropped prefix file),
# DROP_PREFIXES (4000000: about 54 MB of prefix file), DROP_NAMES (100).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
export PATH=$PATH:/usr/local/go/bin

SIZES=${SIZES:-"20000:100000 100000:1000000 20000:1000000"}
FORMS=${FORMS:-"inline service list"}
REGIONS=${REGIONS:-8}
ROUNDS=${ROUNDS:-3}
GDNSD=${GDNSD:-1}
MODE=${MODE:-sizes}
DROP_PREFIXES=${DROP_PREFIXES:-4000000}
DROP_NAMES=${DROP_NAMES:-100}
[[ $MODE == sizes || $MODE == drop ]] || die "MODE=$MODE: want sizes or drop"
[[ $MODE == drop ]] && GDNSD=0
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

# rss_line LABEL KB [BASE_KB SHARE_KB]: prints an RSS figure, with the
# share of the dropped file's memory given back when SHARE_KB is set.
rss_line() {
	local extra=""
	if [[ -n ${4:-} ]]; then
		extra=$(awk -v r="$2" -v b="$3" -v s="$4" 'BEGIN {
			p = sprintf("%.0f", (s > 0 ? 100 * (b + s - r) / s : 0)); if (p == "-0") p = "0"
			printf ", %s %% of the file'"'"'s %.0f MB given back", p, s / 1024 }')
	fi
	printf '  %-40s RSS %6s MB%s\n' "$1" "$(mb "$2")" "$extra"
}

# drop: the dropped-prefix-file measurement (MODE=drop, above).
drop() {
	local d="$WORK/drop" pid t0 t1 hwm big small share rss at
	rm -rf "$d"
	"$WORK/tool" config -dir "$d" -names "$DROP_NAMES" -prefixes "$DROP_PREFIXES" -regions 1 -form service \
		-lb-port "$LB_PORT" -gd-port "$GD_PORT" -mon-port "$MON_PORT"
	cp "$d/lbdns.toml" "$d/with-file.toml"
	"$WORK/tool" config -dir "$d" -names "$DROP_NAMES" -prefixes 0 -regions 1 -form service \
		-lb-port "$LB_PORT" -gd-port "$GD_PORT" -mon-port "$MON_PORT"
	cp "$d/lbdns.toml" "$d/without.toml"
	for f in with-file without; do
		"$WORK/lbdnsd" -check-config "$d/$f.toml" >"$WORK/check.log" 2>&1 || die "lbdnsd -check-config ($f): $(tail -3 "$WORK/check.log")"
	done
	echo "== a dropped prefix file: $DROP_PREFIXES /24s in one file of $(du -h "$d/nets/r0.txt" | cut -f1), $DROP_NAMES names of one service"
	: >"$WORK/results"
	measure lbdnsd-without "$LB_PORT" 0 "$WORK/lbdnsd" -dry-run -config "$d/without.toml" -log-format json
	small=$(awk '{ print $3 }' "$WORK/results")
	cp "$d/with-file.toml" "$d/lbdns.toml"
	t0=$(now_ns)
	"$WORK/lbdnsd" -dry-run -config "$d/lbdns.toml" -log-format json >"$WORK/drop.out" 2>"$WORK/drop.log" &
	pid=$!
	PIDS+=("$pid")
	if ! wait_for 300 ready "$LB_PORT" "$DROP_PREFIXES"; then
		kill -0 "$pid" 2>/dev/null || die "lbdnsd exited: $(tail -5 "$WORK/drop.log")"
		die "lbdnsd: answers not as expected after 300 s: dyn0 A: $(answers "$LB_PORT" dyn0.bench.test A 1.0.0.0/24)"
	fi
	t1=$(now_ns)
	sleep_s 3
	big=$(kb "$pid" VmRSS)
	share=$((big - small))
	printf '  %-16s answering after %6d ms with the file\n' lbdnsd $(((t1 - t0) / 1000000))
	rss_line "lbdnsd without the file, alone" "$small"
	rss_line "with the file, before the reload" "$big"
	cp "$d/without.toml" "$d/lbdns.toml"
	t0=$(now_ns)
	kill -HUP "$pid"
	# The new configuration answers: 1.0.0.0/24 is no longer in the
	# map (the global pool answers it), 10.0.1.0/24 is region r0's.
	if ! wait_for 120 reloaded "$LB_PORT"; then
		die "lbdnsd: the configuration without the file does not answer 120 s after SIGHUP: $(grep -i reload "$WORK/drop.log" | tail -2)"
	fi
	t1=$(now_ns)
	rss_line "reloaded, answering after $(((t1 - t0) / 1000000)) ms" "$(kb "$pid" VmRSS)" "$small" "$share"
	for at in 10 30 60; do
		sleep_s "$(awk -v t="$t0" -v at="$at" -v now="$(now_ns)" 'BEGIN { s = (t + at * 1e9 - now) / 1e9; printf "%.2f", (s > 0 ? s : 0) }')"
		rss=$(kb "$pid" VmRSS)
		rss_line "${at} s after the SIGHUP" "$rss" "$small" "$share"
	done
	hwm=$(kb "$pid" VmHWM)
	stop "$pid"
	awk -v r="$rss" -v b="$small" -v s="$share" -v h="$hwm" 'BEGIN {
		g = (s > 0 ? (b + s - r) / s : 0)
		p = sprintf("%.0f", 100 * g); if (p == "-0") p = "0"
		printf "  peak RSS %.0f MB; 60 s after the reload %.0f MB, %s %% of the file'"'"'s %.0f MB given back (goal: all of it, 90 %% or more, within a minute: %s)\n", h / 1024, r / 1024, p, s / 1024, (g >= 0.9 ? "MEETS" : "MISSES")
	}'
}

# reloaded PORT: lbdnsd answers from the configuration without the file.
reloaded() {
	[[ $(answers "$1" dyn0.bench.test A 1.0.0.0/24) == "127.11.0.1 127.11.0.2" ]] && ready "$1" 0
}

if [[ $MODE == drop ]]; then
	drop
	exit 0
fi

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
				goal = (k == "lbdnsd-inline" ? 3 : 2)
				if (names == 20000 && prefixes == 100000) line = line sprintf(" (goal <= %dx: %s)", goal, (med[k] <= goal * med["gdnsd"] ? "MEETS" : "MISSES"))
			}
			if (k != "gdnsd" && prefixes >= 1000000) line = line sprintf("; goal < 300 MB at 1,000,000 prefixes: %s", (med[k] < 300 * 1024 ? "MEETS" : "MISSES"))
			print line
		}
	}' | sort
done
