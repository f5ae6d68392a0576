#!/usr/bin/env bash
# test_gangs.sh - multi-replica jobs in craterd (doc/jobspec.md "replicas",
# doc/scheduling.md "Gangs"): `crater up` with tests/data/hw-small.yaml
# (two nodes with one GPU each and a GPU-less edge node, each with its own
# agent and data directory) runs a gang of two one-GPU replicas, which
# must land on both small nodes; each replica prints its torchrun
# environment (MASTER_ADDR 127.0.0.1 for nodes on one host, one
# MASTER_PORT, WORLD_SIZE 2, RANK/NODE_RANK/CRATER_REPLICA 0 and 1,
# LOCAL_RANK 0); the API, `crater get jobs` and `crater describe job`
# show each replica's node, state and exit code. A replica that exits 3
# fails the gang and its sibling is stopped (no process left); a gang
# that could never fit at once is refused at submission. With
# python3-torch, a real two-process torch.distributed (gloo) all-reduce
# runs across the two nodes (skipped with a message without torch).
# Waits are for states, with deadlines.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
mark=gang$RANDOM$RANDOM # in every task's argv: pgrep counts only ours
cleanup() {
    [ -n "$up" ] && kill -INT "$up" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$up" 2>/dev/null || break; sleep 0.1; done
    [ -n "$up" ] && kill -9 "$up" 2>/dev/null
    pkill -9 -f "$mark" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }
job() { c get job "$1" -o json 2>/dev/null; }
wait_for() { # wait_for SECONDS JOB JQ_FILTER
    local t=$(($1 * 10)) i
    for i in $(seq 1 "$t"); do
        job "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for job $2: $3"
    job "$2" | jq -c '{state, replicas, history: [.history[] | .state + ": " + .reason]}'
    return 1
}
mem=64Mi
submit() { # submit NAME REPLICAS SHELL_SCRIPT -> job id (memory: $mem each)
    printf 'name: %s\nreplicas: %s\ngang: true\ncommand: [sh, -c, %s, %s]\nresources: {cpu: 100m, memory: %s, gpu: {count: 1}}\n' \
        "$1" "$2" "$(jq -Rn --arg s "$3" '$s')" "$mark" "$mem" >"$tmp/j.yaml"
    c submit -f "$tmp/j.yaml" -o json | jq -r .id
}
logs() { # logs JOB REPLICA
    c logs "$1" --replica "$2" 2>/dev/null
}

# MASTER_PORT from a range of this run's own: with the default 29500, two
# runs of this test at once (two CI runs on one machine) gave their
# all-reduce gangs the same port on the same loopback and one hung
cat >"$tmp/config.yaml" <<YAML
apiVersion: crater/v1
kind: Config
server:
  gangPortBase: $((10000 + RANDOM % 220 * 100)) # below the ephemeral ports (32768-)
  gangPorts: 100
YAML

"$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/config.yaml" \
    --hardware "$src/tests/data/hw-small.yaml" >"$tmp/up.out" 2>&1 &
up=$!
url=""
for _ in $(seq 1 300); do
    url=$(sed -n 's/.*API on \(http:[^,]*\),.*/\1/p' "$tmp/up.out")
    [ -n "$url" ] && break
    kill -0 "$up" 2>/dev/null || break
    sleep 0.1
done
[ -n "$url" ] || { echo "crater up did not start:"; cat "$tmp/up.out"; exit 1; }
token=$(cat "$tmp/var/admin.token")
for _ in $(seq 1 300); do
    [ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ] && break
    sleep 0.1
done
cd "$tmp"

# ---- a gang of two prints its environment ------------------------------------
envs='env | grep -E "^(MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK|LOCAL_WORLD_SIZE|NODE_RANK|CRATER_REPLICA)=" | sort'
id=$(submit envs 2 "$envs")
wait_for 30 "$id" '.state == "succeeded" and .logs_complete' && ok || bad "gang of two succeeded"
job "$id" | jq -e '(.replicas | length) == 2 and ([.replicas[].state] == ["succeeded", "succeeded"])
    and ([.replicas[].exit.code] == [0, 0]) and ([.replicas[].node] | sort == ["small-0", "small-1"])' \
    >/dev/null && ok || bad "replicas on both small nodes, succeeded: $(job "$id" | jq -c .replicas)"
