#!/usr/bin/env bash
# bench/emergency/run.sh: the GSLB responder with intelligent resolution
# on and off, in one run, with dnsperf.
#
# lbdnsd -dry-run serves zone g.test on 127.0.0.1:PORT: a static record
# www.g.test (the baseline: zone data), the dynamic name geo.g.test (ECS,
# policies on the location over a topology of NETS /16 prefixes, pool
# algorithm "hash" keyed by the client subnet) and rr.g.test (global
# policy, round robin). Members 127.0.10.1..127.0.10.8 are up (a Python
# listener on 0.0.0.0:MEMBER_PORT accepts the TCP checks of all of them).
# Phase "on": dnsperf on each name for DURATION s; then lbctl gslb off
# --reason bench (every name: static answers) and phase "off": the same
# runs. For each run: queries per second (dnsperf), lbdnsd's CPU per query
# (utime+stime over the run from /proc/PID/stat divided by the queries
# completed) and the share of the answers with ECS. At the end the Go
# benchmark of the answer path (go test -bench AnswerEmergency ./gslb/),
# emergency on and off, for allocations and ns/op without the network.
#
# Usage: bench/emergency/run.sh
#        DURATION=5 CLIENTS=4 bench/emergency/run.sh
# Env: DURATION (s per run, 10), CLIENTS (dnsperf -c, 8), OUTSTANDING
#      (dnsperf -q, 200), NETS (topology prefixes, 2000), KEEP=1 keeps the
#      work directory. Needs dnsperf, python3 and go. Nothing is sent
#      anywhere but 127.0.0.0/8.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"

DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-8}
OUTSTANDING=${OUTSTANDING:-200}
NETS=${NETS:-2000}

for c in dnsperf python3 go; do command -v "$c" >/dev/null || die "$c is not installed"; done

bench_start emergency

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DNS_PORT=$(free_port)
MEMBER_PORT=$(free_port)

(cd "$ROOT" && go build -o "$WORK/" ./cmd/lbdnsd ./lbctl)

python3 - "$MEMBER_PORT" <<'EOF' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(1024)
while True:
    c, _ = s.accept()
    c.close()
EOF
PIDS+=($!)

{
	printf '[daemon]\nstate_dir = "%s/state"\ncontrol_socket = "%s/lbdns.sock"\nstatus_listen = ""\n\n' "$WORK" "$WORK"
	printf '[check.tcp]\nkind = "tcp"\ninterval = "1s"\ntimeout = "500ms"\n\n[check.tcp.tcp]\nport = %d\n\n' "$MEMBER_PORT"
	for p in a b; do
		printf '[[gslb.pool]]\nname = "%s"\nmonitors = ["tcp"]\nalgorithm = "hash"\n' "$p"
		for i in 1 2 3 4; do
			n=$([[ $p == a ]] && echo "$i" || echo $((i + 4)))
			printf '[[gslb.pool.member]]\nname = "m%d"\naddress = "127.0.10.%d"\n' "$n" "$n"
		done
		printf '\n'
	done
	printf '[[gslb.pool]]\nname = "r"\nmonitors = ["tcp"]\nalgorithm = "rr"\n'
	for i in 1 2 3 4; do printf '[[gslb.pool.member]]\nname = "r%d"\naddress = "127.0.10.%d"\n' "$i" "$i"; done
	printf '\n[[gslb.zone]]\nname = "g.test"\nns = ["ns1.g.test."]\n\n[[gslb.zone.record]]\nname = "www"\ntype = "A"\nvalue = "192.0.2.1"\n\n'
	printf '[[gslb.name]]\nname = "geo.g.test"\necs = true\nstatic = ["192.0.2.10", "192.0.2.11"]\n'
	printf '[[gslb.name.policy]]\nmatch = { carrier = "c1", province = "p1" }\npool = "a"\n'
	printf '[[gslb.name.policy]]\nmatch = { country = "cn" }\npool = "b"\n'
	printf '[[gslb.name.policy]]\npool = "r"\n\n'
	printf '[[gslb.name]]\nname = "rr.g.test"\n[[gslb.name.policy]]\npool = "r"\n\n'
	for ((i = 0; i < NETS; i++)); do
		printf '[[gslb.topology.net]]\nprefix = "10.%d.%d.0/24"\nlabels = { carrier = "c%d", province = "p%d", country = "cn" }\n' \
			$((i / 250)) $((i % 250)) $((i % 3)) $((i % 5))
	done
	printf '\n[gslb.server]\nlisten = ["127.0.0.1:%d"]\n' "$DNS_PORT"
} >"$WORK/lbdns.toml"

"$WORK/lbdnsd" -config "$WORK/lbdns.toml" -dry-run -log-format json 2>"$WORK/lbdnsd.log" &
LBDNSD=$!
PIDS+=("$LBDNSD")
for _ in $(seq 100); do
	dig +short +tries=1 +time=1 @127.0.0.1 -p "$DNS_PORT" rr.g.test A 2>/dev/null | grep -q '^127\.0\.10\.' && break
	sleep 0.1
done
dig +short @127.0.0.1 -p "$DNS_PORT" rr.g.test A | grep -q '^127\.0\.10\.' || die "lbdnsd does not answer rr.g.test from its members (see $WORK/lbdnsd.log)"
sleep 2 # every member up

for n in www geo rr; do printf '%s.g.test A\n' "$n" >"$WORK/q-$n"; done
ECS=8:000118000a0102 # EDNS Client Subnet 10.1.2.0/24

HZ=$(getconf CLK_TCK)

run() { # mode name
	local before after out qps done_q cpu_us
	before=$(cpu_ticks "$LBDNSD")
	out=$(dnsperf -s 127.0.0.1 -p "$DNS_PORT" -d "$WORK/q-$2" -l "$DURATION" -c "$CLIENTS" -q "$OUTSTANDING" -E "$ECS" 2>&1)
	after=$(cpu_ticks "$LBDNSD")
	qps=$(awk '/Queries per second/ {printf "%.0f", $4}' <<<"$out")
	done_q=$(awk '/Queries completed/ {print $3}' <<<"$out")
	cpu_us=$(awk -v t=$((after - before)) -v hz="$HZ" -v q="$done_q" 'BEGIN {printf "%.2f", t / hz * 1e6 / q}')
	printf '%-4s %-12s %12s %14s %10s\n' "$1" "$2.g.test" "$qps" "$cpu_us" "$(awk '/Queries lost/ {print $3}' <<<"$out")"
}

printf '%-4s %-12s %12s %14s %10s\n' MODE NAME QPS "CPU µs/query" LOST
for n in www geo rr; do run on "$n"; done
"$WORK/lbctl" -socket "$WORK/lbdns.sock" gslb off --reason bench >/dev/null
dig @127.0.0.1 -p "$DNS_PORT" geo.g.test A +subnet=10.1.2.0/24 | grep -q 'CLIENT-SUBNET: 10.1.2.0/24/0' || die "geo is not answering with scope 0 after gslb off"
for n in www geo rr; do run off "$n"; done

echo
echo "Go benchmark of the answer path (no network), emergency on and off:"
(cd "$ROOT" && go test -run '^$' -bench AnswerEmergency -benchtime 1000000x ./gslb/ | grep Benchmark)
