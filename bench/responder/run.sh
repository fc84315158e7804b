#!/usr/bin/env bash
# bench/responder/run.sh: the GSLB responder's CPU per query at fixed
# offered loads, side by side in the same rounds with Debian's gdnsd
# (geoip plugin with the same nets, multifo pools with the same members)
# at udp_threads 1 and 2, and with a floor responder that does no DNS
# work; then
# the same at full speed, with dnsperf's own CPU and the machine's idle
# share beside; then a reload of a big configuration while dnsperf runs.
# Each round is checked: a sample of answers against the pools the
# clients must get (a wrong answer fails the run), and the machine's CPU
# used by anything but the servers and dnsperf (a round with more than
# FOREIGN_MAX cores of it is reported and left out of the summary). The
# summary prints every figure with its goal and MEETS or MISSES; the exit
# code judges only whether the run itself went right. See bench/README.md.
#
#   bench/responder/run.sh                                  # friendly mix
#   MIX=realistic NAMES=20000 PREFIXES=100000 RELOAD=0 bench/responder/run.sh
#   bench/responder/all.sh                                  # every mix, memory
#
# Environment: LOADS (the fixed offered loads, qps; default "10000 30000
# 50000"), SOURCES (dnsperf processes at a fixed load, each from its own
# address 127.0.0.2.., default 4), LAT_DURATION (s, each fixed-load run,
# default 10), ROUNDS (alternations of every server, default 5),
# SATURATED (1: the full-speed runs too), DURATION (s, each full-speed
# run), CLIENTS and THREADS (dnsperf -c, -T), OUTSTANDING (dnsperf -q),
# FOREIGN_MAX (cores, default 0.15), COMPARE (0: only the reload test),
# REGIONS
# (networks and pools), NAMES (dynamic names), PREFIXES (0: region R is 10.R.0.0/16; else a map of that many
# interleaved /24s), FORM (lbdnsd's names: service, list or inline; see
# tool config), MIX (the queries: friendly, realistic or hostile; see
# tool queries), FLOOR (1: measure the floor responder too, 0: not),
# RELOAD (1: the reload test, 0: skip), RELOAD_DURATION (s: half before
# the reload, half after its new snapshot is in force), BIG_NAMES,
# BIG_MEMBERS, BIG_PREFIXES (the reload test's size), BIG_INTERVAL (its
# tcp monitor's interval, s), LBDNSD_SRC (build lbdnsd from another
# checkout), LBDNSD_B_SRC (a second lbdnsd from another checkout, in the
# same rounds: a paired comparison of two builds; LBDNSD_B_TOML, TOML
# appended to its configuration, compares two settings), KEEP=1 (keep the work directory), NETNS=0 (run in this
# network namespace: ports 5301-5303, 5305 and 8053 must be free,
# and the IPv6 members up needs "ip -6 route add local fd00::/64 dev lo"
# done by hand).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
export PATH=$PATH:/usr/local/go/bin

DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-5}
LOADS=${LOADS:-"10000 30000 50000"}
SOURCES=${SOURCES:-4}
SATURATED=${SATURATED:-1}
FOREIGN_MAX=${FOREIGN_MAX:-0.15}
COMPARE=${COMPARE:-1}
CLIENTS=${CLIENTS:-4}
THREADS=${THREADS:-1}
OUTSTANDING=${OUTSTANDING:-100}
LAT_DURATION=${LAT_DURATION:-10}
REGIONS=${REGIONS:-8}
NAMES=${NAMES:-100}
PREFIXES=${PREFIXES:-0}
FORM=${FORM:-service}
MIX=${MIX:-friendly}
FLOOR=${FLOOR:-1}
FL_PORT=5303
STATICS=100
RELOAD=${RELOAD:-1}
RELOAD_DURATION=${RELOAD_DURATION:-20}
BIG_NAMES=${BIG_NAMES:-10000}
BIG_MEMBERS=${BIG_MEMBERS:-50000}
BIG_PREFIXES=${BIG_PREFIXES:-1000000}
BIG_INTERVAL=${BIG_INTERVAL:-20}
BIG_FILES=100
MON_PORT=8053
LB_PORT=5301
GD_PORT=5302


# Own network namespace (NETNS=1, the default): free ports, and the
# members' IPv6 addresses (fd00::/64) made local on lo, so that one
# wildcard listener answers every member's tcp monitor.
if [[ ${NETNS:-1} == 1 && -z ${LBDNS_BENCH_NETNS:-} ]]; then
	command -v unshare >/dev/null || die "unshare is not installed (NETNS=0 runs in this namespace)"
	exec unshare -n env LBDNS_BENCH_NETNS=1 "$0" "$@"
