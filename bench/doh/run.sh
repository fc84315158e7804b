#!/usr/bin/env bash
# bench/doh/run.sh: the GSLB responder's DNS over HTTPS front (RFC 8484,
# HTTP/2 over TLS) against Debian's dnsdist 1.7.3 DoH frontend, CPU per
# query at fixed offered loads, in the same alternated rounds:
#
#   1. keep-alive: LOADS qps over CONNS HTTP/2 connections kept open;
#      lbdnsd answers by itself, dnsdist (addDOHLocal with the same
#      certificate, a packet cache, DNSDIST_THREADS DoH listeners and
#      backend entries as its tuning guide advises) forwards to gdnsd
#      (udp_threads 1, configured as bench/responder/run.sh configures
#      it: the same names, pools and nets); dnsdist's CPU per query and
#      its backend's are printed apart, the goal is on dnsdist alone;
#   2. a new TLS connection per query (full handshake, no resumption)
#      at CONN_LOAD qps: both servers' CPU per query;
#   3. before them, the same answers over UDP, TCP, DoT, DoH and the
#      JSON API for CHECK_N queries of the realistic mix (tool
#      transports: rcode, the set of addresses, the ECS scope): one
#      difference fails the run.
#
# The generator (one process; its own CPU printed beside the servers')
# is bench/responder/tool dohload by default (GEN=go): dnsperf 2.10's
# DoH mode loses a reply whenever two arrive in one read (its nghttp2
# data callback pauses and drops the chunk; the lost queries hold its
# in-flight places until -t), and it sets no TCP_NODELAY, so it cannot
# hold a fixed load over HTTP/2 (against dnsdist 1.7.3 it stalls to
# a few hundred qps). GEN=dnsperf runs it all the same (-c CONNS -q
# CONNS: one query in flight per connection, where it loses least;
# num-queries-per-conn=1 for the new-connection runs), its losses
# printed. Latency: dohload's p50 and p99 over every reply; dnsperf's
# from its -v lines (one per reply).
#
# Checked in every run: the response codes against those the queries
# sent must get (tool sent; beyond RCODE_TOL points fails), every 100th
# reply decoded and judged (tool check's judge: the pool, the record
# or the NXDOMAIN, the ECS scope; GEN=go), lost queries (beyond
# LOST_TOL % fails, GEN=go). Foreign load (the machine's CPU used by
# neither the servers nor the generator) printed for every run; a round
# with more than FOREIGN_MAX cores of it in any run is dropped for every
# server alike (all rounds had it: the figures printed, marked). The
# summary: medians of the rounds kept with their range, lbdnsd /
# dnsdist (the frontend alone, and with its backend) as the median of
# each round's own ratio, the goal with MEETS or MISSES; the exit code
# judges only whether the run itself went right. See bench/README.md.
#
#   bench/doh/run.sh
#   ROUNDS=2 LAT_DURATION=3 bench/doh/run.sh       # short
#
# Environment:
#   LOADS        keep-alive offered loads, qps (default "5000 10000")
#   LAT_DURATION s, each fixed-load run (default 10)
#   ROUNDS       rounds, each server in turn at every load, the order
#                rotated from round to round (default 5; at least 2)
#   CONNS        HTTP/2 connections kept alive (default 4)
#   INFLIGHT     queries in flight per connection at most (default 100)
#   METHOD       GET (default) or POST
#   CONN_LOAD    qps of the new-connection runs (default 200; 0: none)
#   CONN_CONNS   connections open at once at most there (default 8)
#   GEN          go (default: tool dohload) or dnsperf
#   DNSDIST_THREADS  dnsdist's addDOHLocal listeners (reusePort) and
#                backend entries, each a thread (default: the CPUs)
#   CHECK_N      queries of the five-transport check (default 10000;
#                0: none)
#   NAMES, PREFIXES, REGIONS   the description (tool config; default
#                2000, 10000, 8); the queries are the realistic mix
#   FOREIGN_MAX  cores of foreign load a round may have in each run to
#                be kept (default 0.15)
#   RCODE_TOL    percentage points the response codes may differ from
#                the expected ones (default 0.5); LOST_TOL % of queries
#                GEN=go may lose (default 0.5)
#   LBDNSD_SRC   build lbdnsd from another checkout
#   KEEP=1       keep the work directory
#   NETNS=0      run in this network namespace: ports 5301, 5302, 5311,
#                8053, 8083, 8443, 8444 and 8853 must be free
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
export PATH=$PATH:/usr/local/go/bin

