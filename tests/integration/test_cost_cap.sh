#!/usr/bin/env bash
# test_cost_cap.sh - cost accounting on `crater up` (issue 16, doc/cost.md):
# with a CPU price of 3600 a core-hour (one per core-second) and 1 s
# heartbeats, a job of 1 core with costCap 3 is stopped by craterd with
# reason "cost cap" (state cancelled, its history names the amounts) well
# before its `sleep 60` ends; its cost shows in the API, in `crater
# describe` and in jobs/{id}/metrics; a checkpointing job (the C client)
# gets the cost-cap notice and saves; GET /api/v1/cost by job and by node
# agree and have an __idle__ row; a tenant over its budget has submissions
# refused with a clear error; the audit log records submissions, cancels
# and the token creation (admin only); the metrics pass promtool; after
# kill -9 and a restart the ledger and its owners are back, an expired
# rotated audit log is removed and a recent one read. Every wait is for a
# state, with a deadline; no task process is left.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
mark=cost$RANDOM$RANDOM # in every task's argv: pgrep counts only ours
cleanup() {
    [ -n "$up" ] && kill -9 "$up" 2>/dev/null
    pkill -9 -f "$mark" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }
job() { c get job "$1" -o json 2>/dev/null; }
api() { curl -s -H "Authorization: Bearer ${2:-$token}" "$url$1"; }
wait_for() { # wait_for SECONDS JOB JQ_FILTER
    local t=$(($1 * 30)) i # bounds x3: a loaded CI machine
    for i in $(seq 1 "$t"); do
        job "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for job $2: $3"
    job "$2" | jq -c '{state, reason, cost, history: [.history[] | .state + ": " + .reason]}'
    return 1
}
submit() { # submit NAME CAP SHELL_SCRIPT [TOKEN] -> job id
    printf 'name: %s\ncostCap: %s\ngracePeriod: 2s\ncommand: [sh, -c, %s, %s]\nresources: {cpu: 1, memory: 64Mi}\n' \
        "$1" "$2" "$(jq -Rn --arg s "$3" '$s')" "$mark" >"$tmp/j.yaml"
    "$bin" submit -f "$tmp/j.yaml" -o json --server "$url" --token "${4:-$token}" | jq -r .id
}
copies() { pgrep -fc -- "$mark" || true; }

cat >"$tmp/craterd.yaml" <<'YAML'
agent: {heartbeatInterval: 1s, heartbeatTimeout: 10s}
cost:
  cpuCoreHour: 3600
  memoryGiBHour: 0
  gpuModels: {a100-sxm4-80gb: 7200}
  tenantBudgets: {broke: 0.000001}
YAML
start_up() { # start_up NAME: crater up on $tmp/var; sets up, url, token
    "$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/craterd.yaml" \
        --hardware "$src/tests/data/hw-small.yaml" >"$tmp/$1.out" 2>&1 &
    up=$!
    url=""
    for _ in $(seq 1 300); do
        url=$(sed -n 's/.*API on \(http:[^,]*\),.*/\1/p' "$tmp/$1.out")
        [ -n "$url" ] && break
        kill -0 "$up" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$url" ] || { echo "crater up did not start:"; cat "$tmp/$1.out"; exit 1; }
    token=$(cat "$tmp/var/admin.token")
    for _ in $(seq 1 300); do
        [ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ] && return 0
        sleep 0.1
    done
    echo "crater up: nodes not ready:"; c get nodes; cat "$tmp/$1.out"; exit 1
}
start_up up1

# ---- costCap 3 at 1 per second: stopped with reason "cost cap" -------------------
id=$(submit capped 3 "sleep 60")
wait_for 10 "$id" '.state == "running"' && ok || bad "capped job running"
wait_for 30 "$id" '.state == "cancelled"' && ok || bad "capped job stopped"
job "$id" | jq -e '.reason | startswith("cost cap")' >/dev/null \
    && ok || bad "reason: $(job "$id" | jq -c .reason)"
job "$id" | jq -e '[.history[].reason | select(startswith("cost cap: charged"))] | length == 1' >/dev/null \
    && ok || bad "history: $(job "$id" | jq -c '[.history[].reason]')"
job "$id" | jq -e '.cost.capped == true and .cost.total >= 3 and .cost.total < 10 and .cost.cap == 3' >/dev/null \
    && ok || bad "cost: $(job "$id" | jq -c .cost)"
api "/api/v1/jobs/$id/metrics" | jq -e '.cost.total >= 3' >/dev/null \
    && ok || bad "metrics cost: $(api "/api/v1/jobs/$id/metrics" | jq -c .cost)"
