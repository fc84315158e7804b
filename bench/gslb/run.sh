#!/usr/bin/env bash
# bench/gslb/run.sh: the GSLB monitor benchmark, lbdnsd against gdnsd.
#
# Members, all on loopback addresses (127.0.0.0/8 answers on lo):
#   N_TCP  TCP members   127.1.x.y:TCP_PORT  (bench/gslb/responder counts
#                                            the connections it accepts)
#   N_HTTP HTTP members  127.2.x.y:80        (the responder counts requests;
#                                            port 80 because lbdnsd's http
#                                            check has no port setting)
#   N_ICMP ICMP members  127.3.x.y           (the kernel answers the echoes;
#                                            counted by the Icmp InEchos
#                                            counter of /proc/net/snmp)
# lbdnsd -dry-run monitors all of them (checks tcp, http, icmp: interval
# 1 s, timeout 500 ms, rise 2, fall 3), Debian's gdnsd the TCP and HTTP
# members (tcp_connect, http_status; gdnsd has no ICMP monitor, and its
# shortest interval is 2 s). Each round runs lbdnsd with all members
# ("lbdnsd-all"), lbdnsd with only the TCP and HTTP members gdnsd monitors
# at gdnsd's interval ("lbdnsd-th", like for like: the goal's ratio), the
# same every 1 s ("lbdnsd-th-1s", a separate line; SAME=0 leaves both out)
# and gdnsd, one after
# the other; ROUNDS rounds in the same run. For each run: CPU % of one core from utime+stime over the
# measured window (DURATION s after WARMUP s), checks per second counted
# at the responder (and the kernel, for ICMP), CPU per check, peak RSS
# (VmHWM); at the end the ratio lbdnsd/gdnsd of CPU per check. In the last
# lbdnsd run, after its window: the time from closing one TCP member's
# listener to its down verdict (the monitor's "since" in lbctl gslb
# members -o json), against fall × interval + timeout + 100 ms.
#
# Usage: bench/gslb/run.sh
#        DURATION=10 N_TCP=200 N_HTTP=100 N_ICMP=100 bench/gslb/run.sh
# Env: DURATION (measured s per run, 60), WARMUP (s, 5), ROUNDS (2),
#      N_TCP (2000), N_HTTP (1000), N_ICMP (1000), TCP_PORT (8080),
#      GDNSD_INTERVAL (s, 2: gdnsd's minimum), SAME (1), ICMP_SOCKET
#      (lbdnsd's icmp privileged: auto, raw, unprivileged), NETNS (1: run
#      in a new network namespace, unshare -n; 0: in this one), KEEP=1 keeps the work
#      directory, LBDNSD_SRC (a checkout to build lbdnsd and lbctl from).
# Needs root (a network namespace, HTTP members on port 80, lbdnsd's raw
# ICMP socket), gdnsd, curl, jq and unshare. Nothing is sent anywhere but 127.0.0.0/8.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"

DURATION=${DURATION:-60}
WARMUP=${WARMUP:-5}
ROUNDS=${ROUNDS:-2}
SAME=${SAME:-1}
N_TCP=${N_TCP:-2000}
N_HTTP=${N_HTTP:-1000}
N_ICMP=${N_ICMP:-1000}
TCP_PORT=${TCP_PORT:-8080}
GDNSD_INTERVAL=${GDNSD_INTERVAL:-2}
HTTP_PORT=80
POOL_SIZE=100
INTERVAL_MS=1000
TIMEOUT_MS=500
RISE=2
FALL=3
ICMP_ECHOES=3
ICMP_SOCKET=${ICMP_SOCKET:-auto}
GOAL_DOWN_MS=$((FALL * INTERVAL_MS + TIMEOUT_MS + 100))


# Own network namespace (NETNS=1, the default): only this run's traffic on
# its loopback, so ports are free and the kernel's ICMP counters count
# only lbdnsd's echoes; ping sockets allowed there for ICMP_SOCKET.
if [[ ${NETNS:-1} == 1 && -z ${LBDNS_BENCH_NETNS:-} ]]; then
	command -v unshare >/dev/null || die "unshare is not installed (NETNS=0 runs in this namespace)"
	bench_modules "${LBDNSD_SRC:-}"
	exec unshare -n env LBDNS_BENCH_NETNS=1 "$0" "$@"
fi
if [[ -n ${LBDNS_BENCH_NETNS:-} ]]; then
	ip link set lo up
	sysctl -qw net.ipv4.ping_group_range="0 2147483647"
