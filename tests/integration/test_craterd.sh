#!/usr/bin/env bash
# test_craterd.sh - craterd as clients see it, over real HTTP on loopback:
# health, auth and tenancy, input errors (bad JSON, unknown fields, wrong
# units, oversize bodies), submit/list/get/cancel with pagination, the agent
# protocol (register with protocol version and held tasks, long-poll work,
# task events, sample-only heartbeats, logs per attempt) driving a job from pending
# to succeeded, preemption of a low-priority job by a high one, quotas,
# dry-run placement, metrics checked by promtool, the decision log, and a
# kill -9 restart that keeps pending and running jobs where they were.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; [ -f "$tmp/body" ] && head -c 600 "$tmp/body" && echo; }
expect() { # expect NAME STATUS [JQ_FILTER]: last api call had STATUS and jq filter is true
    local name=$1 want=$2 filter=${3:-}
    if [ "$code" != "$want" ]; then bad "$name: status $code, wanted $want"; return; fi
    if [ -n "$filter" ] && ! jq -e "$filter" "$tmp/body" >/dev/null 2>&1; then
        bad "$name: $filter"; return
    fi
    ok
}
job() { # job FILE NAME [YAML lines...]: a job spec
    local f=$1 name=$2; shift 2
    { echo "name: $name"; echo "command: [sleep, '1']"; for l in "$@"; do echo "$l"; done; } >"$f"
}
field() { jq -r "$1" "$tmp/body"; }

# the preemption below comes a second after the victim starts
printf 'scheduler:\n  preemptionMinRuntime: 0s\n' >"$tmp/craterd.yaml"
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" --hardware "$src/examples/hardware/h100x8.yaml" || exit 1
node=gpu-h100-0

# ---- health and auth ----------------------------------------------------------
api GET /healthz; expect healthz 200 '.status == "ok"'
api GET /readyz; expect readyz 200
api GET /api/v1/jobs; expect "no token" 401 '.error | test("missing token")'
api GET /api/v1/jobs crt_not_a_real_token; expect "bad token" 401 '.error == "invalid token"'
echo '{"role":"user","tenant":"team-a","name":"alice"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; expect "user token" 201 '.token | startswith("crt_")'
ua=$(field .token)
echo '{"role":"user","tenant":"team-b"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; ub=$(field .token)
api POST /api/v1/tokens "$ua" "$tmp/t"; expect "user cannot mint tokens" 403
echo "{\"role\":\"agent\",\"node\":\"$node\"}" >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; agent=$(field .token)
echo '{"role":"agent","node":"other-node"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; other=$(field .token)
# a name the loader would refuse at the next start is refused now
echo '{"role":"user","tenant":"A"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; expect "token for tenant 'A'" 400 '.field == "tenant" and (.error | test("not a valid name"))'
echo '{"role":"agent","node":"bad_node"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; expect "token for node 'bad_node'" 400 '.field == "node"'
echo '{"role":"wizard"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; expect "bad role" 400 '.field == "role"'
api GET /api/v1/tokens "$admin"; expect "tokens hashed" 200 "[.items[].hash | length == 64] | all and (tostring | test(\"crt_\") | not)"
api GET /api/v1/tokens "$admin"; expect "a token keeps its name" 200 '[.items[] | select(.name == "alice")] | length == 1'
# read-only tokens (the dashboard's viewers): an admin's reads every
# tenant, a user's its own; neither changes anything; agents cannot be
echo '{"role":"admin","name":"viewer","readOnly":true}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; expect "read-only admin token" 201 '.readOnly == true'
roa=$(field .token)
echo '{"role":"user","tenant":"team-a","readOnly":true}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; rou=$(field .token)
echo "{\"role\":\"agent\",\"node\":\"$node\",\"readOnly\":true}" >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; expect "read-only agent token" 400 '.field == "readOnly" and .code == "ECONFLICT"'
echo '{"role":"admin","readOnly":"yes"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; expect "readOnly not a boolean" 400 '.field == "readOnly"'
api GET /api/v1/jobs "$roa"; expect "read-only admin lists jobs" 200
api GET /api/v1/nodes "$roa"; expect "read-only admin lists nodes" 200
api GET /api/v1/tokens "$admin"; expect "listed read-only" 200 '[.items[] | select(.name == "viewer") | .read_only] == [true]'
printf '{"name": "ro", "command": ["true"], "resources": {"cpu": "100m", "memory": "16Mi"}}' >"$tmp/j"
api POST /api/v1/jobs "$roa" "$tmp/j"; expect "read-only admin cannot submit" 403 '.error | test("read-only")'
api POST /api/v1/jobs "$rou" "$tmp/j"; expect "read-only user cannot submit" 403 '.error | test("read-only")'
api POST /api/v1/schedule "$rou" "$tmp/j"; expect "read-only user asks what-if" 200
api POST "/api/v1/nodes/$node/cordon" "$roa"; expect "read-only admin cannot cordon" 403
echo '{"role":"user","tenant":"team-b"}' >"$tmp/t"
api POST /api/v1/tokens "$roa" "$tmp/t"; expect "read-only admin cannot mint tokens" 403
api DELETE "/api/v1/tokens/$(echo -n "$ua" | sha256sum | cut -d' ' -f1)" "$roa"; expect "read-only admin cannot revoke" 403
api GET /api/v1/jobs "$ua"; expect "the token it tried to revoke still works" 200
"${CRATER_BIN:?}" token create --role admin --read-only --name ro2 --server "$url" --token "$admin" -o json >"$tmp/ro2" 2>&1 \
    && jq -e '.readOnly == true' "$tmp/ro2" >/dev/null && ok || bad "crater token create --read-only: $(cat "$tmp/ro2")"