c describe job "$id" | has "^Cost: .*cap 3.000000 (reached)" \
    && ok || { bad "describe Cost"; c describe job "$id"; }
for _ in $(seq 1 300); do [ "$(copies)" = 0 ] && break; sleep 0.1; done
[ "$(copies)" = 0 ] && ok || bad "$(copies) task processes left after the cap"

# ---- a checkpointing job (the C client) gets the cost-cap notice and saves --------
if [ -x "${CKPT_TOY_TRAIN_BIN:-}" ]; then
    mkdir -m 1777 "$tmp/ck"
    cat >"$tmp/toy.yaml" <<Y
name: toy
costCap: 0.5
gracePeriod: 30s
checkpoint: {dir: $tmp/ck/toy}
command: [sh, -c, 'trap : TERM; "\$@"', $mark, $CKPT_TOY_TRAIN_BIN, $tmp/ck/toy, "1000000", "20", "2000"]
resources: {cpu: 100m, memory: 64Mi}
Y
    yid=$(c submit -f "$tmp/toy.yaml" -o json | jq -r .id)
    wait_for 60 "$yid" '.state == "cancelled" and .logs_complete' && ok || bad "checkpointing job stopped at its cap"
    c logs "$yid" --stream stderr | has "^toy_train: notice: cost-cap, [0-9]* ms left; saved step [0-9]*$" \
        && ok || bad "no cost-cap notice: $(c logs "$yid" --stream stderr | tail -n 3)"
    job "$yid" | jq -e '.reason | startswith("cost cap")' >/dev/null \
        && ok || bad "toy reason: $(job "$yid" | jq -c .reason)"
else
    echo "SKIP: checkpointing job at its cap (CKPT_TOY_TRAIN_BIN unset)"
fi

# ---- an uncapped job is charged and runs on -------------------------------------
id2=$(submit free 0 "sleep 60")
wait_for 10 "$id2" '.state == "running" and .cost.total > 0' && ok || bad "uncapped job charged"
c cancel "$id2" >/dev/null

# ---- the cost API: idle row; entries of an admin's answer add up ------------------
ans=$(api "/api/v1/cost?window=2h&aggregate=job")
echo "$ans" | jq -e --arg id "$id" '[.items[] | select(.name == $id)] | length >= 1' >/dev/null \
    && ok || bad "cost by job: $ans"
echo "$ans" | jq -e '[.items[] | select(.name == "__idle__")] | length >= 1' >/dev/null \
    && ok || bad "no idle row: $ans"
# job entries + idle (by job) == the nodes' entries + idle (by node); a
# heartbeat between the two queries charges more: ask again until none did
for _ in $(seq 1 300); do
    a=$(api "/api/v1/cost?window=2h&aggregate=job" | jq '[.items[].totalCostMicros] | add')
    b=$(api "/api/v1/cost?window=2h&aggregate=node" | jq '[.items[].totalCostMicros] | add')
    [ "$a" = "$b" ] && break
done
[ "$a" = "$b" ] && [ "$a" -gt 0 ] && ok || bad "by job $a != by node $b"
api "/api/v1/cost?window=90m" | jq -e '.field == "window"' >/dev/null \
    && ok || bad "bad window not named: $(api '/api/v1/cost?window=90m')"
c cost --window 2h --by tenant >"$tmp/cost.out" && grep -q "^TOTAL" "$tmp/cost.out" \
    && ok || { bad "crater cost"; cat "$tmp/cost.out"; }

# ---- a tenant past its budget: submissions held with a clear error ---------------
broke=$(c token create --role user --tenant broke -o json | jq -r .token)
id3=$(submit spender 0 "sleep 60" "$broke")
wait_for 10 "$id3" '.state == "running" and .cost.total > 0' && ok || bad "broke's first job charged"
sleep_ms=0
for _ in $(seq 1 300); do # the first charge must reach the ledger
    out=$(submit more 0 "true" "$broke" 2>&1) || true
    echo "$out" | has "budget" && break
    sleep 0.2
done
echo "$out" | has "tenant 'broke' has spent .* of its budget" \
    && ok || bad "budget not enforced: $out"
c cancel "$id3" >/dev/null

# ---- the audit log: admin only; submissions and the token are there ---------------
aud=$(api "/api/v1/audit")
echo "$aud" | jq -e '[.items[] | select(.action == "job.submit" and .actor == "admin")] | length >= 2' >/dev/null \
    && ok || bad "audit submissions: $aud"
