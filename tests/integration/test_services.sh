#!/usr/bin/env bash
# test_services.sh - inference services in craterd (doc/inference.md):
# `crater up` with tests/data/hw-small.yaml runs a service whose replicas
# are the fake KServe V2 model server (tests/tools/fake_v2.c) listening on
# CRATER_SERVICE_PORT after a 4 s "model load". Checked: what craterd
# does not build is refused naming the field; the service comes up with
# one replica in traffic and one warm (lower priority, preemptible), its
# load time measured; requests through craterd's gateway succeed; load
# from concurrent clients scales it 1 -> 3 with the warm replica taking
# traffic before any cold one is ready; every request of the load
# succeeds; without load it scales back to 1; a replica that dies is
# replaced (the warm one promoted first); one name per service; a
# crash-looping model backs off; a service scales to zero after the grace
# and a request held in the gateway wakes it, answered once a replica is
# ready (503 when none is within inference.activationTimeout); a training
# job preempts a warm replica and never one in traffic; cancelling a service stops every replica.
# Waits are for states, with deadlines.
set -uo pipefail
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} fake=${FAKE_V2_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up="" loaders=()
mark=svc$RANDOM$RANDOM # in every replica's argv: pgrep counts only ours
cleanup() {
    touch "$tmp/stop" 2>/dev/null
    for p in "${loaders[@]}"; do kill "$p" 2>/dev/null; done
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
svc() { c describe service "$1" -o json 2>/dev/null; }
wait_svc() { # wait_svc SECONDS NAME JQ_FILTER (bounds x3: a loaded CI
    local t=$(($1 * 30)) i   # machine slows the probes and the load)
    for i in $(seq 1 "$t"); do
        svc "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for service $2: $3"
    svc "$2" | jq -c '{replicas, desired, items: [.items[] | {job, role, state, in_traffic}]}'
    return 1
}
service() { # service NAME [EXTRA_INFERENCE_YAML [WINDOWS]] -> submit's output
    local win=${3:-$'  minReplicas: 1\n  maxReplicas: 3\n  warmPoolSize: 1\n  stableWindow: 6s\n  panicWindow: 2s'}
    cat >"$tmp/s.yaml" <<YAML
name: $1
workloadType: inference
command: [sh, -c, 'sleep 4; exec "\$0" -l 127.0.0.1:\$CRATER_SERVICE_PORT -d 200 -t 16 "\$1"', $fake, $mark]
resources: {cpu: 100m, memory: 32Mi}
inference:
  targetConcurrency: 1
  maxBatchSize: 1
$win
${2:-}
YAML
    c submit -f "$tmp/s.yaml" -o json 2>&1
}
body='{"inputs":[{"name":"x","shape":[1,1],"datatype":"FP32","data":[1]}]}'
infer() { # infer -> HTTP status of one request through the gateway
    curl -s -o "$tmp/infer.out" -w '%{http_code}' -X POST -d "$body" \
        "$gw/echo/v2/models/m/infer"
}

cat >"$tmp/config.yaml" <<YAML
apiVersion: crater/v1
kind: Config
scheduler:
  preemptionMinRuntime: 0s
inference:
  activationTimeout: 15s
server: # replica ports away from other tests' on this host (30500-31499)
  gangPortBase: $((10000 + RANDOM % 110 * 200)) # below the ephemeral ports (32768-)
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
gw=$(sed -n 's/.*inference gateway on \(http:[^ ]*\) .*/\1/p' "$tmp/up.out")
[ -n "$gw" ] && ok || bad "crater up prints the gateway: $(cat "$tmp/up.out")"
token=$(cat "$tmp/var/admin.token")
for _ in $(seq 1 300); do
    [ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ] && break
    sleep 0.1
done
cd "$tmp"

# ---- what is not built is refused, naming the field -------------------------
# (the submit exits 1: its output is taken first, for pipefail)
out=$(service bad1 '  port: 8000')
has 'inference.port: not built' <<<"$out" && ok || bad "inference.port refused: $out"
out=$(service bad2 '' $'  stableWindow: 1s\n  panicWindow: 2s')
has 'inference.panicWindow' <<<"$out" && ok || bad "panicWindow > stableWindow refused: $out"
printf 'name: dep\nworkloadType: inference\ncommand: [sleep, "1"]\nafter: [x]\ninference: {}\n' >"$tmp/dep.yaml"
out=$(c submit -f "$tmp/dep.yaml" 2>&1)
has "after\[0\]: no job named 'x'" <<<"$out" && ok || bad "after: an unknown job refused: $out"
sed -i 's/after: \[x\]/after: [x, y]/' "$tmp/dep.yaml"
out=$(c submit -f "$tmp/dep.yaml" 2>&1)
has 'after: a service follows one training job' <<<"$out" && ok || bad "after: two jobs refused: $out"
c get services -o json | jq -e '.items == []' >/dev/null && ok || bad "nothing was created"

# ---- the service comes up: one replica in traffic, one warm ------------------
sid=$(service echo '' | jq -r .id)
[ -n "$sid" ] && [ "$sid" != null ] && ok || bad "service submitted"
c get job "$sid" -o json | jq -e '.state == "serving"' >/dev/null && ok || bad "its job serves"
wait_svc 30 echo '.replicas.ready == 1 and .replicas.warm_ready == 1' && ok || bad "1 ready + 1 warm"
warm=$(svc echo | jq -r '.items[] | select(.role == "warm") | .job')
c get job "$warm" -o json | jq -e '.priority == -1000 and .spec.preemptible == true and .service.role == "warm"' \
    >/dev/null && ok || bad "warm replica low priority, preemptible: $(c get job "$warm" -o json | jq -c '{priority, service}')"
svc echo | jq -e '.load_ms.last >= 4000 and .load_ms.count == 2' >/dev/null \
    && ok || bad "model load time measured: $(svc echo | jq -c .load_ms)"
[ "$(infer)" = 200 ] && jq -e '.outputs[0].data == [2]' "$tmp/infer.out" >/dev/null \
    && ok || bad "a request through the gateway: $(cat "$tmp/infer.out")"
c get services | grep -E "^echo +$sid +1/1 +1/1 +0 +1 +1-3 " >/dev/null \
    && ok || bad "get services: $(c get services)"
curl -s -H "Authorization: Bearer $token" "$url/api/v1/services/echo/endpoints" \
    | jq -e '(.items | length) == 1' >/dev/null && ok || bad "one endpoint in traffic"

# ---- load scales it up; the warm replica takes traffic first ----------------
for i in $(seq 1 6); do
    (while [ ! -e "$tmp/stop" ]; do infer; echo; done >"$tmp/load.$i") &
    loaders+=($!)
done
first=""
for _ in $(seq 1 300); do
    first=$(svc echo | jq -r --arg w "$warm" '[.items[] | select(.role == "traffic"
        and .state == "ready" and .in_traffic)] | if length >= 2 then
        (map(select(.job == ($w | tonumber))) | length) else empty end')
    [ -n "$first" ] && break
    sleep 0.1
done
[ "$first" = 1 ] && ok || bad "the warm replica is the second in traffic: $(svc echo | jq -c .items)"
wait_svc 30 echo '.replicas.ready == 3 and .desired == 3' && ok || bad "scaled to 3"
grep '"decision":"autoscale"' "$tmp/var/decisions.log" | grep "\"promote\",\"job\":$warm" \
    | has '"inputs":{' && ok || bad "the promotion is in the decision log with its inputs"
touch "$tmp/stop"
for p in "${loaders[@]}"; do wait "$p"; done
loaders=()
n=$(cat "$tmp"/load.* | wc -l)
[ "$n" -gt 20 ] && [ "$(cat "$tmp"/load.* | grep -cvx 200)" = 0 ] \
    && ok || bad "every request under load succeeded ($n): $(cat "$tmp"/load.* | sort | uniq -c)"

# ---- no load: back down to 1 ---------------------------------------------------
wait_svc 40 echo '.replicas.traffic == 1 and .replicas.ready == 1 and .desired == 1' \
    && ok || bad "scaled back to 1"
# (the decision log is written by its own thread: wait for the line)
logged=""
for _ in $(seq 1 300); do
    # a decision for 1 after the one for 3: the scale-down itself
    grep '"decision":"autoscale"' "$tmp/var/decisions.log" \
        | awk '/"desired":3,/ {up = 1} up && /"desired":1,/ {down = 1} END {exit !down}' \
        && logged=1 && break
    sleep 0.1
done
[ -n "$logged" ] && ok || bad "the scale-down is in the decision log"
[ "$(infer)" = 200 ] && ok || bad "requests still succeed"

# ---- a replica that dies is replaced -----------------------------------------------
port=$(svc echo | jq -r '.items[] | select(.role == "traffic") | .url' | sed 's/.*://')
victim=$(pgrep -f "fake_v2 -l 127.0.0.1:$port " | head -1)
[ -n "$victim" ] && kill -9 "$victim"
wait_svc 30 echo '.replicas.ready == 1 and .replicas.warm_ready == 1
    and ([.items[] | .url | endswith(":'"$port"'")] | any | not)' \
    && ok || bad "the dead replica was replaced"
[ "$(infer)" = 200 ] && ok || bad "requests succeed after the replacement"

# ---- one name per service; a crash-looping model backs off ------------------------
out=$(service echo '')
has 'a service named .echo. is running' <<<"$out" && ok || bad "a second 'echo' refused: $out"
cat >"$tmp/crash.yaml" <<YAML
name: crashy
workloadType: inference
command: [sh, -c, 'exit 1', $mark]
resources: {cpu: 100m, memory: 32Mi}
inference: {minReplicas: 1, maxReplicas: 1, maxBatchSize: 1}
YAML
cid=$(c submit -f "$tmp/crash.yaml" -o json | jq -r .id)
reps='[.items[] | select(.name | startswith("crashy-"))] | sort_by(.submitted_ms)'
for _ in $(seq 1 300); do
    [ "$(c get jobs -o json | jq "$reps | length")" -ge 4 ] && break
    sleep 0.1
done
gap=$(c get jobs -o json | jq "$reps | .[3].submitted_ms - .[2].submitted_ms")
[ "${gap:-0}" -ge 3500 ] && ok || bad "the 4th start waits ~4 s after the 3rd crash (gap ${gap:-none} ms)"
c cancel "$cid" >/dev/null

# ---- scale to zero after the grace, and back on a request -------------------------
zid=$(service zero '  scaleToZeroGrace: 1s' $'  minReplicas: 0\n  maxReplicas: 1\n  warmPoolSize: 0\n  stableWindow: 3s\n  panicWindow: 1s' \
    | jq -r .id)
wait_svc 30 zero '.replicas.ready == 1' && ok || bad "zero: its first replica"
wait_svc 40 zero '.replicas.traffic == 0 and .desired == 0' && ok || bad "zero: scaled to zero"
curl -s -o /dev/null -w '%{http_code}' -X POST -d "$body" "$gw/zero/v2/models/m/infer" \
    >"$tmp/held.code" &
held=$!
for _ in $(seq 1 100); do # the request waits in the gateway, counted
    curl -s "$gw/metrics" | grep -q '^crater_gateway_held{service="zero"} 1$' && break
    sleep 0.1
done
curl -s "$gw/metrics" | grep -q '^crater_gateway_held{service="zero"} 1$' \
    && ok || bad "zero: the request is held: $(curl -s "$gw/metrics" | grep held)"
wait_svc 30 zero '.replicas.ready == 1' && ok || bad "zero: the held request woke it"
wait "$held"
[ "$(cat "$tmp/held.code")" = 200 ] && ok || bad "zero: the held request is answered 200 (got $(cat "$tmp/held.code"))"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d "$body" "$gw/zero/v2/models/m/infer")
[ "$code" = 200 ] && ok || bad "zero: served again (got $code)"
c cancel "$zid" >/dev/null