fi
for c in gdnsd curl jq; do command -v "$c" >/dev/null || die "$c is not installed"; done
((N_TCP >= 1 && N_TCP <= 62500 && N_HTTP >= 0 && N_HTTP <= 62500 && N_ICMP >= 0 && N_ICMP <= 62500)) ||
	die "N_TCP must be 1..62500, N_HTTP and N_ICMP 0..62500"
((DURATION >= 1 && WARMUP >= 1 && ROUNDS >= 1)) || die "DURATION, WARMUP and ROUNDS must be at least 1"

bench_start gslb

echo "== build"
SRC=${LBDNSD_SRC:-$ROOT}
(cd "$SRC" && go build -o "$WORK/lbdnsd" ./cmd/lbdnsd && go build -o "$WORK/lbctl" ./lbctl)
(cd "$ROOT" && go build -o "$WORK/responder" ./bench/gslb/responder)
echo "lbdnsd from $SRC ($(git -C "$SRC" describe --always --dirty 2>/dev/null || echo unknown)); $(gdnsd -c "$WORK" checkconf 2>&1 | grep -o 'gdnsd version [^ ]*' | head -1 || echo gdnsd)"

# addrs OCTET N: N loopback addresses 127.OCTET.x.y, y in 1..250.
addrs() { awk -v o="$1" -v n="$2" 'BEGIN { for (i = 0; i < n; i++) printf "127.%d.%d.%d\n", o, int(i / 250), i % 250 + 1 }'; }
addrs 1 "$N_TCP" >"$WORK/tcp.txt"
addrs 2 "$N_HTTP" >"$WORK/http.txt"
addrs 3 "$N_ICMP" >"$WORK/icmp.txt"
VICTIM=$(head -1 "$WORK/tcp.txt")

echo "== responder: $N_TCP TCP members on port $TCP_PORT, $N_HTTP HTTP members on port $HTTP_PORT"
ulimit -n $((N_TCP + N_HTTP + 4096)) 2>/dev/null || true
"$WORK/responder" -tcp "$WORK/tcp.txt" -tcp-port "$TCP_PORT" -http "$WORK/http.txt" -http-port "$HTTP_PORT" \
	>"$WORK/responder.out" 2>"$WORK/responder.err" &
RPID=$!
PIDS+=("$RPID")
for _ in $(seq 1 100); do
	grep -q '^ready' "$WORK/responder.out" 2>/dev/null && break
	kill -0 "$RPID" 2>/dev/null || die "responder: $(cat "$WORK/responder.err") (TCP_PORT=$TCP_PORT busy? try another)"
	sleep 0.1
done
CTRL=$(awk '/^ready/ { print $4 }' "$WORK/responder.out")
[[ -n $CTRL ]] || die "responder not ready after 10 s"
echo "responder: $(cat "$WORK/responder.out")"

# Configs. Pools of POOL_SIZE members; a member's monitor is its pool's.
# pools KIND CHECK FILE: [[gslb.pool]] tables of the members in FILE.
pools() {
	awk -v k="$1" -v c="$2" -v ps=$POOL_SIZE '{
		if ((NR - 1) % ps == 0) printf "[[gslb.pool]]\nname = \"%s%d\"\nmonitors = [\"%s\"]\n\n", k, int((NR - 1) / ps), c
		printf "[[gslb.pool.member]]\nname = \"%s%d\"\naddress = \"%s\"\n\n", k, NR - 1, $1
	}' "$3"
}
mkdir -p "$WORK/lbdns"
{
	cat <<TOML
# Generated by bench/gslb/run.sh: GSLB members only.
[daemon]
state_dir = "$WORK/lbdns"
log_level = "info"
control_socket = "$WORK/lbdns/lbdns.sock"
status_listen = ""

[check.tcp]
kind = "tcp"
interval = "${INTERVAL_MS}ms"
timeout = "${TIMEOUT_MS}ms"
rise = $RISE
fall = $FALL

[check.tcp.tcp]
port = $TCP_PORT

[check.http]
kind = "http"
interval = "${INTERVAL_MS}ms"
timeout = "${TIMEOUT_MS}ms"
rise = $RISE
fall = $FALL

[check.http.http]
path = "/"

[check.icmp]
kind = "icmp"
interval = "${INTERVAL_MS}ms"
timeout = "${TIMEOUT_MS}ms"
rise = $RISE
fall = $FALL

[check.icmp.icmp]
count = $ICMP_ECHOES
privileged = "$ICMP_SOCKET"

TOML
	pools t tcp "$WORK/tcp.txt"
	pools h http "$WORK/http.txt"
} >"$WORK/lbdns-th.toml"
{
	cat "$WORK/lbdns-th.toml"
	pools i icmp "$WORK/icmp.txt"
} >"$WORK/lbdns.toml"
# lbdnsd-th checks at gdnsd's interval (like for like: the goal is about
# it); lbdnsd-th-1s at lbdnsd's 1 s, twice gdnsd's rate, a separate line.
cp "$WORK/lbdns-th.toml" "$WORK/lbdns-th-1s.toml"
sed -i "s/^interval = \"${INTERVAL_MS}ms\"\$/interval = \"$((GDNSD_INTERVAL * 1000))ms\"/" "$WORK/lbdns-th.toml"
"$WORK/lbdnsd" -check-config "$WORK/lbdns.toml"
"$WORK/lbdnsd" -check-config "$WORK/lbdns-th.toml"