LOADS=${LOADS:-"5000 10000"}
LAT_DURATION=${LAT_DURATION:-10}
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-4}
INFLIGHT=${INFLIGHT:-100}
METHOD=${METHOD:-GET}
CONN_LOAD=${CONN_LOAD:-200}
CONN_CONNS=${CONN_CONNS:-8}
GEN=${GEN:-go}
DNSDIST_THREADS=${DNSDIST_THREADS:-$(nproc)}
CHECK_N=${CHECK_N:-10000}
NAMES=${NAMES:-2000}
PREFIXES=${PREFIXES:-10000}
REGIONS=${REGIONS:-8}
FOREIGN_MAX=${FOREIGN_MAX:-0.15}
RCODE_TOL=${RCODE_TOL:-0.5}
LOST_TOL=${LOST_TOL:-0.5}
STATICS=100
MON_PORT=8053
LB_PORT=5301
GD_PORT=5302
DD_PORT=5311
DD_WEB=8083
LB_DOH=8443
DD_DOH=8444
LB_DOT=8853

if [[ ${NETNS:-1} == 1 && -z ${LBDNS_BENCH_NETNS:-} ]]; then
	command -v unshare >/dev/null || die "unshare is not installed (NETNS=0 runs in this namespace)"
	bench_modules "${LBDNSD_SRC:-}"
	exec unshare -n env LBDNS_BENCH_NETNS=1 "$0" "$@"
fi
if [[ -n ${LBDNS_BENCH_NETNS:-} ]]; then
	ip link set lo up
	ip -6 route add local fd00::/64 dev lo
fi
for c in gdnsd dnsdist dig kdig curl jq openssl; do command -v "$c" >/dev/null || die "$c is not installed"; done
[[ $GEN == dnsperf ]] && { command -v dnsperf >/dev/null || die "dnsperf is not installed"; }
[[ $GEN == go || $GEN == dnsperf ]] || die "GEN must be go or dnsperf"
[[ $METHOD == GET || $METHOD == POST ]] || die "METHOD must be GET or POST"
((LAT_DURATION >= 1 && ROUNDS >= 2 && ROUNDS <= 100 && CONNS >= 1 && CONNS <= 200 && INFLIGHT >= 1 && CONN_LOAD >= 0 && CONN_CONNS >= 1 && DNSDIST_THREADS >= 1 && DNSDIST_THREADS <= 64 && CHECK_N >= 0 && NAMES >= 1 && REGIONS >= 1 && REGIONS <= 200 && (PREFIXES == 0 || PREFIXES >= REGIONS))) ||
	die "LAT_DURATION at least 1, ROUNDS 2..100, CONNS 1..200, INFLIGHT and CONN_CONNS at least 1, CONN_LOAD and CHECK_N at least 0, DNSDIST_THREADS 1..64, NAMES at least 1, REGIONS 1..200, PREFIXES 0 or at least REGIONS"
for l in $LOADS; do ((l >= 1)) || die "LOADS: $l is not a load"; done

bench_start doh

echo "== build"
SRC=${LBDNSD_SRC:-$ROOT}
(cd "$SRC" && go build -o "$WORK/lbdnsd" ./cmd/lbdnsd)
(cd "$ROOT" && go build -o "$WORK/tool" ./bench/responder/tool)
echo "lbdnsd from $SRC ($(git -C "$SRC" describe --always --dirty 2>/dev/null || echo unknown)); $(dnsdist --version 2>&1 | head -1); $(gdnsd -c "$WORK" checkconf 2>&1 | grep -o 'gdnsd version [^ ]*' | head -1 || echo gdnsd); generator: $([[ $GEN == go ]] && echo "tool dohload (Go net/http, HTTP/2)" || dnsperf -h 2>&1 | grep -i '^version' | sed 's/^/dnsperf /')"

# wait_for SECONDS CMD...: runs CMD every 0.1 s until it succeeds.
wait_for() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}

"$WORK/tool" listen "[::]:$MON_PORT" >"$WORK/listen.out" 2>"$WORK/listen.err" &
PIDS+=($!)
wait_for 5 grep -q ready "$WORK/listen.out" || die "member listener: $(cat "$WORK/listen.err")"