"${CRATER_BIN:?}" token list --server "$url" --token "$admin" >"$tmp/tl" 2>&1 \
    && grep -q "admin/ro .*viewer" "$tmp/tl" && ok || bad "crater token list shows read-only: $(cat "$tmp/tl")"
# revocation: the token stops working at once; the last admin token stays
echo '{"role":"user","tenant":"team-b","name":"short-lived"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; tmptok=$(field .token); tmphash=$(field .hash)
api GET /api/v1/jobs "$tmptok"; expect "new token works" 200
"${CRATER_BIN:?}" token revoke "$tmphash" --server "$url" --token "$admin" >"$tmp/rev" 2>&1 \
    && grep -q revoked "$tmp/rev" && ok || bad "crater token revoke: $(cat "$tmp/rev")"
api GET /api/v1/jobs "$tmptok"; expect "revoked token refused" 401
api DELETE "/api/v1/tokens/$tmphash" "$admin"; expect "revoke twice" 404
api DELETE "/api/v1/tokens/$(echo -n "$admin" | sha256sum | cut -d' ' -f1)" "$admin"
expect "the last admin token" 409 '.error | test("last admin token")'
api DELETE "/api/v1/tokens/$tmphash" "$ua"; expect "a user revokes" 403
# expiry: a token stops working when it expires; list shows last use
echo '{"role":"user","tenant":"team-b","expires":"6s"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; expect "expiring token" 201 '.expires_ms > 0'
exptok=$(field .token); exphash=$(field .hash)
api GET /api/v1/jobs "$exptok"; expect "token works before it expires" 200
api GET /api/v1/tokens "$admin"
expect "last use listed" 200 "[.items[] | select(.hash == \"$exphash\") | .last_used_ms > 0 and .expired == false] == [true]"
until_ 60 'api GET /api/v1/jobs "$exptok"; [ "$code" = 401 ]' && ok || bad "token never expired"
expect "expired token refused" 401 '.error | test("expired")'
api GET /api/v1/tokens "$admin"; expect "listed as expired" 200 "[.items[] | select(.hash == \"$exphash\") | .expired] == [true]"
"${CRATER_BIN:?}" token list --server "$url" --token "$admin" >"$tmp/tl" 2>&1 \
    && grep -q "^${exphash:0:12} .* expired" "$tmp/tl" && grep -q "alice" "$tmp/tl" && ok || bad "crater token list: $(cat "$tmp/tl")"
for e in '"expires":"0s"' '"expires":"soon"' '"expires":"11000d"' '"expiry":"1d"'; do
    echo "{\"role\":\"user\",\"tenant\":\"team-b\",$e}" >"$tmp/t"
    api POST /api/v1/tokens "$admin" "$tmp/t"; expect "token with $e" 400 '.field | test("^expir")'
done

# ---- input errors -------------------------------------------------------------
printf '{"name": ' >"$tmp/j"
api POST /api/v1/jobs "$admin" "$tmp/j"; expect "bad JSON" 400 '.code == "EPARSE"'
printf '{"name": "x", "comand": ["true"]}' >"$tmp/j"
api POST /api/v1/jobs "$admin" "$tmp/j"; expect "unknown field" 400 '.field == "comand" and (.error | test("command"))'
job "$tmp/j" units "resources: {memory: 20GB/s}"
api POST /api/v1/jobs "$admin" "$tmp/j"; expect "wrong unit" 400 '.code == "EUNIT" and .field == "resources.memory" and (.error | test(":3:"))'
head -c 5000000 /dev/zero | tr '\0' ' ' >"$tmp/big"
api POST /api/v1/jobs "$admin" "$tmp/big"; expect "oversize body" 413 '.code == "ELIMIT"'
job "$tmp/j" huge "resources: {gpu: {count: 64, memory: 200Gi}}"
api POST /api/v1/jobs "$admin" "$tmp/j"; expect "impossible slice" 422 '.field | startswith("resources.gpu")'
api GET /api/v1/jobs?state=sleeping "$admin"; expect "bad state filter" 400 '.field == "state"'
api GET /api/v1/nope "$admin"; expect "unknown path" 404
api PUT /api/v1/jobs "$admin"; expect "wrong method" 405

