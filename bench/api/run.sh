#!/usr/bin/env bash
# bench/api/run.sh - BENCHMARKS.md B5: wrk against a running craterd on
# loopback: GET a job, and durable POST submissions (fsync'd group commit).
# Usage: bench/api/run.sh [BUILD_DIR=build] [SECONDS=10] [CONNECTIONS=64]
# The daemon gets 2 HTTP threads; wrk runs 2 threads on the same machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build} secs=${2:-10} conns=${3:-64}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
CRATERD_BIN=$root/$build/craterd
. "$root/tests/integration/craterd_lib.sh"
start_craterd "$tmp/data" --threads 2
export CRATER_TOKEN=$admin
printf '{"name":"probe","command":["true"],"priority":-100,"resources":{"cpu":"100m","memory":"64Mi"}}' >"$tmp/j"
api POST /api/v1/jobs "$admin" "$tmp/j"
echo "== GET /api/v1/jobs/1 ($secs s, $conns connections)"
wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$root/bench/api/get.lua" "$url" | tee "$tmp/get.txt"
echo "== POST /api/v1/jobs, durable ($secs s, $conns connections)"
wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$root/bench/api/submit.lua" "$url" | tee "$tmp/post.txt"
api GET "/api/v1/jobs?limit=1" "$admin"
echo "== store: $(ls -la "$tmp/data/crater.db" | awk '{print $5}') bytes; nproc $(nproc)"
