#!/usr/bin/env bash
# test_sched_defects.sh - the scheduling defects of issue 13, through craterd
# over loopback with a hand-written agent (register, events, heartbeats):
# 1. overcommit only when nothing else fits, allocation never above 100%
#    with the excess shown apart, and the safety watermark acting (a
#    heartbeat measuring an overcommitted GPU past it requeues the newest
#    task there, with a reason and a "watermark" decision);
# 2. preemption: a victim younger than preemptionMinRuntime is protected
#    (the pending reason says so) and preempted once it has run that long;
#    a second job whose plan names the same victim does not log a second
#    "preempting" decision (one decision, one line); with only equal
#    priorities left the reason says so;
# 3. explain on a placed job shows the chosen node's scores.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; [ -f "$tmp/body" ] && head -c 900 "$tmp/body" && echo; }
expect() { # expect NAME STATUS [JQ_FILTER]
    local name=$1 want=$2 filter=${3:-}
    if [ "$code" != "$want" ]; then bad "$name: status $code, wanted $want"; return; fi
    if [ -n "$filter" ] && ! jq -e "$filter" "$tmp/body" >/dev/null 2>&1; then
        bad "$name: $filter"; return
    fi
    ok
}
field() { jq -r "$1" "$tmp/body"; }
submit() { # submit NAME [YAML lines...] -> $id
    local name=$1; shift
    { echo "name: $name"; echo "command: [sleep, '100']"; for l in "$@"; do echo "$l"; done; } >"$tmp/j"
    api POST /api/v1/jobs "$admin" "$tmp/j"; id=$(field .id)
}
started() { # started JOB...: the agent says they run
    local j
    for j in "$@"; do
        printf '{"events":[{"job":"%s","attempt":1,"event":"started","pid":1}]}' "$j" >"$tmp/e"
        api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"
    done
}
heartbeat() { # heartbeat USED_MIB_GPU0: measurements of the node
    printf '{"util":{"cpu":0.1,"memory":0.1,"disk":0,"gpus":[{"index":0,"util":0.5,"memory_used_bytes":%s},{"index":1,"util":0.5,"memory_used_bytes":0}]},"tasks":[]}' \
        "$(( $1 * 1048576 ))" >"$tmp/h"
    api POST "/api/v1/agents/$node/heartbeat" "$agent" "$tmp/h"
}
up() { # up CONFIG: a fresh craterd with the a2-a100 node and its agent
    [ -n "$pid" ] && { kill -9 "$pid"; wait "$pid" 2>/dev/null; }
    rm -rf "$tmp/data"
    start_craterd "$tmp/data" --config "$1" --hardware "$src/examples/hardware/a2-a100.yaml" || exit 1
    echo "{\"role\":\"agent\",\"node\":\"$node\"}" >"$tmp/t"
    api POST /api/v1/tokens "$admin" "$tmp/t"; agent=$(field .token)
    "${CRATER_BIN:?}" validate -o json "$src/examples/hardware/a2-a100.yaml" 2>/dev/null \
        | jq --argjson p "$(sed -n "s/^#define CRATER_AGENT_PROTOCOL \\([0-9]*\\).*/\\1/p" "$src/src/daemon/buildinfo.h")" '{version: "0.1.0", protocol: $p, node: ., tasks: []}' >"$tmp/r"
    api POST "/api/v1/agents/$node/register" "$agent" "$tmp/r"; expect register 200
    heartbeat 0
}
node=gpu-a100-0

