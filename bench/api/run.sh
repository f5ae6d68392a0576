#!/usr/bin/env bash
# bench/api/run.sh - BENCHMARKS.md B5: wrk against a running craterd on
# loopback: GET a job, and durable POST submissions (fsync'd group commit).
# Usage: bench/api/run.sh [BUILD_DIR=build] [SECONDS=10] [CONNECTIONS=64]
# The daemon gets 2 HTTP threads; wrk runs 2 threads on the same machine.
# STORE=etcd runs craterd on store.backend etcd: a temporary single-member
# etcd (Debian's etcd-server) on free loopback ports, killed at exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build} secs=${2:-10} conns=${3:-64}
tmp=$(mktemp -d)
pid="" etcd_pid=""
trap 'kill $pid $etcd_pid 2>/dev/null; wait $pid $etcd_pid 2>/dev/null; rm -rf "$tmp"' EXIT
CRATERD_BIN=$root/$build/craterd
. "$root/tests/integration/craterd_lib.sh"
extra=()
if [ "${STORE:-sqlite}" = etcd ]; then
    port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
    cp=$(port) pp=$(port)
    etcd --name b --data-dir "$tmp/etcd" --listen-client-urls "http://127.0.0.1:$cp" \
        --advertise-client-urls "http://127.0.0.1:$cp" --listen-peer-urls "http://127.0.0.1:$pp" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "b=http://127.0.0.1:$pp" >"$tmp/etcd.log" 2>&1 &
    etcd_pid=$!
    until_ 20 "curl -sf http://127.0.0.1:$cp/health | grep -q true"
    printf 'store:\n  backend: etcd\n  etcdEndpoints: [http://127.0.0.1:%s]\n' "$cp" >"$tmp/c.yaml"
    extra=(--config "$tmp/c.yaml")
fi
start_craterd "$tmp/data" --threads 2 "${extra[@]}"
export CRATER_TOKEN=$admin
printf '{"name":"probe","command":["true"],"priority":-100,"resources":{"cpu":"100m","memory":"64Mi"}}' >"$tmp/j"
api POST /api/v1/jobs "$admin" "$tmp/j"
echo "== GET /api/v1/jobs/1 ($secs s, $conns connections)"
wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$root/bench/api/get.lua" "$url" | tee "$tmp/get.txt"
echo "== POST /api/v1/jobs, durable ($secs s, $conns connections)"
wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$root/bench/api/submit.lua" "$url" | tee "$tmp/post.txt"
api GET "/api/v1/jobs?limit=1" "$admin"
echo "== store ${STORE:-sqlite}: $(du -sb "$tmp/data/crater.db" "$tmp/etcd" 2>/dev/null | awk '{s+=$1} END {print s}') bytes; nproc $(nproc)"