# ---- tenancy ------------------------------------------------------------------
job "$tmp/j" a-job "resources: {cpu: 1, memory: 1Gi}"
api POST /api/v1/jobs "$ua" "$tmp/j"; expect "user submit" 201 '.tenant == "team-a" and .state == "pending"'
ja=$(field .id)
api GET "/api/v1/jobs/$ja" "$ub"; expect "other tenant cannot see" 404
api POST "/api/v1/jobs/$ja/cancel" "$ub"; expect "other tenant cannot cancel" 404
api GET "/api/v1/jobs" "$ub"; expect "other tenant list empty" 200 '.items | length == 0'
api GET "/api/v1/jobs/$ja" "$ua"; expect "own job" 200 ".id == \"$ja\""
job "$tmp/j" sneaky "tenant: team-b" "resources: {cpu: 1, memory: 1Gi}"
api POST /api/v1/jobs "$ua" "$tmp/j"; expect "submit into other tenant" 403 '.field == "metadata.tenant"'
api POST "/api/v1/nodes/$node/cordon" "$ua"; expect "user cannot cordon" 403
echo '{"version":"0.1.0","node":{}}' >"$tmp/r"
api POST "/api/v1/agents/$node/register" "$other"; expect "agent of other node" 403

# profiles per tenant: a tenant's own profiles are its own; the shared
# (admin) names cannot be shadowed
printf 'apiVersion: crater/v1\nkind: Profile\nname: default\nversion: "99"\ntraining: {env: {LD_PRELOAD: /tmp/evil.so}}\n' >"$tmp/prof"
api POST /api/v1/profiles "$ub" "$tmp/prof"; expect "a tenant shadows the shared default" 409 '.field == "name" and (.error | test("cannot shadow"))'
api GET /api/v1/profiles "$ua"; expect "nothing published" 200 '[.items[] | select(.version == "99")] | length == 0'
printf 'apiVersion: crater/v1\nkind: Profile\nname: b-env\nversion: "1"\ntraining: {env: {SECRET_OF_B: "yes"}}\n' >"$tmp/prof"
api POST /api/v1/profiles "$ub" "$tmp/prof"; expect "a tenant publishes its own" 201 '.tenant == "team-b"'
api GET /api/v1/profiles "$ua"; expect "another tenant does not see it" 200 '[.items[] | select(.name == "b-env")] | length == 0'
api GET /api/v1/profiles/b-env "$ua"; expect "nor get it" 404
api GET /api/v1/profiles/b-env "$ub"; expect "its tenant gets it" 200 '.tenant == "team-b"'
api GET /api/v1/profiles "$admin"; expect "an admin sees all" 200 '([.items[] | select(.name == "b-env" and .tenant == "team-b")] | length == 1) and ([.items[] | select(.name == "default")][0].shared == true)'
job "$tmp/j" use-b "profile: b-env" "priority: -100" "resources: {cpu: 1, memory: 1Gi}"
api POST /api/v1/jobs "$ua" "$tmp/j"; expect "another tenant's job cannot use it" 404 '.field == "profile" and (.error | test("unknown profile"))'
api POST /api/v1/jobs "$ub" "$tmp/j"; expect "its tenant's job uses it" 201 '.spec.env.SECRET_OF_B == "yes" or (.spec.env | tostring | test("SECRET_OF_B"))'
bjob=$(field .id)
api POST "/api/v1/jobs/$bjob/cancel" "$ub"
api POST "/api/v1/profiles?tenant=team-a" "$ub" "$tmp/prof"; expect "a user publishes for another tenant" 403 '.field == "tenant"'
api POST "/api/v1/profiles?tenant=Team_A" "$admin" "$tmp/prof"; expect "bad tenant parameter" 400 '.field == "tenant"'

# ---- limits by default (LimitRange) -------------------------------------------
printf 'name: no-ask\ncommand: [sleep, "1"]\npriority: -100\n' >"$tmp/j"
api POST /api/v1/jobs "$ua" "$tmp/j"; expect "a job asking nothing gets the defaults" 201 '.spec.resources.cpu == "1000m" and .spec.resources.memory == 1073741824'
api POST "/api/v1/jobs/$(field .id)/cancel" "$ua"
echo '{"defaults": {"cpu": "500m", "memory": "256Mi"}}' >"$tmp/q"
api PUT /api/v1/tenants/team-b "$admin" "$tmp/q"; expect "a tenant's defaults" 200 '.defaults.cpu_millis == 500 and .defaults.memory_bytes == 268435456'
api POST /api/v1/jobs "$ub" "$tmp/j"; expect "the tenant's defaults win" 201 '.spec.resources.cpu == "500m" and .spec.resources.memory == 268435456'
api POST "/api/v1/jobs/$(field .id)/cancel" "$ub"
echo '{"defaults": {"cpu": "lots"}}' >"$tmp/q"
api PUT /api/v1/tenants/team-b "$admin" "$tmp/q"; expect "bad default" 400 '.field == "defaults.cpu"'
echo '{"defaults": {"gpu": 1}}' >"$tmp/q"
api PUT /api/v1/tenants/team-b "$admin" "$tmp/q"; expect "unknown default" 400 '.field == "defaults"'

# ---- paging -------------------------------------------------------------------
for i in 1 2 3 4 5; do
    job "$tmp/j" page-$i "priority: -100" "resources: {cpu: 1, memory: 1Gi}"
    api POST /api/v1/jobs "$admin" "$tmp/j"