# ---- 1. overcommit ------------------------------------------------------------
printf 'scheduler:\n  overcommitRatio: 2\n  gpuContextOverhead: 0\n' >"$tmp/oc.yaml"
up "$tmp/oc.yaml"
slice="resources: {gpu: {count: 1, memory: 50Gi}, cpu: 1, memory: 1Gi}"
submit s1 "$slice"; s1=$id
until_ 5 'api GET "/api/v1/jobs/$s1" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "s1 bound"
submit s2 "$slice"; s2=$id
until_ 5 'api GET "/api/v1/jobs/$s2" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "s2 bound"
g1=$(api GET "/api/v1/jobs/$s1" "$admin"; field '.placement.gpus[0].index')
api GET "/api/v1/jobs/$s2" "$admin"
expect "second slice on the free GPU, not past the first's memory" 200 ".placement.gpus[0].index != $g1"
api GET "/api/v1/nodes/$node" "$admin"
expect "two GPUs in use, no overcommit" 200 '.allocated.gpus == 2 and .utilization.gpu == 1 and .allocated.gpu_memory_overcommitted_bytes == 0'
submit s3 "$slice"; s3=$id
until_ 5 'api GET "/api/v1/jobs/$s3" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "s3 bound (overcommitted: nothing else fits)"
g3=$(field '.placement.gpus[0].index')
api GET "/api/v1/nodes/$node" "$admin"
expect "allocation against physical memory, the excess apart" 200 \
    '.utilization.gpu <= 1 and .utilization.gpu_memory <= 1 and .allocated.gpu_memory_overcommitted_bytes == 21474836480 and .utilization.gpu_memory_overcommit > 0'
started "$s1" "$s2" "$s3"
# the overcommitted GPU measures past 0.9 x 80 GiB: the newest task there goes
heartbeat $(( g3 == 0 ? 75000 : 0 )) >/dev/null
if [ "$g3" != 0 ]; then
    printf '{"util":{"cpu":0.1,"memory":0.1,"disk":0,"gpus":[{"index":1,"util":0.5,"memory_used_bytes":%s}]},"tasks":[]}' $(( 75000 * 1048576 )) >"$tmp/h"
    api POST "/api/v1/agents/$node/heartbeat" "$agent" "$tmp/h"
fi
api GET "/api/v1/jobs/$s3" "$admin"
expect "watermark: the newest overcommitted task is stopped, with a reason" 200 \
    '.state == "preempting" and ([.history[].reason] | map(select(. != null and test("safetyWatermark"))) | length > 0)'
api GET "/api/v1/jobs/$s1" "$admin"; expect "the older task stays" 200 '.state == "running"'
# (the decision log is flushed by the scheduler thread: wait for it)
until_ 10 'grep -q "\"decision\":\"watermark\",\"job\":$s3" "$tmp/data/decisions.log"' && ok || bad "watermark decision logged"

# ---- 1b. the watermark stops a gang too (its tasks carry their replica) -------
up "$tmp/oc.yaml"
submit w1 "$slice"; w1=$id
submit w2 "$slice"; w2=$id
until_ 5 'api GET "/api/v1/jobs/$w2" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "w1, w2 bound"
submit wg "$slice" "replicas: 2" "gang: true"; wg=$id
until_ 5 'api GET "/api/v1/jobs/$wg" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "the gang bound, overcommitted"
started "$w1" "$w2"
for r in 0 1; do
    printf '{"events":[{"job":"%s","attempt":1,"replica":%d,"event":"started","pid":1}]}' "$wg" "$r" >"$tmp/e"
    api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"
done
printf '{"util":{"cpu":0.1,"memory":0.1,"disk":0,"gpus":[{"index":0,"util":0.5,"memory_used_bytes":%s},{"index":1,"util":0.5,"memory_used_bytes":%s}]},"tasks":[]}' \
    $(( 75000 * 1048576 )) $(( 75000 * 1048576 )) >"$tmp/h"
api POST "/api/v1/agents/$node/heartbeat" "$agent" "$tmp/h"
api GET "/api/v1/jobs/$wg" "$admin"
expect "watermark: the overcommitted gang is stopped as a unit" 200 \
    '.state == "preempting" and ([.history[].reason] | map(select(. != null and test("safetyWatermark"))) | length > 0)'
api GET "/api/v1/jobs/$w1" "$admin"; expect "the older task stays" 200 '.state == "running"'

