#!/usr/bin/env bash
# test_restart.sh - restartPolicy and backoffLimit (issue 14,
# doc/jobspec.md): on `crater up` (tests/data/hw-small.yaml), a job with
# restartPolicy OnFailure and backoffLimit 2 that always exits 3 runs three
# attempts and fails, each attempt's reason in its history; one that fails
# its first attempt and succeeds its second succeeds with two attempts; the
# default (Never) fails at the first failure; backoffLimit without
# OnFailure and a relative checkpoint.dir are refused naming the field.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
mark=rst$RANDOM$RANDOM
cleanup() {
    [ -n "$up" ] && { kill -9 "$up"; wait "$up"; } 2>/dev/null
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
    job "$2" | jq -c '{state, reason, attempts, history: [.history[] | .state + ": " + .reason]}'
    return 1
}
submit() { # submit NAME EXTRA_YAML SHELL_SCRIPT -> job id
    printf 'name: %s\n%s\ncommand: [sh, -c, %s, %s]\nresources: {cpu: 100m, memory: 64Mi}\n' \
        "$1" "$2" "$(jq -Rn --arg s "$3" '$s')" "$mark" >"$tmp/j.yaml"
    c submit -f "$tmp/j.yaml" -o json | jq -r .id
}

"$bin" up --data "$tmp/var" --listen 127.0.0.1:0 \
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

# ---- OnFailure, backoffLimit 2, always exit 3: three attempts, failed ----------
id=$(submit always $'restartPolicy: OnFailure\nbackoffLimit: 2' "exit 3")
wait_for 60 "$id" '.state == "failed"' && ok || bad "always-failing job failed"
job "$id" | jq -e '.attempts == 3 and .failures == 3 and .exit.code == 3' >/dev/null \
    && ok || bad "attempts: $(job "$id" | jq -c '{attempts, failures, exit}')"
job "$id" | jq -r '.history[] | select(.reason | startswith("attempt")) | .state + ": " + .reason' >"$tmp/h.out"
cat >"$tmp/want.out" <<'W'
pending: attempt 1 failed: exit code 3; requeued (restartPolicy OnFailure, retry 1 of backoffLimit 2)
pending: attempt 2 failed: exit code 3; requeued (restartPolicy OnFailure, retry 2 of backoffLimit 2)
failed: attempt 3 failed: exit code 3; backoffLimit 2 reached (3 failed attempts)
W
diff "$tmp/want.out" "$tmp/h.out" && ok || bad "history of the attempts"
job "$id" | jq -e '.spec.restartPolicy == "OnFailure" and .spec.backoffLimit == 2' >/dev/null \
    && ok || bad "normalised spec: $(job "$id" | jq -c .spec)"
c describe job "$id" | has "^Restart: *OnFailure, 3 failed attempt(s), backoffLimit 2$" \
    && ok || bad "describe: $(c describe job "$id")"

# ---- OnFailure: fails once, then succeeds -----------------------------------------
id=$(submit flaky 'restartPolicy: OnFailure' '[ "$CRATER_ATTEMPT" -ge 2 ]')
wait_for 60 "$id" '.state == "succeeded"' && ok || bad "flaky job succeeded"
job "$id" | jq -e '.attempts == 2 and .failures == 1 and .spec.backoffLimit == 6' >/dev/null \
    && ok || bad "flaky: $(job "$id" | jq -c '{attempts, failures, b: .spec.backoffLimit}')"

# ---- Never (the default): the first failure fails the job --------------------------
id=$(submit never '' "exit 3")
wait_for 60 "$id" '.state == "failed"' && ok || bad "Never job failed"
job "$id" | jq -e '.attempts == 1 and .reason == "exit code 3" and (.spec | has("restartPolicy") | not)' >/dev/null \
    && ok || bad "Never: $(job "$id" | jq -c '{attempts, reason}')"

# ---- refused -----------------------------------------------------------------------
printf 'name: x\nbackoffLimit: 2\ncommand: [true]\n' >"$tmp/b.yaml"
c submit -f "$tmp/b.yaml" >"$tmp/err.out" 2>&1 && bad "backoffLimit with Never accepted" \
    || { grep -q "backoffLimit.*needs restartPolicy: OnFailure" "$tmp/err.out" && ok || bad "error: $(cat "$tmp/err.out")"; }
printf 'name: x\nrestartPolicy: Always\ncommand: [true]\n' >"$tmp/b.yaml"
c submit -f "$tmp/b.yaml" >"$tmp/err.out" 2>&1 && bad "restartPolicy Always accepted" \
    || { grep -q "restartPolicy" "$tmp/err.out" && ok || bad "error: $(cat "$tmp/err.out")"; }
printf 'name: x\ncheckpoint: {dir: ckpt/x}\ncommand: [true]\n' >"$tmp/b.yaml"
c submit -f "$tmp/b.yaml" >"$tmp/err.out" 2>&1 && bad "relative checkpoint.dir accepted" \
    || { grep -q "checkpoint.dir.*not an absolute path" "$tmp/err.out" && ok || bad "error: $(cat "$tmp/err.out")"; }
[ "$(pgrep -fc -- "$mark" || true)" = 0 ] && ok || bad "task processes left"

echo "test_restart: $pass passed, $fail failed"
[ "$fail" = 0 ]