done
api GET "/api/v1/jobs?limit=2&tenant=default" "$admin"; expect "page 1" 200 '(.items | length == 2) and (.next != null)'
n1=$(field .next)
api GET "/api/v1/jobs?limit=2&tenant=default&after=$n1" "$admin"; expect "page 2" 200 '(.items | length == 2)'
n2=$(field .next)
api GET "/api/v1/jobs?limit=2&tenant=default&after=$n2" "$admin"; expect "page 3" 200 '(.items | length == 1) and .next == null'

# ---- the agent protocol -------------------------------------------------------
"${CRATER_BIN:?}" validate -o json "$src/examples/hardware/h100x8.yaml" 2>/dev/null \
    | jq '{version: "0.1.0", node: .}' >"$tmp/r1"
api POST "/api/v1/agents/$node/register" "$agent" "$tmp/r1"
expect "register without a protocol version" 400 '.field == "protocol" and (.error | test("protocol 1"))'
proto=$(sed -n 's/^#define CRATER_AGENT_PROTOCOL \([0-9]*\).*/\1/p' "$src/src/daemon/buildinfo.h")
jq --argjson p "$proto" '. + {protocol: $p, tasks: []}' "$tmp/r1" >"$tmp/r"
api POST "/api/v1/agents/$node/register" "$agent" "$tmp/r"; expect register 200 ".node == \"$node\" and .protocol == $proto"
seq=$(field .seq)
api POST "/api/v1/agents/$node/heartbeat" "$agent" <(echo '{"tasks": []}'); expect heartbeat 200
api GET "/api/v1/nodes/$node" "$admin"; expect "node ready" 200 '.state == "Ready"'
# the six pending jobs were bound as soon as the node came up
api GET "/api/v1/agents/$node/work?after=$seq&wait_ms=3000" "$agent"
expect "work arrives" 200 "[.items[] | select(.op == \"start\") | .task.job] | index(\"$ja\") != null"
seq=$(field .seq)
start=$(jq -c "[.items[] | select(.task.job == \"$ja\")][0].task" "$tmp/body")
echo "$start" | jq -e '.argv == ["sleep","1"] and (.env.CUDA_DEVICE_ORDER == "PCI_BUS_ID")' >/dev/null && ok || bad "task has argv and env"
# a heartbeat carries samples, never states; events carry states
printf '{"tasks":[{"job":"%s","attempt":1,"usage":{"cpu_millis":900}}]}' "$ja" >"$tmp/h"
api POST "/api/v1/agents/$node/heartbeat" "$agent" "$tmp/h"
api GET "/api/v1/jobs/$ja" "$ua"; expect "a heartbeat does not start a job" 200 '.state == "bound"'
t_start=$(( $(date +%s) * 1000 + 30000 )) # the node's clock, a little ahead
printf '{"events":[{"job":"%s","attempt":1,"event":"started","pid":4242,"time_ms":%s}]}' "$ja" "$t_start" >"$tmp/e"
api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"; expect "started event" 200
api GET "/api/v1/jobs/$ja" "$ua"; expect "running at the agent's time" 200 ".state == \"running\" and .started_ms == $t_start"
api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"; expect "a repeated event is a no-op" 200
echo '{"events":[{"job":"1","event":"finished"}]}' >"$tmp/e"
api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"; expect "unknown event" 400 '.field == "events" and (.error | test("events\\[0\\]"))'
printf 'hello from the task\n' >"$tmp/log"
printf '{"events":[{"job":"%s","attempt":1,"event":"exited","exit_code":0,"logs":{"stdout":%d,"stderr":0}}]}' "$ja" "$(wc -c <"$tmp/log")" >"$tmp/e"
api POST "/api/v1/agents/$node/events" "$agent" "$tmp/e"; expect "exited event" 200
api GET "/api/v1/jobs/$ja" "$ua"; expect "finished, output on its way" 200 '.state == "succeeded" and (.logs_complete | not)'
api GET "/api/v1/jobs/$ja/events" "$ua"
expect "events" 200 '[.items[].state | select(. != "pending")] == ["bound","running","succeeded"] and .items[0].reason == "submitted" and ([.items[] | select(.state == "running")][0] | (.reason | test("pid 4242")) and .time_ms == '"$t_start"')'
api GET "/api/v1/jobs/$ja/metrics" "$ua"; expect "job metrics" 200 '(.samples | length == 1) and .end_ms != null'
api POST "/api/v1/agents/$node/logs/$ja?attempt=1&stream=stdout&offset=0" "$agent" "$tmp/log"; expect "log upload" 200 '.truncated | not'
api GET "/api/v1/jobs/$ja" "$ua"; expect "output complete" 200 '.logs_complete'
api GET "/api/v1/jobs/$ja/logs" "$ua"
[ "$code" = 200 ] && grep -q 'hello from the task' "$tmp/body" && ok || bad "log read"
api GET "/api/v1/jobs/$ja/logs?attempt=2" "$ua"; expect "no attempt 2" 400 '.field == "attempt"'
# logs.maxBytes (default 256Mi) cuts a stream and says so at its end
printf '0123456789AB' >"$tmp/tail"
api POST "/api/v1/agents/$node/logs/$ja?attempt=1&stream=stdout&offset=268435450" "$agent" "$tmp/tail"
expect "upload past logs.maxBytes" 200 '.truncated'
api GET "/api/v1/jobs/$ja/logs?offset=268435450&limit=200" "$ua"
[ "$(cat "$tmp/body")" = "$(printf '012345\n[crater: output truncated at 268435456 bytes (logs.maxBytes)]')" ] \
    && ok || bad "truncation note: '$(cat "$tmp/body")'"
