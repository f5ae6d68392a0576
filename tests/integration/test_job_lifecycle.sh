#!/usr/bin/env bash
# test_job_lifecycle.sh - craterd's job lifecycle (doc/queue.md "Job
# lifecycle") where a transition used to be written in place, through
# craterd over loopback with a hand-written agent (register, events,
# heartbeats, the work channel), so every report comes exactly when the
# test sends it:
# 1. a preemption victim force-released while it stops frees the job that
#    preempted it (it was left waiting for that victim forever, and the
#    victim took its GPUs back);
# 2. a job whose cancel is pending is cancelled, not requeued, when its
#    node stops heartbeating (it was requeued and ran again);
# 3. late and repeated agent reports change nothing: a "started" for a
#    cancelled job gets a stop order, a second exit is ignored;
# 4. a gang is preempted as a unit: both replicas get a stop order, it
#    keeps its GPUs until its last replica is gone, and is requeued once
#    (it was requeued at its first replica's exit, its GPUs handed to the
#    preemptor while its other replica still ran);
# 5. a gang fails as a unit: the first failing replica fails the job and
#    its sibling gets a stop order; the sibling's exit changes nothing.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; [ -f "$tmp/body" ] && head -c 1500 "$tmp/body" && echo; }
field() { jq -r "$1" "$tmp/body"; }
submit() { # submit NAME [YAML lines...] -> $id
    local name=$1; shift
    { echo "name: $name"; echo "command: [sleep, '100']"; for l in "$@"; do echo "$l"; done; } >"$tmp/j"
    api POST /api/v1/jobs "$admin" "$tmp/j"; id=$(field .id)
}
event() { # event JOB ATTEMPT REPLICA started|exited [EXIT_CODE SIGNAL]
    if [ "$4" = started ]; then
        printf '{"events":[{"job":"%s","attempt":%s,"replica":%s,"event":"started","pid":1}]}' "$1" "$2" "$3"
    else
        printf '{"events":[{"job":"%s","attempt":%s,"replica":%s,"event":"exited","exit_code":%s,"signal":%s}]}' \
            "$1" "$2" "$3" "${5:-0}" "${6:-0}"
    fi >"$tmp/e"
    api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"
}
heartbeat() { api POST "/api/v1/agents/$node/heartbeat" "$agent" <(echo '{"tasks": []}'); }
state_is() { # state_is JOB STATE [JQ_FILTER]
    api GET "/api/v1/jobs/$1" "$admin"
    jq -e ".state == \"$2\" and (${3:-true})" "$tmp/body" >/dev/null 2>&1
}
wait_state() { until_ "${4:-10}" "state_is $1 $2 '${3:-true}'"; }
stops() { # stops JOB: the replicas of JOB's stop orders in the work channel
    api GET "/api/v1/agents/$node/work?after=0&wait_ms=0" "$agent"
    jq -c "[.items[] | select(.op == \"stop\" and .job == \"$1\") | (.replica // 0)] | unique" "$tmp/body"
}
up() { # up CONFIG: a fresh craterd with the a2-a100 node and its agent
    [ -n "$pid" ] && { kill -9 "$pid"; wait "$pid" 2>/dev/null; }
    rm -rf "$tmp/data"
    start_craterd "$tmp/data" --config "$1" --hardware "$src/examples/hardware/a2-a100.yaml" || exit 1
    echo "{\"role\":\"agent\",\"node\":\"$node\"}" >"$tmp/t"
    api POST /api/v1/tokens "$admin" "$tmp/t"; agent=$(field .token)
    "${CRATER_BIN:?}" validate -o json "$src/examples/hardware/a2-a100.yaml" 2>/dev/null \
        | jq --argjson p "$(sed -n "s/^#define CRATER_AGENT_PROTOCOL \\([0-9]*\\).*/\\1/p" "$src/src/daemon/buildinfo.h")" '{version: "0.1.0", protocol: $p, node: ., tasks: []}' >"$tmp/r"
    api POST "/api/v1/agents/$node/register" "$agent" "$tmp/r"
    [ "$code" = 200 ] || { bad "register: $code"; exit 1; }
    heartbeat
}
node=gpu-a100-0
gpu0=GPU-5f1c2a7e-3b9d-4c21-8e0a-6d4b7f9a1c02
whole="resources: {gpu: {count: 2}, cpu: 1, memory: 1Gi}"
printf 'scheduler:\n  preemptionMinRuntime: 0s\n' >"$tmp/pre.yaml"

# ---- 1. a victim force-released while it stops frees its preemptor ------------
up "$tmp/pre.yaml"
submit low "priority: -50" "preemptible: true" "$whole"; low=$id
wait_state "$low" bound && ok || bad "low bound"
event "$low" 1 0 started
submit high "priorityClass: high" "$whole"; high=$id
wait_state "$low" preempting && ok || bad "low preempting for high"
printf '{"uuid":"%s","reason":"test"}' "$gpu0" >"$tmp/f"
api POST /api/v1/resources/force-release "$admin" "$tmp/f"
[ "$code" = 200 ] && jq -e ".requeued == [\"$low\"]" "$tmp/body" >/dev/null && ok || bad "force-release requeues low"
wait_state "$high" bound 'true' 5 && ok || bad "high bound once its victim was requeued (it waited for it forever)"
state_is "$low" pending '.attempts == 2' && ok || bad "low pending, its second attempt"

