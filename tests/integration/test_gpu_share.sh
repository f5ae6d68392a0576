#!/usr/bin/env bash
# test_gpu_share.sh - GPU sharing in craterd (scheduler.gpuShare,
# doc/scheduling.md "GPU sharing"): real craterd and crater-agent on
# loopback, one node with synthetic samples (tests/data/hw-idle.yaml: its
# GPUs read what their tasks set in CRATER_SYNTHETIC_GPU_UTIL, their
# slice or whole memory as used). With minSamples 3 and idle reclaim
# (2s + 2s) to bring a job back:
#   - a whole-GPU job is profiled from the heartbeats ("gpu_share" in its
#     JSON: samples, use, peak), not shared on its first attempt;
#   - reclaimed and requeued, its next attempt is time-shared: a slice of
#     its peak (memoryMargin 0) in the agent's order, "gpu_share" in the
#     placement, shared: true;
#   - a job measured busy (0.95, above maxUtil) says why it is not shared;
#   - a time-shared attempt that fails gives the job whole GPUs again.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} agentbin=${CRATER_AGENT_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
pid="" apid=""
mark=gsh$RANDOM$RANDOM # in every task's argv: cleanup finds only ours
cleanup() {
    kill -9 $apid $pid 2>/dev/null && wait $apid $pid 2>/dev/null
    for p in $(pgrep -f -- "$mark"); do kill -9 "$p" 2>/dev/null; done
    for f in "$tmp"/agent/tasks/*/task.json; do
        [ -f "$f" ] || continue
        g=$(jq -r .cgroup "$f")
        [ -n "$g" ] && [ "$g" != null ] || continue
        rm -f "/dev/shm/crater-$g.slice"
        for _ in 1 2 3 4 5; do
            left=$(find /sys/fs/cgroup -maxdepth 3 -type d -name "$g" 2>/dev/null)
            [ -z "$left" ] && break
            for d in $left; do
                for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
            done
            rmdir $left 2>/dev/null
            sleep 0.1
        done
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$admin"; }
job() { c get job "$1" -o json 2>/dev/null; }
show() { job "$1" | jq -c '{state, attempts, gpu_share, placement: .placement | {whole_gpus, gpu_share, gpus}}'; }
submit() { # submit NAME EXTRA_YAML_LINES... -> job id
    local name=$1; shift
    { echo "name: $name"; for l in "$@"; do echo "$l"; done; } >"$tmp/$name.yaml"
    c submit -f "$tmp/$name.yaml" -o json | jq -r .id
}

cat >"$tmp/craterd.yaml" <<'EOF'
apiVersion: crater/v1
kind: Config
scheduler:
  idleGpuWindow: 2s
  idleGpuGrace: 2s
  gpuContextOverhead: 0
  gpuShare: {enabled: true, maxUtil: 0.9, memoryMargin: 0, minSamples: 3}
agent:
  heartbeatInterval: 200ms
EOF
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
atok=$(c token create --role agent --node idlegpu -o json | jq -r .token)
"$agentbin" --server "$url" --token "$atok" --hardware "$src/tests/data/hw-idle.yaml" \
    --node idlegpu --data "$tmp/agent" --config "$tmp/craterd.yaml" 2>>"$tmp/agent.err" &
apid=$!

sleeper="command: [sh, -c, 'sleep 600; :', $mark]"
whole="resources: {gpu: {count: 1}, cpu: 500m, memory: 64Mi}"
idle=$(submit idle "$sleeper" 'env: {CRATER_SYNTHETIC_GPU_UTIL: "0"}' "$whole")
busy=$(submit busy "$sleeper" 'env: {CRATER_SYNTHETIC_GPU_UTIL: "0.95"}' "$whole")
[ -n "$idle" ] && [ -n "$busy" ] && ok || bad "submitted: '$idle' '$busy'"

# ---- profiled on its first attempt, held whole ---------------------------------
until_ 30 'job "$idle" | jq -e ".state == \"running\" and .gpu_share.samples >= 3" >/dev/null' \
    && ok || { bad "profiled: $(show "$idle")"; cat "$tmp/agent.err"; }
job "$idle" | jq -e '.attempts == 1 and .placement.whole_gpus and .placement.gpu_share == null
    and .gpu_share.shared == false and .gpu_share.use == 0 and .gpu_share.peak_mib == 81920' \
    >/dev/null && ok || bad "first attempt whole, profile use 0 peak 80 GiB: $(show "$idle")"

# ---- reclaimed, back time-shared -----------------------------------------------
until_ 40 'job "$idle" | jq -e ".attempts >= 2 and .state == \"running\"" >/dev/null' \
    && ok || bad "requeued and running again: $(show "$idle")"
job "$idle" | jq -e '.placement.whole_gpus == false and .placement.gpu_share > 0
    and .placement.gpus[0].memory_bytes == 85899345920
    and .gpu_share.shared and .gpu_share.slice_mib == 81920' >/dev/null \
    && ok || bad "second attempt time-shared, a slice of its peak: $(show "$idle")"

# ---- a busy job is never shared, and says why -----------------------------------
until_ 20 'job "$busy" | jq -e ".gpu_share.samples >= 3" >/dev/null' && ok || bad "busy profiled: $(show "$busy")"
job "$busy" | jq -e '.gpu_share.use > 0.9 and .placement.whole_gpus' >/dev/null \
    && ok || bad "busy job: $(show "$busy")"

# ---- a shared attempt that fails: whole GPUs from then on ------------------------
# attempt 1 idle (profiled, reclaimed), attempt 2 time-shared exits 3
# (restartPolicy OnFailure), attempt 3 must hold its GPU whole again
flaky=$(submit flaky "command: [sh, -c, 'test \"\$CRATER_ATTEMPT\" = 2 && exit 3; sleep 600; :', $mark]" \
    'env: {CRATER_SYNTHETIC_GPU_UTIL: "0"}' 'restartPolicy: OnFailure' 'backoffLimit: 2' "$whole")
until_ 60 'job "$flaky" | jq -e ".attempts >= 3 and .state == \"running\"" >/dev/null' \
    && ok || bad "flaky: attempt 3 runs: $(show "$flaky")"
job "$flaky" | jq -e '.placement.whole_gpus and .placement.gpu_share == null
    and .gpu_share.shared == false
    and (.gpu_share.why_not | test("time-shared failed"))' >/dev/null \
    && ok || bad "a failed shared attempt: whole GPUs again, and why: $(show "$flaky")"
job "$flaky" | jq -e '[.history[] | select(.reason | test("attempt 2 failed: exit code 3"))] | length == 1' \
    >/dev/null && ok || bad "flaky: its second (shared) attempt failed: $(job "$flaky" | jq -c '[.history[].reason]')"

echo "test_gpu_share: $pass passed, $fail failed"
[ "$fail" = 0 ]
