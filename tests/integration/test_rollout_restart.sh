#!/usr/bin/env bash
# test_rollout_restart.sh - a rollout survives a restart of craterd
# (doc/inference.md "Rollouts", issue 15). craterd and one crater-agent
# run as separate processes on fixed loopback ports, so the replicas
# (the fake KServe V2 server, tests/tools/fake_v2.c) keep running while
# craterd is restarted and come back adopted. A service of 2 replicas is
# rolled 0 -> 1 (no restart), then:
#   - 1 -> 2 with craterd stopped by SIGTERM after the first replica moved;
#   - 2 -> 3 with craterd killed by kill -9 after the first replica moved;
# each time the API reports the same rollout (state rolling, from, to,
# total 2, at least the replicas rolled before) as soon as it answers, and
# at every poll after it until the rollout is done with both replicas on
# the new version; a restart after it still reports it done. Then a
# version never ready (3 -> 4, ready timeout 8 s) with a restart in the
# middle fails after the restart and the service's spec and version are
# version 3's again (the previous spec is stored with the rollout).
# Last, the autoscaler keeps acting during a rollout: load arriving while
# a service rolls starts replicas of the new version.
# Requests: 2 clients send requests through craterd's gateway without
# pause the whole time; every answer is 200, but for what the gateway
# inside craterd cannot help: connections refused while craterd is down,
# and 503 "shutting down" for a request in flight at the moment
# of the SIGTERM (both counted apart and printed). Waits are for states, with
# deadlines.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} fake=${FAKE_V2_BIN:?}
agentbin=${CRATER_AGENT_BIN:?} craterd=${CRATERD_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
pid="" apid="" loaders=()
mark=rr$RANDOM$RANDOM # in every replica's argv: cleanup reaches only ours
cleanup() {
    touch "$tmp/stop" 2>/dev/null
    for p in "${loaders[@]}"; do kill "$p" 2>/dev/null; done
    [ -n "$apid" ] && kill -TERM "$apid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$apid" 2>/dev/null || break; sleep 0.1; done
    { kill -9 $apid $pid; wait $apid $pid; } 2>/dev/null
    for p in $(pgrep -f -- "$mark"); do kill -9 "$p" 2>/dev/null; done
    [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$admin"; }
svc() { c describe service echo -o json 2>/dev/null; }
show() { svc | jq -c '{version, rollout, items: [.items[] | {job, version, role, state}]}'; }
wait_svc() { # wait_svc SECONDS JQ_FILTER
    local t=$(($1 * 10)) i
    for i in $(seq 1 "$t"); do
        svc | jq -e "$2" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for: $2"
    show
    return 1
}
spec() { # spec FILE VERSION_TAG LOAD_SECONDS: the service "echo", 2 replicas
    cat >"$1" <<YAML
name: echo
workloadType: inference
command: [sh, -c, 'sleep $3; exec "\$0" -l 127.0.0.1:\$CRATER_SERVICE_PORT -d 20 -t 8 "\$1"', $fake, $mark, $2]
resources: {cpu: 100m, memory: 32Mi}
inference: {minReplicas: 2, maxReplicas: 2, warmPoolSize: 0, maxBatchSize: 1}
YAML
}
free_port() { # a port nothing listens on now (the restarts reuse it)
    local p
    while :; do
        p=$((20000 + RANDOM % 9000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}
port=$(free_port) gport=$(free_port)
url=http://127.0.0.1:$port gw=http://127.0.0.1:$gport
cat >"$tmp/craterd.yaml" <<YAML
apiVersion: crater/v1
kind: Config
server:
  gangPortBase: $((10000 + RANDOM % 110 * 200)) # below the ephemeral ports (32768-)
  gangPorts: 100
agent:
  heartbeatInterval: 200ms
inference:
  gateway: 127.0.0.1:$gport
YAML
start() { # craterd on the same ports and data each time
    "$craterd" --data "$tmp/data" --listen "127.0.0.1:$port" \
        --config "$tmp/craterd.yaml" >>"$tmp/craterd.out" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do
        curl -sf "$url/readyz" >/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "craterd did not start:"; tail -20 "$tmp/craterd.out"; exit 1
}
start
admin=$(cat "$tmp/data/admin.token")
atok=$(c token create --role agent --node small-0 -o json | jq -r .token)
"$agentbin" --server "$url" --token "$atok" --hardware "$src/tests/data/hw-small.yaml" \
    --node small-0 --data "$tmp/agent" --config "$tmp/craterd.yaml" 2>>"$tmp/agent.err" &
apid=$!
cd "$tmp"

spec v0.yaml v0 1
c submit -f v0.yaml >/dev/null || bad "submit echo"
wait_svc 60 '.replicas.ready == 2 and ([.items[] | select(.in_traffic)] | length) == 2' \
    && ok || bad "echo: 2 replicas ready"
spec v1.yaml v1 1
c rollout -f v1.yaml >/dev/null || bad "rollout to version 1"
wait_svc 60 '.rollout.state == "done" and .version == 1' && ok || bad "rolled to version 1"

infer() { # 200, else the code and the start of the answer
    local out code
    out=$(curl -s --max-time 10 -w '\n%{http_code}' "$gw/echo/v2/health/ready")
    code=${out##*$'\n'}
    [ "$code" = 200 ] && echo 200 || echo "$code $(head -c 100 <<<"${out%$'\n'*}" | tr -d '\n')"
}
for i in 1 2; do
    (while [ ! -e "$tmp/stop" ]; do infer; done >"$tmp/load.$i") &
    loaders+=($!)
done

# truthful: while rolling, the rollout from->to with total 2 and at least
# `least` replicas rolled; then done with both replicas on `to`
truthful() { # truthful FROM TO LEAST SECONDS
    local t=$(($4 * 10)) i s
    for i in $(seq 1 "$t"); do
        s=$(svc) || { sleep 0.1; continue; }
        [ -n "$s" ] || { sleep 0.1; continue; }
        jq -e --argjson f "$1" --argjson t "$2" --argjson l "$3" \
            '.version == $t and .rollout.from == $f and .rollout.to == $t
             and .rollout.total == 2 and .rollout.rolled >= $l
             and (.rollout.state == "rolling" or .rollout.state == "done")' \
            <<<"$s" >/dev/null || { echo "untruthful: $(jq -c '{version, rollout}' <<<"$s")"; return 1; }
        jq -e '.rollout.state == "done"' <<<"$s" >/dev/null && return 0
        sleep 0.1
    done
    echo "not done in $4 s: $(show)"
    return 1
}
restart_mid() { # restart_mid SIGNAL FROM TO: craterd stopped mid-rollout
    # from a steady service: both replicas of FROM live and ready (a
    # rollout's total counts the old replicas in traffic at its start; a
    # replica that just ended and is not replaced yet is not one of them)
    wait_svc 60 '([.items[] | select(.state != "draining")]
        | length == 2 and all(.version == '"$2"')) and .replicas.ready == 2' \
        || bad "$1: both replicas of version $2 ready before the rollout"
    spec "v$3.yaml" "v$3" 3
    c rollout -f "v$3.yaml" >/dev/null || bad "rollout to version $3"
    wait_svc 60 '.rollout.state == "rolling" and .rollout.rolled == 1' \
        && ok || bad "$3: the first replica moved"
    { kill "-$1" "$pid"; wait "$pid"; } 2>/dev/null # no "Killed" line
    start
    svc | jq -e --argjson f "$2" --argjson t "$3" '.rollout.state == "rolling"
        and .rollout.from == $f and .rollout.to == $t and .rollout.total == 2
        and .rollout.rolled >= 1' >/dev/null \
        && ok || bad "after $1, the API reports the same rollout: $(show)"
    truthful "$2" "$3" 1 90 && ok || bad "$1: the rollout to $3 ends, reported truthfully"
    wait_svc 60 '([.items[] | select(.state != "draining")]
        | length == 2 and all(.version == '"$3"')) and .replicas.ready == 2' \
        && ok || bad "$1: both replicas run version $3"
}
restart_mid TERM 1 2
restart_mid KILL 2 3

{ kill -TERM "$pid"; wait "$pid"; } 2>/dev/null; start
svc | jq -e '.rollout.state == "done" and .rollout.from == 2 and .rollout.to == 3
    and .rollout.rolled == 2' >/dev/null \
    && ok || bad "a restart keeps the finished rollout: $(show)"

touch "$tmp/stop"
for p in "${loaders[@]}"; do wait "$p"; done
loaders=()
# 000: connection refused while craterd is down; 503 "... shutting
# down": in flight at the moment craterd stopped (its gateway stops with
# it). Anything else is a failure.
codes=$(cat "$tmp"/load.* | sort | uniq -c | tr '\n' ' ')
n=$(cat "$tmp"/load.* | grep -cx 200)
other=$(cat "$tmp"/load.* | grep -vx '200' | grep -v '^000' | grep -cv '^503 .*shutting down')
[ "$n" -gt 20 ] && [ "$other" = 0 ] \
    && ok || bad "every answer of a running gateway is 200: $codes"
echo "answers: $codes"


# ---- a version never ready, restarted mid-rollout: fails, version 3 again ----
cmd3=$(c get job "$(svc | jq -r .job)" -o json | jq -c .spec.command)
spec v4.yaml v4 300
c rollout -f v4.yaml --ready-timeout 8s >/dev/null || bad "rollout to version 4"
wait_svc 30 '.rollout.state == "rolling" and .rollout.waiting_for > 0' \
    && ok || bad "4: a replica of version 4 is waited for"
{ kill -TERM "$pid"; wait "$pid"; } 2>/dev/null; start
wait_svc 60 '.rollout.state == "failed" and .rollout.from == 3 and .rollout.to == 4
    and (.rollout.reason | test("not ready after 8000 ms"))' \
    && ok || bad "the rollout to version 4 fails after the restart"
svc | jq -e '.version == 3' >/dev/null && ok || bad "version 3 again: $(show)"
[ "$(c get job "$(svc | jq -r .job)" -o json | jq -c .spec.command)" = "$cmd3" ] \
    && ok || bad "the service's spec is version 3's again"
wait_svc 30 '([.items[] | select(.state != "draining")]
    | length == 2 and all(.version == 3)) and .replicas.ready == 2' \
    && ok || bad "the version-3 replicas stay"

# ---- the autoscaler keeps acting during a rollout ---------------------------
# "auto": 1 to 3 replicas, target 1 request in flight, each infer 400 ms.
# While its rollout waits for a slow new replica, 3 clients arrive: the
# autoscaler's count (3) applies to the new version, so new-version
# replicas start beside the surge one (before, the plan waited for the
# rollout), and no replica of the old version starts.
auto() { # auto FILE TAG LOAD_SECONDS
    cat >"$1" <<YAML
name: auto
workloadType: inference
command: [sh, -c, 'sleep $3; exec "\$0" -l 127.0.0.1:\$CRATER_SERVICE_PORT -d 400 -t 8 "\$1"', $fake, $mark, $2]
resources: {cpu: 100m, memory: 32Mi}
inference: {minReplicas: 1, maxReplicas: 3, warmPoolSize: 0, maxBatchSize: 1,
  targetConcurrency: 1, stableWindow: 3s, panicWindow: 1s}
YAML
}
asvc() { c describe service auto -o json 2>/dev/null; }
auto a0.yaml a0 0
c submit -f a0.yaml >/dev/null || bad "submit auto"
for _ in $(seq 1 300); do
    asvc | jq -e '.replicas.ready == 1' >/dev/null 2>&1 && break
    sleep 0.1
done
auto a1.yaml a1 8
c rollout -f a1.yaml >/dev/null || bad "rollout auto to version 1"
aload=()
body='{"inputs":[{"name":"x","shape":[1,1],"datatype":"FP32","data":[1]}]}'
for i in 1 2 3; do
    (while [ ! -e "$tmp/astop" ]; do
        curl -s -o /dev/null --max-time 10 -X POST -d "$body" "$gw/auto/v2/models/m/infer"
    done) &
    aload+=($!)
    loaders+=($!)
done
acted=0
for _ in $(seq 1 300); do
    s=$(asvc)
    if jq -e '.rollout.state == "rolling" and ([.items[] | select(.version == 1
        and .role == "traffic" and .state != "draining")] | length) >= 2' <<<"$s" >/dev/null 2>&1; then
        acted=1
        break
    fi
    sleep 0.1
done
[ "$acted" = 1 ] && ok || bad "new-version replicas start during the rollout: $(asvc | jq -c '{desired, rollout, items: [.items[] | {job, version, role, state}]}')"
asvc | jq -e '[.items[] | select(.version == 0)] | length <= 1' >/dev/null \
    && ok || bad "no old-version replica started: $(asvc | jq -c '[.items[] | {job, version}]')"
asvc | jq -e '.rollout.autoscalePaused == false' >/dev/null && ok || bad "rollout.autoscalePaused false"
touch "$tmp/astop"
for p in "${aload[@]}"; do wait "$p"; done
for _ in $(seq 1 300); do
    asvc | jq -e '.rollout.state == "done"' >/dev/null 2>&1 && break
    sleep 0.1
done
asvc | jq -e '.rollout.state == "done"' >/dev/null && ok || bad "auto rolled: $(asvc | jq -c .rollout)"

echo "test_rollout_restart: $pass passed, $fail failed"
[ "$fail" = 0 ]