echo "$aud" | jq -e '[.items[] | select(.action == "token.create" and .from == "127.0.0.1")] | length == 1' >/dev/null \
    && ok || bad "audit token: $aud"
echo "$aud" | jq -e '[.items[] | select(.action == "job.cancel")] | length >= 1' >/dev/null \
    && ok || bad "audit cancel: $aud"
api "/api/v1/audit" "$broke" | jq -e '.code == "EPERM"' >/dev/null \
    && ok || bad "a user reads the audit log"

# ---- metrics: measured utilisation and the allocation as its own series ----------
m=$(curl -s "$url/metrics")
echo "$m" | has '^crater_resource_capability_utilization{node="small-0",resource="cpu"}' \
    && ok || bad "no measured utilisation series"
echo "$m" | has '^crater_resource_capability_allocation{' \
    && ok || bad "no allocation series"
echo "$m" | has '^crater_cost_micros_total{tenant="default",basis="allocation"}' \
    && ok || bad "no cost counter: $(echo "$m" | grep crater_cost)"
echo "$m" | has '^crater_http_request_duration_seconds_count{method="POST",route="/api/v1/jobs"} [1-9]' \
    && ok || bad "no request latency histogram"
for name in crater_queue_oldest_wait_seconds crater_overcommit_watermark crater_store_commit_seconds_count; do
    echo "$m" | has "^$name" && ok || bad "no $name"
done
if command -v promtool >/dev/null; then
    echo "$m" | promtool check metrics >"$tmp/promtool.out" 2>&1 \
        && ok || { bad "promtool check metrics"; cat "$tmp/promtool.out"; }
fi

# ---- the ledger survives a crash: kill -9, restart, same charges ------------------
before=$(job "$id" | jq .cost.total_micros)
t=$(date +%s%3N)
for _ in $(seq 1 150); do # the rows are written at most every 10 s
    [ "$(api "/api/v1/cost" | jq .stored_ms)" -gt "$t" ] && break
    sleep 0.1
done
[ "$(api "/api/v1/cost" | jq .stored_ms)" -gt "$t" ] && ok || bad "ledger not on disk since $t"
total=$(api "/api/v1/cost?window=2h&aggregate=tenant" | jq '[.items[] | select(.name != "__idle__") | .totalCostMicros] | add')
{ kill -9 "$up"; wait "$up"; } 2>/dev/null
up=""
# rotated audit logs: one past server.auditLogRetention (365d) goes at the
# start, a recent one is kept and read back before the current file
now=$(date +%s%3N)
echo '{"action":"ancient","actor":"admin","time_ms":1}' >"$tmp/var/audit-$((now - 400 * 86400000)).log"
echo '{"action":"rotated.kept","actor":"admin","time_ms":2}' >"$tmp/var/audit-$((now - 86400000)).log"
start_up up2
[ ! -e "$tmp/var/audit-$((now - 400 * 86400000)).log" ] && ok || bad "expired audit log kept"
api "/api/v1/audit" | jq -e '.items[0].action == "rotated.kept" and ([.items[].action] | index("ancient") == null) and ([.items[] | select(.action == "token.create")] | length == 1)' >/dev/null \
    && ok || bad "audit after restart: $(api '/api/v1/audit' | jq -c '[.items[].action]')"
api "/api/v1/audit?action=token.create&limit=1" | jq -e '(.items | length) == 1' >/dev/null \
    && ok || bad "audit filter: $(api '/api/v1/audit?action=token.create&limit=1')"
job "$id" | jq -e --argjson b "$before" '.cost.total_micros == $b' >/dev/null \
    && ok || bad "capped job's cost after restart: $(job "$id" | jq -c .cost) (was $before)"
again=$(api "/api/v1/cost?window=2h&aggregate=tenant" | jq '[.items[] | select(.name != "__idle__") | .totalCostMicros] | add')
[ "$again" -ge "$total" ] && ok || bad "tenants' charges after restart: $again < $total"
api "/api/v1/cost?window=2h&aggregate=tenant" | jq -e '[.items[].name] | index("broke") != null and index("unknown") == null' >/dev/null \
    && ok || bad "owners after restart: $(api '/api/v1/cost?window=2h&aggregate=tenant' | jq -c '[.items[].name]')"

for _ in $(seq 1 300); do [ "$(copies)" = 0 ] && break; sleep 0.1; done
[ "$(copies)" = 0 ] && ok || bad "$(copies) task processes left"
echo "test_cost_cap: $pass passed, $fail failed"
[ "$fail" = 0 ]