# The certificate both servers serve: ECDSA P-256, for 127.0.0.1 and
# localhost, self-signed (the generator verifies it).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
	-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$WORK/key.pem" -out "$WORK/cert.pem" >"$WORK/openssl.log" 2>&1 ||
	die "openssl: $(tail -3 "$WORK/openssl.log")"

echo "== configs: $REGIONS regions ($( ((PREFIXES > 0)) && echo "$PREFIXES /24s from 1.0.0.0" || echo "10.R.0.0/16")), $NAMES dynamic names, $STATICS static names; lbdnsd DoH https://127.0.0.1:$LB_DOH, DoT 127.0.0.1:$LB_DOT; dnsdist DoH https://127.0.0.1:$DD_DOH ($DNSDIST_THREADS DoH listener(s), $DNSDIST_THREADS backend entries) -> gdnsd 127.0.0.1:$GD_PORT (udp_threads 1)"
"$WORK/tool" config -dir "$WORK" -names "$NAMES" -static "$STATICS" -regions "$REGIONS" -prefixes "$PREFIXES" \
	-lb-port "$LB_PORT" -gd-port "$GD_PORT" -mon-port "$MON_PORT"
# lbdnsd's fronts; allow_client_ip: a DoH message's Client Subnet option
# and the JSON API's edns_client_subnet= are used, as dnsdist passes the
# option on to gdnsd (both servers locate by the ECS of the query).
cat >>"$WORK/lbdns.toml" <<TOML

[gslb.tls]
doh_listen = ["127.0.0.1:$LB_DOH"]
dot_listen = ["127.0.0.1:$LB_DOT"]
cert_file = "$WORK/cert.pem"
key_file = "$WORK/key.pem"
allow_client_ip = true
TOML
"$WORK/lbdnsd" -check-config "$WORK/lbdns.toml" >"$WORK/check-config.log" 2>&1 || die "lbdnsd -check-config: $(tail -3 "$WORK/check-config.log")"
sed -i -e 's|^options => {$|options => {\n  udp_threads => 1|' "$WORK/gdnsd/config"
gdnsd -c "$WORK/gdnsd" checkconf >"$WORK/gdnsd-checkconf.log" 2>&1 || die "gdnsd checkconf: $(tail -3 "$WORK/gdnsd-checkconf.log")"
# dnsdist as its tuning guide advises (docs/advanced/tuning.rst): one
# addDOHLocal per thread wanted (reusePort), internalPipeBufferSize
# 1048576 "known to yield good results on Linux", the backend added once
# per responder thread wanted, a sharded packet cache; no security poll,
# the health check on a name of the zone, the web server for the
# cache's counters.
{
	echo "-- Generated by bench/doh/run.sh."
	echo 'setSecurityPollSuffix("")'
	echo "setLocal(\"127.0.0.1:$DD_PORT\")"
	echo 'addACL("127.0.0.0/8")'
	for ((i = 0; i < DNSDIST_THREADS; i++)); do
		echo "addDOHLocal(\"127.0.0.1:$DD_DOH\", \"$WORK/cert.pem\", \"$WORK/key.pem\", \"/dns-query\", {reusePort=true, internalPipeBufferSize=1048576})"
		echo "newServer({address=\"127.0.0.1:$GD_PORT\", name=\"gdnsd$i\", checkName=\"s0.bench.test.\"})"
	done
	echo 'pc = newPacketCache(1000000, {maxTTL=86400, numberOfShards=16})'
	echo 'getPool(""):setCache(pc)'
	echo 'setRingBuffersSize(10000, 16)'
	echo "webserver(\"127.0.0.1:$DD_WEB\")"
	echo 'setWebserverConfig({apiKey="bench", acl="127.0.0.1/32"})'
} >"$WORK/dnsdist.conf"
dnsdist --check-config -C "$WORK/dnsdist.conf" >"$WORK/dnsdist-check.log" 2>&1 || die "dnsdist --check-config: $(tail -3 "$WORK/dnsdist-check.log")"