# ---- 1c. a gang does not jump the head's reservation (EASY) -----------------
printf 'scheduler:\n  gpuContextOverhead: 0\n' >"$tmp/plain.yaml"
up "$tmp/plain.yaml"
submit r1 "timeLimit: 1h" "resources: {gpu: {count: 1}, cpu: 1, memory: 1Gi}"; r1=$id
until_ 5 'api GET "/api/v1/jobs/$r1" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "r1 bound"
started "$r1"
submit head "resources: {gpu: {count: 2}, cpu: 1, memory: 1Gi}"; hd=$id
submit gl "replicas: 2" "gang: true" "resources: {gpu: {count: 1, memory: 10Gi}, cpu: 1, memory: 1Gi}"; gl=$id
submit gs "replicas: 2" "gang: true" "timeLimit: 1m" "resources: {gpu: {count: 1, memory: 10Gi}, cpu: 1, memory: 1Gi}"; gs=$id
until_ 5 'api GET "/api/v1/jobs/$gs" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "a gang that ends before the head's start backfills"
api GET "/api/v1/jobs/$gl" "$admin"
expect "a gang that could delay the head waits behind its reservation" 200 \
    ".state == \"pending\" and (.reason | test(\"reserved start of job $hd\"))"
api GET "/api/v1/jobs/$hd" "$admin"; expect "the head still waits for r1" 200 '.state == "pending"'

# ---- 2. preemption --------------------------------------------------------------
printf 'scheduler:\n  preemptionMinRuntime: 3s\n' >"$tmp/pre.yaml"
up "$tmp/pre.yaml"
whole="resources: {gpu: {count: 2}, cpu: 1, memory: 1Gi}"
submit low "priority: -50" "preemptible: true" "$whole"; low=$id
until_ 5 'api GET "/api/v1/jobs/$low" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "low bound"
started "$low"
submit h1 "priorityClass: high" "preemptible: true" "$whole"; h1=$id
until_ 10 'api GET "/api/v1/jobs/$h1" "$admin"; jq -e ".history[-1].reason | test(\"preemptionMinRuntime\")" "$tmp/body" >/dev/null' || true
expect "a victim younger than preemptionMinRuntime is protected" 200 \
    '.state == "pending" and (.history[-1].reason | test("preemptionMinRuntime"))'
api GET "/api/v1/jobs/$low" "$admin"; expect "low still running" 200 '.state == "running"'
until_ 10 'api GET "/api/v1/jobs/$low" "$admin"; [ "$(field .state)" = preempting ]' && ok || bad "low preempted once it ran 3 s"
submit h2 "priorityClass: high" "$whole"; h2=$id
# heartbeats make full passes; wait for h2's verdict
until_ 10 'heartbeat 0 >/dev/null; api GET "/api/v1/jobs/$h2" "$admin"; jq -e ".history[-1].reason | test(\"already being preempted\")" "$tmp/body" >/dev/null' || true
expect "a plan over a victim already stopping waits, says so" 200 \
    ".state == \"pending\" and (.history[-1].reason | test(\"already being preempted\"))"
n=$(grep -c '"decision":"preempting"' "$tmp/data/decisions.log")
[ "$n" = 1 ] && ok || bad "one preemption decision, $n \"preempting\" lines"
printf '{"events":[{"job":"%s","attempt":1,"event":"exited","exit_code":0,"signal":15}]}' "$low" >"$tmp/e"
api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"
until_ 5 'api GET "/api/v1/jobs/$h1" "$admin"; [ "$(field .state)" = bound ]' && ok || bad "h1 bound"
started "$h1"
until_ 10 'heartbeat 0 >/dev/null; api GET "/api/v1/jobs/$h2" "$admin"; jq -e ".history[-1].reason | test(\"may be preempted\")" "$tmp/body" >/dev/null' || true
expect "equal priority: the reason says why no preemption" 200 \
    '.state == "pending" and (.history[-1].reason | test("may be preempted \\(1 at priority"))'

# ---- 3. explain on a placed job ---------------------------------------------------
api GET "/api/v1/jobs/$h1/explain" "$admin"
expect "explain: the chosen node's scores" 200 \
    ".scores.chosen.node == \"$node\" and .scores.chosen.fits and (.scores.chosen.plugins | length > 0) and .scores.runner_up == null and .scores.fit == 1"
"${CRATER_BIN:?}" explain "$h1" --server "$url" --token "$admin" >"$tmp/ex" 2>&1
grep -q "^  chosen  *$node  *total" "$tmp/ex" && grep -q "runner-up" "$tmp/ex" && ok || { bad "crater explain"; cat "$tmp/ex"; }

echo "test_sched_defects: $pass passed, $fail failed"
[ "$fail" = 0 ]
