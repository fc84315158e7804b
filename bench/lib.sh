# lib.sh is sourced by the bench/*/run.sh scripts: the helpers they all
# need, written once. A script calls `bench_start NAME` (ROOT, WORK, PIDS
# and the traps) and appends the processes it starts to PIDS.

# die MESSAGE: print it and exit 1.
die() { echo "run.sh: $*" >&2; exit 1; }

# now_ns: the wall clock in nanoseconds.
now_ns() { date +%s%N; }

# cpu_ticks PID: the user and system clock ticks PID has used (fields 14
# and 15 of /proc/PID/stat, counted after the command name, which may hold
# spaces).
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# cpu_ns PID: the CPU time PID's threads have used, in nanoseconds (the
# scheduler's own account, /proc/PID/task/*/schedstat: finer than clock
# ticks; threads that have exited are not counted).
cpu_ns() { cat "/proc/$1/task/"*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

# sleep_s SECONDS: sleep as a process listed in PIDS, so that a signal's
# cleanup ends it at once.
sleep_s() { sleep "$1" & PIDS+=($!); wait $! || true; }

# stop_all: continue (a stopped one could not act on TERM) and terminate
# every process in PIDS, wait up to 5 s for each, then kill what is left.
stop_all() {
	local p
	for p in "${PIDS[@]}"; do
		kill -CONT "$p" 2>/dev/null || true
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
}

# bench_cleanup: stop_all, then remove WORK unless KEEP=1.
bench_cleanup() {
	stop_all
	if [[ ${KEEP:-0} == 1 ]]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}

# stop PID: terminate one process, wait up to 10 s, then kill it.
stop() {
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# bench_modules [DIR...]: downloads the Go modules the checkout (and each
# DIR, another checkout to build) needs, while the network is there: a
# script that goes on in a network namespace of its own (unshare -n)
# builds there with no route to the module proxy.
bench_modules() {
	local d
	export PATH=$PATH:/usr/local/go/bin
	for d in "$(cd "$(dirname "$0")/../.." && pwd)" "$@"; do
		[[ -n $d ]] || continue
		(cd "$d" && go mod download) || die "go mod download in $d failed"
	done
}

# bench_start NAME: ROOT (the checkout), WORK (a new work directory named
# after NAME), PIDS (empty), bench_cleanup on exit, exit 130 on a signal.
bench_start() {
	ROOT=$(cd "$(dirname "$0")/../.." && pwd)
	WORK=$(mktemp -d "/tmp/lbdns-bench$1.XXXXXX")
	PIDS=()
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}