fi
if [[ -n ${LBDNS_BENCH_NETNS:-} ]]; then
	ip link set lo up
	ip -6 route add local fd00::/64 dev lo
fi
for c in gdnsd dnsperf dig jq; do command -v "$c" >/dev/null || die "$c is not installed"; done
((DURATION >= 1 && LAT_DURATION >= 1 && SOURCES >= 1 && SOURCES <= 200 && ROUNDS >= 2 && REGIONS >= 1 && REGIONS <= 200 && NAMES >= 1)) ||
	die "DURATION and LAT_DURATION must be at least 1, SOURCES 1..200, ROUNDS at least 2, REGIONS 1..200, NAMES at least 1"
((BIG_MEMBERS >= BIG_NAMES && BIG_MEMBERS <= 250 * 250 * 100 && BIG_PREFIXES >= BIG_FILES && BIG_PREFIXES <= 100 * 65536)) ||
	die "BIG_MEMBERS must be BIG_NAMES..6250000, BIG_PREFIXES $BIG_FILES..6553600"

bench_start resp

echo "== build"
SRC=${LBDNSD_SRC:-$ROOT}
(cd "$SRC" && go build -o "$WORK/lbdnsd" ./cmd/lbdnsd && go build -o "$WORK/lbctl" ./lbctl)
if [[ -n ${LBDNSD_B_SRC:-} ]]; then
	(cd "$LBDNSD_B_SRC" && go build -o "$WORK/lbdnsd-b" ./cmd/lbdnsd)
	echo "lbdnsd-b from $LBDNSD_B_SRC ($(git -C "$LBDNSD_B_SRC" describe --always --dirty 2>/dev/null || echo unknown)), measured in the same rounds"
fi
(cd "$ROOT" && go build -o "$WORK/tool" ./bench/responder/tool)
echo "lbdnsd from $SRC ($(git -C "$SRC" describe --always --dirty 2>/dev/null || echo unknown)); $(gdnsd -c "$WORK" checkconf 2>&1 | grep -o 'gdnsd version [^ ]*' | head -1 || echo gdnsd); $(dnsperf -h 2>&1 | grep -i '^version' || echo dnsperf)"

HZ=$(getconf CLK_TCK)
# wait_for SECONDS CMD...: runs CMD every 0.1 s until it succeeds.
wait_for() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}

# The one member listener: every tcp monitor connects to MON_PORT on its
# member's address (127.x on lo, fd00:: made local above).
"$WORK/tool" listen "[::]:$MON_PORT" >"$WORK/listen.out" 2>"$WORK/listen.err" &
PIDS+=($!)
wait_for 5 grep -q ready "$WORK/listen.out" || die "member listener: $(cat "$WORK/listen.err")"

# Members: region R's pool rR has 127.10.R.1-2 and fd00::10:R:1-2; the
# global pool gl 127.11.0.1-2 and fd00::11:0:1-2.
v4() { echo "127.$1.$2.$3"; }
v6() { echo "fd00::$1:$2:$3"; }

# One description for both servers (bench/responder/tool config): the
# regions' pools, the names (lbdnsd's in FORM: service, list or inline),
# the network map (10.R.0.0/16 per region, or PREFIXES interleaved /24s).
echo "== configs: $REGIONS regions ($( ((PREFIXES > 0)) && echo "$PREFIXES /24s from 1.0.0.0" || echo "10.R.0.0/16")), $NAMES dynamic names ($FORM), $STATICS static names"
"$WORK/tool" config -dir "$WORK" -names "$NAMES" -static "$STATICS" -regions "$REGIONS" -prefixes "$PREFIXES" -form "$FORM" \
	-lb-port "$LB_PORT" -gd-port "$GD_PORT" -mon-port "$MON_PORT"
"$WORK/lbdnsd" -check-config "$WORK/lbdns.toml" >"$WORK/check-config.log" 2>&1 || die "lbdnsd -check-config: $(tail -3 "$WORK/check-config.log")"
gdnsd -c "$WORK/gdnsd" checkconf >"$WORK/gdnsd-checkconf.log" 2>&1 || die "gdnsd checkconf: $(tail -3 "$WORK/gdnsd-checkconf.log")"

echo "== queries"
"$WORK/tool" queries -out "$WORK/queries.bin" -n 200000 -dyn "$NAMES" -static "$STATICS" -regions "$REGIONS" -prefixes "$PREFIXES" -mix "$MIX"

# answers PORT NAME TYPE [ECS]: the sorted addresses answered.
answers() {
	dig +norec +short +time=1 +tries=1 @127.0.0.1 -p "$1" "$2" "$3" ${4:+"+subnet=$4"} 2>/dev/null | sort | paste -sd' '
}
# field FILE LABEL: the first number after LABEL in dnsperf's output.
field() { awk -v l="$2" 'index($0, l) { s = substr($0, index($0, l) + length(l)); if (match(s, /[0-9.]+/)) { print substr(s, RSTART, RLENGTH); exit } }' "$1"; }

