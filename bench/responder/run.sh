#!/usr/bin/env bash
# bench/responder/run.sh: the GSLB responder's CPU per query at fixed
# offered loads, side by side in the same rounds with Debian's gdnsd
# (geoip plugin with the same nets, multifo pools with the same members)
# at udp_threads 1 and 2, and with a floor responder that does no DNS
# work (floor.c), all driven by the same generator (one dnsperf by
# default, its own CPU reported beside the servers'); then the same at
# full speed, with the machine's idle share beside; then a reload of a
# big configuration while dnsperf runs.
#
# What each run is checked for: the queries it sent (dnsperf reads its
# file from the start: the distinct queries among the first "sent" of
# each generator's file, printed; a hostile run that sent one twice
# fails); the replies' response codes (dnsperf's counts against those
# the queries sent must get, printed; a difference beyond RCODE_TOL
# points fails); the mean reply size (dnsperf's, printed per server).
# After each round a sample of at least 1 % of the queries each server
# was sent is sent again from the same files and every reply decoded
# (tool check: the pool, the record or the NXDOMAIN, the ECS scope); a
# wrong one fails the run. Every run's foreign load (the machine's CPU
# used by anything but the servers and dnsperf) is printed; a round
# with more than FOREIGN_MAX cores of it in any run is dropped for every
# server alike, and if every round had it the figures are still printed,
# marked as taken under foreign load. The summary prints each server's
# median over the rounds kept with the range, every goal with MEETS or
# MISSES; the exit code judges only whether the run itself went right.
# See bench/README.md.
#
#   bench/responder/run.sh                                  # friendly mix
#   MIX=realistic NAMES=20000 PREFIXES=100000 RELOAD=0 bench/responder/run.sh
#   ROUNDS=2 LOADS=30000 LAT_DURATION=3 SATURATED=0 MIX=hostile NAMES=2000 PREFIXES=10000 RELOAD=0 bench/responder/run.sh   # short
#   bench/responder/all.sh                                  # every mix, memory
#
# Environment:
#   LOADS        the fixed offered loads, qps (default "10000 30000 50000")
#   LAT_DURATION s, each fixed-load run (default 10)
#   SOURCES      dnsperf processes at a fixed load (default 1), each from
#                its own address 127.0.0.2.. at LOAD/SOURCES qps and on
#                its own query file: disjoint slices of one shuffled list
#                (tool queries -files), so that no two send the same
#                stream; 1..200
#   ROUNDS       rounds, each every server in turn at every load, the
#                order rotated from round to round (default 5; at least 2)
#   SATURATED    1 (default): the full-speed runs too (one dnsperf on the
#                first query file; hostile: -n 1, until that file is sent
#                once); DURATION (s, each, default 20)
#   CLIENTS, THREADS, OUTSTANDING   dnsperf -c, -T, -q (4, 1, 100)
#   FOREIGN_MAX  cores of foreign load a round may have in each run to
#                be kept (default 0.15)
#   RCODE_TOL    percentage points the replies' response codes may differ
#                from the expected ones (default 0.5)
#   COMPARE      0: only the reload test (default 1)
#   REGIONS      networks and pools (default 8)
#   NAMES        dynamic names (default 100)
#   PREFIXES     0 (default): region R is 10.R.0.0/16; else a map of that
#                many interleaved /24s from 1.0.0.0
#   FORM         lbdnsd's names: service (default), list or inline (tool
#                config)
#   MIX          the queries (tool queries; 70 % dynamic, 20 % static,
#                10 % NXDOMAIN, shuffled, the file a quarter longer than
#                a run at the highest load sends, at least 200,000):
#                friendly (default; uniform names, ECS on 30 % of the
#                dynamic queries), realistic (Zipf names and Zipf ECS /24s
#                over the whole map, ECS on every dynamic query) or
#                hostile (every query distinct in name or ECS /24)
#   FLOOR        1 (default, if cc is there): measure the floor responder
#   RELOAD       1 (default): the reload test; RELOAD_DURATION (s: half
#                before the reload, half after its new snapshot is in
#                force, default 20); BIG_NAMES, BIG_MEMBERS, BIG_PREFIXES
#                (its size); BIG_INTERVAL (its tcp monitor's interval, s)
#   LBDNSD_SRC   build lbdnsd from another checkout
#   LBDNSD_B_SRC a second lbdnsd from another checkout, in the same
#                rounds: a paired comparison of two builds; LBDNSD_B_TOML,
#                TOML appended to its configuration, compares two settings
#   KEEP=1       keep the work directory
#   NETNS=0      run in this network namespace: ports 5301-5305 and 8053
#                must be free, and the IPv6 members up needs
#                "ip -6 route add local fd00::/64 dev lo" done by hand
#   LBDNS_CPUPROFILE  passed to lbdnsd (its CPU profile)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
export PATH=$PATH:/usr/local/go/bin

DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-5}
LOADS=${LOADS:-"10000 30000 50000"}
SOURCES=${SOURCES:-1}
SATURATED=${SATURATED:-1}
FOREIGN_MAX=${FOREIGN_MAX:-0.15}
RCODE_TOL=${RCODE_TOL:-0.5}
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
	bench_modules "${LBDNSD_SRC:-}" "${LBDNSD_B_SRC:-}"
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

# The queries: one file per generator (SOURCES), disjoint slices of one
# shuffled list, together longer than a fixed-load run at the highest
# load sends (by a quarter), so that no run sends a query file twice.
if [[ $COMPARE == 1 ]]; then
	max_load=0
	for l in $LOADS; do ((l > max_load)) && max_load=$l; done
	QUERIES=$((LAT_DURATION * max_load * 5 / 4 + 1000 * SOURCES))
	((QUERIES >= 200000)) || QUERIES=200000
	echo "== queries: $QUERIES in $SOURCES file(s) (a fixed-load run at $max_load qps sends about $((LAT_DURATION * max_load)), $((LAT_DURATION * max_load / SOURCES)) from each)"
	"$WORK/tool" queries -out "$WORK/queries" -files "$SOURCES" -n "$QUERIES" -dyn "$NAMES" -static "$STATICS" -regions "$REGIONS" -prefixes "$PREFIXES" -mix "$MIX"