r0=$(logs "$id" 0) r1=$(logs "$id" 1)
for r in 0 1; do
    out=$([ $r = 0 ] && echo "$r0" || echo "$r1")
    echo "$out" | has -x "MASTER_ADDR=127.0.0.1" && echo "$out" | has -x "WORLD_SIZE=2" \
        && echo "$out" | has -x "RANK=$r" && echo "$out" | has -x "NODE_RANK=$r" \
        && echo "$out" | has -x "LOCAL_RANK=0" && echo "$out" | has -x "LOCAL_WORLD_SIZE=1" \
        && echo "$out" | has -x "CRATER_REPLICA=$r" && echo "$out" | has -x "MASTER_PORT=[0-9]*" \
        && ok || bad "replica $r environment: $out"
done
[ "$(echo "$r0" | grep ^MASTER_PORT=)" = "$(echo "$r1" | grep ^MASTER_PORT=)" ] \
    && ok || bad "one MASTER_PORT for the gang"
c get jobs | grep -E "^$id +envs .*succeeded \(succeeded,succeeded\) .*small-[01],small-[01]" >/dev/null \
    && ok || bad "get jobs shows the replicas: $(c get jobs | grep -E "^$id ")"
c describe job "$id" | grep -A3 "^Replicas:" | grep -E "^ +1 +small-[01] +succeeded +0" >/dev/null \
    && ok || bad "describe shows the replicas: $(c describe job "$id")"

# ---- one replica fails: the gang fails, its sibling is stopped ----------------
id=$(submit failing 2 'if [ "$CRATER_REPLICA" = 1 ]; then exit 3; fi; sleep 300')
wait_for 30 "$id" '.state == "failed"' && ok || bad "gang failed with its replica"
job "$id" | jq -e '(.history[-1].reason | test("replica 1 on small-[01]: exit code 3"))
    and .replicas[1].state == "failed" and .replicas[1].exit.code == 3
    and .replicas[0].state == "cancelled"' >/dev/null \
    && ok || bad "failure names the replica: $(job "$id" | jq -c '{r: .history[-1].reason, replicas}')"
until_gone() { for _ in $(seq 1 300); do pgrep -f "sleep 300" | xargs -r ps -o args= -p 2>/dev/null | has . || return 0; sleep 0.1; done; return 1; }
for _ in $(seq 1 300); do [ "$(pgrep -fc -- "$mark" || true)" = 0 ] && break; sleep 0.1; done
[ "$(pgrep -fc -- "$mark" || true)" = 0 ] && ok || bad "the sibling replica was stopped: $(pgrep -fa -- "$mark")"

# ---- a gang that could never fit at once is refused -------------------------
printf 'name: toobig\nreplicas: 3\ncommand: [sh, -c, "true"]\nresources: {cpu: 100m, memory: 64Mi, gpu: {count: 1}}\n' >"$tmp/big.yaml"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $token" \
    --data-binary @"$tmp/big.yaml" "$url/api/v1/jobs")
[ "$code" = 422 ] && jq -e '.field == "replicas" and (.error | test("3 replicas at once"))' "$tmp/body" >/dev/null \
    && ok || bad "three one-GPU replicas on two GPUs refused: $code $(cat "$tmp/body")"

# ---- a real torch.distributed all-reduce across the two nodes -----------------
py3=""
for p in python3 /usr/bin/python3; do # the Debian package is /usr/bin's
    "$p" -c 'import torch.distributed' 2>/dev/null && { py3=$(command -v "$p"); break; }
done
if [ -n "$py3" ]; then
    py='import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("rank", dist.get_rank(), "of", dist.get_world_size(), "sum", int(t.item()))
dist.destroy_process_group()'
    printf '%s\n' "$py" >"$tmp/allreduce.py"
    chmod 644 "$tmp/allreduce.py"
    mem=2Gi # importing torch takes more than 64Mi
    id=$(submit torch 2 "exec $py3 $tmp/allreduce.py")
    wait_for 120 "$id" '.state == "succeeded" and .logs_complete' && ok || {
        bad "torch all-reduce gang succeeded"
        for r in 0 1; do c logs "$id" --replica $r --stream stderr | tail -5; done
    }
    [ "$(logs "$id" 0)" = "rank 0 of 2 sum 3" ] && [ "$(logs "$id" 1)" = "rank 1 of 2 sum 3" ] \
        && ok || bad "all-reduce sums 1 + 2 on both ranks: '$(logs "$id" 0)' '$(logs "$id" 1)'"
else
    echo "SKIP: python3-torch is not installed (apt-get install python3-torch): no gloo all-reduce"
fi

echo "test_gangs: $pass passed, $fail failed"
[ "$fail" = 0 ]