[[ $COMPARE == 1 ]] && {
# The servers, all running for the whole comparison (an idle one only
# monitors its 36 members; the dnsperf runs alternate between them):
# lbdnsd; gdnsd with udp_threads 1 and with 2 (the CPU goals compare
# with its better one); and the floor.
GD2_PORT=5305
cp -r "$WORK/gdnsd" "$WORK/gdnsd2"
sed -i -e "s|$WORK/gdnsd/|$WORK/gdnsd2/|g" -e "s|$WORK/gdnsd\$|$WORK/gdnsd2|" -e "s|127.0.0.1:$GD_PORT|127.0.0.1:$GD2_PORT|" \
	-e 's|^options => {$|options => {\n  udp_threads => 2|' "$WORK/gdnsd2/config"
sed -i -e 's|^options => {$|options => {\n  udp_threads => 1|' "$WORK/gdnsd/config"
gdnsd -c "$WORK/gdnsd2" checkconf >"$WORK/gdnsd2-checkconf.log" 2>&1 || die "gdnsd checkconf (udp_threads 2): $(tail -3 "$WORK/gdnsd2-checkconf.log")"

declare -A PORT PID
PORT[lbdnsd]=$LB_PORT PORT[gdnsd-t1]=$GD_PORT PORT[gdnsd-t2]=$GD2_PORT PORT[floor]=$FL_PORT
"$WORK/lbdnsd" -dry-run -config "$WORK/lbdns.toml" -log-format json >"$WORK/lbdnsd.out" 2>"$WORK/lbdnsd.log" &
PID[lbdnsd]=$!
PIDS+=("$!")
SERVERS=(lbdnsd)
# LBDNSD_B_SRC: a second lbdnsd, built from another checkout, on its own
# port and state directory, measured in the same rounds (a paired
# comparison of two builds; the summary prints lbdnsd / lbdnsd-b).
if [[ -n ${LBDNSD_B_SRC:-} ]]; then
	LBB_PORT=5304
	mkdir -p "$WORK/lbdns-b"
	sed -e "s|127.0.0.1:$LB_PORT|127.0.0.1:$LBB_PORT|" -e "s|$WORK/lbdns\b|$WORK/lbdns-b|g" "$WORK/lbdns.toml" >"$WORK/lbdns-b.toml"
	# LBDNSD_B_TOML: TOML appended to lbdnsd-b's configuration (a paired
	# comparison of two settings, e.g. "[flood]" "enabled = false").
	[[ -n ${LBDNSD_B_TOML:-} ]] && printf '\n%b\n' "$LBDNSD_B_TOML" >>"$WORK/lbdns-b.toml"
	"$WORK/lbdnsd-b" -check-config "$WORK/lbdns-b.toml" >"$WORK/check-config-b.log" 2>&1 || die "lbdnsd-b -check-config: $(tail -3 "$WORK/check-config-b.log")"
	PORT[lbdnsd-b]=$LBB_PORT
	"$WORK/lbdnsd-b" -dry-run -config "$WORK/lbdns-b.toml" -log-format json >"$WORK/lbdnsd-b.out" 2>"$WORK/lbdnsd-b.log" &
	PID[lbdnsd-b]=$!
	PIDS+=("$!")
	SERVERS+=(lbdnsd-b)
fi
gdnsd -c "$WORK/gdnsd" start >"$WORK/gdnsd-t1.out" 2>"$WORK/gdnsd-t1.log" &
PID[gdnsd-t1]=$!
PIDS+=("$!")
gdnsd -c "$WORK/gdnsd2" start >"$WORK/gdnsd-t2.out" 2>"$WORK/gdnsd-t2.log" &
PID[gdnsd-t2]=$!
PIDS+=("$!")
SERVERS+=(gdnsd-t1 gdnsd-t2)
# The floor (FLOOR=1): a responder that does no DNS work (floor.c:
# recvmmsg, QR set, sendmmsg), measured in the same rounds.
if [[ $FLOOR == 1 ]] && ! command -v cc >/dev/null; then
	echo "no C compiler (cc): the floor responder is left out"
	FLOOR=0
fi
if [[ $FLOOR == 1 ]]; then
	cc -O2 -o "$WORK/floor" "$ROOT/bench/responder/floor.c" || die "floor: cc failed"
	"$WORK/floor" 127.0.0.1 "$FL_PORT" >"$WORK/floor.out" 2>"$WORK/floor.log" &
	PID[floor]=$!
	PIDS+=("$!")
	wait_for 5 grep -q ready "$WORK/floor.out" || die "floor: $(cat "$WORK/floor.log")"
	SERVERS=(floor "${SERVERS[@]}")
fi

# ready PORT: the answers every member up gives (no fail-open, no
# fallback), from both servers alike.
NET0=10.0.1.0/24 NETR=10.$((REGIONS - 1)).2.0/24 # in region 0, in the last region
if ((PREFIXES > 0)); then NET0=1.0.0.0/24 NETR=1.0.$((REGIONS - 1)).0/24; fi
ready() {
	[[ $(answers "$1" dyn0.bench.test A "$NET0") == "$(v4 10 0 1) $(v4 10 0 2)" ]] &&
		[[ $(answers "$1" dyn0.bench.test AAAA "$NETR") == "$(v6 10 $((REGIONS - 1)) 1) $(v6 10 $((REGIONS - 1)) 2)" ]] &&
		[[ $(answers "$1" dyn0.bench.test A) == "$(v4 11 0 1) $(v4 11 0 2)" ]] &&
		[[ $(answers "$1" s1.bench.test A) == "198.18.0.2" ]] &&
		dig +norec +time=1 +tries=1 @127.0.0.1 -p "$1" nx-1.bench.test A | grep -q 'status: NXDOMAIN'
}
for name in "${SERVERS[@]}"; do
	[[ $name == floor ]] && continue
	port=${PORT[$name]} pid=${PID[$name]}
	wait_for 30 ready "$port" || {
		kill -0 "$pid" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.log")"
		die "$name: answers not as expected after 30 s: dyn0 A ECS $NET0: $(answers "$port" dyn0.bench.test A "$NET0"); dyn0 A: $(answers "$port" dyn0.bench.test A)"
	}
	echo "$name ready on 127.0.0.1:$port: dyn0 A (ECS $NET0) $(answers "$port" dyn0.bench.test A "$NET0"); dyn0 AAAA (no ECS) $(answers "$port" dyn0.bench.test AAAA)"
done

# busy_idle: the machine's busy and idle clock ticks so far (/proc/stat).
busy_idle() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }
# ours: the CPU time every server of the comparison has used, ns.
ours() {
	local s=0 p
	for p in "${PID[@]}"; do s=$((s + $(cpu_ns "$p"))); done
	echo "$s"
}