# The queries: the realistic mix, one file per round and load (both
# servers get the same file in a round, and no file is sent twice to
# one server: dnsdist's packet cache never holds a query from an
# earlier run), each a disjoint slice of one shuffled list, a quarter
# longer than a run at the highest load sends (at least 50,000).
max_load=$CONN_LOAD
NRUNS=$((CONN_LOAD > 0 ? 1 : 0))
for l in $LOADS; do
	((l > max_load)) && max_load=$l
	NRUNS=$((NRUNS + 1))
done
PER_FILE=$((LAT_DURATION * max_load * 5 / 4))
((PER_FILE >= 50000)) || PER_FILE=50000
FILES=$((ROUNDS * NRUNS))
echo "== queries: $FILES files of $PER_FILE (one per round and load; a run at $max_load qps sends about $((LAT_DURATION * max_load)))"
"$WORK/tool" queries -out "$WORK/queries" -files "$FILES" -n $((FILES * PER_FILE)) -dyn "$NAMES" -static "$STATICS" -regions "$REGIONS" -prefixes "$PREFIXES" -mix realistic

declare -A PID
"$WORK/lbdnsd" -dry-run -config "$WORK/lbdns.toml" -log-format json >"$WORK/lbdnsd.out" 2>"$WORK/lbdnsd.log" &
PID[lbdnsd]=$!
PIDS+=("$!")
gdnsd -c "$WORK/gdnsd" start >"$WORK/gdnsd.out" 2>"$WORK/gdnsd.log" &
PID[gdnsd]=$!
PIDS+=("$!")
dnsdist --supervised --disable-syslog -C "$WORK/dnsdist.conf" >"$WORK/dnsdist.out" 2>"$WORK/dnsdist.log" &
PID[dnsdist]=$!
PIDS+=("$!")

