#!/usr/bin/env bash
# test_up.sh - `crater up` as a new user runs it, with real tasks: a job
# that prints (its log comes back), one that sleeps (seen running), one
# that exceeds its memory limit (OOM-killed and reported), one that ignores
# SIGTERM (SIGKILLed after its grace period), preemption of a low-priority
# job by a high one (victim stopped and requeued, the new job runs), the
# cgroup files of a running task, GPU UUIDs in CUDA_VISIBLE_DEVICES, jobs
# landing on the node the scheduler picks among several agents, and a clean
# Ctrl-C. Tasks run on this machine; cgroup checks skip where cgroups are
# not writable.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
trap '[ -n "$up" ] && kill -9 $up 2>/dev/null; rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }
job() { c get job "$1" -o json 2>/dev/null; }
wait_for() { # wait_for SECONDS JOB JQ_FILTER
    local t=$(( $1 * 10 )) i
    for i in $(seq 1 "$t"); do
        job "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for job $2: $3"; job "$2" | jq -c '{state, exit, history: [.history[] | .state + ": " + .reason]}'
    return 1
}
submit() { # submit YAML_TEXT -> prints the job id
    printf '%s\n' "$1" >"$tmp/j.yaml"
    c submit -f "$tmp/j.yaml" -o json | jq -r .id
}

# unique sleep lengths: other test runs on this machine do not confuse pgrep
s30=30.$RANDOM s60=60.$RANDOM
cd "$tmp"
# the preemption below comes seconds after the victim starts
printf 'scheduler:\n  preemptionMinRuntime: 0s\n' >"$tmp/up.yaml"
"$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/up.yaml" \
    --hardware "$src/tests/data/hw-small.yaml" >"$tmp/up.out" 2>&1 &
up=$!
for i in $(seq 1 100); do
    url=$(sed -n 's/.*API on \(http:[^,]*\),.*/\1/p' "$tmp/up.out")
    [ -n "$url" ] && break; sleep 0.1
done
[ -n "$url" ] || { echo "crater up did not start:"; cat "$tmp/up.out"; exit 1; }
token=$(cat "$tmp/var/admin.token")
grep -q "3 agents" "$tmp/up.out" && ok || bad "banner names 3 agents"
for i in $(seq 1 50); do
    [ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ] && break
    sleep 0.1
done
[ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ] && ok || bad "3 nodes ready"

# ---- print: the log comes back ----------------------------------------------------
id=$(submit 'name: hello
command: [echo, hello from a task]
resources: {cpu: 1, memory: 64Mi}')
wait_for 20 "$id" '.state == "succeeded" and .exit.code == 0' && ok || bad "print job succeeded"
for i in $(seq 1 30); do c logs "$id" 2>/dev/null | has 'hello from a task' && break; sleep 0.1; done
c logs "$id" | has 'hello from a task' && ok || bad "print job log"

# ---- GPU job: CUDA_VISIBLE_DEVICES by UUID, lands on a GPU node ---------------------
id=$(submit 'name: gpu
command: [sh, -c, "echo devices=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER"]
resources: {gpu: {count: 1}, cpu: 1, memory: 64Mi}')
wait_for 20 "$id" '.state == "succeeded"' && ok || bad "gpu job succeeded"
node=$(job "$id" | jq -r .placement.node)
case $node in small-*) ok ;; *) bad "gpu job on $node, not a GPU node" ;; esac
uuid=$(job "$id" | jq -r '.placement.gpus[0].uuid')
for i in $(seq 1 30); do c logs "$id" 2>/dev/null | has devices= && break; sleep 0.1; done
c logs "$id" | has "devices=$uuid order=PCI_BUS_ID" && ok || { bad "CUDA_VISIBLE_DEVICES=$uuid"; c logs "$id"; }