# measure KIND NAME ROUND [QPS]: dnsperf against NAME, at full speed
# (KIND sat, one dnsperf) or at a fixed QPS (KIND fixed, SOURCES dnsperf
# processes from 127.0.0.2.., QPS/SOURCES each). One line printed, and a
# line appended to $WORK/results: KIND NAME QPS ROUND server_us_per_query
# qps_answered foreign_share idle_share dnsperf_us_per_query lost. The
# foreign share is the machine's CPU used by neither the
# servers nor dnsperf, in cores; above FOREIGN_MAX the round is marked
# and left out of the summary.
measure() {
	local kind=$1 name=$2 run=$3 qps=${4:-0} port=${PORT[$2]} pid=${PID[$2]} c0 c1 o0 o1 b0 i0 b1 i1 t0 t1 n i out
	n=1
	[[ $kind == fixed ]] && n=$SOURCES
	out="$WORK/$name.$kind.$qps.$run"
	[[ $kind == fixed ]] && threads "$pid" >"$out.threads0"
	c0=$(cpu_ns "$pid") o0=$(ours) t0=$(now_ns)
	read -r b0 i0 < <(busy_idle)
	local dp=()
	for ((i = 0; i < n; i++)); do
		local args=(-B -d "$WORK/queries.bin" -s 127.0.0.1 -p "$port" -l "$([[ $kind == fixed ]] && echo "$LAT_DURATION" || echo "$DURATION")" -c "$CLIENTS" -T "$THREADS" -q "$OUTSTANDING" -t 2)
		[[ $kind == fixed ]] && args+=(-a "127.0.0.$((2 + i))" -Q "$((qps / n))")
		# The wrapper prints dnsperf's CPU ticks (its children's, once waited).
		bash -c 'dnsperf "$@" >"'"$out.$i"'" 2>&1; rc=$?; awk "{ sub(/^.*\\) /, \"\"); print \$14 + \$15 }" /proc/$$/stat >"'"$out.$i.cpu"'"; exit $rc' _ "${args[@]}" &
		dp+=($!)
	done
	for p in "${dp[@]}"; do wait "$p" || die "dnsperf against $name: $(tail -5 "$out.0")"; done
	c1=$(cpu_ns "$pid") o1=$(ours) t1=$(now_ns)
	read -r b1 i1 < <(busy_idle)
	kill -0 "$pid" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.log")"
	local sent=0 lost=0 q=0 dcpu=0
	for ((i = 0; i < n; i++)); do
		sent=$((sent + $(field "$out.$i" "Queries sent:")))
		lost=$((lost + $(field "$out.$i" "Queries lost:")))
		q=$(awk -v a="$q" -v b="$(field "$out.$i" "Queries per second:")" 'BEGIN { print a + b }')
		dcpu=$((dcpu + $(cat "$out.$i.cpu")))
	done
	awk -v k="$kind" -v n="$name" -v r="$run" -v Q="$qps" -v q="$q" -v sent="$sent" -v lost="$lost" -v c=$((c1 - c0)) -v o=$((o1 - o0)) \
		-v b=$((b1 - b0)) -v id=$((i1 - i0)) -v d="$dcpu" -v hz="$HZ" -v w=$((t1 - t0)) -v fmax="$FOREIGN_MAX" 'BEGIN {
		wall = w / 1e9
		us = sent ? c / 1e3 / sent : 0; dus = sent ? 1e6 * d / hz / sent : 0
		foreign = ((b - d) / hz - o / 1e9) / wall; if (foreign < 0) foreign = 0
		idle = (b + id) ? id / (b + id) : 0
		mark = foreign > fmax ? sprintf(" | FOREIGN LOAD %.2f cores: left out", foreign) : ""
		printf "%-9s %s %d%s: %8.0f qps answered | %d sent, %d lost | server %5.2f us CPU per query | dnsperf %5.2f us per query | idle %2.0f%%%s\n",
			n, (k == "fixed" ? "fixed" : "full speed"), r, (k == "fixed" ? sprintf(" at %d qps", Q) : ""), q, sent, lost, us, dus, 100 * idle, mark
		printf "%s %s %d %d %f %f %f %f %f %d\n", k, n, Q, r, us, q, foreign, idle, dus, lost >> "'"$WORK/results"'"
	}'
	# Each server's busiest threads at a fixed load: the CPU of each per query
	# sent and its wake-ups (voluntary switches) per second; the Go
	# runtime's monitor (sysmon) is the thread with many wake-ups and
	# little CPU.
	if [[ $kind == fixed ]]; then
		threads "$pid" >"$out.threads1"
		join "$out.threads0" "$out.threads1" | awk -v sent="$sent" -v w=$((t1 - t0)) '{ d = $4 - $2; v = $5 - $3; if (d > 0) printf "%.2f %.0f\n", sent ? d / 1e3 / sent : 0, v / (w / 1e9) }' |
			sort -rn | head -4 | awk -v n="$name" '{ s = s sprintf("%s%s us/q %s wake-ups/s", (NR > 1 ? "; " : ""), $1, $2) } END { printf "%-9s threads (busiest 4): %s\n", n, s }'
	fi
}