fi

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
# (KIND sat: one dnsperf on the first query file; on the hostile mix
# with -n 1, so that it stops before it would send a query again) or at
# a fixed QPS (KIND fixed: SOURCES dnsperf processes from 127.0.0.2..,
# QPS/SOURCES each, each on its own query file). One line printed, and a
# line appended to $WORK/results: KIND NAME QPS ROUND
# server_us_per_query qps_answered foreign_share idle_share
# dnsperf_us_per_query lost sent distinct_sent mean_reply_bytes. The
# foreign share is the machine's CPU used by neither the servers nor
# dnsperf, in cores (the summary drops a round above FOREIGN_MAX for
# every server). The run fails if the replies' response codes are not
# those the queries sent must get (within RCODE_TOL percentage points;
# the floor echoes every query: NOERROR), or if a hostile run sent a
# query twice.
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
		local args=(-B -d "$WORK/queries.$i.bin" -s 127.0.0.1 -p "$port" -l "$([[ $kind == fixed ]] && echo "$LAT_DURATION" || echo "$DURATION")" -c "$CLIENTS" -T "$THREADS" -q "$OUTSTANDING" -t 2)
		[[ $kind == fixed ]] && args+=(-a "127.0.0.$((2 + i))" -Q "$((qps / n))")
		[[ $kind == sat && $MIX == hostile ]] && args+=(-n 1)
		# The wrapper prints dnsperf's CPU ticks (its children's, once waited).
		bash -c 'dnsperf "$@" >"'"$out.$i"'" 2>&1; rc=$?; awk "{ sub(/^.*\\) /, \"\"); print \$14 + \$15 }" /proc/$$/stat >"'"$out.$i.cpu"'"; exit $rc' _ "${args[@]}" &
		dp+=($!)
	done
	for p in "${dp[@]}"; do wait "$p" || die "dnsperf against $name: $(tail -5 "$out.0")"; done
	c1=$(cpu_ns "$pid") o1=$(ours) t1=$(now_ns)
	read -r b1 i1 < <(busy_idle)
	kill -0 "$pid" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.log")"
	local sent=0 lost=0 q=0 dcpu=0 s pairs=() files=() outs=()
	for ((i = 0; i < n; i++)); do
		outs+=("$out.$i")
		s=$(field "$out.$i" "Queries sent:")
		sent=$((sent + s))
		pairs+=("$WORK/queries.$i.keys" "$s")
		files+=("$WORK/queries.$i.bin:$s")
		lost=$((lost + $(field "$out.$i" "Queries lost:")))
		q=$(awk -v a="$q" -v b="$(field "$out.$i" "Queries per second:")" 'BEGIN { print a + b }')
		dcpu=$((dcpu + $(cat "$out.$i.cpu")))
	done
	# What was sent (tool sent: the distinct queries among the first
	# "sent" of each file, and the response codes they must get).
	local st tsent distinct eno enx
	st=$("$WORK/tool" sent "${pairs[@]}") || die "tool sent: $st"
	read -r tsent distinct eno enx <<<"$st"
	[[ $name == floor ]] && eno=$tsent enx=0
	# The server's round: its queries sent and the files and counts the
	# answers' sample is drawn from (the run that sent the most).
	ROUND_SENT[$name]=$((${ROUND_SENT[$name]:-0} + sent))
	if ((sent > ${ROUND_MAX[$name]:-0})); then ROUND_MAX[$name]=$sent ROUND_FILES[$name]=$(IFS=,; echo "${files[*]}"); fi
	# Every generator's response codes and mean reply size, summed.
	local codes
	codes=$(awk '
		/Response codes:/ { s = substr($0, index($0, ":") + 1); n = split(s, a, ","); for (i = 1; i <= n; i++) { split(a[i], w, " "); c[w[1]] += w[2] } }
		/Queries completed:/ { split($0, w, ":"); split(w[2], v, " "); done += v[1]; last = v[1] }
		/Average packet size:/ { if (match($0, /response [0-9]+/)) bytes += substr($0, RSTART + 9, RLENGTH - 9) * last }
		END { o = 0; for (k in c) if (k != "NOERROR" && k != "NXDOMAIN") o += c[k]
			printf "%d %d %d %d %.1f\n", c["NOERROR"], c["NXDOMAIN"], o, done, done ? bytes / done : 0 }' "${outs[@]}")
	local rc=0
	awk -v k="$kind" -v n="$name" -v r="$run" -v Q="$qps" -v q="$q" -v sent="$sent" -v lost="$lost" -v c=$((c1 - c0)) -v o=$((o1 - o0)) \
		-v b=$((b1 - b0)) -v id=$((i1 - i0)) -v d="$dcpu" -v hz="$HZ" -v w=$((t1 - t0)) -v distinct="$distinct" -v eno="$eno" -v enx="$enx" \
		-v codes="$codes" -v tol="$RCODE_TOL" -v mix="$MIX" 'BEGIN {
		split(codes, g, " "); gno = g[1]; gnx = g[2]; goth = g[3]; done = g[4]; size = g[5]
		wall = w / 1e9
		us = sent ? c / 1e3 / sent : 0; dus = sent ? 1e6 * d / hz / sent : 0
		foreign = ((b - d) / hz - o / 1e9) / wall; if (foreign < 0) foreign = 0
		idle = (b + id) ? id / (b + id) : 0
		e1 = sent ? 100 * eno / sent : 0; e2 = sent ? 100 * enx / sent : 0
		g1 = done ? 100 * gno / done : 0; g2 = done ? 100 * gnx / done : 0; g3 = done ? 100 * goth / done : 0
		bad = (g1 - e1 > tol || e1 - g1 > tol || g2 - e2 > tol || e2 - g2 > tol || g3 > tol)
		printf "%-9s %s %d%s: %8.0f qps answered | %d sent (%d distinct), %d lost | server %5.2f us CPU per query | dnsperf %5.2f us per query | idle %2.0f%% | foreign load %.2f cores\n",
			n, (k == "fixed" ? "fixed" : "full speed"), r, (k == "fixed" ? sprintf(" at %d qps", Q) : ""), q, sent, distinct, lost, us, dus, 100 * idle, foreign
		printf "%-9s   rcodes NOERROR %.2f%% NXDOMAIN %.2f%% other %.2f%% of %d replies (expected NOERROR %.2f%% NXDOMAIN %.2f%%)%s | mean reply %.1f bytes\n",
			n, g1, g2, g3, done, e1, e2, (bad ? sprintf(": BEYOND %.2f POINTS", tol) : ": as expected"), size
		printf "%s %s %d %d %f %f %f %f %f %d %d %d %f\n", k, n, Q, r, us, q, foreign, idle, dus, lost, sent, distinct, size >> "'"$WORK/results"'"
		if (bad) exit 3
		if (mix == "hostile" && distinct < sent) exit 4
	}' || rc=$?
	((rc == 3)) && die "$name: the response codes are not those of the queries sent (see above)"
	((rc == 4)) && die "$name: the hostile run sent $((sent - distinct)) queries more than once (the query file is too short for the run)"
	((rc == 0)) || die "$name: awk failed"
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