api POST "/api/v1/agents/$node/logs/$ja?attempt=7&stream=stdout&offset=0" "$agent" "$tmp/log"; expect "upload to a future attempt" 400 '.field == "attempt"'
api POST "/api/v1/jobs/$ja/cancel" "$ua"; expect "cancel finished job" 409

# ---- dry run ------------------------------------------------------------------
job "$tmp/j" dry "resources: {gpu: {count: 2}, cpu: 8, memory: 64Gi}"
api POST /api/v1/schedule "$admin" "$tmp/j"
expect "dry run fits" 200 ".fits and .placement.node == \"$node\" and (.placement.gpus | length == 2) and (.placement.gpus[0].uuid | length > 0)"
job "$tmp/j" dry2 "resources: {gpu: {count: 1}, cpu: 500, memory: 64Gi}"
api POST /api/v1/schedule "$admin" "$tmp/j"; expect "dry run explains" 200 '(.fits | not) and (.reason | length > 0)'

# what-if on a batch: 9 one-GPU jobs on an 8-GPU node, in order; each sees
# the ones before it, nothing stays charged afterwards
job "$tmp/j" batch 'array: "0-8"' "resources: {gpu: {count: 1}, cpu: 1, memory: 1Gi}"
api POST /api/v1/schedule "$admin" "$tmp/j"
expect "what-if on a batch" 200 '(.placed + .pending == 9) and .pending >= 1 and (.items | length == 9) and ([.items[] | select(.fits) | .placements[0].gpus[0].index] | (length == (unique | length)))'
{ echo "name: pair"; echo "command: [sleep, '1']"; echo "replicas: 2"; echo "gang: true"; echo "resources: {gpu: {count: 1}, cpu: 1, memory: 1Gi}"; echo ---
  echo "name: after-pair"; echo "command: [sleep, '1']"; echo "resources: {cpu: 1, memory: 1Gi}"; } >"$tmp/j"
api POST /api/v1/schedule "$admin" "$tmp/j"; expect "what-if with a gang" 200 '(.items | length == 2) and (.items[0].placements | length == 2 or (.items[0].fits | not))'
job "$tmp/j" dry "resources: {gpu: {count: 2}, cpu: 8, memory: 64Gi}"
api POST /api/v1/schedule "$admin" "$tmp/j"; expect "the batch left nothing charged" 200 '.fits'

# long poll: a job submitted while the agent waits reaches it at once
curl -s -H "Authorization: Bearer $agent" "$url/api/v1/agents/$node/work?after=$seq&wait_ms=20000" >"$tmp/poll" &
cpid=$!
sleep 0.3
job "$tmp/j" quick "resources: {gpu: {count: 1, memory: 10Gi}, cpu: 1, memory: 1Gi}"
t0=$(date +%s%N)
api POST /api/v1/jobs "$admin" "$tmp/j"; jq_quick=$(field .id)
wait $cpid
t1=$(date +%s%N)
jq -e "[.items[].task.job] | index(\"$jq_quick\") != null" "$tmp/poll" >/dev/null && ok || bad "long poll delivers the new job"
echo "long poll: job delivered $(( (t1 - t0) / 1000000 )) ms after submit"
seq=$(jq -r .seq "$tmp/poll")

# ---- preemption -------------------------------------------------------------------
job "$tmp/j" low "priority: -50" "preemptible: true" "resources: {gpu: {count: 7}, cpu: 8, memory: 64Gi}"
api POST /api/v1/jobs "$admin" "$tmp/j"; low=$(field .id)
sleep 0.5
api GET "/api/v1/jobs/$low" "$admin"; expect "low bound" 200 '.state == "bound"'
printf '{"events":[{"job":"%s","attempt":1,"event":"started","pid":1}]}' "$low" >"$tmp/h"
api POST "/api/v1/agents/$node/events" "$agent" "$tmp/h"
job "$tmp/j" high "priorityClass: high" "resources: {gpu: {count: 4}, cpu: 8, memory: 64Gi}"
api POST /api/v1/jobs "$admin" "$tmp/j"; high=$(field .id)
sleep 0.5
api GET "/api/v1/jobs/$low" "$admin"; expect "victim preempting" 200 '.state == "preempting"'
api GET "/api/v1/agents/$node/work?after=$seq&wait_ms=2000" "$agent"
expect "stop order" 200 "[.items[] | select(.op == \"stop\" and .job == \"$low\")] | length == 1"
seq=$(field .seq)
printf '{"events":[{"job":"%s","attempt":1,"event":"exited","exit_code":0,"signal":15}]}' "$low" >"$tmp/h"
api POST "/api/v1/agents/$node/events" "$agent" "$tmp/h"
sleep 0.5
api GET "/api/v1/jobs/$low" "$admin"; expect "victim requeued" 200 '(.state == "pending" or .state == "bound") and .attempts == 2 and ([.history[].state] | index("preempted") != null)'
api GET "/api/v1/jobs/$high" "$admin"; expect "preemptor bound" 200 '.state == "bound"'
printf '{"events":[{"job":"%s","attempt":1,"event":"started","pid":2}]}' "$high" >"$tmp/h"
api POST "/api/v1/agents/$node/events" "$agent" "$tmp/h"