# threads PID: each thread of PID as "tid cpu_ns voluntary_switches"
# (the scheduler's account and /proc's status).
threads() {
	local t
	for t in /proc/"$1"/task/*; do
		echo "${t##*/} $(awk '{ print $1 }' "$t/schedstat" 2>/dev/null || echo 0) $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null || echo 0)"
	done | sort -k1,1
}

# checked NAME ROUND: a sample of answers compared with the pool each
# client gets (tool check); a wrong one fails the run.
checked() {
	[[ $1 == floor ]] && return 0
	"$WORK/tool" check -server "127.0.0.1:${PORT[$1]}" -n 200 -names "$NAMES" -regions "$REGIONS" -prefixes "$PREFIXES" -seed "$2" >"$WORK/$1.check.$2" 2>&1 ||
		die "$1 answered wrong after round $2: $(tail -1 "$WORK/$1.check.$2")"
}

echo "== CPU per query at fixed offered loads ($LOADS qps; dnsperf -Q from $SOURCES source addresses), $ROUNDS rounds, ${LAT_DURATION} s each, servers in turn: ${SERVERS[*]}; $(nproc) CPUs shared with dnsperf, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
	for load in $LOADS; do
		for s in "${SERVERS[@]}"; do measure fixed "$s" "$r" "$load"; done
	done
	for s in "${SERVERS[@]}"; do checked "$s" "$r"; done
done
if [[ $SATURATED == 1 ]]; then
	echo "== full speed: $ROUNDS rounds, ${DURATION} s each; dnsperf -B -c $CLIENTS -T $THREADS -q $OUTSTANDING (dnsperf's own CPU beside the server's)"
	for ((r = 1; r <= ROUNDS; r++)); do
		for s in "${SERVERS[@]}"; do measure sat "$s" "$r"; done
		for s in "${SERVERS[@]}"; do checked "$s" "$((ROUNDS + r))"; done
	done
fi
echo "answers checked after every round: 200 per server, each the members of the client's pool"