# answers PORT NAME TYPE [ECS]: the sorted addresses answered over UDP.
answers() { dig +norec +short +time=1 +tries=1 @127.0.0.1 -p "$1" "$2" "$3" ${4:+"+subnet=$4"} 2>/dev/null | sort | paste -sd' '; }
# doh_answers PORT NAME TYPE ECS: the same over DoH (kdig).
doh_answers() {
	kdig +https +tls-ca="$WORK/cert.pem" +tls-hostname=localhost +norec +short +time=1 +retry=0 @127.0.0.1 -p "$1" "$2" "$3" "+subnet=$4" 2>/dev/null | sort | paste -sd' '
}
NET0=1.0.0.0/24
((PREFIXES > 0)) || NET0=10.0.1.0/24
WANT="127.10.0.1 127.10.0.2"
# ready PORT: every member up (every region's pool and the global one,
# A and AAAA, answered whole), so that no answer changes under the
# checks and runs.
ready() {
	local r net
	for ((r = 0; r < REGIONS; r++)); do
		net=10.$r.1.0/24
		((PREFIXES > 0)) && net=1.0.$r.0/24
		[[ $(answers "$1" dyn0.bench.test A "$net") == "127.10.$r.1 127.10.$r.2" ]] || return 1
		[[ $(answers "$1" dyn0.bench.test AAAA "$net") == "fd00::10:$r:1 fd00::10:$r:2" ]] || return 1
	done
	[[ $(answers "$1" dyn0.bench.test A) == "127.11.0.1 127.11.0.2" && $(answers "$1" dyn0.bench.test AAAA) == "fd00::11:0:1 fd00::11:0:2" ]]
}
doh_ready() { [[ $(doh_answers "$1" dyn0.bench.test A "$NET0") == "$WANT" ]]; }
for s in lbdnsd:$LB_PORT gdnsd:$GD_PORT; do
	wait_for 30 ready "${s#*:}" || {
		kill -0 "${PID[${s%%:*}]}" 2>/dev/null || die "${s%%:*} exited: $(tail -5 "$WORK/${s%%:*}.log")"
		die "${s%%:*}: not every member up after 30 s (dyn0 A, ECS $NET0: $(answers "${s#*:}" dyn0.bench.test A "$NET0"))"
	}
done
for s in lbdnsd:$LB_DOH dnsdist:$DD_DOH; do
	wait_for 30 doh_ready "${s#*:}" || {
		kill -0 "${PID[${s%%:*}]}" 2>/dev/null || die "${s%%:*} exited: $(tail -5 "$WORK/${s%%:*}.log")"
		die "${s%%:*}: dyn0 A over DoH (ECS $NET0) is $(doh_answers "${s#*:}" dyn0.bench.test A "$NET0") after 30 s, not $WANT"
	}
	echo "${s%%:*} ready: DoH https://127.0.0.1:${s#*:}/dns-query dyn0 A (ECS $NET0) $(doh_answers "${s#*:}" dyn0.bench.test A "$NET0")"
done

if ((CHECK_N > 0)); then
	echo "== the same answers over five transports: $CHECK_N queries of the realistic mix to lbdnsd"
	"$WORK/tool" transports -udp "127.0.0.1:$LB_PORT" -dot "127.0.0.1:$LB_DOT" -doh "https://127.0.0.1:$LB_DOH/dns-query" -json "https://127.0.0.1:$LB_DOH/resolve" \
		-ca "$WORK/cert.pem" -n "$CHECK_N" -dyn "$NAMES" -static "$STATICS" -regions "$REGIONS" -prefixes "$PREFIXES" >"$WORK/transports.out" 2>&1 || {
		cat "$WORK/transports.out"
		die "the five transports' answers differ, or one is wrong (above)"
	}
	cat "$WORK/transports.out"
fi

HZ=$(getconf CLK_TCK)
# busy_idle: the machine's busy and idle clock ticks so far (/proc/stat).
busy_idle() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat; }
# ours: the CPU time the three servers have used, ns.
ours() { echo $(($(cpu_ns "${PID[lbdnsd]}") + $(cpu_ns "${PID[dnsdist]}") + $(cpu_ns "${PID[gdnsd]}"))); }
# cache: dnsdist's packet cache hits and misses so far.
cache() { curl -s -m 2 -H 'X-API-Key: bench' "http://127.0.0.1:$DD_WEB/jsonstat?command=stats" | jq -r '"\(.["cache-hits"]) \(.["cache-misses"])"' 2>/dev/null || echo "0 0"; }

# generate KIND PORT QPS OUT FILE: one generator run against PORT (KIND
# fixed: kept alive; conn: a new connection per query) on query file
# FILE (queries.FILE.bin); OUT gets its
# output, OUT.result the RESULT line of tool dohload's format ("sent
# completed lost http_errors noerror nxdomain other avg_us p50_us p99_us
# qps cpu_ns checked").
generate() {
	local kind=$1 port=$2 qps=$3 out=$4 bin="$WORK/queries.$5.bin" url="https://127.0.0.1:$2/dns-query"
	if [[ $GEN == go ]]; then
		local args=(-url "$url" -queries "$bin" -ca "$WORK/cert.pem" -qps "$qps" -duration "${LAT_DURATION}s" -method "$METHOD"
			-regions "$REGIONS" -prefixes "$PREFIXES")
		if [[ $kind == fixed ]]; then args+=(-conns "$CONNS" -inflight "$INFLIGHT"); else args+=(-new-conn -conns "$CONN_CONNS"); fi
		"$WORK/tool" dohload "${args[@]}" >"$out" 2>&1 || die "tool dohload against port $port: $(tail -2 "$out")"
		grep '^RESULT ' "$out" | cut -d' ' -f2- >"$out.result"
		return
	fi
	local args=(-m doh -B -d "$bin" -s 127.0.0.1 -p "$port" -O "doh-uri=$url" -O "doh-method=$METHOD" -Q "$qps" -l "$LAT_DURATION" -t 2 -v)
	if [[ $kind == fixed ]]; then args+=(-c "$CONNS" -q "$CONNS"); else args+=(-c "$CONN_CONNS" -q "$CONN_CONNS" -O num-queries-per-conn=1); fi
	# The wrapper prints dnsperf's CPU ticks (its children's, once waited).
	bash -c 'dnsperf "$@" >"'"$out"'" 2>&1; rc=$?; awk "{ sub(/^.*\\) /, \"\"); print \$14 + \$15 }" /proc/$$/stat >"'"$out.cpu"'"; exit $rc' _ "${args[@]}" ||
		die "dnsperf against port $port: $(tail -5 "$out")"
	awk -v cpu="$(cat "$out.cpu")" -v hz="$HZ" '
		/^> / { n++; l[n] = $NF * 1e6; s += $NF * 1e6 }
		/Queries sent:/ { sent = $3 } /Queries completed:/ { done = $3 } /Queries lost:/ { lost = $3 }
		/Response codes:/ { x = substr($0, index($0, ":") + 1); k = split(x, a, ","); for (i = 1; i <= k; i++) { split(a[i], w, " "); c[w[1]] += w[2] } }
		/Queries per second:/ { qps = $4 }
		END {
			m = 0; for (i = 1; i <= n; i++) v[++m] = l[i]
			for (i = 2; i <= m; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
			o = 0; for (k in c) if (k != "NOERROR" && k != "NXDOMAIN") o += c[k]
			p50 = m ? v[int(0.5 * m + 0.999999)] : 0; p99 = m ? v[int(0.99 * m + 0.999999)] : 0
			printf "%d %d %d 0 %d %d %d %.0f %.0f %.0f %.1f %.0f 0\n", sent, done, lost, c["NOERROR"], c["NXDOMAIN"], o, (m ? s / m : 0), p50, p99, qps, cpu / hz * 1e9
		}' "$out" >"$out.result"
}

# measure KIND NAME ROUND QPS FILE: one run against NAME (lbdnsd or
# dnsdist) on query file FILE.
# One line printed, and a line appended to $WORK/results: KIND NAME QPS
# ROUND server_us backend_us generator_us p50_us p99_us foreign sent
# completed lost cache_hit_pct.
measure() {
	local kind=$1 name=$2 run=$3 qps=$4 file=$5 port out c0 c1 g0 g1 o0 o1 b0 i0 b1 i1 t0 t1 h0 m0 h1 m1
	port=$LB_DOH
	[[ $name == dnsdist ]] && port=$DD_DOH
	out="$WORK/$name.$kind.$qps.$run"
	read -r h0 m0 < <(cache)
	c0=$(cpu_ns "${PID[$name]}") g0=$(cpu_ns "${PID[gdnsd]}") o0=$(ours) t0=$(now_ns)
	read -r b0 i0 < <(busy_idle)
	generate "$kind" "$port" "$qps" "$out" "$file"
	c1=$(cpu_ns "${PID[$name]}") g1=$(cpu_ns "${PID[gdnsd]}") o1=$(ours) t1=$(now_ns)
	read -r b1 i1 < <(busy_idle)
	read -r h1 m1 < <(cache)
	kill -0 "${PID[$name]}" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.log")"
	local res sent st eno enx
	read -ra res <"$out.result"
	sent=${res[0]}
	((sent > 0)) || die "$name: the generator sent nothing ($(tail -2 "$out"))"
	st=$("$WORK/tool" sent "$WORK/queries.$file.keys" "$sent") || die "tool sent: $st"
	read -r _ _ eno enx <<<"$st"
	local backend=$((g1 - g0)) rc=0
	[[ $name == lbdnsd ]] && backend=0
	awk -v k="$kind" -v n="$name" -v r="$run" -v Q="$qps" -v c=$((c1 - c0)) -v g="$backend" -v o=$((o1 - o0)) -v b=$((b1 - b0)) -v id=$((i1 - i0)) \
		-v hz="$HZ" -v w=$((t1 - t0)) -v res="${res[*]}" -v eno="$eno" -v enx="$enx" -v tol="$RCODE_TOL" -v ltol="$LOST_TOL" -v gen="$GEN" \
		-v hits=$((h1 - h0)) -v miss=$((m1 - m0)) 'BEGIN {
		split(res, f, " "); sent = f[1]; done = f[2]; lost = f[3]; herr = f[4]; gno = f[5]; gnx = f[6]; goth = f[7]; p50 = f[9]; p99 = f[10]; q = f[11]; gcpu = f[12]; judged = f[13]
		wall = w / 1e9
		us = c / 1e3 / sent; bus = g / 1e3 / sent; dus = gcpu / 1e3 / sent
		foreign = (b / hz - o / 1e9 - gcpu / 1e9) / wall; if (foreign < 0) foreign = 0
		idle = (b + id) ? id / (b + id) : 0
		e1 = 100 * eno / sent; e2 = 100 * enx / sent
		g1 = done ? 100 * gno / done : 0; g2 = done ? 100 * gnx / done : 0; g3 = done ? 100 * goth / done : 0
		bad = (g1 - e1 > tol || e1 - g1 > tol || g2 - e2 > tol || e2 - g2 > tol || g3 > tol)
		lostbad = gen == "go" && 100 * (lost + herr) / sent > ltol
		hit = (hits + miss) ? 100 * hits / (hits + miss) : -1
		printf "%-7s %s %d at %d qps: %6.0f qps answered | %d sent, %d lost, %d HTTP errors | server %6.2f us CPU per query%s | generator %6.2f us | latency p50 %.0f us, p99 %.0f us | idle %2.0f%% | foreign load %.2f cores\n",
			n, (k == "fixed" ? "kept alive" : "new conn"), r, Q, q, sent, lost, herr, us,
			(n == "dnsdist" ? sprintf(" + backend (gdnsd) %.2f us, packet cache hits %.1f%%", bus, hit) : ""), dus, p50, p99, 100 * idle, foreign
		printf "%-7s   rcodes NOERROR %.2f%% NXDOMAIN %.2f%% other %.2f%% of %d replies (expected NOERROR %.2f%% NXDOMAIN %.2f%%)%s%s\n",
			n, g1, g2, g3, done, e1, e2, (bad ? sprintf(": BEYOND %.2f POINTS", tol) : ": as expected"), (judged ? sprintf("; %d replies judged right", judged) : "")
		printf "%s %s %d %d %f %f %f %f %f %f %d %d %d %f\n", k, n, Q, r, us, bus, dus, p50, p99, foreign, sent, done, lost + herr, hit >> "'"$WORK/results"'"
		if (bad) exit 3
		if (lostbad) exit 4
	}' || rc=$?
	((rc == 3)) && die "$name: the response codes are not those of the queries sent (see above)"
	((rc == 4)) && die "$name: more than $LOST_TOL % of the queries lost or failed (see above)"
	((rc == 0)) || die "$name: awk failed"
}

# foreign KIND QPS ROUND: the round's foreign load, run by run.
foreign() {
	awk -v k="$1" -v Q="$2" -v r="$3" -v fmax="$FOREIGN_MAX" '$1 == k && $3 == Q && $4 == r { s = s sprintf("%s%s %.2f", (s ? ", " : ""), $2, $10); if ($10 > m) m = $10 }
		END { printf "round %d at %d qps (%s): foreign load %s cores: %s\n", r, Q, (k == "fixed" ? "kept alive" : "new conn"), s,
			(m > fmax ? sprintf("above %.2f: the round is dropped for both servers", fmax) : "kept") }' "$WORK/results"
}

SERVERS=(lbdnsd dnsdist)
echo "== CPU per query: kept alive at $LOADS qps ($CONNS HTTP/2 connections, $INFLIGHT in flight each at most, $METHOD)$( ((CONN_LOAD > 0)) && echo "; a new TLS connection per query at $CONN_LOAD qps ($CONN_CONNS at once at most)"); $ROUNDS rounds, ${LAT_DURATION} s each, the servers in turn (rotated every round); generator $GEN; $(nproc) CPUs shared with the generator, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
	order=("${SERVERS[@]}")
	((r % 2 == 0)) && order=("${SERVERS[1]}" "${SERVERS[0]}")
	f=$(((r - 1) * NRUNS))
	for load in $LOADS; do
		for s in "${order[@]}"; do measure fixed "$s" "$r" "$load" "$f"; done
		foreign fixed "$load" "$r"
		f=$((f + 1))
	done
	if ((CONN_LOAD > 0)); then
		for s in "${order[@]}"; do measure conn "$s" "$r" "$CONN_LOAD" "$f"; done
		foreign conn "$CONN_LOAD" "$r"
	fi
done

echo "== summary (realistic mix; medians of the rounds, min..max; a round with foreign load above $FOREIGN_MAX cores in any run is dropped for both servers; generator $GEN)"
awk -v fmax="$FOREIGN_MAX" '
# sorted_median: the median of v[1..n] (sorted in place), low and high.
function sorted_median(n,   i, j, t) {
	for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
	if (!n) { low = high = 0; return 0 }
	low = v[1]; high = v[n]
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
# med KEY F: the median of field F of KEY (kind server qps) over the rounds used.
function med(key, f,   i, n) {
	n = 0; delete v
	for (i = 1; i <= nr[key]; i++) if (use[grp[key, i]]) v[++n] = val[key, i, f]
	used = n
	return sorted_median(n)
}
# ratio A B FA FB: the median over the rounds used of (A field FA) / (B field FB, plus field FB2 when set).
function ratio(ka, kb, fa, fb, fb2,   i, n, y) {
	n = 0; delete v
	for (i = 1; i <= nround; i++) {
		g = gl[i]
		if (!use[g] || !((ka, g) in at) || !((kb, g) in at)) continue
		y = val[kb, at[kb, g], fb] + (fb2 ? val[kb, at[kb, g], fb2] : 0)
		if (y > 0) v[++n] = val[ka, at[ka, g], fa] / y
	}
	return sorted_median(n)
}
{
	key = $1 " " $2 " " $3; g = $1 ":" $3 ":" $4
	nr[key]++; grp[key, nr[key]] = g; at[key, g] = nr[key]
	for (f = 5; f <= 14; f++) val[key, nr[key], f] = $f
	if (!(g in gmax)) { gmax[g] = 0; gl[++nround] = g; cnt[$1 " " $3]++; rl[$1 " " $3] = rl[$1 " " $3] " " g }
	if ($10 > gmax[g]) gmax[g] = $10
	if (!(($1 " " $3) in seen)) { seen[$1 " " $3] = 1; loads[++nl] = $1 " " $3 }
}
END {
	for (j = 1; j <= nl; j++) {
		split(loads[j], kl, " "); kind = kl[1]; Q = kl[2]
		nrg = split(rl[loads[j]], gs, " "); kept = 0; worst = 0
		for (i = 1; i <= nrg; i++) if (gmax[gs[i]] <= fmax) kept++
		for (i = 1; i <= nrg; i++) { use[gs[i]] = (kept == 0 || gmax[gs[i]] <= fmax); if (gmax[gs[i]] > worst) worst = gmax[gs[i]] }
		head = sprintf("%s at %d qps", (kind == "fixed" ? "kept alive" : "a new TLS connection per query"), Q)
		note = kept ? sprintf("%d of %d rounds, %d dropped for foreign load", kept, nrg, nrg - kept) : \
			sprintf("UNDER FOREIGN LOAD: every one of %d rounds had more than %.2f cores, up to %.2f", nrg, fmax, worst)
		printf "%s: %s\n", head, note
		for (si = 1; si <= 2; si++) {
			s = (si == 1 ? "lbdnsd" : "dnsdist"); k = kind " " s " " Q
			if (!nr[k]) continue
			m = med(k, 5); lo = low; hi = high; n = used
			b = med(k, 6); blo = low; bhi = high
			gu = med(k, 7); p50 = med(k, 8); p99 = med(k, 9); fo = med(k, 10); lost = med(k, 13); hit = med(k, 14)
			printf "%-7s %s: %.2f us CPU per query (%.2f..%.2f, %d round%s)%s | generator %.2f us per query | latency p50 %.0f us, p99 %.0f us | %.0f lost | foreign load %.2f cores\n",
				s, head, m, lo, hi, n, (n == 1 ? "" : "s"),
				(s == "dnsdist" ? sprintf(" + its backend gdnsd %.2f us (%.2f..%.2f) = %.2f; packet cache hits %.1f%%", b, blo, bhi, m + b, hit) : ""), gu, p50, p99, lost, fo
		}
		under = kept ? "" : " (under foreign load)"
		ka = kind " lbdnsd " Q; kb = kind " dnsdist " Q
		if (nr[ka] && nr[kb]) {
			r1 = ratio(ka, kb, 5, 5, 0); l1 = low; h1 = high
			r2 = ratio(ka, kb, 5, 5, 6); l2 = low; h2 = high
			if (kind == "fixed")
				printf "lbdnsd / dnsdist (DoH frontend alone) %s: %.2f (round by round %.2f..%.2f) (goal <= 1.0x dnsdist'"'"'s DoH frontend CPU per query: %s)%s\n", head, r1, l1, h1, (r1 <= 1.0 ? "MEETS" : "MISSES"), under
			else
				printf "lbdnsd / dnsdist (DoH frontend alone) %s: %.2f (round by round %.2f..%.2f)%s\n", head, r1, l1, h1, under
			printf "lbdnsd / (dnsdist + gdnsd) %s: %.2f (round by round %.2f..%.2f)%s\n", head, r2, l2, h2, under
		}
	}
}' "$WORK/results"
for s in lbdnsd dnsdist gdnsd; do stop "${PID[$s]}"; done
