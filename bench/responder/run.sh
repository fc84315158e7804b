#!/usr/bin/env bash
# bench/responder/run.sh: the GSLB responder under dnsperf, side by side
# with Debian's gdnsd (geoip plugin with the same nets, multifo pools with
# the same members), and a reload of a big configuration while dnsperf
# runs. Figures are printed, never judged: the script fails only when the
# run itself goes wrong. See bench/README.md.
#
#   bench/responder/run.sh                  # DURATION=20 s per dnsperf run
#   DURATION=5 ROUNDS=2 RELOAD=0 bench/responder/run.sh
#
# Environment: DURATION (s, each throughput run), ROUNDS (alternations of
# lbdnsd and gdnsd, at least 2), CLIENTS and THREADS (dnsperf -c, -T),
# OUTSTANDING (dnsperf -q), LAT_QPS (the fixed rate of the latency runs),
# LAT_DURATION (s), REGIONS (networks and pools), NAMES (dynamic names),
# PREFIXES (0: region R is 10.R.0.0/16; else a map of that many
# interleaved /24s), FORM (lbdnsd's names: service, list or inline; see
# tool config), MIX (the queries: friendly, realistic or hostile; see
# tool queries), FLOOR (1: measure the floor responder too, 0: not),
# RELOAD (1: the reload test, 0: skip), RELOAD_DURATION (s: half before
# the reload, half after its new snapshot is in force), BIG_NAMES,
# BIG_MEMBERS, BIG_PREFIXES (the reload test's size), BIG_INTERVAL (its
# tcp monitor's interval, s), LBDNSD_SRC (build lbdnsd from another
# checkout), KEEP=1 (keep the work directory), NETNS=0 (run in this
# network namespace: ports 5301, 5302, 5303 and 8053 must be free, and the IPv6
# members up needs "ip -6 route add local fd00::/64 dev lo" done by hand).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
export PATH=$PATH:/usr/local/go/bin

DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-2}
CLIENTS=${CLIENTS:-4}
THREADS=${THREADS:-1}
OUTSTANDING=${OUTSTANDING:-100}
LAT_QPS=${LAT_QPS:-10000}
LAT_DURATION=${LAT_DURATION:-$DURATION}
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
((DURATION >= 1 && ROUNDS >= 2 && REGIONS >= 1 && REGIONS <= 200 && NAMES >= 1)) ||
	die "DURATION must be at least 1, ROUNDS at least 2, REGIONS 1..200, NAMES at least 1"
((BIG_MEMBERS >= BIG_NAMES && BIG_MEMBERS <= 250 * 250 * 100 && BIG_PREFIXES >= BIG_FILES && BIG_PREFIXES <= 100 * 65536)) ||
	die "BIG_MEMBERS must be BIG_NAMES..6250000, BIG_PREFIXES $BIG_FILES..6553600"

bench_start resp

echo "== build"
SRC=${LBDNSD_SRC:-$ROOT}
(cd "$SRC" && go build -o "$WORK/lbdnsd" ./cmd/lbdnsd && go build -o "$WORK/lbctl" ./lbctl)
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

# Both servers run for the whole comparison (the idle one only monitors
# its 36 members); the dnsperf runs alternate between them.
"$WORK/lbdnsd" -dry-run -config "$WORK/lbdns.toml" -log-format json >"$WORK/lbdnsd.out" 2>"$WORK/lbdnsd.log" &
LPID=$!
PIDS+=("$LPID")
gdnsd -c "$WORK/gdnsd" start >"$WORK/gdnsd.out" 2>"$WORK/gdnsd.log" &
GPID=$!
PIDS+=("$GPID")
# The floor (FLOOR=1): a responder that does no DNS work (floor.c:
# recvmmsg, QR set, sendmmsg), measured in the same rounds.
if [[ $FLOOR == 1 ]] && ! command -v cc >/dev/null; then
	echo "no C compiler (cc): the floor responder is left out"
	FLOOR=0
fi
if [[ $FLOOR == 1 ]]; then
	cc -O2 -o "$WORK/floor" "$ROOT/bench/responder/floor.c" || die "floor: cc failed"
	"$WORK/floor" 127.0.0.1 "$FL_PORT" >"$WORK/floor.out" 2>"$WORK/floor.log" &
	FPID=$!
	PIDS+=("$FPID")
	wait_for 5 grep -q ready "$WORK/floor.out" || die "floor: $(cat "$WORK/floor.log")"
fi

