#!/usr/bin/env bash
# test_typical.sh - craterd's default policy is Crater's with the typical
# tasks learned from the submissions (issue 13, doc/scheduling.md "Typical
# tasks"): GET /api/v1/scheduler shows the policy "crater" with the prior
# (1, 2, 4, 8 whole GPUs) before scheduler.typicalMinSamples submissions,
# then the learned histogram of exactly what was submitted (a GPU share
# and a CPU-only shape, weighted by count, once per array element); a
# restart rebuilds the same histogram from the stored jobs; typicalTasks
# off installs nothing and another policy stays selectable. No node is
# registered: the jobs stay pending, admitted as on a cluster coming up.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check NAME JQ_FILTER: on GET /api/v1/scheduler
    api GET /api/v1/scheduler "$admin"
    [ "$code" = 200 ] && jq -e "$2" "$tmp/body" >/dev/null && ok \
        || bad "$1: $code $(jq -c . "$tmp/body" 2>/dev/null || cat "$tmp/body")"
}
submit() { # submit FILE
    api POST /api/v1/jobs "$admin" "$1"
    [ "$code" = 201 ] && ok || bad "submit $1: $code $(head -c 300 "$tmp/body")"
}
config() { # config FILE KEY: VALUE...
    local f=$1; shift
    printf 'apiVersion: crater/v1\nkind: Config\nscheduler:\n' >"$f"
    for kv in "$@"; do printf '  %s\n' "$kv" >>"$f"; done
}

config "$tmp/learn.yaml" "typicalMinSamples: 4" "typicalHalfLife: 1000000"
"$bin" validate "$tmp/learn.yaml" >/dev/null && ok || bad "config validates"
start_craterd "$tmp/data" --config "$tmp/learn.yaml" || exit 1

check "prior at start" '.policy == "crater" and .typicalTasks == "learned"
    and .typical.source == "prior" and .typical.seen == 0
    and ([.typical.shapes[].gpus] == [1, 2, 4, 8])
    and all(.typical.shapes[]; .slice == 0 and .weight == 0.25)'

printf 'name: share\ncommand: ["true"]\nresources: {cpu: 2, memory: 1Gi, gpu: {count: 1, memory: 20Gi}}\n' >"$tmp/share.yaml"
printf 'name: cpu\ncommand: ["true"]\narray: "0-2"\nresources: {cpu: 500m, memory: 1Mi}\n' >"$tmp/cpu.yaml"
submit "$tmp/share.yaml"
check "still the prior after one" '.typical.source == "prior" and .typical.seen == 1'
submit "$tmp/cpu.yaml"
# four submissions (one job, three array elements): 3/4 CPU-only, 1/4 share
check "learned after minSamples" '.typical.source == "learned"
    and .typical.seen == 4 and (.typical.shapes | length) == 2
    and (.typical.shapes[0] | .gpus == 0 and .cpuMilli == 500
         and (.weight - 0.75 | fabs) < 0.001)
    and (.typical.shapes[1] | .gpus == 1 and .slice == 20480
         and .cpuMilli == 2000 and (.weight - 0.25 | fabs) < 0.001)'
before=$(jq -c .typical.shapes "$tmp/body")

stop_craterd && ok || bad "clean stop"
start_craterd "$tmp/data" --config "$tmp/learn.yaml" || exit 1
check "rebuilt at restart" ".typical.source == \"learned\" and .typical.seen == 4
    and (.typical.shapes | tojson) == $(jq -Rn --arg s "$before" '$s')"
stop_craterd && ok || bad "clean stop"

config "$tmp/off.yaml" "typicalTasks: off"
start_craterd "$tmp/data" --config "$tmp/off.yaml" || exit 1
check "typicalTasks off" '.policy == "crater" and .typicalTasks == "off" and .typical == null'
stop_craterd && ok || bad "clean stop"

config "$tmp/fgd.yaml" "policy: fgd"
start_craterd "$tmp/data" --config "$tmp/fgd.yaml" || exit 1
check "another policy" '.policy == "fgd" and .typical.source == "prior"
    and .typical.seen == 4'
stop_craterd && ok || bad "clean stop"
grep -q Sanitizer "$tmp"/craterd.*.out && { bad "sanitizer report"; cat "$tmp"/craterd.*.out; } || ok

echo "test_typical: $pass passed, $fail failed"
[ "$fail" = 0 ]