# ---- a held request is answered 503 when no replica is ready in time -------------
cat >"$tmp/never.yaml" <<YAML
name: never
workloadType: inference
command: [sh, -c, 'sleep 300', $mark]
resources: {cpu: 100m, memory: 32Mi}
inference: {minReplicas: 1, maxReplicas: 1, maxBatchSize: 1}
YAML
nid=$(c submit -f "$tmp/never.yaml" -o json | jq -r .id)
start=$(date +%s%N)
out=$(curl -s -w ' %{http_code}' -X POST -d "$body" "$gw/never/v2/models/m/infer")
took=$((($(date +%s%N) - start) / 1000000))
has '503$' <<<"$out" && has 'no ready backend within 15000 ms' <<<"$out" \
    && [ "$took" -ge 14500 ] && ok || bad "never: held 15 s then 503 (${took} ms): $out"
c cancel "$nid" >/dev/null

# ---- cancelling the service stops its replicas ----------------------------------
c cancel "$sid" >/dev/null
live='[.items[] | select(.state | IN("cancelled", "failed") | not)] == []'
for _ in $(seq 1 300); do
    c get jobs -o json | jq -e "$live" >/dev/null && break
    sleep 0.1
done
c get jobs -o json | jq -e "$live" >/dev/null && ok || bad "every replica job ended: $(c get jobs)"
[ -z "$(pgrep -f "$mark")" ] && ok || bad "no replica left: $(pgrep -af "$mark")"