# answers PORT NAME TYPE [ECS]: the sorted addresses answered.
answers() {
	dig +norec +short +time=1 +tries=1 @127.0.0.1 -p "$1" "$2" "$3" ${4:+"+subnet=$4"} 2>/dev/null | sort | paste -sd' '
}
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
for s in "lbdnsd $LB_PORT $LPID" "gdnsd $GD_PORT $GPID"; do
	read -r name port pid <<<"$s"
	wait_for 30 ready "$port" || {
		kill -0 "$pid" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.log")"
		die "$name: answers not as expected after 30 s: dyn0 A ECS $NET0: $(answers "$port" dyn0.bench.test A "$NET0"); dyn0 A: $(answers "$port" dyn0.bench.test A)"
	}
	echo "$name ready on 127.0.0.1:$port: dyn0 A (ECS $NET0) $(answers "$port" dyn0.bench.test A "$NET0"); dyn0 AAAA (no ECS) $(answers "$port" dyn0.bench.test AAAA)"
done

# field FILE LABEL: the first number after LABEL in dnsperf's output.
field() { awk -v l="$2" 'index($0, l) { s = substr($0, index($0, l) + length(l)); if (match(s, /[0-9.]+/)) { print substr(s, RSTART, RLENGTH); exit } }' "$1"; }

# throughput NAME PORT PID ROUND: dnsperf at full speed; one line, and
# "NAME qps cpu_us_per_query" appended to $WORK/results.
throughput() {
	local name=$1 port=$2 pid=$3 run=$4 out c0 c1 t0 t1
	out="$WORK/$name.tp.$run"
	c0=$(cpu_ticks "$pid") t0=$(now_ns)
	dnsperf -B -d "$WORK/queries.bin" -s 127.0.0.1 -p "$port" -l "$DURATION" -c "$CLIENTS" -T "$THREADS" -q "$OUTSTANDING" -t 2 >"$out" 2>&1 ||
		die "dnsperf against $name: $(tail -5 "$out")"
	c1=$(cpu_ticks "$pid") t1=$(now_ns)
	kill -0 "$pid" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.log")"
	awk -v n="$name" -v r="$run" -v q="$(field "$out" "Queries per second:")" -v lost="$(field "$out" "Queries lost:")" \
		-v avg="$(field "$out" "Average Latency (s):")" -v c=$((c1 - c0)) -v hz="$HZ" -v w=$((t1 - t0)) \
		-v sent="$(field "$out" "Queries sent:")" -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
		cpu = c / hz; wall = w / 1e9
		printf "%-7s run %d: %8.0f qps | %d sent, %d lost | mean latency %.3f ms | server CPU %5.1f%% of one core, %5.2f us per query | load %s\n",
			n, r, q, sent, lost, avg * 1000, 100 * cpu / wall, (sent ? 1e6 * cpu / sent : 0), load
		printf "%s %f %f\n", n, q, (sent ? 1e6 * cpu / sent : 0) >> "'"$WORK/results"'"
	}'
}

# latency NAME PORT PID ROUND: dnsperf -v at LAT_QPS; the percentiles of
# the per-query latencies it prints, and the server's CPU per query at
# that fixed offered load ("NAME cpu_us_per_query" appended to
# $WORK/fixed).
latency() {
	local name=$1 port=$2 pid=$3 run=$4 out c0 c1
	out="$WORK/$name.lat.$run"
	c0=$(cpu_ticks "$pid")
	dnsperf -B -v -d "$WORK/queries.bin" -s 127.0.0.1 -p "$port" -l "$LAT_DURATION" -Q "$LAT_QPS" -c "$CLIENTS" -T "$THREADS" -q "$OUTSTANDING" -t 2 >"$out" 2>&1 ||
		die "dnsperf -v against $name: $(tail -5 "$out")"
	c1=$(cpu_ticks "$pid")
	awk '$1 == ">" && $NF ~ /^[0-9.]+$/ { print $NF * 1e6 }' "$out" | sort -n >"$out.us"
	awk -v n="$name" -v r="$run" -v q="$(field "$out" "Queries per second:")" -v lost="$(field "$out" "Queries lost:")" \
		-v c=$((c1 - c0)) -v hz="$HZ" -v sent="$(field "$out" "Queries sent:")" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { printf "%-7s run %d: no per-query latencies in dnsperf -v output\n", n, r; exit }
			split("50 90 99 99.9", ps, " ")
			s = ""
			for (i = 1; i <= 4; i++) { k = int(NR * ps[i] / 100 + 0.999999); if (k < 1) k = 1; s = s sprintf(" p%s %.0f us", ps[i], v[k]) }
			us = (sent ? 1e6 * c / hz / sent : 0)
			printf "%-7s run %d at %.0f qps: %d answers, %d lost | latency%s | max %.0f us | server CPU %.2f us per query | load %s\n", n, r, q, NR, lost, s, v[NR], us, load
			printf "%s %f\n", n, us >> "'"$WORK/fixed"'"
			printf "%s", n >> "'"$WORK/lat"'"
			for (i = 1; i <= 4; i++) { k = int(NR * ps[i] / 100 + 0.999999); if (k < 1) k = 1; printf " %f", v[k] >> "'"$WORK/lat"'" }
			printf "\n" >> "'"$WORK/lat"'"
		}' "$out.us"
}

