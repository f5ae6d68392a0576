#!/usr/bin/env bash
# test_differential.sh - craterd and the simulator run the same scheduling
# pass (issue 13, doc/queue.md "One scheduling cycle"): one job list goes
# through a real craterd over loopback (nodes registered in the order of
# a hardware file by a hand-written agent; the jobs are bound, never
# started, so no clock or task can make the two differ) and through
# `crater sim replay --joblist --hardware --placements` (every job
# submitted at 0 s, running for an hour). The jobs placed at time 0 by the
# simulator must be exactly the jobs craterd bound, each on the same node
# and the same GPUs; the rest wait in both. Several seeds of a mixed
# workload: whole GPUs, multi-GPU jobs, slices, CPU-only jobs, tolerations
# for the tainted inference nodes, two priorities, more demand than the
# cluster has.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"
hw=$src/examples/hardware/cluster.yaml
proto=$(sed -n 's/^#define CRATER_AGENT_PROTOCOL \([0-9]*\).*/\1/p' "$src/src/daemon/buildinfo.h")

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
field() { jq -r "$1" "$tmp/body"; }

shapes=(
    "{gpu: 1, cpu: 8, memory: 32Gi}"
    "{gpu: 2, cpu: 16, memory: 64Gi}"
    "{gpu: 4, cpu: 32, memory: 128Gi}"
    "{gpu: 8, cpu: 64, memory: 256Gi}"
    "{gpu: {count: 1, memory: 20Gi}, cpu: 4, memory: 16Gi}"
    "{gpu: {count: 1, memory: 40Gi}, cpu: 8, memory: 32Gi}"
    "{cpu: 16, memory: 64Gi}"
    "{cpu: 48, memory: 200Gi}"
)
tol="tolerations: [{key: dedicated, value: inference, effect: NoSchedule}]"

# jobs SEED N: the job list ($tmp/jl.yaml) and the same specs as one
# multi-document submission ($tmp/jobs.yaml), in the same order
jobs() {
    local seed=$1 n=$2 i r shape prio extra
    RANDOM=$seed
    echo "kind: JobList" >"$tmp/jl.yaml"
    echo "jobs:" >>"$tmp/jl.yaml"
    : >"$tmp/jobs.yaml"
    for i in $(seq 0 $((n - 1))); do
        r=$RANDOM
        shape=${shapes[$((r % ${#shapes[@]}))]}
        prio=$(( (r / 8) % 4 == 0 ? 500 : 0 ))
        extra=$([ $(( (r / 32) % 5 )) = 0 ] && echo ", $tol" || true)
        spec="{name: d-$i, command: [sleep, '600'], priority: $prio, resources: $shape$extra}"
        printf '  - submit: 0s\n    duration: 1h\n    spec: %s\n' "$spec" >>"$tmp/jl.yaml"
        echo "--- $spec" >>"$tmp/jobs.yaml"
    done
}

# register every node of the hardware file, in its order
register() {
    local names name
    names=$("$bin" validate -o json "$hw" 2>/dev/null | jq -r '.nodes[].name')
    for name in $names; do
        echo "{\"role\":\"agent\",\"node\":\"$name\"}" >"$tmp/t"
        api POST /api/v1/tokens "$admin" "$tmp/t"
        local token; token=$(field .token)
        "$bin" validate -o json "$hw" 2>/dev/null \
            | jq --arg n "$name" --argjson p "$proto" \
                '{version: "0.1.0", protocol: $p, node: (.nodes[] | select(.name == $n)), tasks: []}' >"$tmp/r"
        api POST "/api/v1/agents/$name/register" "$token" "$tmp/r"
        [ "$code" = 200 ] || { bad "register $name: $code $(cat "$tmp/body")"; return 1; }
    done
}

# craterd's placements: "<index> <node> <gpus>" of the bound jobs, sorted
craterd_placements() {
    api GET "/api/v1/jobs?limit=1000" "$admin"
    jq -r '.items[] | select(.state == "bound")
           | "\(.name | ltrimstr("d-")) \(.placement.node) \([.placement.gpus[].index] | join(","))"' \
        "$tmp/body" | sort -n
}

sim_placements() {
    "$bin" sim replay --joblist "$tmp/jl.yaml" --hardware "$hw" --policy crater --learn-typical \
        --placements "$tmp/pl.jsonl" >/dev/null || { bad "sim replay failed"; return 1; }
    jq -r 'select(.t_ms == 0) | "\(.job) \(.node) \(.gpus | join(","))"' "$tmp/pl.jsonl" | sort -n
}

for seed in 1 2 3 4 5; do
    rm -rf "$tmp/data"
    start_craterd "$tmp/data" --hardware "$hw" || exit 1
    register || exit 1
    jobs "$seed" 40
    api POST /api/v1/jobs "$admin" "$tmp/jobs.yaml"
    [ "$code" = 201 ] && ok || { bad "seed $seed: submit: $code $(head -c 300 "$tmp/body")"; continue; }
    # settled: every job bound or pending with a reason, twice in a row
    prev=""
    until_ 30 'api GET "/api/v1/jobs?limit=1000" "$admin";
        cur=$(jq -c "[.items[] | select(.state == \"bound\") | .id]" "$tmp/body");
        all=$(jq "[.items[] | select(.state == \"bound\" or (.state == \"pending\" and .reason != null))] | length" "$tmp/body");
        [ "$all" = 40 ] && [ "$cur" = "$prev" ] && true || { prev=$cur; false; }' \
        && ok || bad "seed $seed: craterd did not settle"
    craterd_placements >"$tmp/craterd.txt"
    sim_placements >"$tmp/sim.txt"
    nb=$(wc -l <"$tmp/craterd.txt")
    if [ "$nb" -gt 0 ] && [ "$nb" -lt 40 ] && cmp -s "$tmp/craterd.txt" "$tmp/sim.txt"; then
        ok
        echo "seed $seed: $nb of 40 jobs placed, the same in craterd and the simulator"
    else
        bad "seed $seed: craterd ($nb bound) and the simulator differ (index node gpus):"
        diff "$tmp/craterd.txt" "$tmp/sim.txt" | head -20
    fi
    stop_craterd || bad "craterd did not stop cleanly"
    pid=""
done

echo "test_differential: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