# ---- training preempts a warm replica, never one in traffic ------------------------
cat >"$tmp/gpu.yaml" <<YAML
name: gpusvc
workloadType: inference
command: [sh, -c, 'sleep 1; exec "\$0" -l 127.0.0.1:\$CRATER_SERVICE_PORT -t 4 "\$1"', $fake, $mark]
resources: {cpu: 100m, memory: 32Mi, gpu: {count: 1}}
inference: {minReplicas: 1, maxReplicas: 1, warmPoolSize: 1, maxBatchSize: 1}
YAML
gid=$(c submit -f "$tmp/gpu.yaml" -o json | jq -r .id)
wait_svc 30 gpusvc '.replicas.ready == 1 and .replicas.warm_ready == 1' && ok || bad "gpusvc: 1 ready + 1 warm"
warm=$(svc gpusvc | jq -r '.items[] | select(.role == "warm") | .job')
hot=$(svc gpusvc | jq -r '.items[] | select(.role == "traffic") | .job')
train() { # train NAME -> job id: one GPU, normal priority, not preemptible
    printf 'name: %s\nworkloadType: training\ncommand: [sh, -c, "sleep 300", %s]\nresources: {cpu: 100m, memory: 32Mi, gpu: {count: 1}}\n' \
        "$1" "$mark" >"$tmp/t.yaml"
    c submit -f "$tmp/t.yaml" -o json | jq -r .id
}
t1=$(train train1)
for _ in $(seq 1 300); do
    [ "$(c get job "$t1" -o json | jq -r .state)" = running ] && break
    sleep 0.1
