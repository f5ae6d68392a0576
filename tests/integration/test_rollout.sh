#!/usr/bin/env bash
# test_rollout.sh - rolling a running service to a new spec
# (doc/inference.md "Rollouts") and the services' metrics on craterd's
# /metrics. `crater up` runs a service of 2 replicas of the fake KServe V2
# server (tests/tools/fake_v2.c, 2 s "model load"). Checked: a rollout
# may not change the resources (refused, naming the field); while clients
# send requests through the gateway without pause, `crater rollout` moves
# both replicas to version 2, one at a time, never with fewer than 2 ready
# in traffic, and not one request fails; describe shows the versions and
# the progress; a version whose model cannot start (crash loop) stops the
# rollout with the reason, the spec is version 2 again and the version-2
# replicas keep serving; a version never ready within --ready-timeout
# stops it too; craterd's /metrics has the services' families (requests
# by code, batch sizes, queue and backend time, replicas by state) and
# passes `promtool check metrics` when promtool is installed.
# Waits are for states, with deadlines.
set -uo pipefail
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} fake=${FAKE_V2_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up="" loaders=()
mark=ro$RANDOM$RANDOM # in every replica's argv: pkill reaches only ours
cleanup() {
    touch "$tmp/stop" 2>/dev/null
    for p in "${loaders[@]}"; do kill "$p" 2>/dev/null; done
    [ -n "$up" ] && kill -INT "$up" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$up" 2>/dev/null || break; sleep 0.1; done
    [ -n "$up" ] && kill -9 "$up" 2>/dev/null
    pkill -9 -f "$mark" 2>/dev/null
    [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }
svc() { c describe service "$1" -o json 2>/dev/null; }
wait_svc() { # wait_svc SECONDS NAME JQ_FILTER
    local t=$(($1 * 10)) i
    for i in $(seq 1 "$t"); do
        svc "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for service $2: $3"
    svc "$2" | jq -c '{version, rollout, items: [.items[] | {job, version, role, state, in_traffic}]}'
    return 1
}
spec() { # spec FILE CMD [RESOURCES]: the service "echo", 2 replicas
    cat >"$1" <<YAML
name: echo
workloadType: inference
command: [sh, -c, '$2', $fake, $mark]
resources: ${3:-{cpu: 100m, memory: 32Mi\}}
inference:
  minReplicas: 2
  maxReplicas: 2
  warmPoolSize: 0
  maxBatchSize: 4
  batchTimeout: 2ms
YAML
}
serve='sleep 2; exec "$0" -l 127.0.0.1:$CRATER_SERVICE_PORT -d 50 -t 8 "$1"'
body='{"inputs":[{"name":"x","shape":[1,1],"datatype":"FP32","data":[1]}]}'
infer() { curl -s -o /dev/null -w '%{http_code}' -X POST -d "$body" "$gw/echo/v2/models/m/infer"; }

# replica ports away from other tests' on this host (30500-31499)
cat >"$tmp/config.yaml" <<YAML
apiVersion: crater/v1
kind: Config
server:
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
token=$(cat "$tmp/var/admin.token")
for _ in $(seq 1 300); do
    [ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ] && break
    sleep 0.1
done
cd "$tmp"

spec "$tmp/v1.yaml" "$serve"
c submit -f "$tmp/v1.yaml" >/dev/null || bad "submit echo"
wait_svc 30 echo '.replicas.ready == 2 and ([.items[] | select(.in_traffic)] | length) == 2' \
    && ok || bad "echo: 2 replicas ready"
svc echo | jq -e '.version == 0 and .rollout.state == "none"' >/dev/null \
    && ok || bad "version 0, never rolled: $(svc echo | jq -c '{version, rollout}')"

# ---- what a rollout may not change is refused, naming the field -------------
spec "$tmp/big.yaml" "$serve" '{cpu: 200m, memory: 32Mi}'
out=$(c rollout -f "$tmp/big.yaml" 2>&1)
has 'resources: a rollout cannot change it' <<<"$out" && ok || bad "resources refused: $out"
out=$(c rollout -f "$tmp/v1.yaml" --ready-timeout 1x 2>&1)
has 'readyTimeout' <<<"$out" && ok || bad "a bad --ready-timeout refused: $out"

# ---- no failed request while the replicas move to version 1 ------------------
for i in 1 2 3 4; do
    (while [ ! -e "$tmp/stop" ]; do infer; echo; done >"$tmp/load.$i") &
    loaders+=($!)
done
min=9
spec "$tmp/v2.yaml" "sleep 3; exec \"\$0\" -l 127.0.0.1:\$CRATER_SERVICE_PORT -d 50 -t 8 \"\$1\""
c rollout -f "$tmp/v2.yaml" | has 'rolling to version 1' && ok || bad "rollout accepted"
for _ in $(seq 1 600); do # the ready replicas in traffic never drop below 2
    s=$(svc echo)
    n=$(jq '[.items[] | select(.in_traffic)] | length' <<<"$s")
    [ "$n" -lt "$min" ] && min=$n
    jq -e '.rollout.state == "done"' <<<"$s" >/dev/null && break
    sleep 0.1
done
svc echo | jq -e '.version == 1 and .rollout.state == "done" and .rollout.rolled == 2
    and .rollout.total == 2' >/dev/null && ok || bad "rolled: $(svc echo | jq -c .rollout)"
[ "$min" -ge 2 ] && ok || bad "never fewer than 2 replicas in traffic (min $min)"
wait_svc 30 echo '[.items[] | select(.state != "draining")] | length == 2 and all(.version == 1)' \
    && ok || bad "both replicas run version 1"
c describe service echo | grep -q 'rollout 0 -> 1: done, 2 of 2 replaced' \
    && ok || bad "describe shows the rollout: $(c describe service echo)"
touch "$tmp/stop"
for p in "${loaders[@]}"; do wait "$p"; done
loaders=()
n=$(cat "$tmp"/load.* | wc -l)
[ "$n" -gt 20 ] && [ "$(cat "$tmp"/load.* | grep -cvx 200)" = 0 ] \
    && ok || bad "no request failed during the rollout ($n): $(cat "$tmp"/load.* | sort | uniq -c)"
grep '"rollout-stop"' "$tmp/var/decisions.log" | has '"decision":"autoscale"' \
    && ok || bad "the rollout's actions are in the decision log"

# ---- a crash-looping version stops the rollout; version 1 keeps serving ------
spec "$tmp/bad.yaml" 'exit 3'
c rollout -f "$tmp/bad.yaml" >/dev/null || bad "rollout to a bad version accepted"
wait_svc 60 echo '.rollout.state == "failed"' && ok || bad "the crash loop stops the rollout"
svc echo | jq -e '.version == 1 and .rollout.to == 2
    and (.rollout.reason | test("crash loop"))' >/dev/null \
    && ok || bad "version 1 again, with the reason: $(svc echo | jq -c '{version, rollout}')"
wait_svc 10 echo '.replicas.ready == 2 and ([.items[] | select(.state != "draining")] | all(.version == 1))' \
    && ok || bad "the version-1 replicas stayed"
[ "$(infer)" = 200 ] && ok || bad "still served after the failed rollout"

# ---- a version never ready within the timeout stops it too -------------------
spec "$tmp/slow.yaml" 'sleep 300'
c rollout -f "$tmp/slow.yaml" --ready-timeout 2s >/dev/null || bad "rollout to a slow version accepted"
wait_svc 30 echo '.rollout.state == "failed" and (.rollout.reason | test("not ready after 2000 ms"))' \
    && ok || bad "the ready timeout stops the rollout"
wait_svc 10 echo '[.items[] | select(.state != "draining")] | length == 2 and all(.version == 1)' \
    && ok || bad "the replica that was not ready is stopped"

# ---- train -> serve: a service follows its training job -----------------------
train() { # train N: a "training" job writing model version N, in ckpt dir N
    cat >"$tmp/train.yaml" <<YAML
name: train
workloadType: training
command: [sh, -c, 'sleep 1; echo $1 >"\$CRATER_CHECKPOINT_DIR/model"', $mark]
resources: {cpu: 100m, memory: 32Mi}
checkpoint: {dir: $tmp/ckpt/$1}
YAML
    c submit -f "$tmp/train.yaml" -o json | jq -r .id
}
mkdir -m 1777 "$tmp/ckpt" # the jobs write there as their own uid
t1=$(train 1)
cat >"$tmp/served.yaml" <<YAML
name: served
workloadType: inference
after: [train]
command: [sh, -c, 'test -s "\$CRATER_MODEL_PATH/model" && exec "\$0" -l 127.0.0.1:\$CRATER_SERVICE_PORT -t 4 "\$1"', $fake, $mark]
resources: {cpu: 100m, memory: 32Mi}
inference: {minReplicas: 1, maxReplicas: 1, maxBatchSize: 1}
YAML
c submit -f "$tmp/served.yaml" >/dev/null || bad "a service with after: is accepted"
svc served | jq -e '.replicas.traffic == 0 and .model.after == "train"' >/dev/null \
    && ok || bad "served waits for its training job: $(svc served | jq -c '{replicas, model}')"
wait_svc 30 served '.replicas.ready == 1 and .model.job == '"$t1" \
    && ok || bad "served serves the model of job $t1"
rep=$(svc served | jq -r '.items[0].job')
c get job "$rep" -o json | jq -e --arg p "$tmp/ckpt/1" --arg t "$t1" \
    '.spec.env.CRATER_MODEL_PATH == $p and .spec.env.CRATER_MODEL_JOB == $t' >/dev/null \
    && ok || bad "the replica's CRATER_MODEL_PATH: $(c get job "$rep" -o json | jq -c .spec.env)"
t2=$(train 2)
wait_svc 40 served '.model.job == '"$t2"' and .rollout.state == "done" and .version == 1
    and .replicas.ready == 1' && ok || bad "a new training run rolls served to job $t2"
# the new version's replica (the old one may still be listed, draining)
rep=$(svc served | jq -r '[.items[] | select(.state == "ready" and .version == 1)][0].job')
c get job "$rep" -o json | jq -e --arg p "$tmp/ckpt/2" '.spec.env.CRATER_MODEL_PATH == $p' >/dev/null \
    && ok || bad "the new replica serves ckpt2: $(c get job "$rep" -o json | jq -c .spec.env)"
code=$(curl -s -o /dev/null -w '%{http_code}' "$gw/served/v2/health/ready")
[ "$code" = 200 ] && ok || bad "served answers through the gateway ($code)"

# ---- the services' metrics on craterd's /metrics -----------------------------
m=$(curl -s "$url/metrics")
for want in 'crater_gateway_requests_total{service="echo",code="200"}' \
    'crater_gateway_batch_size_bucket{service="echo"' \
    'crater_gateway_queue_seconds_count{service="echo"}' \
    'crater_gateway_backend_seconds_count{service="echo"}' \
    'crater_service_replicas{service="echo",state="ready"} 2' \
    'crater_service_replicas{service="echo",state="warm"} 0' \
    'crater_service_replicas{service="echo",state="starting"} 0'; do
    grep -qF "$want" <<<"$m" && ok || bad "/metrics has $want"
done
if command -v promtool >/dev/null; then
    promtool check metrics <<<"$m" >"$tmp/promtool.out" 2>&1 \
        && ok || bad "promtool check metrics: $(cat "$tmp/promtool.out")"
else
    echo "promtool not installed: the metrics' format is not checked"
fi

echo "test_rollout: $pass passed, $fail failed"
[ "$fail" = 0 ]
