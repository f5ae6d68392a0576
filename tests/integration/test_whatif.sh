#!/usr/bin/env bash
# test_whatif.sh - `crater sim whatif` against a live craterd on loopback
# with a hand-written agent: one node with two A100 80GB, two running 50Gi
# slices (one per GPU, one with a timeLimit) and a CPU job, and one pending
# 50Gi slice that fits nowhere under the current configuration
# (overcommitRatio 1). The proposed configuration allows overcommit
# (overcommitRatio 2): the pending slice must be placed now there and not
# under the current one. Also: the table's rows, -o json's structure, the
# assumption stated for jobs without timeLimit, and that the node
# hardware needs an admin.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
field() { jq -r "$1" "$tmp/body"; }
submit() { # submit NAME [YAML lines...] -> $id
    local name=$1; shift
    { echo "name: $name"; echo "command: [sleep, '100']"; for l in "$@"; do echo "$l"; done; } >"$tmp/j"
    api POST /api/v1/jobs "$admin" "$tmp/j"; id=$(field .id)
}
state_is() { api GET "/api/v1/jobs/$1" "$admin"; [ "$(field .state)" = "$2" ]; }
node=gpu-a100-0

printf 'scheduler:\n  gpuContextOverhead: 0\n' >"$tmp/current.yaml"
printf 'scheduler:\n  gpuContextOverhead: 0\n  overcommitRatio: 2\n' >"$tmp/proposed.yaml"
start_craterd "$tmp/data" --config "$tmp/current.yaml" \
    --hardware "$src/examples/hardware/a2-a100.yaml" || exit 1
echo "{\"role\":\"agent\",\"node\":\"$node\"}" >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; agent=$(field .token)
"$bin" validate -o json "$src/examples/hardware/a2-a100.yaml" 2>/dev/null \
    | jq --argjson p "$(sed -n "s/^#define CRATER_AGENT_PROTOCOL \\([0-9]*\\).*/\\1/p" "$src/src/daemon/buildinfo.h")" \
        '{version: "0.1.0", protocol: $p, node: ., tasks: []}' >"$tmp/r"
api POST "/api/v1/agents/$node/register" "$agent" "$tmp/r"
[ "$code" = 200 ] && ok || bad "register: $code"

slice="resources: {gpu: {count: 1, memory: 50Gi}, cpu: 1, memory: 1Gi}"
submit r1 "$slice" "timeLimit: 2h"; r1=$id
until_ 5 'state_is $r1 bound' && ok || bad "r1 bound"
submit r2 "$slice"; r2=$id
until_ 5 'state_is $r2 bound' && ok || bad "r2 bound"
for j in "$r1" "$r2"; do
    printf '{"events":[{"job":"%s","attempt":1,"event":"started","pid":1}]}' "$j" >"$tmp/e"
    api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"
done
until_ 5 'state_is $r2 running' && ok || bad "r2 running"
submit p1 "$slice" "timeLimit: 30m"; p1=$id
until_ 5 'api GET "/api/v1/jobs/$p1" "$admin"; [ "$(field .state)" = pending ] && [ "$(field .reason)" != null ]' \
    && ok || bad "p1 pending with a reason"
submit c1 "resources: {cpu: 1, memory: 1Gi}" "priorityClass: high"; c1=$id
until_ 5 'state_is $c1 bound' && ok || bad "c1 bound"

# the hardware of the nodes is an admin's
echo "{\"role\":\"user\",\"tenant\":\"t1\"}" >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; user=$(field .token)
api GET "/api/v1/nodes?hardware=1" "$user"
[ "$code" = 403 ] && ok || bad "hardware=1 as a user: $code"
api GET "/api/v1/nodes?hardware=1" "$admin"
[ "$code" = 200 ] && [ "$(field '.items[0].hardware.kind')" = Node ] && ok || bad "hardware=1: $code"
api GET "/api/v1/nodes?hardware=x" "$admin"
[ "$code" = 400 ] && [ "$(field .field)" = hardware ] && ok || bad "hardware=x: $code"
api GET "/api/v1/jobs/$r1" "$admin"
[ "$(field '.placement.numa_charges[0].cpu_millis')" = 1000 ] && ok || bad "numa_charges"

export CRATER_SERVER=$url CRATER_TOKEN=$admin
"$bin" sim whatif --current "$tmp/current.yaml" --config "$tmp/proposed.yaml" \
    --horizon 4h -o json >"$tmp/w.json" 2>"$tmp/w.err" || { bad "whatif -o json"; cat "$tmp/w.err"; }
jq -e '.snapshot == {nodes: 1, running: 3, pending: 1, skipped: 0, assumed: 2}
       and .horizon_s == 14400 and .assumed_runtime_s == 3600' "$tmp/w.json" >/dev/null \
    && ok || { bad "snapshot"; cat "$tmp/w.json"; }
for side in current proposed; do
    jq -e ".$side | has(\"policy\") and has(\"placed_now\") and has(\"placed\")
        and has(\"gpu_alloc_now\") and has(\"cpu_allocated_now\")
        and has(\"fragmentation_now\") and has(\"gpu_alloc_mean\")
        and has(\"preemptions\") and (.waits | has(\"high\") and has(\"normal\"))" \
        "$tmp/w.json" >/dev/null && ok || bad "$side: fields"
done
# behaviour: overcommit places the pending slice now; without it it waits
# for a running slice to end (r1's timeLimit, 2 h from its start)
jq -e '.current.placed_now == 0 and .proposed.placed_now == 1
       and .current.placed == 1 and .proposed.placed == 1
       and .current.waits.normal.wait_mean_s > 3000
       and .proposed.waits.normal.wait_mean_s == 0
       and .proposed.gpu_alloc_now > .current.gpu_alloc_now
       and .current.fragmentation_now > 0 and .current.preemptions == 0' \
    "$tmp/w.json" >/dev/null && ok || { bad "overcommit difference"; cat "$tmp/w.json"; }

"$bin" sim whatif --current "$tmp/current.yaml" --config "$tmp/proposed.yaml" \
    >"$tmp/w.txt" 2>&1 || bad "whatif text"
for row in "current  *proposed" "pending placed now  *0/1  *1/1" \
    "placed within horizon" "wait normal mean" "GPUs held now" \
    "CPU allocated now" "fragmentation now" "preemptions" \
    "2 without timeLimit assumed to run 1.0 h"; do
    grep -q "$row" "$tmp/w.txt" && ok || { bad "text: $row"; cat "$tmp/w.txt"; }
done
"$bin" sim whatif --token "$user" >"$tmp/u.txt" 2>&1
[ $? = 1 ] && grep -qi "admin" "$tmp/u.txt" && ok || { bad "whatif as a user"; cat "$tmp/u.txt"; }
"$bin" sim whatif --horizon nope >"$tmp/h.txt" 2>&1
[ $? = 2 ] && grep -q -- "--horizon" "$tmp/h.txt" && ok || { bad "bad --horizon"; cat "$tmp/h.txt"; }

stop_craterd && ok || bad "craterd exit"
pid=""
echo "test_whatif: $pass passed, $fail failed"
[ "$fail" = 0 ]