# gdnsd: DNS on 127.4.0.1 (nothing queries it), one multifo resource per
# pool of members, monitored by the resource's service type.
mkdir -p "$WORK/gdnsd/zones"
gres() {
	awk -v k="$1" -v st="$2" -v ps=$POOL_SIZE '{
		if ((NR - 1) % ps == 0) { if (NR > 1) print "    }"; printf "    %s%d => {\n      service_types => [ %s ]\n      up_thresh => 0.01\n", k, int((NR - 1) / ps), st }
		printf "      m%d => %s\n", NR - 1, $1
	} END { if (NR > 0) print "    }" }' "$3"
}
{
	cat <<CONF
# Generated by bench/gslb/run.sh.
options => {
  listen => [ 127.4.0.1 ]
  dns_port => 15353
  run_dir => $WORK/gdnsd/run
  state_dir => $WORK/gdnsd/state
}
service_types => {
  tcpmon => { plugin => tcp_connect, port => $TCP_PORT, up_thresh => $RISE, ok_thresh => $RISE, down_thresh => $FALL, interval => $GDNSD_INTERVAL, timeout => 1 }
  httpmon => { plugin => http_status, port => $HTTP_PORT, url_path => /, ok_codes => [ 200 ], up_thresh => $RISE, ok_thresh => $RISE, down_thresh => $FALL, interval => $GDNSD_INTERVAL, timeout => 1 }
}
plugins => {
  multifo => {
CONF
	gres t tcpmon "$WORK/tcp.txt"
	gres h httpmon "$WORK/http.txt"
	printf '  }\n}\n'
} >"$WORK/gdnsd/config"
gdnsd -c "$WORK/gdnsd" checkconf >"$WORK/gdnsd-checkconf.log" 2>&1 || die "gdnsd checkconf: $(tail -3 "$WORK/gdnsd-checkconf.log")"

HZ=$(getconf CLK_TCK)
in_echos() { awk '/^Icmp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "InEchos") c = i; h = 1 } else print $c }' /proc/net/snmp; }
counts() { curl -sf "http://$CTRL/counts" | jq -r '"\(.tcp) \(.http)"'; }

# lbctl_victim: the victim member's JSON ({} when absent).
lbctl_victim() {
	"$WORK/lbctl" -socket "$WORK/lbdns/lbdns.sock" -timeout 30s gslb members --pool t0 -o json 2>/dev/null |
		jq -c --arg a "$VICTIM" '[.[].members[] | select(.address == $a)][0] // {}'
}

# down_test: closes the victim's listener, waits for lbdnsd's down verdict,
# prints the times, opens the listener again.
down_test() {
	local m t0 t_seen since since_ns ms seen_ms
	for _ in $(seq 1 100); do
		m=$(lbctl_victim)
		[[ $(jq -r '.state // ""' <<<"$m") == up ]] && break
		sleep 0.1
	done
	[[ $(jq -r '.state // ""' <<<"$m") == up ]] || { echo "member death: skipped, $VICTIM is not up: $m"; return; }
	t0=$(now_ns)
	curl -sf "http://$CTRL/close?addr=$VICTIM" >/dev/null || die "cannot close $VICTIM"
	t_seen=
	while (($(now_ns) - t0 < (GOAL_DOWN_MS + 5000) * 1000000)); do
		m=$(lbctl_victim)
		if [[ $(jq -r '.state // ""' <<<"$m") == down ]]; then t_seen=$(now_ns); break; fi
		sleep 0.05
	done
	curl -sf "http://$CTRL/open?addr=$VICTIM" >/dev/null || echo "could not open $VICTIM again" >&2
	if [[ -z $t_seen ]]; then
		echo "member death: $VICTIM NOT down within $((GOAL_DOWN_MS + 5000)) ms: $m"
		return
	fi
	since=$(jq -r '.monitors[0].since' <<<"$m")
	since_ns=$(date -d "$since" +%s%N)
	ms=$(((since_ns - t0) / 1000000))
	seen_ms=$(((t_seen - t0) / 1000000))
	echo "member death ($VICTIM, listener closed: connection refused): down verdict after ${ms} ms (goal <= fall x interval + timeout + 100 ms = ${GOAL_DOWN_MS} ms: $( ((ms <= GOAL_DOWN_MS)) && echo MEETS || echo MISSES) goal); seen by lbctl polling after ${seen_ms} ms; reason: $(jq -r '.reason' <<<"$m")"
}

# measure NAME RUN CMD...: starts CMD, waits WARMUP, measures DURATION,
# prints one line, appends "NAME cpu_pct checks_per_s us_per_check" to
# $WORK/results; for lbdnsd's last run also the death test.
measure() {
	local name=$1 run=$2 pid c0 c1 t0 t1 e0 e1 tc0 hc0 tc1 hc1 r0 r1 hwm wall cpu checks icmp_checks
	shift 2
	"$@" >"$WORK/$name.$run.out" 2>"$WORK/$name.$run.log" &
	pid=$!
	PIDS+=("$pid")
	sleep_s "$WARMUP"
	kill -0 "$pid" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.$run.log")"
	read -r tc0 hc0 < <(counts)
	e0=$(in_echos) c0=$(cpu_ticks "$pid") r0=$(cpu_ticks "$RPID") t0=$(now_ns)
	sleep_s "$DURATION"
	kill -0 "$pid" 2>/dev/null || die "$name exited: $(tail -5 "$WORK/$name.$run.log")"
	c1=$(cpu_ticks "$pid") t1=$(now_ns) e1=$(in_echos) r1=$(cpu_ticks "$RPID")
	read -r tc1 hc1 < <(counts)
	hwm=$(awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
	cpu=$(awk -v t=$((c1 - c0)) -v hz="$HZ" 'BEGIN { printf "%.3f", t / hz }')
	icmp_checks=0
	[[ $name == lbdnsd-all ]] && icmp_checks=$(awk -v e=$((e1 - e0)) -v n=$ICMP_ECHOES 'BEGIN { printf "%.0f", e / n }')
	checks=$((tc1 - tc0 + hc1 - hc0 + icmp_checks))
	awk -v n="$name" -v r="$run" -v w="$wall" -v c="$cpu" -v k="$checks" -v tc=$((tc1 - tc0)) -v hc=$((hc1 - hc0)) \
		-v ic="$icmp_checks" -v e=$((e1 - e0)) -v h="$hwm" -v rc=$((r1 - r0)) -v hz="$HZ" -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
		printf "%-14s run %d: CPU %5.1f%% of one core | checks %8.1f/s (tcp %.1f/s, http %.1f/s, icmp %.1f/s; %d echoes) | CPU per check %6.1f us | peak RSS %6.1f MB | responder %4.1f%% | load %s\n",
			n, r, 100 * c / w, k / w, tc / w, hc / w, ic / w, e, (k ? 1e6 * c / k : 0), h, 100 * rc / hz / w, load
		printf "%s %.2f %.1f %.2f %s\n", n, 100 * c / w, k / w, (k ? 1e6 * c / k : 0), h >> "'"$WORK/results"'"
	}'
	if [[ $name == lbdnsd-* ]]; then
		# Members up by kind, and the commonest last results of the others.
		if "$WORK/lbctl" -socket "$WORK/lbdns/lbdns.sock" -timeout 60s gslb members -o json >"$WORK/members.json" 2>"$WORK/lbctl.err"; then
			jq -r '[.[].members[]] | group_by(.monitors[0].kind)[] | "        \(.[0].monitors[0].kind): \([.[] | select(.state == "up")] | length)/\(length) members up"' "$WORK/members.json"
			jq -r '.[].members[] | select(.state != "up") | "\(.monitors[0].kind) \(.state): \(.monitors[0].last_result | sub("[0-9.]+(ms|µs|s)"; "N"))"' "$WORK/members.json" |
				sort | uniq -c | sort -rn | head -5 | sed 's/^/        /'
		else
			echo "        lbctl gslb members: $(cat "$WORK/lbctl.err")"
		fi
		[[ $name == lbdnsd-all && $run == "$ROUNDS" ]] && down_test
	else
		echo "        gdnsd state changes logged: $(grep -c 'to UP' "$WORK/$name.$run.log" || true) to UP, $(grep -c 'to DOWN' "$WORK/$name.$run.log" || true) to DOWN"
	fi
	stop "$pid"
}

echo "== $ROUNDS rounds of lbdnsd-all, $([[ $SAME == 1 ]] && echo "lbdnsd-th (TCP + HTTP only, every ${GDNSD_INTERVAL} s like gdnsd), lbdnsd-th-1s (the same every 1 s), ")gdnsd: $N_TCP TCP + $N_HTTP HTTP + $N_ICMP ICMP members (gdnsd: TCP + HTTP), warm-up ${WARMUP} s, measured ${DURATION} s each; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lbdnsd: interval 1 s (lbdnsd-th: ${GDNSD_INTERVAL} s), timeout ${TIMEOUT_MS} ms, rise $RISE, fall $FALL, icmp count $ICMP_ECHOES, icmp socket $ICMP_SOCKET; gdnsd: interval ${GDNSD_INTERVAL} s (its minimum is 2), timeout 1 s"
for ((r = 1; r <= ROUNDS; r++)); do
	measure lbdnsd-all "$r" "$WORK/lbdnsd" -dry-run -config "$WORK/lbdns.toml" -log-format json
	if [[ $SAME == 1 ]]; then
		measure lbdnsd-th "$r" "$WORK/lbdnsd" -dry-run -config "$WORK/lbdns-th.toml" -log-format json
		measure lbdnsd-th-1s "$r" "$WORK/lbdnsd" -dry-run -config "$WORK/lbdns-th-1s.toml" -log-format json
	fi
	measure gdnsd "$r" gdnsd -c "$WORK/gdnsd" start
done

echo
echo "== summary"
awk '{ n[$1]++; cpu[$1] += $2; cps[$1] += $3; us[$1] += $4; if ($5 > hwm[$1]) hwm[$1] = $5 }
END {
	for (k in n) printf "%-14s mean of %d runs: CPU %.1f%% of one core, %.0f checks/s, %.1f us CPU per check, peak RSS %.1f MB\n", k, n[k], cpu[k] / n[k], cps[k] / n[k], us[k] / n[k], hwm[k]
	if (!n["gdnsd"] || us["gdnsd"] <= 0) exit
	g = us["gdnsd"] / n["gdnsd"]
	for (k in n) if (k != "gdnsd") {
		# lbdnsd-th monitors what gdnsd monitors: the goal is about that ratio.
		# lbdnsd-all adds ICMP checks, which gdnsd has no monitor for.
		verdict = (us[k] / n[k] / g <= 1.0 ? "MEETS goal" : "MISSES goal")
		if (k == "lbdnsd-all" && n["lbdnsd-th"]) verdict = "not like for like: it adds the ICMP checks gdnsd does not run, at 1 s"
		if (k == "lbdnsd-th-1s") verdict = "not like for like: twice gdnsd'"'"'s check rate, its fixed costs spread over twice the checks"
		printf "ratio %s/gdnsd of CPU per check: %.2f (goal <= 1.0: %s)\n", k, us[k] / n[k] / g, verdict
	}
	if (n["lbdnsd-all"] && n["lbdnsd-th-1s"]) {
		# Both every 1 s: the difference is the ICMP checks.
		icps = cps["lbdnsd-all"] / n["lbdnsd-all"] - cps["lbdnsd-th-1s"] / n["lbdnsd-th-1s"]
		icpu = cpu["lbdnsd-all"] / n["lbdnsd-all"] - cpu["lbdnsd-th-1s"] / n["lbdnsd-th-1s"]
		if (icps > 0) printf "icmp           lbdnsd-all minus lbdnsd-th-1s: %.0f checks/s, %.1f%% of one core, %.1f us CPU per check\n", icps, icpu, icpu * 10000 / icps
	}
}' "$WORK/results" | sort
echo "(lbdnsd-all's checks include its ICMP checks, one per $ICMP_ECHOES echoes counted by the kernel's InEchos, which counts any echo request in $([[ -n ${LBDNS_BENCH_NETNS:-} ]] && echo "this run's own network namespace" || echo "this network namespace: other programs' pings too"))"