# checked NAME PORT ROUND: a sample of answers compared with the pool
# each client gets (tool check); a wrong one fails the run.
checked() {
	"$WORK/tool" check -server "127.0.0.1:$2" -n 200 -names "$NAMES" -regions "$REGIONS" -prefixes "$PREFIXES" -seed "$3" >"$WORK/$1.check.$3" 2>&1 ||
		die "$1 answered wrong after round $3: $(tail -1 "$WORK/$1.check.$3")"
}

echo "== throughput: $ROUNDS rounds, lbdnsd then gdnsd, ${DURATION} s each; dnsperf -B -c $CLIENTS -T $THREADS -q $OUTSTANDING; $(nproc) CPUs shared with dnsperf, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
	[[ $FLOOR == 1 ]] && throughput floor "$FL_PORT" "$FPID" "$r"
	throughput lbdnsd "$LB_PORT" "$LPID" "$r"
	throughput gdnsd "$GD_PORT" "$GPID" "$r"
	checked lbdnsd "$LB_PORT" "$r"
	checked gdnsd "$GD_PORT" "$r"
done
echo "== latency: $ROUNDS rounds at a fixed $LAT_QPS qps (dnsperf -Q), ${LAT_DURATION} s each, from dnsperf -v"
for ((r = 1; r <= ROUNDS; r++)); do
	[[ $FLOOR == 1 ]] && latency floor "$FL_PORT" "$FPID" "$r"
	latency lbdnsd "$LB_PORT" "$LPID" "$r"
	latency gdnsd "$GD_PORT" "$GPID" "$r"
	checked lbdnsd "$LB_PORT" "$((ROUNDS + r))"
	checked gdnsd "$GD_PORT" "$((ROUNDS + r))"
done
echo "answers checked after every round: 200 per server, each the members of the client's pool"
echo "== summary"
awk '{ n[$1]++; q[$1] += $2; u[$1] += $3 }
END {
	for (k in n) printf "%-7s mean of %d runs: %.0f qps, %.2f us server CPU per query\n", k, n[k], q[k] / n[k], u[k] / n[k]
	if (n["gdnsd"] && q["gdnsd"] > 0) {
		ratio = (q["lbdnsd"] / n["lbdnsd"]) / (q["gdnsd"] / n["gdnsd"])
		printf "qps ratio lbdnsd/gdnsd: %.2f (goal >= 1.0: %s)\n", ratio, (ratio >= 1.0 ? "MEETS goal" : "MISSES goal")
	}
}' "$WORK/results" | sort
awk '{ n[$1]++; for (i = 2; i <= 5; i++) p[$1, i] += $i }
END { for (k in n) printf "%-7s mean latency percentiles of %d runs at %s qps: p50 %.0f us, p90 %.0f us, p99 %.0f us, p99.9 %.0f us\n", k, n[k], "'"$LAT_QPS"'", p[k, 2] / n[k], p[k, 3] / n[k], p[k, 4] / n[k], p[k, 5] / n[k] }' "$WORK/lat" | sort
awk '{ n[$1]++; u[$1] += $2; if (!($1 in lo) || $2 < lo[$1]) lo[$1] = $2; if ($2 > hi[$1]) hi[$1] = $2 }
END {
	for (k in n) printf "%-7s server CPU per query at a fixed %s qps, mean of %d runs: %.2f us (%.2f..%.2f)\n", k, "'"$LAT_QPS"'", n[k], u[k] / n[k], lo[k], hi[k]
	if (n["gdnsd"] && u["gdnsd"] > 0) printf "CPU per query at %s qps, lbdnsd/gdnsd: %.2f\n", "'"$LAT_QPS"'", (u["lbdnsd"] / n["lbdnsd"]) / (u["gdnsd"] / n["gdnsd"])
	if (n["floor"] && u["floor"] > 0) printf "CPU per query at %s qps as multiples of the floor: lbdnsd %.2f, gdnsd %.2f\n", "'"$LAT_QPS"'", (u["lbdnsd"] / n["lbdnsd"]) / (u["floor"] / n["floor"]), (u["gdnsd"] / n["gdnsd"]) / (u["floor"] / n["floor"])
}' "$WORK/fixed" | sort
stop "$GPID"
stop "$LPID"
[[ $FLOOR == 1 ]] && stop "$FPID"

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