# checked NAME ROUND: a sample of the queries NAME was sent in the
# round (at least 1 % of them, drawn from the run that sent the most),
# sent again and every reply decoded and compared with the pool, the
# record or the NXDOMAIN the query must get and its ECS scope (tool
# check); a wrong one fails the run.
checked() {
	[[ $1 == floor ]] && return 0
	local n=$(((${ROUND_SENT[$1]} + 99) / 100))
	"$WORK/tool" check -server "127.0.0.1:${PORT[$1]}" -queries "${ROUND_FILES[$1]}" -n "$((n < 200 ? 200 : n))" -regions "$REGIONS" -prefixes "$PREFIXES" -seed "$2" >"$WORK/$1.check.$2" 2>&1 ||
		die "$1 answered wrong after round $2: $(tail -1 "$WORK/$1.check.$2")"
	printf '%-9s round %d: %s\n' "$1" "$2" "$(tail -1 "$WORK/$1.check.$2")"
}

# foreign KIND QPS ROUND: the round's foreign load, run by run; the
# summary drops the round for every server when its highest is above
# FOREIGN_MAX.
foreign() {
	awk -v k="$1" -v Q="$2" -v r="$3" -v fmax="$FOREIGN_MAX" '$1 == k && $3 == Q && $4 == r { s = s sprintf("%s%s %.2f", (s ? ", " : ""), $2, $7); if ($7 > m) m = $7 }
		END { printf "round %d %s: foreign load %s cores: %s\n", r, (k == "fixed" ? "at " Q " qps" : "at full speed"), s,
			(m > fmax ? sprintf("above %.2f: the round is dropped for every server", fmax) : "kept") }' "$WORK/results"
}

