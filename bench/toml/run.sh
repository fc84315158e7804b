#!/usr/bin/env bash
# run.sh times the configuration decode of two revisions in one run,
# their test binaries alternated round by round: the TOML decode of a
# 5 MB document of the big reload's shape (configs: BenchmarkDecode*),
# then configs.Load of the big reload's configuration (10,000 names,
# 50,000 members, 1,000,000 prefixes; responder: BenchmarkBigReload).
#
# Usage: bench/toml/run.sh
# Environment: BASE (the revision to compare with, default main), ROUNDS
# (default 3), BENCHTIME (default 3x), KEEP=1 keeps the work directory.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/lib.sh"
PIDS=()
WORK=$(mktemp -d)
trap bench_cleanup EXIT
BASE=${BASE:-main}
ROUNDS=${ROUNDS:-3}
BENCHTIME=${BENCHTIME:-3x}

mkdir -p "$WORK/base"
git -C "$ROOT" archive "$BASE" | tar -x -C "$WORK/base"
for side in base new; do
	src=$WORK/base
	[[ $side == new ]] && src=$ROOT
	(cd "$src" && go test -c -o "$WORK/$side-configs.test" ./configs &&
		go test -c -o "$WORK/$side-server.test" ./responder)
done
echo "base $(git -C "$ROOT" rev-parse --short "$BASE"), new $(git -C "$ROOT" describe --always --dirty)"

for round in $(seq 1 "$ROUNDS"); do
	for side in base new; do
		echo "== round $round $side, load $(cut -d' ' -f1-3 /proc/loadavg)"
		(cd "$ROOT/configs" && "$WORK/$side-configs.test" -test.run '^$' \
			-test.bench '^BenchmarkDecode' -test.benchtime "$BENCHTIME" -test.benchmem) |
			grep '^Benchmark'
		(cd "$ROOT/responder" && "$WORK/$side-server.test" -test.run '^$' \
			-test.bench 'BigReload/configs.Load$' -test.benchtime "$BENCHTIME" -test.benchmem) |
			grep '^Benchmark'
	done
done
