#!/usr/bin/env bash
# bench/gateway/run.sh - BENCHMARKS B9: crater-gateway on loopback against
# the fake V2 backend (tests/tools/fake_v2.c: 5 ms + 0.5 ms per row).
#  1. throughput and p99 at CONNECTIONS clients, one-row infer requests:
#     direct to a one-at-a-time backend (a GPU) vs through the gateway with
#     dynamic batching (maxBatchSize = CONNECTIONS, batchTimeout BATCH_MS);
#  2. gateway overhead: p50 of GET /v2/health/ready (no model time) at one
#     connection, direct vs through the gateway without batching.
# Usage: bench/gateway/run.sh [BUILD_DIR=build] [SECONDS=10] [CONNECTIONS=64]
#                             [BATCH_MS=5] [REPLICAS=1]
# REPLICAS one-at-a-time backends serve the batched service; the direct
# run has one of its own.
# Everything (wrk, gateway, backends) shares this machine's cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build} secs=${2:-10} conns=${3:-64} batch_ms=${4:-5} replicas=${5:-1}
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT

start() { # start NAME CMD...: sets $port from "port N" in its output
    local log=$tmp/$1.out i
    shift
    "$@" >"$log" 2>&1 &
    pids+=($!)
    for i in $(seq 1 200); do
        grep -q 'port [0-9]' "$log" && break
        sleep 0.05
    done
    port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] || { cat "$log"; exit 1; }
}

# the direct run has a backend of its own: a serial backend still works
# through the requests of closed connections for a while after wrk stops,
# and that backlog landed in the batched run's first batches (its p99)
start direct "$root/$build/tests/fake_v2" -s
direct=http://127.0.0.1:$port
start gpu "$root/$build/tests/fake_v2" -s
gpu=http://127.0.0.1:$port
gpus=$gpu
for ((r = 2; r <= replicas; r++)); do
    start "gpu$r" "$root/$build/tests/fake_v2" -s
    gpus=$gpus,http://127.0.0.1:$port
done
start cpu "$root/$build/tests/fake_v2" -t 4
cpu=http://127.0.0.1:$port
start gw "$root/$build/crater-gateway" --listen 127.0.0.1:0 --threads 2 \
    --service b="$gpus" --batch b="$conns:${batch_ms}ms" --service o="$cpu"
gw=http://127.0.0.1:$port
for i in $(seq 1 100); do
    [ "$(curl -s "$gw/metrics" | awk '$1 ~ /backends_ready/ {s += $2} END {print s}')" = $((replicas + 1)) ] && break
    sleep 0.05
done

# wrk_run NAME ARGS...: summary line "rps p50 p99 non2xx" into $tmp/NAME
wrk_run() {
    local name=$1
    shift
    wrk --latency "$@" >"$tmp/$name.txt"
    awk '
        /Requests\/sec/ { rps = $2 }
        /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
        /Non-2xx/ { bad = $NF }
        END { printf "%s %s %s %s\n", rps, p50, p99, bad + 0 }' \
        "$tmp/$name.txt" >"$tmp/$name"
    echo "== $name: $(cat "$tmp/$name")  (rps p50 p99 non-2xx)"
}

wrk_run direct -t2 -c"$conns" -d"${secs}s" -s "$root/bench/gateway/infer.lua" \
    "$direct/v2/models/bench/infer"
wrk_run batched -t2 -c"$conns" -d"${secs}s" -s "$root/bench/gateway/infer.lua" \
    "$gw/b/v2/models/bench/infer"
curl -s "$gpu/fake/stats" | sed 's/^/== backend stats: /'
curl -s "$gw/metrics" | grep -E '(batch_size|queue_seconds|backend_seconds)_(sum|count)' | sed 's/^/== /'
wrk_run health_direct -t1 -c1 -d"${secs}s" "$cpu/v2/health/ready"
wrk_run health_gateway -t1 -c1 -d"${secs}s" "$gw/o/v2/health/ready"
echo "== nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