echo "== summary ($MIX mix; rounds with foreign load above $FOREIGN_MAX cores left out)"
# The goals at 30,000 qps, against gdnsd's better thread setting.
case $MIX in
friendly) GOAL=0.9 ;;
realistic) GOAL=1.0 ;;
hostile) GOAL=1.1 ;;
esac
awk -v goal="$GOAL" -v mix="$MIX" -v fmax="$FOREIGN_MAX" '
function stats(key,   i, s, lo, hi) {
	s = 0; lo = 1e18; hi = 0
	for (i = 1; i <= cnt[key]; i++) { s += val[key, i]; if (val[key, i] < lo) lo = val[key, i]; if (val[key, i] > hi) hi = val[key, i] }
	mean[key] = cnt[key] ? s / cnt[key] : 0; low[key] = lo; high[key] = hi
}
{
	k = $1 " " $2 " " $3
	all[k]++
	if (!(($1 " " $3) in seen)) { seen[$1 " " $3] = 1; loads[++nl] = $1 " " $3 }
	if (!($2 in servers)) { servers[$2] = 1; order[++ns] = $2 }
	if ($7 > fmax) { out[k]++; next }
	cnt[k]++; val[k, cnt[k]] = $5; qps[k] += $6; dus[k] += $9; idle[k] += $8; lost[k] += $10
}
END {
	for (k in all) if (cnt[k]) stats(k)
	for (j = 1; j <= nl; j++) {
		split(loads[j], kl, " ")
		kind = kl[1]; Q = kl[2]
		head = kind == "fixed" ? sprintf("at %d qps", Q) : "at full speed"
		fl = mean["" kind " floor " Q]
		for (si = 1; si <= ns; si++) {
			s = order[si]
			k = kind " " s " " Q
			if (!all[k]) continue
			if (!cnt[k]) { printf "%-9s %s: every one of %d rounds had foreign load: no figure\n", s, head, all[k]; continue }
			printf "%-9s %s: %.2f us CPU per query (%.2f..%.2f, %d rounds%s)%s | %.0f qps answered | dnsperf %.2f us per query | idle %.0f%% | %d lost\n",
				s, head, mean[k], low[k], high[k], cnt[k], (out[k] ? sprintf(", %d left out", out[k]) : ""),
				(fl > 0 && s != "floor" ? sprintf(" = %.2fx the floor", mean[k] / fl) : ""), qps[k] / cnt[k], dus[k] / cnt[k], 100 * idle[k] / cnt[k], lost[k]
		}
		g1 = mean[kind " gdnsd-t1 " Q]; g2 = mean[kind " gdnsd-t2 " Q]
		g = (g1 > 0 && (g2 <= 0 || g1 <= g2)) ? g1 : g2; gname = (g == g1) ? "udp_threads 1" : "udp_threads 2"
		lb = mean[kind " lbdnsd " Q]
		if (g > 0 && lb > 0) {
			ratio = lb / g
			isgoal = (kind == "fixed" && Q == 30000)
			printf "lbdnsd/gdnsd (gdnsd at its better, %s) %s: %.2f%s\n", gname, head, ratio,
				(isgoal ? sprintf(" (goal <= %.1f on the %s mix: %s)", goal, mix, (ratio <= goal ? "MEETS" : "MISSES")) : "")
			if (isgoal && mix == "realistic" && fl > 0)
				printf "lbdnsd/floor %s: %.2f (goal <= 1.3 on the realistic mix: %s)\n", head, lb / fl, (lb / fl <= 1.3 ? "MEETS" : "MISSES")
		}
		lbb = mean[kind " lbdnsd-b " Q]
		if (lb > 0 && lbb > 0)
			printf "lbdnsd - lbdnsd-b %s: %+.2f us per query (lbdnsd %.2f..%.2f, lbdnsd-b %.2f..%.2f)\n", head, lb - lbb,
				low[kind " lbdnsd " Q], high[kind " lbdnsd " Q], low[kind " lbdnsd-b " Q], high[kind " lbdnsd-b " Q]
	}
}' "$WORK/results"
for s in "${SERVERS[@]}"; do stop "${PID[$s]}"; done
}

[[ $RELOAD == 1 ]] || exit 0

