#!/usr/bin/env bash
# Runs the whole benchmark: starts its own redis-server (and etcd, if
# installed) on free loopback ports, runs every scenario (and, after the
# uncontended row, ../fairlock's BenchmarkSideBySide; after the names row,
# its BenchmarkSideBySideManyNames), writes
# results/results.{md,json}, results/chart.svg and the plots
# (results/*.png, drawn by bin/bench), stops the servers, and
# prints every target, met or missed, at the end of stdout.
# Extra arguments are passed to the benchmark program (see `bin/bench -h`).
set -euo pipefail
cd "$(dirname "$0")"

mkdir -p bin results
if [ -z "${BENCH_NOBUILD:-}" ]; then # BENCH_NOBUILD=1: use the bin/bench already built
	TAGS=fairlock
	if ! (cd .. && go build ./fairlock/ 2>/dev/null); then
		echo "run.sh: the fairlock package does not build; benchmarking the peers only" >&2
		TAGS=nofairlock
	fi
	go build -tags "$TAGS" -o bin/bench .
	# The plain loops of ../fairlock/sidebyside_test.go and
	# sidebyside_names_test.go, which the bench runs right after its
	# uncontended and names rows.
	rm -f bin/fairlock.test
	if [ "$TAGS" = fairlock ] && ! (cd .. && go test -c -o bench/bin/fairlock.test ./fairlock/); then
		echo "run.sh: the fairlock tests do not build; the side-by-side benchmark is reported as not run" >&2
	fi
fi
SIDE_ARGS=()
if [ "$(bin/bench -fairlock-built)" = yes ]; then
	SIDE_ARGS=(-sidebyside bin/fairlock.test)
fi

if ! command -v redis-server >/dev/null; then
	echo "run.sh: redis-server not found (apt-get install -y redis-server)" >&2
	exit 1
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

RPORT=$(bin/bench -freeport)
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no \
	--dir "$WORK" --logfile "$WORK/redis.log" --slowlog-log-slower-than 1000 &
PIDS+=($!)

ETCD_ARGS=()
if command -v etcd >/dev/null; then
	CPORT=$(bin/bench -freeport)
	PPORT=$(bin/bench -freeport)
	while [ "$PPORT" = "$CPORT" ]; do PPORT=$(bin/bench -freeport); done
	etcd --name bench --data-dir "$WORK/etcd" \
		--listen-client-urls "http://127.0.0.1:$CPORT" --advertise-client-urls "http://127.0.0.1:$CPORT" \
		--listen-peer-urls "http://127.0.0.1:$PPORT" --initial-advertise-peer-urls "http://127.0.0.1:$PPORT" \
		--initial-cluster "bench=http://127.0.0.1:$PPORT" --log-level error >"$WORK/etcd.log" 2>&1 &
	EPID=$!
	PIDS+=($EPID)
	ETCD_ARGS=(-etcd "http://127.0.0.1:$CPORT" -etcd-pid "$EPID")
else
	echo "run.sh: etcd not found (apt-get install -y etcd-server); etcd is skipped" >&2
	ETCD_ARGS=(-peers fairlock,redislock,redsync,naive)
fi

for i in $(seq 100); do
	bash -c "exec 3<>/dev/tcp/127.0.0.1/$RPORT" 2>/dev/null && break
	sleep 0.05
done
if [ "${ETCD_ARGS[0]}" = "-etcd" ]; then
	for i in $(seq 100); do
		bash -c "exec 3<>/dev/tcp/127.0.0.1/$CPORT" 2>/dev/null && break
		sleep 0.1
	done
fi

# The committed run is the baseline that the FIFO hand-off and the largest
# drain must not fall behind (a copy: this run overwrites it).
BASE_ARGS=()
if [ -f results/results.json ]; then
	cp results/results.json "$WORK/baseline.json"
	BASE_ARGS=(-baseline "$WORK/baseline.json")
fi

# The targets, met or missed, are the last lines of stdout.
bin/bench -redis "127.0.0.1:$RPORT" "${ETCD_ARGS[@]}" "${BASE_ARGS[@]}" "${SIDE_ARGS[@]}" -out results "$@"
