#!/usr/bin/env bash
# test_readiness_cmd.sh - readiness by command (inference.readiness,
# doc/inference.md "Ports and readiness"). On `crater up` (the agent of
# the replica's node runs the command as the replica: its user, cgroup,
# environment), a service whose
# replica serves the V2 API at once (tests/tools/fake_v2.c) but whose
# readiness command is `test -e FILE`: the replica runs and is not ready
# (not in traffic) while FILE is absent, becomes ready and takes traffic
# through the gateway once FILE appears, and leaves traffic when FILE is
# removed; a command that outlives its timeout is not ready; the command
# runs as the replica's user (never root: a root craterd running it was a
# root shell for any tenant) with the replica's environment. Bad
# readiness sections are refused naming the field. Waits are for states,
# with deadlines.
set -uo pipefail
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} fake=${FAKE_V2_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
mark=rc$RANDOM$RANDOM # in every replica's argv: cleanup reaches only ours
cleanup() {
    [ -n "$up" ] && kill -INT "$up" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$up" 2>/dev/null || break; sleep 0.1; done
    [ -n "$up" ] && kill -9 "$up" 2>/dev/null
    for p in $(pgrep -f -- "$mark"); do kill -9 "$p" 2>/dev/null; done
    [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

. "$src/tests/integration/craterd_lib.sh" # until_
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }
svc() { c describe service "$1" -o json 2>/dev/null; }
show() { svc "$1" | jq -c '{replicas, items: [.items[] | {job, state, in_traffic}]}'; }
wait_svc() { # wait_svc SECONDS NAME JQ_FILTER
    local t=$(($1 * 10)) i
    for i in $(seq 1 "$t"); do
        svc "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for service $2: $3"
    show "$2"
    return 1
}
holds() { # holds SECONDS NAME JQ_FILTER: true at every poll for SECONDS
    local t=$(($1 * 10)) i
    for i in $(seq 1 "$t"); do
        svc "$2" | jq -e "$3" >/dev/null 2>&1 || { show "$2"; return 1; }
        sleep 0.1
    done
}
service() { # service NAME READINESS_YAML: one replica, batching off
    cat >"$tmp/$1.yaml" <<YAML
name: $1
workloadType: inference
command: [sh, -c, 'exec "\$0" -l 127.0.0.1:\$CRATER_SERVICE_PORT -t 4', $fake, $mark]
resources: {cpu: 100m, memory: 32Mi}
inference:
  minReplicas: 1
  maxReplicas: 1
  maxBatchSize: 1
  readiness: $2
YAML
    c submit -f "$tmp/$1.yaml" 2>&1
}

cat >"$tmp/config.yaml" <<YAML
apiVersion: crater/v1
kind: Config
server:
  gangPortBase: $((10000 + RANDOM % 110 * 200)) # below the ephemeral ports (32768-)
  gangPorts: 100
inference:
  activationTimeout: 0s
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

# ---- refused, naming the field ----------------------------------------------
out=$(service bad1 '{command: "test -e x"}')
has 'inference.readiness.command: give a list' <<<"$out" && ok || bad "a string command refused: $out"
out=$(service bad2 '{command: [true], periodMs: 5}')
has 'inference.readiness.periodMs' <<<"$out" && ok || bad "an unknown field refused: $out"
out=$(service bad3 '{command: [true], timeout: 0s}')
has 'inference.readiness.timeout: must be 1 ms to 1 h' <<<"$out" && ok || bad "timeout 0 refused: $out"
out=$(service bad4 '{period: 1s}')
has "inference.readiness: missing required field 'command'" <<<"$out" && ok || bad "a readiness without command refused: $out"

# ---- ready only once the file exists ------------------------------------------
out=$(service file "{command: [test, -e, $tmp/model-loaded], period: 200ms, timeout: 1s}") \
    && ok || bad "service with a readiness command: $out"
c get job "$(svc file | jq -r .job)" -o json | jq -e --arg f "$tmp/model-loaded" \
    '.spec.inference.readiness.command == ["test", "-e", $f]
     and .spec.inference.readiness.period == "200ms"' >/dev/null \
    && ok || bad "the readiness section in the spec: $(c get job "$(svc file | jq -r .job)" -o json | jq -c .spec.inference)"
wait_svc 30 file '[.items[] | select(.state == "starting")] | length == 1' \
    && ok || bad "the replica runs"
rep=$(svc file | jq -r '.items[0].job')
# its V2 endpoint answers (once the replica listens: `starting` is the
# task running, not yet bound to its port), but the command says not
# ready: 3 s of probes
until_ 10 "curl -sf '$(svc file | jq -r '.items[0].url')/v2/health/ready' >/dev/null" \
    && ok || bad "the replica's own endpoint answers: $(show file)"
holds 3 file '.replicas.ready == 0 and ([.items[] | select(.in_traffic)] | length) == 0' \
    && ok || bad "not ready while the file is absent"
code=$(curl -s -o /dev/null -w '%{http_code}' "$gw/file/v2/health/ready")
[ "$code" = 503 ] && ok || bad "the gateway has no backend yet ($code)"
touch "$tmp/model-loaded"
wait_svc 10 file '.replicas.ready == 1 and .items[0].in_traffic' \
    && ok || bad "ready once the file exists"
code=$(curl -s -o /dev/null -w '%{http_code}' "$gw/file/v2/health/ready")
[ "$code" = 200 ] && ok || bad "served through the gateway ($code)"
svc file | jq -e '.load_ms.count == 1 and .load_ms.last >= 3000' >/dev/null \
    && ok || bad "the load time runs to the first ready command: $(svc file | jq -c .load_ms)"
rm "$tmp/model-loaded"
wait_svc 10 file '.replicas.ready == 0' && ok || bad "not ready once the file is gone"
[ "$(svc file | jq -r '.items[0].job')" = "$rep" ] && ok \
    || bad "the same replica (not restarted): $(show file); job $rep: $(c get job "$rep" -o json | jq -c '[.history[] | .state + ": " + .reason]')"

# ---- a command past its timeout is not ready ------------------------------------
# sh stays the group's leader (`; :`), its argv keeps the mark
service slow "{command: [sh, -c, 'sleep 5; :', $mark-slow], period: 100ms, timeout: 200ms}" >/dev/null
wait_svc 30 slow '[.items[] | select(.state == "starting")] | length == 1' \
    && ok || bad "slow: the replica runs"
holds 3 slow '.replicas.ready == 0' && ok || bad "a command past its timeout is not ready"
old=""
for p in $(pgrep -f -- "$mark-slow"); do # one may be running now, none for long
    [ "$(ps -o etimes= -p "$p" | tr -d ' ')" -ge 2 ] 2>/dev/null && old="$old $p"
done
[ -z "$old" ] && ok || bad "the timed-out commands were killed (left:$old)"

# ---- the command runs as the replica, not as craterd -------------------------
# (crater up runs as root here; tasks never do): ready only when the
# command is not root and sees the replica's CRATER_SERVICE_PORT
service who "{command: [sh, -c, 'test \"\$(id -u)\" -ne 0 && test -n \"\$CRATER_SERVICE_PORT\"', $mark-who], period: 200ms}" >/dev/null
wait_svc 30 who '.replicas.ready == 1' \
    && ok || bad "the command runs as the replica's user with its environment"

echo "test_readiness_cmd: $pass passed, $fail failed"
[ "$fail" = 0 ]