# The reload test: BIG_NAMES names, BIG_MEMBERS members in pools of
# BIG_MEMBERS/BIG_NAMES, BIG_PREFIXES /24 prefixes in BIG_FILES files (one
# region each). Name K: region r(K mod BIG_FILES) -> pool pK, else pool
# p(K+1). The reload changes every name's TTL (30 -> 31): the served
# configuration changes, so lbdnsd rebuilds the topology, the serial and
# the snapshot.
PER=$((BIG_MEMBERS / BIG_NAMES))
echo
echo "== reload: $BIG_NAMES names, $BIG_MEMBERS members ($BIG_NAMES pools of $PER), $BIG_PREFIXES prefixes in $BIG_FILES files; tcp monitor every ${BIG_INTERVAL} s"
mkdir -p "$WORK/big/nets" "$WORK/big/lbdns"
t0=$(now_ns)
awk -v n="$BIG_PREFIXES" -v f="$BIG_FILES" -v d="$WORK/big/nets" 'BEGIN {
	per = int(n / f)
	for (i = 0; i < n; i++) {
		k = int(i / per); if (k >= f) k = f - 1
		p = 16777216 + i * 256
		printf "%d.%d.%d.0/24\n", int(p / 16777216), int(p / 65536) % 256, int(p / 256) % 256 > (d "/r" k ".txt")
	}
}'
{
	cat <<TOML
# Generated by bench/responder/run.sh (reload test).
[daemon]
state_dir = "$WORK/big/lbdns"
log_level = "info"
control_socket = "$WORK/big/lbdns/lbdns.sock"
status_listen = ""

[check.tcp]
kind = "tcp"
interval = "${BIG_INTERVAL}s"
timeout = "1s"
rise = 1
fall = 3

[check.tcp.tcp]
port = $MON_PORT

[gslb]
policy_order = ["region", "global"]

[gslb.server]
listen = ["127.0.0.1:$LB_PORT"]

[gslb.topology]
levels = ["region"]

TOML
	for ((k = 0; k < BIG_FILES; k++)); do
		printf '[[gslb.topology.file]]\npath = "nets/r%d.txt"\nlabels = { region = "r%d" }\n\n' "$k" "$k"
	done
	awk -v names="$BIG_NAMES" -v per="$PER" -v files="$BIG_FILES" 'BEGIN {
		for (p = 0; p < names; p++) {
			printf "[[gslb.pool]]\nname = \"p%d\"\nmonitors = [\"tcp\"]\n\n", p
			for (j = 0; j < per; j++) {
				i = p * per + j
				printf "[[gslb.pool.member]]\nname = \"m%d\"\naddress = \"127.%d.%d.%d\"\n\n", j, 20 + int(i / 62500), int(i / 250) % 250, i % 250 + 1
			}
		}
		printf "[[gslb.zone]]\nname = \"bench.test\"\nns = [\"ns1.bench.test.\"]\n\n"
		for (s = 0; s < 100; s++) printf "[[gslb.zone.record]]\nname = \"s%d\"\ntype = \"A\"\nvalue = \"198.18.0.%d\"\n\n", s, s + 1
		for (k = 0; k < names; k++) {
			printf "[[gslb.name]]\nname = \"dyn%d.bench.test\"\nttl = 30\necs = true\n\n", k
			printf "[[gslb.name.policy]]\nmatch = { region = \"r%d\" }\npool = \"p%d\"\n\n", k % files, k
			printf "[[gslb.name.policy]]\npool = \"p%d\"\n\n", (k + 1) % names
		}
	}'
} >"$WORK/big/lbdns.toml"
echo "generated in $(((($(now_ns) - t0)) / 1000000)) ms: config $(du -h "$WORK/big/lbdns.toml" | cut -f1), prefix files $(du -sh "$WORK/big/nets" | cut -f1)"
"$WORK/tool" queries -out "$WORK/big/queries.bin" -n 200000 -dyn "$BIG_NAMES" -static 100 -prefixes "$BIG_PREFIXES"

ulimit -n 65536 2>/dev/null || true
t0=$(now_ns)
"$WORK/lbdnsd" -dry-run -config "$WORK/big/lbdns.toml" -log-format json >"$WORK/big/lbdnsd.out" 2>"$WORK/big/lbdnsd.log" &
BPID=$!
PIDS+=("$BPID")
# The first snapshot: "gslb configuration in force" logged.
wait_for 300 grep -q 'gslb configuration in force' "$WORK/big/lbdnsd.log" || {
	kill -0 "$BPID" 2>/dev/null || die "lbdnsd (big) exited: $(tail -5 "$WORK/big/lbdnsd.log")"
	die "lbdnsd (big): no snapshot after 300 s"
}
echo "start to first snapshot: $(((($(now_ns) - t0)) / 1000000)) ms; peak RSS $(awk '/^VmHWM:/ { printf "%.0f MB", $2 / 1024 }' "/proc/$BPID/status")"
# members up: lbctl gslb members, counted.
up_count() {
	"$WORK/lbctl" -socket "$WORK/big/lbdns/lbdns.sock" -timeout 60s gslb members -o json 2>/dev/null |
		jq '[.[].members[] | select(.state == "up")] | length'
}
deadline=$(($(date +%s) + 2 * BIG_INTERVAL + 30))
up=0
while (($(date +%s) < deadline)); do
	up=$(up_count || echo 0)
	((up >= BIG_MEMBERS)) && break
	sleep_s 2