# ---- quota ------------------------------------------------------------------------
echo '{"quota": {"gpus": 1, "memory": "4Gi"}}' >"$tmp/q"
api PUT /api/v1/tenants/team-a "$admin" "$tmp/q"; expect "set quota" 200 '.quota.gpus == 1'
echo '{"quota": {"memory": "4GB/s"}}' >"$tmp/q"
api PUT /api/v1/tenants/team-a "$admin" "$tmp/q"; expect "quota unit error" 400 '.field == "quota.memory"'
job "$tmp/j" greedy "resources: {gpu: {count: 2}, cpu: 1, memory: 1Gi}"
api POST /api/v1/jobs "$ua" "$tmp/j"; expect "over quota" 422 '.field == "resources.gpu.count" and (.error | test("quota"))'
# a request near 2^64 cannot wrap the tenant's sum
job "$tmp/j" wrap "resources: {cpu: 1, memory: 18446744072635809792B}"
api POST /api/v1/jobs "$ua" "$tmp/j"; expect "memory near 2^64" 400 '.field == "resources.memory" and (.error | test("1Pi"))'

# ---- cordon, nodes, resources -----------------------------------------------------
api GET "/api/v1/resources?filter=type:gpu" "$admin"; expect "gpu resources" 200 '(.items | length == 8) and all(.items[]; .type == "gpu")'
uuid=$(jq -r '.items[0].uuid' "$tmp/body")
api GET "/api/v1/resources/$uuid/capabilities" "$admin"; expect "capabilities" 200 '.memory_bytes > 0 and .sm_count > 0'
api GET "/api/v1/resources?filter=colour:red" "$admin"; expect "bad filter" 400 '.field == "filter"'
echo '{"reasn": "typo"}' >"$tmp/c"
api POST "/api/v1/nodes/$node/cordon" "$admin" "$tmp/c"; expect "cordon body typo" 400 '.code == "EFIELD" and .field == "reasn"'
echo '{"reason": 5}' >"$tmp/c"
api POST "/api/v1/nodes/$node/drain" "$admin" "$tmp/c"; expect "reason not a string" 400 '.field == "reason"'
api GET "/api/v1/nodes/$node" "$admin"; expect "rejected cordon changed nothing" 200 '(.cordoned | not) and (.draining | not)'
echo '{"reason": "disk replacement"}' >"$tmp/c"
api POST "/api/v1/nodes/$node/cordon" "$admin" "$tmp/c"; expect cordon 200 '.cordoned and .reason == "disk replacement"'
api POST "/api/v1/nodes/$node/uncordon" "$admin"; expect uncordon 200 '.cordoned | not'

# ---- metrics ------------------------------------------------------------------------
curl -s "$url/metrics" >"$tmp/metrics.txt"
if command -v promtool >/dev/null; then
    promtool check metrics <"$tmp/metrics.txt" >"$tmp/lint" 2>&1 && ok || { bad "promtool"; cat "$tmp/lint"; }
else
    echo "SKIP: promtool not installed (Debian package prometheus)"
fi
grep -q "crater_resource_capability_allocation{node=\"$node\",resource=\"gpu\"}" "$tmp/metrics.txt" && ok || bad "allocation metric"
grep -q '^crater_decisions_total{result="bound"} [1-9]' "$tmp/metrics.txt" && ok || bad "decisions metric"
grep -q '^crater_preemptions_total [1-9]' "$tmp/metrics.txt" && ok || bad "preemptions metric"
grep -q '"decision":"preempting"' "$tmp/data/decisions.log" && ok || bad "decision log"

