#!/usr/bin/env bash
# test_timelimit.sh - a job's timeLimit (issue 13, doc/jobspec.md,
# doc/agent.md "Time limits"): on `crater up` (craterd and three agents on
# loopback, tests/data/hw-small.yaml), a job with timeLimit 2s running
# `sleep 60` is stopped by its agent and ends failed with the reason
# "time limit (2s) exceeded" in the API and in `crater describe`; a task
# that catches SIGTERM and exits 0 still fails; `crater run --time` sets
# the limit; and after kill -9 of `crater up` and a restart, the adopted
# task keeps its original deadline (it is stopped at its limit, not
# a full limit after the restart). Every wait is for a state, with a
# deadline; no task process is left.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
mark=tlim$RANDOM$RANDOM # in every task's argv: pgrep counts only ours
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
wait_for() { # wait_for SECONDS JOB JQ_FILTER
    local t=$(($1 * 10)) i
    for i in $(seq 1 "$t"); do
        job "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for job $2: $3"
    job "$2" | jq -c '{state, reason, exit, history: [.history[] | .state + ": " + .reason]}'
    return 1
}
submit() { # submit NAME LIMIT SHELL_SCRIPT -> job id
    printf 'name: %s\ntimeLimit: %s\ngracePeriod: 2s\ncommand: [sh, -c, %s, %s]\nresources: {cpu: 100m, memory: 64Mi}\n' \
        "$1" "$2" "$(jq -Rn --arg s "$3" '$s')" "$mark" >"$tmp/j.yaml"
    c submit -f "$tmp/j.yaml" -o json | jq -r .id
}
copies() { pgrep -fc -- "$mark" || true; }
now_ms() { date +%s%3N; }

start_up() { # start_up NAME: crater up on $tmp/var; sets up, url, token
    "$bin" up --data "$tmp/var" --listen 127.0.0.1:0 \
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

cd "$tmp"
start_up up1

# ---- timeLimit 2s on sleep 60: stopped, failed, the reason everywhere -------------
t0=$(now_ms)
id=$(submit limited 2s "sleep 60")
wait_for 10 "$id" '.state == "running"' && ok || bad "limited job running"
wait_for 20 "$id" '.state == "failed"' && ok || bad "limited job failed"
took=$(( $(now_ms) - t0 ))
[ "$took" -lt 15000 ] && ok || bad "stopped after ${took} ms (limit 2 s, grace 2 s)"
job "$id" | jq -e '.reason == "time limit (2s) exceeded"' >/dev/null \
    && ok || bad "API reason: $(job "$id" | jq -c .reason)"
job "$id" | jq -e '.history[-1] | .state == "failed" and .reason == "time limit (2s) exceeded"' >/dev/null \
    && ok || bad "history: $(job "$id" | jq -c '.history[-1]')"
job "$id" | jq -e '.exit.signal == 15' >/dev/null \
    && ok || bad "ended by SIGTERM, not the grace period's SIGKILL: $(job "$id" | jq -c .exit)"
c describe job "$id" >"$tmp/describe.out"
grep -q "^Reason: *time limit (2s) exceeded$" "$tmp/describe.out" \
    && ok || { bad "describe Reason"; cat "$tmp/describe.out"; }
grep -q "^Time limit: *2s$" "$tmp/describe.out" \
    && ok || { bad "describe Time limit"; cat "$tmp/describe.out"; }
for _ in $(seq 1 50); do [ "$(copies)" = 0 ] && break; sleep 0.1; done
[ "$(copies)" = 0 ] && ok || bad "$(copies) task processes left after the limit"

# ---- a task that catches SIGTERM and exits 0 still failed ------------------------
id=$(submit trapper 1s 'trap "exit 0" TERM; sleep 60 & wait')
wait_for 20 "$id" '.state == "failed"' && ok || bad "trapping job failed"
job "$id" | jq -e '.reason == "time limit (1s) exceeded" and .exit.code == 0' >/dev/null \
    && ok || bad "trapping job: $(job "$id" | jq -c '{reason, exit}')"

# ---- a job that ends in time succeeds; crater run --time sets the limit ----------
id=$(submit quick 30s "true")
wait_for 20 "$id" '.state == "succeeded"' && ok || bad "job within its limit succeeded"
id=$(c run --time 1s --cpu 100m --mem 64Mi -o json -- sh -c "sleep 60" "$mark" | jq -r .id)
job "$id" | jq -e '.spec.timeLimit == "1000ms"' >/dev/null && ok || bad "crater run --time: $(job "$id" | jq -c .spec.timeLimit)"
wait_for 20 "$id" '.state == "failed" and .reason == "time limit (1s) exceeded"' && ok || bad "crater run --time 1s"

# ---- kill -9 of crater up: the adopted task keeps its deadline -------------------
id=$(submit survivor 6s "sleep 60")
wait_for 10 "$id" '.state == "running"' && ok || bad "survivor running"
started=$(job "$id" | jq .started_ms)
{ kill -9 "$up"; wait "$up"; } 2>/dev/null
up=""
[ "$(copies)" = 1 ] && ok || bad "task survives kill -9 of crater up (counted $(copies))"
sleep 3 # an outage of 3 s (the one fixed wait: the agent is away)
start_up up2
grep -q "adopted" "$tmp/up2.out" && ok || bad "restart adopts the task"
wait_for 30 "$id" '.state == "failed" and .reason == "time limit (6s) exceeded"' \
    && ok || bad "adopted task stopped at its limit"
ended=$(job "$id" | jq .finished_ms)
ran=$(( ended - started ))
echo "adopted task ran ${ran} ms (limit 6 s, 3 s outage)"
# kept deadline: ~6 s (at least the 3 s outage plus the restart);
# a deadline restarted at adoption: 3 s + restart + 6 s, over 9 s
[ "$ran" -ge 5500 ] && [ "$ran" -lt 9000 ] && ok \
    || bad "adopted task ran ${ran} ms for a 6 s limit (deadline restarted?)"
for _ in $(seq 1 50); do [ "$(copies)" = 0 ] && break; sleep 0.1; done
[ "$(copies)" = 0 ] && ok || bad "$(copies) task processes left"

kill -INT "$up"
for _ in $(seq 1 200); do kill -0 "$up" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$up" 2>/dev/null; then bad "crater up still running 20 s after Ctrl-C"; else
    wait "$up"; up=""
fi
grep -q 'Sanitizer' "$tmp"/up*.out && { bad "sanitizer report"; grep -A20 Sanitizer "$tmp"/up*.out; } || ok

echo "test_timelimit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