# ---- node selector: jobs land where the scheduler says ----------------------------------
id=$(submit 'name: edge-only
command: ["true"]
nodeSelector: {zone: b}
resources: {cpu: 1, memory: 64Mi}')
wait_for 20 "$id" '.state == "succeeded" and .placement.node == "edge"' && ok || bad "selector placed on edge"

# ---- the placement is the one the scheduler core gives in a dry run ----------------------
printf 'name: dry\ncommand: ["true"]\nresources: {gpu: {count: 1, memory: 20Gi}, cpu: 1, memory: 64Mi}\n' >"$tmp/d.yaml"
want=$(curl -s -H "Authorization: Bearer $token" --data-binary @"$tmp/d.yaml" "$url/api/v1/schedule" \
    | jq -r '.placement.node + "/" + (.placement.gpus[0].index | tostring)')
id=$(c submit -f "$tmp/d.yaml" -o json | jq -r .id)
wait_for 20 "$id" '.state == "succeeded"' && ok || bad "dry-run job ran"
got=$(job "$id" | jq -r '.placement.node + "/" + (.placement.gpus[0].index | tostring)')
[ -n "$want" ] && [ "$want" = "$got" ] && ok || bad "placed on $got, dry run said $want"

# ---- sleep: seen running; cgroup limits ---------------------------------------------------
id=$(submit 'name: sleeper
command: [sleep, "'"$s30"'"]
resources: {cpu: 1500m, memory: 96Mi}')
wait_for 20 "$id" '.state == "running"' && ok || bad "sleeper running"
# the task's own cgroup: the one holding its pid (another cluster on this
# machine may have a job with the same id)
cg="" tpid=""
until_pid() { for _ in $(seq 1 50); do tpid=$(pgrep -f "^sleep $s30" | head -1); [ -n "$tpid" ] && return; sleep 0.1; done; }
until_pid
for d in /sys/fs/cgroup/cpu/crater /sys/fs/cgroup/crater; do
    for g in "$d"/job-"$id"-1-*; do
        [ -d "$g" ] && [ -n "$tpid" ] && grep -qx "$tpid" "$g/cgroup.procs" 2>/dev/null && cg=$g
    done
    [ -n "$cg" ] && break
done
if [ -z "$cg" ]; then
    echo "SKIP: no task cgroup (cgroups not writable here)"
elif [ -f "$cg/cpu.cfs_quota_us" ]; then
    [ "$(cat "$cg/cpu.cfs_quota_us")" = 150000 ] && ok || bad "cpu quota $(cat "$cg/cpu.cfs_quota_us")"
    [ "$(cat "/sys/fs/cgroup/memory/crater/${cg##*/}/memory.limit_in_bytes")" = $((96 * 1048576)) ] && ok || bad "memory limit"
    grep -qx "$tpid" "$cg/cgroup.procs" && ok || bad "task in its cgroup"
else
    [ "$(cut -d' ' -f1 "$cg/cpu.max")" = 150000 ] && ok || bad "cpu.max $(cat "$cg/cpu.max")"
    [ "$(cat "$cg/memory.max")" = $((96 * 1048576)) ] && ok || bad "memory.max"
fi
c cancel "$id" >/dev/null
wait_for 20 "$id" '.state == "cancelled"' && ok || bad "sleeper cancelled"

# ---- memory hog: OOM-killed and reported ------------------------------------------------
if [ -n "$cg" ]; then
    id=$(submit 'name: hog
command: [sh, -c, "head -c 400000000 /dev/zero | tail -n 1 >/dev/null"]
resources: {cpu: 1, memory: 64Mi}')
    wait_for 60 "$id" '.state == "failed" and .exit.oom' && ok || bad "hog OOM-killed"
    job "$id" | jq -e '[.history[].reason] | any(test("OOM"))' >/dev/null && ok || bad "OOM in history"
fi

# ---- SIGTERM ignored: SIGKILL after the grace period --------------------------------------
id=$(submit 'name: stubborn
command: [sh, -c, "trap \"\" TERM; echo ready; sleep '"$s60"'"]
gracePeriod: 2s
resources: {cpu: 1, memory: 64Mi}')
wait_for 20 "$id" '.state == "running"' && ok || bad "stubborn running"
t0=$(date +%s%N)
c cancel "$id" >/dev/null
wait_for 30 "$id" '.state == "cancelled" and .exit.signal == 9' && ok || bad "stubborn SIGKILLed"
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
echo "stubborn task killed ${ms} ms after cancel (grace 2000 ms)"
[ "$ms" -ge 1900 ] && ok || bad "killed before the grace period ended (${ms} ms)"
pgrep -f "sleep $s60" >/dev/null && bad "stubborn task still running" || ok

# ---- preemption: a high-priority job displaces a preemptible one -------------------------
low=$(submit 'name: low
command: [sh, -c, "echo attempt $CRATER_ATTEMPT; exec sleep '"$s60"'"]
priority: -10
preemptible: true
nodeSelector: {zone: b}
resources: {cpu: 2, memory: 64Mi}')
wait_for 20 "$low" '.state == "running"' && ok || bad "low running"
high=$(submit 'name: high
command: [sh, -c, "echo high ran"]
priorityClass: high
nodeSelector: {zone: b}
resources: {cpu: 2, memory: 64Mi}')
wait_for 40 "$high" '.state == "succeeded"' && ok || bad "high ran"
job "$low" | jq -e '([.history[].state] | index("preempting") != null) and ([.history[].state] | index("preempted") != null)' >/dev/null && ok || bad "low preempted"
wait_for 30 "$low" '.state == "running" and .attempts == 2' && ok || bad "low requeued and running again"
# each attempt has its own log
for i in $(seq 1 50); do [ "$(c logs "$low" 2>/dev/null)" = "attempt 2" ] && break; sleep 0.1; done
[ "$(c logs "$low")" = "attempt 2" ] && ok || bad "latest attempt's log: '$(c logs "$low")'"
[ "$(c logs "$low" --attempt 1)" = "attempt 1" ] && ok || bad "attempt 1's log kept apart: '$(c logs "$low" --attempt 1)'"
c logs "$low" --attempt 3 >/dev/null 2>&1 && bad "--attempt 3 of a job with 2 attempts" || ok
c cancel "$low" >/dev/null

# ---- Ctrl-C stops everything -------------------------------------------------------------
kill -INT "$up"
for i in $(seq 1 100); do kill -0 "$up" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$up" 2>/dev/null; then bad "crater up still running 10 s after Ctrl-C"; else
    wait "$up"; rc=$?; up=""
    [ "$rc" = 0 ] && ok || { bad "crater up exit $rc"; tail -n 40 "$tmp/up.out"; }
fi
grep -q 'Sanitizer' "$tmp/up.out" && { bad "sanitizer report"; cat "$tmp/up.out"; } || ok
pgrep -f "sleep $s60" >/dev/null && bad "tasks left running" || ok

echo "test_up: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