# ---- kill -9 and restart ------------------------------------------------------------
api GET "/api/v1/jobs?state=pending" "$admin"; pending_before=$(jq -c '[.items[].id]' "$tmp/body")
kill -9 "$pid"; wait "$pid" 2>/dev/null
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
api GET "/api/v1/jobs?state=pending" "$admin"
expect "pending survive restart" 200 "[.items[].id] == $pending_before"
api GET "/api/v1/jobs/$high" "$admin"; expect "running survives restart" 200 ".state == \"running\" and .placement.node == \"$node\""
api GET "/api/v1/jobs/$ja" "$ua"; expect "tokens survive restart" 200 '.state == "succeeded"'
api GET /api/v1/profiles/b-env "$ub"; expect "a tenant profile survives restart" 200 '.tenant == "team-b"'
api GET /api/v1/profiles/b-env "$ua"; expect "and stays its own" 404
api GET /api/v1/tenants "$admin"; expect "tenant defaults survive restart" 200 '[.items[] | select(.name == "team-b") | .defaults.cpu_millis] == [500]'
api GET /api/v1/tokens "$admin"; expect "last use survives restart" 200 '[.items[] | select(.name == "alice") | .last_used_ms > 0] == [true]'
api GET "/api/v1/nodes/$node" "$admin"; expect "node waits for agent" 200 '.state == "NotReady"'
# the agent holds (adopted) the running task: it stays running, and the
# answer says how much of its output craterd has
jq --arg j "$high" '.tasks = [{job: $j, attempt: 1, state: "running", pid: 2}]' "$tmp/r" >"$tmp/r2"
api POST "/api/v1/agents/$node/register" "$agent" "$tmp/r2"
expect "re-register" 200 "[.tasks[] | select(.job == \"$high\") | .logs.stdout] == [0]"
api GET "/api/v1/jobs/$high" "$admin"; expect "held task keeps running" 200 '.state == "running"'
# a task the node holds that is not placed there is stopped
jq '.tasks = [{job: "999999", attempt: 1, state: "running", pid: 3}]' "$tmp/r" >"$tmp/r3"
api POST "/api/v1/agents/$node/register" "$agent" "$tmp/r3"; seq=$(field .seq)
api GET "/api/v1/jobs/$high" "$admin"; expect "a job the agent no longer holds is requeued" 200 '.state == "pending" or .state == "bound"'
api GET "/api/v1/agents/$node/work?after=$seq&wait_ms=2000" "$agent"
expect "stray task stopped" 200 '[.items[] | select(.op == "stop" and .job == "999999")] | length == 1'

# a re-registration cannot invent capacity: the node keeps what it
# registered with, and says what the agent claimed
api GET "/api/v1/nodes/$node" "$admin"; cap_before=$(jq -c .capacity "$tmp/body")
jq '.node.nodes[0].cpus[0].threads = 4096 | .node.nodes[0].memory[0].capacity = 1125899906842624' "$tmp/r" >"$tmp/rbig"
api POST "/api/v1/agents/$node/register" "$agent" "$tmp/rbig"; expect "re-register with invented capacity" 200
api GET "/api/v1/nodes/$node" "$admin"
expect "capacity stays as registered" 200 "(.capacity | tostring) == \"$(echo "$cap_before" | sed 's/"/\\"/g')\" and (.hardware_change | test(\"keeps its registered\"))"
api POST "/api/v1/agents/$node/register" "$agent" "$tmp/r"
api GET "/api/v1/nodes/$node" "$admin"; expect "the flag clears when the agent agrees again" 200 '.hardware_change == null'

# ---- attacks on the agent protocol: another node's agent forges a log --------------
jq --argjson p "$proto" '.node.nodes[0].name = "other-node" | . + {protocol: $p, tasks: []}' "$tmp/r1" >"$tmp/ro"
api POST "/api/v1/agents/other-node/register" "$other" "$tmp/ro"; expect "other node registers" 200
printf 'forged\n' >"$tmp/forged"
api POST "/api/v1/agents/other-node/logs/$ja?attempt=1&stream=stdout&offset=0" "$other" "$tmp/forged"
expect "log upload for a job of another node" 403 '.field == "job"'
api GET "/api/v1/jobs/$ja/logs" "$ua"
grep -q forged "$tmp/body" && bad "the forged log was written" || ok
# an agent token reaches its node's agent endpoints only
for path in /api/v1/jobs /api/v1/tenants /api/v1/nodes /api/v1/tokens "/api/v1/jobs/$ja"; do
    api GET "$path" "$other"; expect "agent token on $path" 403 '.error | test("may only call /api/v1/agents/other-node")'
done
# a user sees its own tenant's job ids on a node, not other tenants'
api GET "/api/v1/nodes/$node" "$ub"; expect "node seen by team-b" 200 "[.jobs[] | select(. == \"$high\")] | length == 0"
api GET "/api/v1/nodes" "$admin"; expect "node seen by an admin" 200 "[.items[].jobs[] | select(. == \"$high\")] | length == 1"
# a heartbeat listing 5,000 invented tasks is refused whole (at most 4096)
jq -n '{util: {cpu: 0.1, memory: 0.1, disk: 0, gpus: []}, tasks: [range(5000) | {job: (. + 100000 | tostring), attempt: 1, usage: {cpu_millis: 1, memory_bytes: 1}}]}' >"$tmp/fat"
api POST "/api/v1/agents/other-node/heartbeat" "$other" "$tmp/fat"; expect "5,000 fake tasks in a heartbeat" 413 '.field | test("tasks")'
for o in -1 abc 1e3 99999999999999999999; do
    api GET "/api/v1/jobs/$ja/logs?offset=$o" "$ua"; expect "log read offset=$o" 400 '.field == "offset"'
    api POST "/api/v1/agents/$node/logs/$ja?attempt=1&stream=stdout&offset=$o" "$agent" "$tmp/forged"
    expect "log upload offset=$o" 400 '.field == "offset"'
done