# ---- 2. a job being cancelled whose node goes silent is cancelled ------------
printf 'agent:\n  heartbeatInterval: 500ms\n  heartbeatTimeout: 2s\n  migrationPolicy: immediate\n' >"$tmp/hb.yaml"
up "$tmp/hb.yaml"
submit stubborn "resources: {gpu: {count: 1}, cpu: 1, memory: 1Gi}"; sj=$id
wait_state "$sj" bound && ok || bad "stubborn bound"
event "$sj" 1 0 started
api POST "/api/v1/jobs/$sj/cancel" "$admin"
state_is "$sj" running '.history[-1].reason == "cancel requested; stopping"' && ok || bad "cancel requested, still running"
[ "$(stops "$sj")" = "[0]" ] && ok || bad "a stop order for the cancelled job: $(stops "$sj")"
# no more heartbeats: the node goes NotReady after 2 s
wait_state "$sj" cancelled 'true' 10 && ok || bad "cancelled when its node was lost (it was requeued)"
state_is "$sj" cancelled '.attempts == 1 and ([.history[].state] | index("pending") == 0 and (map(select(. == "pending")) | length) == 1)' \
    && ok || bad "never requeued"

# ---- 3. late and repeated agent reports change nothing -------------------------
up "$tmp/pre.yaml"
submit late "resources: {gpu: {count: 1}, cpu: 1, memory: 1Gi}"; lj=$id
wait_state "$lj" bound && ok || bad "late bound"
event "$lj" 1 0 started
api POST "/api/v1/jobs/$lj/cancel" "$admin"
event "$lj" 1 0 exited 0 15
state_is "$lj" cancelled && ok || bad "cancelled on its exit"
n=$(jq '.history | length' "$tmp/body")
event "$lj" 1 0 started
event "$lj" 1 0 exited 1 0
state_is "$lj" cancelled ".history | length == $n" && ok || bad "a late start and a second exit change nothing"
api GET "/api/v1/agents/$node/work?after=0&wait_ms=0" "$agent"
jq -e "[.items[] | select(.op == \"stop\" and .job == \"$lj\" and .reason == \"not placed here\")] | length == 1" "$tmp/body" >/dev/null \
    && ok || bad "the late start gets a stop order"

# ---- 4. a gang is preempted, and requeued, as a unit ---------------------------
up "$tmp/pre.yaml"
submit gang "priority: -50" "preemptible: true" "replicas: 2" "gang: true" \
    "resources: {gpu: {count: 1}, cpu: 1, memory: 1Gi}"; g=$id
wait_state "$g" bound && ok || bad "gang bound"
event "$g" 1 0 started; event "$g" 1 1 started
state_is "$g" running && ok || bad "gang running"
submit one "priorityClass: high" "resources: {gpu: {count: 1}, cpu: 1, memory: 1Gi}"; one=$id
wait_state "$g" preempting && ok || bad "gang preempting for one"
[ "$(stops "$g")" = "[0,1]" ] && ok || bad "stop orders for both replicas: $(stops "$g")"
event "$g" 1 0 exited 0 15
state_is "$g" preempting '.replicas[0].state == "preempted" and .replicas[1].state == "running"' \
    && ok || bad "the gang holds its GPUs until its last replica is gone"
state_is "$one" pending && ok || bad "one still waits"
event "$g" 1 1 exited 0 15
state_is "$g" pending '.attempts == 2' && ok || bad "the gang is requeued once its replicas are gone"
wait_state "$one" bound && ok || bad "one bound"
event "$g" 1 1 exited 0 15
state_is "$g" pending '.attempts == 2 and ([.history[] | select(.reason | startswith("requeued after preemption"))] | length == 1)' \
    && ok || bad "requeued once"
n=$(grep -c "\"decision\":\"preempting\",\"job\":$one" "$tmp/data/decisions.log")
[ "$n" = 1 ] && ok || bad "one preemption decision for one, $n"

# ---- 5. a gang fails as a unit -------------------------------------------------
up "$tmp/pre.yaml"
submit gf "replicas: 2" "gang: true" "resources: {gpu: {count: 1}, cpu: 1, memory: 1Gi}"; gf=$id
wait_state "$gf" bound && ok || bad "gang bound"
event "$gf" 1 0 started; event "$gf" 1 1 started
event "$gf" 1 1 exited 3 0
state_is "$gf" failed '.replicas[1].state == "failed" and .replicas[0].state == "cancelled" and (.history[-1].reason | test("replica 1 on gpu-a100-0: exit code 3"))' \
    && ok || bad "the gang fails with its replica"
[ "$(stops "$gf")" = "[0]" ] && ok || bad "its sibling gets a stop order: $(stops "$gf")"
event "$gf" 1 0 exited 0 15
state_is "$gf" failed '.replicas[0].state == "cancelled"' && ok || bad "the sibling's exit changes nothing"
api GET "/api/v1/nodes/$node" "$admin"
jq -e '.allocated.gpus == 0' "$tmp/body" >/dev/null && ok || bad "its GPUs are free"

echo "test_job_lifecycle: $pass passed, $fail failed"
[ "$fail" = 0 ]