done
[ "$(c get job "$t1" -o json | jq -r .state)" = running ] && ok || bad "training runs: $(c get job "$t1" -o json | jq -c '{state, reason}')"
c get job "$warm" -o json | jq -e '.state != "running" and (.history | map(.state) | index("preempting"))' >/dev/null \
    && ok || bad "the warm replica was preempted: $(c get job "$warm" -o json | jq -c '{state, history: [.history[].state]}')"
c get job "$hot" -o json | jq -e '.state == "running" and .service.in_traffic' >/dev/null \
    && ok || bad "the replica in traffic kept running"
t2=$(train train2)
for _ in $(seq 1 300); do
    c get job "$t2" -o json | jq -e '.reason != null' >/dev/null && break
    sleep 0.1
done
c get job "$t2" -o json | jq -e '.state == "pending" and .reason != null' >/dev/null \
    && c get job "$hot" -o json | jq -e '.state == "running"' >/dev/null \
    && ok || bad "a second training job does not preempt the replica in traffic: $(c get job "$t2" -o json | jq -c '{state, reason}')"
c cancel "$t1" >/dev/null; c cancel "$t2" >/dev/null; c cancel "$gid" >/dev/null
for _ in $(seq 1 300); do
    c get jobs -o json | jq -e "$live" >/dev/null && break
    sleep 0.1
done
[ -z "$(pgrep -f "$mark")" ] && ok || bad "nothing left after the GPU service: $(pgrep -af "$mark")"

# ---- crater up stops cleanly (under ASan: no report) ----------------------------------
kill -INT "$up"
wait "$up"
rc=$?
up=""
[ "$rc" = 0 ] && ! grep -q Sanitizer "$tmp/up.out" && ok \
    || bad "crater up exit $rc: $(grep -A5 Sanitizer "$tmp/up.out" | head -20)"

echo "test_services: $pass passed, $fail failed"
[ "$fail" = 0 ]