# ---- several documents in one request; job arrays ------------------------------------
count_jobs() { api GET "/api/v1/jobs?limit=1000" "$admin"; jq '.items | length' "$tmp/body"; }
jobtext() { local name=$1; shift; echo "name: $name"; echo "command: [sleep, '1']"; for l in "$@"; do echo "$l"; done; }
# admission: what no node could ever run, even empty, is refused at once
job "$tmp/j" never "$(echo 'nodeSelector: {zone: nowhere}')" "resources: {cpu: 1, memory: 1Gi}"
api POST /api/v1/jobs "$admin" "$tmp/j"; expect "a job no node can ever run" 422 '.code == "EIMPOSSIBLE" and (.error | test("nodeSelector"))'
job "$tmp/j" never "resources: {cpu: 100000, memory: 1Gi}"
api POST /api/v1/jobs "$admin" "$tmp/j"; expect "more CPU than any node" 422 '.error | test("insufficient CPU")'
job "$tmp/j" orphan "after: [no-such-job]" "resources: {cpu: 1, memory: 1Gi}"
api POST /api/v1/jobs "$admin" "$tmp/j"; expect "after names an unknown job" 404 '.field == "after" and (.error | test("no-such-job"))'
{ jobtext dep-a "resources: {cpu: 1, memory: 1Gi}" "priority: -100"; echo ---
  jobtext dep-b "after: [dep-a]" "resources: {cpu: 1, memory: 1Gi}" "priority: -100"; } >"$tmp/deps"
api POST /api/v1/jobs "$admin" "$tmp/deps"; expect "after names a job earlier in the request" 201 '.jobs == 2'
for id in $(jq -r '.items[].id' "$tmp/body"); do api POST "/api/v1/jobs/$id/cancel" "$admin"; expect "cancel $id" 200; done
# the rest of this section keeps its jobs pending: every node cordoned
for n in "$node" other-node; do api POST "/api/v1/nodes/$n/cordon" "$admin"; expect "cordon $n" 200; done
nowhere="preemptible: true"
before=$(count_jobs)
{ jobtext bulk-1 "$nowhere" "resources: {cpu: 1, memory: 1Gi}"; echo ---
  jobtext bulk-2 "$nowhere" "resources: {cpu: 1, memory: 1Gi}"; echo ---
  jobtext bulk-3 "$nowhere" "replicas: 300" "resources: {cpu: 1, memory: 1Gi}"; } >"$tmp/multi"
api POST /api/v1/jobs "$admin" "$tmp/multi"
expect "one bad document refuses the request" 422 '.field == "replicas" and (.error | test("document 3")) and (.error | test("nothing was submitted"))'
[ "$(count_jobs)" = "$before" ] && ok || bad "nothing of a refused request was created"
sed -i 's/replicas: 300/priority: 5/' "$tmp/multi"
api POST /api/v1/jobs "$admin" "$tmp/multi"
expect "three documents, one transaction" 201 '(.items | length == 3) and .jobs == 3 and ([.items[].name] == ["bulk-1","bulk-2","bulk-3"]) and ((.items[2].id | tonumber) - (.items[0].id | tonumber) == 2)'
job "$tmp/arr" arr "$nowhere" 'array: "0-99%5"' "resources: {cpu: 1, memory: 1Gi}"
api POST /api/v1/jobs "$admin" "$tmp/arr"
expect "array submitted" 201 '.array.count == 100 and .array.parallelism == 5 and .array.indexes == "0-99%5" and .array.states.pending == 100'
arr=$(field .id)
api GET "/api/v1/arrays/$arr" "$admin"; expect "array counts" 200 ".id == \"$arr\" and .count == 100 and .states.pending == 100"
api GET "/api/v1/arrays/$arr" "$ua"; expect "another tenant's array" 404
api GET "/api/v1/jobs/${arr}_42" "$admin"
expect "job 42 of the array" 200 ".array.index == 42 and .array.id == \"$arr\" and .spec.env.CRATER_ARRAY_INDEX == \"42\" and .spec.env.CRATER_ARRAY_ID == \"$arr\" and (.id | tonumber) == $arr + 42"
api GET "/api/v1/jobs/${arr}_100" "$admin"; expect "no index 100" 404
api POST "/api/v1/jobs/${arr}_7/cancel" "$admin"; expect "cancel one index" 200 '.state == "cancelled"'
api POST "/api/v1/arrays/$arr/cancel" "$admin"; expect "cancel the array" 200 '.cancelled == 99 and .states.cancelled == 100'
job "$tmp/arr" arr2 'array: "9-3"'
api POST /api/v1/jobs "$admin" "$tmp/arr"; expect "bad array" 400 '.field == "array" and (.error | test("ends before it starts"))'
{ jobtext big-1 'array: "0-9999"'; echo ---; jobtext big-2 'array: "0"'; } >"$tmp/big"
api POST /api/v1/jobs "$admin" "$tmp/big"; expect "over 10,000 jobs in one request" 400 '.error | test("at most 10000 jobs")'

stop_craterd && ok || bad "clean stop"
if grep -q 'Sanitizer' "$craterd_log"; then bad "sanitizer report"; cat "$craterd_log"; else ok; fi

echo "test_craterd: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