# rotated ROUND: the servers in the round's order (each round starts one
# further on, so that no server is always measured first or last).
rotated() {
	local k=$((($1 - 1) % ${#SERVERS[@]}))
	echo "${SERVERS[@]:k}" "${SERVERS[@]:0:k}"
}

declare -A ROUND_SENT ROUND_MAX ROUND_FILES
echo "== CPU per query at fixed offered loads ($LOADS qps; $SOURCES dnsperf process(es), each on its own query file and source address), $ROUNDS rounds, ${LAT_DURATION} s each, servers in turn (rotated every round): ${SERVERS[*]}; $(nproc) CPUs shared with dnsperf, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
	ROUND_SENT=() ROUND_MAX=() ROUND_FILES=()
	read -ra order <<<"$(rotated "$r")"
	for load in $LOADS; do
		for s in "${order[@]}"; do measure fixed "$s" "$r" "$load"; done
		foreign fixed "$load" "$r"
	done
	for s in "${order[@]}"; do checked "$s" "$r"; done
done
if [[ $SATURATED == 1 ]]; then
	echo "== full speed: $ROUNDS rounds, ${DURATION} s each$([[ $MIX == hostile ]] && echo " or until the first query file is sent once (-n 1)"); one dnsperf -B -c $CLIENTS -T $THREADS -q $OUTSTANDING on the first query file (dnsperf's own CPU beside the server's)"
	for ((r = 1; r <= ROUNDS; r++)); do
		ROUND_SENT=() ROUND_MAX=() ROUND_FILES=()
		read -ra order <<<"$(rotated "$r")"
		for s in "${order[@]}"; do measure sat "$s" "$r"; done
		foreign sat 0 "$r"
		for s in "${order[@]}"; do checked "$s" "$((ROUNDS + r))"; done
	done
fi

echo "== summary ($MIX mix; medians of the rounds, min..max; a round with foreign load above $FOREIGN_MAX cores in any run is dropped for every server)"
# The goals at 30,000 qps, against gdnsd's better thread setting.
case $MIX in
friendly) GOAL=0.9 ;;
realistic) GOAL=1.0 ;;
hostile) GOAL=1.1 ;;
esac
awk -v goal="$GOAL" -v mix="$MIX" -v fmax="$FOREIGN_MAX" '
# median KEY: med, low and high of the values of KEY over the rounds used.
function median(key, f,   i, j, n, t, v) {
	n = 0
	for (i = 1; i <= cnt[key]; i++) if (use[grp[key, i]]) v[++n] = val[key, i, f]
	for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
	used[key] = n
	if (!n) { low = high = 0; return 0 }
	low = v[1]; high = v[n]
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
# paired A B OP: the median over the rounds of A - B (OP "-") or A / B (OP
# "/"), A and B servers of this kind and load, over the rounds used
# (low and high their range; 0 if no round has both).
function paired(a, b, op,   i, j, n, t, v, x, y) {
	n = 0
	for (i = 1; i <= nr; i++) {
		if (!use[gs[i]] || !((kind " " a " " Q, gs[i]) in byg) || !((kind " " b " " Q, gs[i]) in byg)) continue
		x = byg[kind " " a " " Q, gs[i]]; y = byg[kind " " b " " Q, gs[i]]
		if (op == "/" && y <= 0) continue
		v[++n] = op == "/" ? x / y : x - y
	}
	for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
	if (!n) { low = high = 0; return 0 }
	low = v[1]; high = v[n]
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{
	k = $1 " " $2 " " $3; g = $1 ":" $3 ":" $4
	byg[k, g] = $5
	if (!(($1 " " $3) in seen)) { seen[$1 " " $3] = 1; loads[++nl] = $1 " " $3 }
	if (!($2 in servers)) { servers[$2] = 1; order[++ns] = $2 }
	if (!(g in gmax)) { gmax[g] = 0; rounds[$1 " " $3] = rounds[$1 " " $3] " " g; nround[$1 " " $3]++ }
	if ($7 > gmax[g]) gmax[g] = $7
	cnt[k]++; grp[k, cnt[k]] = g
	for (f = 5; f <= 13; f++) val[k, cnt[k], f] = $f
}
END {
	sizegoal = ""
	for (j = 1; j <= nl; j++) {
		split(loads[j], kl, " ")
		kind = kl[1]; Q = kl[2]
		head = kind == "fixed" ? sprintf("at %d qps", Q) : "at full speed"
		# The rounds used: those whose every run had at most fmax cores of
		# foreign load, for every server alike; if none, every round, said.
		nr = split(rounds[loads[j]], gs, " "); kept = 0; worst = 0
		for (i = 1; i <= nr; i++) if (gmax[gs[i]] <= fmax) kept++
		for (i = 1; i <= nr; i++) { use[gs[i]] = (kept == 0 || gmax[gs[i]] <= fmax); if (gmax[gs[i]] > worst) worst = gmax[gs[i]] }
		note = kept ? sprintf("%d of %d rounds, %d dropped for foreign load", kept, nround[loads[j]], nround[loads[j]] - kept) : \
			sprintf("UNDER FOREIGN LOAD: every one of %d rounds had more than %.2f cores, up to %.2f", nround[loads[j]], fmax, worst)
		printf "%s: %s\n", head, note
		fl = median(kind " floor " Q, 5)
		for (si = 1; si <= ns; si++) {
			s = order[si]; k = kind " " s " " Q
			if (!cnt[k]) continue
			m = median(k, 5); lo = low; hi = high; n = used[k]; med[k] = m; lows[k] = lo; highs[k] = hi
			qp = median(k, 6); du = median(k, 9); idl = median(k, 8); ls = median(k, 10); sn = median(k, 11); di = median(k, 12); sz = median(k, 13); fo = median(k, 7)
			size[k] = sz
			printf "%-9s %s: %.2f us CPU per query (%.2f..%.2f, %d round%s)%s | %.0f qps answered | %.0f sent, %.0f distinct | dnsperf %.2f us per query | mean reply %.1f bytes | idle %.0f%% | foreign load %.2f cores | %.0f lost\n",
				s, head, m, lo, hi, n, (n == 1 ? "" : "s"), (fl > 0 && s != "floor" ? sprintf(" = %.2fx the floor", m / fl) : ""), qp, sn, di, du, sz, 100 * idl, fo, ls
		}
		g1 = med[kind " gdnsd-t1 " Q]; g2 = med[kind " gdnsd-t2 " Q]
		g = (g1 > 0 && (g2 <= 0 || g1 <= g2)) ? g1 : g2; gname = (g == g1) ? "udp_threads 1" : "udp_threads 2"
		lb = med[kind " lbdnsd " Q]
		under = kept ? "" : " (under foreign load)"
		isgoal = (kind == "fixed" && Q == 30000)
		if (g > 0 && lb > 0) {
			ratio = lb / g
			paired("lbdnsd", (g == g1 ? "gdnsd-t1" : "gdnsd-t2"), "/")
			printf "lbdnsd/gdnsd (gdnsd at its better, %s) %s: %.2f (round by round %.2f..%.2f)%s%s\n", gname, head, ratio, low, high,
				(isgoal ? sprintf(" (goal <= %.1f on the %s mix: %s)", goal, mix, (ratio <= goal ? "MEETS" : "MISSES")) : ""), under
			if (isgoal && mix == "realistic" && fl > 0)
				printf "lbdnsd/floor %s: %.2f (goal <= 1.3 on the realistic mix: %s)%s\n", head, lb / fl, (lb / fl <= 1.3 ? "MEETS" : "MISSES"), under
		}
		gs1 = size[kind " gdnsd-t1 " Q]; gs2 = size[kind " gdnsd-t2 " Q]; gsz = (gs1 > 0 && (gs2 <= 0 || gs1 <= gs2)) ? gs1 : gs2
		lsz = size[kind " lbdnsd " Q]
		if (gsz > 0 && lsz > 0 && (isgoal || sizegoal == ""))
			sizegoal = sprintf("mean reply size %s: lbdnsd %.1f bytes, gdnsd %.1f (goal <= gdnsd'"'"'s on every mix, %s mix: %s)", head, lsz, gsz, mix, (lsz <= gsz ? "MEETS" : "MISSES"))
		lbb = med[kind " lbdnsd-b " Q]
		if (lb > 0 && lbb > 0)
			printf "lbdnsd - lbdnsd-b %s: %+.2f us per query, the median of the differences round by round (%+.2f..%+.2f; lbdnsd %.2f..%.2f, lbdnsd-b %.2f..%.2f)%s\n", head,
				paired("lbdnsd", "lbdnsd-b", "-"), low, high, lows[kind " lbdnsd " Q], highs[kind " lbdnsd " Q], lows[kind " lbdnsd-b " Q], highs[kind " lbdnsd-b " Q], under
	}
	if (sizegoal != "") print sizegoal
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
echo "generated in $((($(now_ns) - t0) / 1000000)) ms: config $(du -h "$WORK/big/lbdns.toml" | cut -f1), prefix files $(du -sh "$WORK/big/nets" | cut -f1)"
"$WORK/tool" queries -out "$WORK/big/queries" -n 200000 -dyn "$BIG_NAMES" -static 100 -prefixes "$BIG_PREFIXES"

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
echo "start to first snapshot: $((($(now_ns) - t0) / 1000000)) ms; peak RSS $(awk '/^VmHWM:/ { printf "%.0f MB", $2 / 1024 }' "/proc/$BPID/status")"
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
echo "members up: $up/$BIG_MEMBERS after $((($(now_ns) - t0) / 1000000)) ms; answer dyn0 A (ECS 1.0.0.0/24): $(answers "$LB_PORT" dyn0.bench.test A 1.0.0.0/24)"

# dnsperf runs RELOAD_DURATION/2 s before the reload and until
# RELOAD_DURATION/2 s after the new snapshot is in force (then SIGINT:
# dnsperf counts the queries still outstanding as interrupted, not lost).
out="$WORK/big/dnsperf"
half=$(((RELOAD_DURATION + 1) / 2))
dnsperf -B -d "$WORK/big/queries.0.bin" -s 127.0.0.1 -p "$LB_PORT" -l $((RELOAD_DURATION + 300)) -c "$CLIENTS" -T "$THREADS" -q "$OUTSTANDING" -t 2 -S 1 >"$out" 2>&1 &
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