done
echo "members up: $up/$BIG_MEMBERS after $(((($(now_ns) - t0)) / 1000000)) ms; answer dyn0 A (ECS 1.0.0.0/24): $(answers "$LB_PORT" dyn0.bench.test A 1.0.0.0/24)"

# dnsperf runs RELOAD_DURATION/2 s before the reload and until
# RELOAD_DURATION/2 s after the new snapshot is in force (then SIGINT:
# dnsperf counts the queries still outstanding as interrupted, not lost).
out="$WORK/big/dnsperf"
half=$(((RELOAD_DURATION + 1) / 2))
dnsperf -B -d "$WORK/big/queries.bin" -s 127.0.0.1 -p "$LB_PORT" -l $((RELOAD_DURATION + 300)) -c "$CLIENTS" -T "$THREADS" -q "$OUTSTANDING" -t 2 -S 1 >"$out" 2>&1 &
DPID=$!
PIDS+=("$DPID")
sleep_s "$half"
sed -i 's/^ttl = 30$/ttl = 31/' "$WORK/big/lbdns.toml"
serial0=$(dig +norec +short @127.0.0.1 -p "$LB_PORT" bench.test SOA | awk '{ print $3 }')
r0=$(now_ns)
"$WORK/lbctl" -socket "$WORK/big/lbdns/lbdns.sock" -timeout 120s reload >"$WORK/big/reload.out" 2>&1 || echo "lbctl reload failed: $(cat "$WORK/big/reload.out")"
r1=$(now_ns)
# in_force N: lbdnsd logged "gslb configuration in force" N times.
in_force() { (($(grep -c 'gslb configuration in force' "$WORK/big/lbdnsd.log") >= $1)); }
wait_for 120 in_force 2 || echo "no second 'gslb configuration in force' within 120 s of the reload"
sleep_s "$half"
kill -INT "$DPID" 2>/dev/null || true
wait "$DPID" || die "dnsperf (reload): $(tail -5 "$out")"
serial1=$(dig +norec +short @127.0.0.1 -p "$LB_PORT" bench.test SOA | awk '{ print $3 }')
hwm=$(awk '/^VmHWM:/ { printf "%.0f MB", $2 / 1024 }' "/proc/$BPID/status")
ttl=$(dig +norec @127.0.0.1 -p "$LB_PORT" dyn5.bench.test A +subnet=1.0.0.0/24 | awk '$1 == "dyn5.bench.test." { print $2; exit }')
# log_ns MSG N: the time of lbdnsd's Nth log line MSG, ns since the epoch.
log_ns() {
	local ts
	ts=$(grep "\"msg\":\"$1\"" "$WORK/big/lbdnsd.log" | sed -n "$2p" | jq -r '.time' 2>/dev/null || true)
	[[ -n $ts ]] && date -d "$ts" +%s%N
}
rl=$(log_ns "config reloaded" 1)
r2=$(log_ns "gslb configuration in force" 2)
if [[ -n $r2 && -n $rl ]]; then
	echo "reload: lbctl reload returned after $(((r1 - r0) / 1000000)) ms; configuration reloaded (parsed, checked, monitors reconciled; log) after $(((rl - r0) / 1000000)) ms; new snapshot in force (topology and snapshot built; log) after $(((r2 - r0) / 1000000)) ms (goal <= 2,000 ms: $( (((r2 - r0) / 1000000 <= 2000)) && echo MEETS || echo MISSES) goal)"
else
	echo "reload: lbctl reload returned after $(((r1 - r0) / 1000000)) ms; the reload or the new snapshot is not in lbdnsd's log"
fi
echo "the responder's rebuild after the reload (lbdnsd's log): $(grep '"msg":"gslb configuration in force"' "$WORK/big/lbdnsd.log" | sed -n 2p | jq -r '"topology and the serial'"'"'s hash \(.topology_ms) ms, with the snapshot \(.build_ms) ms"' 2>/dev/null || echo "not logged")"
echo "SOA serial $serial0 -> $serial1; dyn5 TTL now $ttl (31 after the reload); peak RSS $hwm"
echo "dnsperf across the reload ($(field "$out" "Run time (s):") s): $(field "$out" "Queries sent:") sent, $(field "$out" "Queries completed:") completed, $(field "$out" "Queries lost:") lost (goal 0), $(field "$out" "Queries interrupted:") interrupted at the end, $(field "$out" "Queries per second:") qps on average"
echo "qps per second (dnsperf -S 1; the reload was asked after ${half} s): $(awk '/^[0-9.]+: [0-9.]+$/ { printf "%.0f ", $2 }' "$out")"
stop "$BPID"
