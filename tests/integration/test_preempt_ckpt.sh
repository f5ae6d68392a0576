#!/usr/bin/env bash
# test_preempt_ckpt.sh - preemption with checkpoints, end to end (issue 14,
# doc/checkpoint.md "Runtime"): on `crater up` (craterd and three agents on
# loopback, tests/data/hw-small.yaml), a real PyTorch training job (CPU,
# examples/ckpt/train_torch.py with python/crater_ckpt) runs on node edge
# with checkpoint.dir; a high-priority job that only fits there preempts
# it. The task gets the notice on its agent socket (reason priority) with
# SIGTERM, saves at the step it reached, reports the checkpoint, is
# requeued as attempt 2 (not a failure), resumes at exactly that step and
# ends with the same SHA-256 of its final weights as an uninterrupted run.
# Also: the task's environment and directories (CRATER_CHECKPOINT_DIR
# 0700 and owned by the task user, the socket an abstract name that
# answers no other uid), the
# socket's strict decoder, GET /jobs/{id}/checkpoints (tenant-scoped),
# `crater describe`, and the grace period sized by the measured save time
# capped by scheduler.maxCheckpointGrace. Every wait is for a state.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
py=/usr/bin/python3
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
mark=pck$RANDOM$RANDOM
cleanup() {
    [ -n "$up" ] && { kill -9 "$up"; wait "$up"; } 2>/dev/null
    pkill -9 -f "$mark" 2>/dev/null
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "SKIP: $py cannot import torch"
    exit 77
fi

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
ckpts() { curl -s -H "Authorization: Bearer $token" "$url/api/v1/jobs/$1/checkpoints"; }
logs() { # logs JOB ATTEMPT
    curl -s -H "Authorization: Bearer $token" "$url/api/v1/jobs/$1/logs?attempt=$2&limit=1000000"
}

cat >"$tmp/craterd.yaml" <<'Y'
scheduler:
  preemptionMinRuntime: 0s
  maxCheckpointGrace: 6s
Y
"$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/craterd.yaml" \
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
until_() { local n=$(($1 * 10)) i; for i in $(seq 1 "$n"); do eval "$2" && return 0; sleep 0.1; done; return 1; }
until_ 30 '[ "$(c get nodes -o json | jq "[.items[] | select(.state == \"Ready\")] | length")" = 3 ]' \
    || { echo "nodes not ready"; cat "$tmp/up.out"; exit 1; }

# the tasks' user (a tenant uid when the agent runs as root) makes its
# checkpoint.dir under a directory anyone may write to, as /tmp
mkdir -m 1777 "$tmp/ck"

# ---- the uninterrupted run: the reference weights ------------------------------
steps=400 every=25
"$py" "$src/examples/ckpt/train_torch.py" --dir "$tmp/ref" --steps $steps --every $every \
    >"$tmp/ref.out" 2>&1 || { bad "reference run"; cat "$tmp/ref.out"; }
ref=$(tail -n 1 "$tmp/ref.out")
[[ "$ref" =~ ^[0-9a-f]{64}$ ]] && ok || bad "reference hash: $ref"

# ---- the environment, the directories, the socket's decoder --------------------
cat >"$tmp/probe.py" <<'P'
import json, os, socket, stat, sys
d, s = os.environ["CRATER_CHECKPOINT_DIR"], os.environ["CRATER_AGENT_SOCKET"]
st = os.stat(d)
print("env", os.environ["CRATER_JOB_ID"], os.environ["CRATER_ATTEMPT"], d,
      os.environ.get("CRATER_CHECKPOINT_INTERVAL_MS"))
print("dir", oct(stat.S_IMODE(st.st_mode)), st.st_uid == os.getuid(),
      "sock", s.startswith("@crater-") and len(s) == 40)
def call(req):
    c = socket.socket(socket.AF_UNIX); c.connect("\0" + s[1:])
    c.sendall(req.encode() + b"\n"); a = c.makefile().readline(); c.close()
    return json.loads(a)
print("bad", json.dumps(call('{"op": "checkpoint", "step": -1}'), sort_keys=True))
print("unknown", json.dumps(call('{"op": "checkpoint", "step": 1, "size": 3}'), sort_keys=True))
print("wait", json.dumps(call('{"op": "wait", "timeout_ms": 50}')))
print("slow", json.dumps(call('{"op": "checkpoint", "step": 7, "bytes": 10, "seconds": 8.0, "digest": "00ff"}')))
# hand the socket's name to the test, which tries it as another user
x = sys.argv[2]
open(x + "/name.tmp", "w").write(s); os.rename(x + "/name.tmp", x + "/name")
import time
for _ in range(300):
    if os.path.exists(x + "/go"): break
    time.sleep(0.1)
print("after stranger", json.dumps(call('{"op": "wait", "timeout_ms": 10}')))
P
mkdir -p "$tmp/x" && chmod 777 "$tmp/x"
cat >"$tmp/probe.yaml" <<Y
name: probe
gracePeriod: 1s
checkpoint: {dir: $tmp/ck/probe/deep, checkpointInterval: 5m}
command: [$py, $tmp/probe.py, $mark, $tmp/x]
resources: {cpu: 100m, memory: 64Mi}
Y
pid_=$(c submit -f "$tmp/probe.yaml" -o json | jq -r .id)
# another uid that learns the abstract name is dropped before a byte is read
until_ 30 '[ -s "$tmp/x/name" ]' && ok || bad "the probe wrote its socket name"
stranger=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$py" -c '
import socket, sys
c = socket.socket(socket.AF_UNIX); c.settimeout(5)
c.connect("\0" + sys.argv[1][1:])
try:
    c.sendall(b"{\"op\": \"wait\", \"timeout_ms\": 10}\n"); print(repr(c.recv(100)))
except OSError as e:
    print("closed", e.errno)' "$(cat "$tmp/x/name")" 2>&1)
case $stranger in "b''"|closed*) ok ;; *) bad "another uid was answered on the task's socket: $stranger" ;; esac
touch "$tmp/x/go"
wait_for 30 "$pid_" '.state == "succeeded" and .logs_complete' && ok || bad "probe job"
logs "$pid_" 1 >"$tmp/probe.out"
grep -q "^env $pid_ 1 $tmp/ck/probe/deep 300000$" "$tmp/probe.out" && ok || { bad "task env"; cat "$tmp/probe.out"; }
grep -q "^dir 0o700 True sock True$" "$tmp/probe.out" && ok || { bad "dir modes"; cat "$tmp/probe.out"; }
grep -q '^bad {"error": ".*", "field": "step", "ok": false}$' "$tmp/probe.out" && ok || { bad "negative step refused"; cat "$tmp/probe.out"; }
grep -q '^unknown {"error": ".*size.*", "field": "size", "ok": false}$' "$tmp/probe.out" && ok || { bad "unknown key refused"; cat "$tmp/probe.out"; }
grep -q '^wait {"preempt": false}$' "$tmp/probe.out" && ok || { bad "wait timeout"; cat "$tmp/probe.out"; }
grep -q '^slow {"ok": true}$' "$tmp/probe.out" && ok || { bad "report accepted"; cat "$tmp/probe.out"; }
grep -q '^after stranger {"preempt": false}$' "$tmp/probe.out" && ok || { bad "the task's socket serves it after a stranger"; cat "$tmp/probe.out"; }
until_ 10 '[ "$(ckpts "$pid_" | jq ".checkpoints | length")" = 1 ]' && ok || bad "probe checkpoint recorded: $(ckpts "$pid_")"
ckpts "$pid_" | jq -e '.latest | .step == 7 and .digest == "00ff" and .attempt == 1 and .seconds == 8' >/dev/null \
    && ok || bad "probe report: $(ckpts "$pid_")"
# 8 s measured: 10 s wanted, capped by maxCheckpointGrace 6s
ckpts "$pid_" | jq -e '.preempt_grace_ms == 6000' >/dev/null && ok || bad "grace cap: $(ckpts "$pid_" | jq -c .preempt_grace_ms)"

# ---- preempted training job: notice, checkpoint, requeue, resume ---------------
# (sh carries $mark for pgrep and waits for python through SIGTERM)
cat >"$tmp/train.yaml" <<Y
name: train
preemptible: true
priority: 0
gracePeriod: 20s
checkpoint: {dir: $tmp/ck/train}
nodeSelector: {zone: b}
command: [sh, -c, 'trap : TERM; $py "\$@"', $mark, $src/examples/ckpt/train_torch.py, --steps, "$steps", --every, "$every", --sleep, "0.02"]
resources: {cpu: 1500m, memory: 1Gi}
Y
tid=$(c submit -f "$tmp/train.yaml" -o json | jq -r .id)
wait_for 60 "$tid" '.state == "running"' && ok || bad "training running"
until_ 90 '[ "$(ckpts "$tid" | jq "[.checkpoints[] | select(.step >= 50)] | length")" -ge 1 ]' \
    && ok || bad "training reported checkpoints: $(ckpts "$tid")"
wait_for 10 "$tid" '.progress.step >= 50' && ok || bad "progress reported"
cat >"$tmp/urgent.yaml" <<Y
name: urgent
priority: 100
nodeSelector: {zone: b}
command: [sh, -c, "sleep 1", $mark]
resources: {cpu: 1500m, memory: 1Gi}
Y
uid_=$(c submit -f "$tmp/urgent.yaml" -o json | jq -r .id)
wait_for 60 "$uid_" '.state == "succeeded"' && ok || bad "urgent job ran"
wait_for 120 "$tid" '.state == "succeeded" and .logs_complete' && ok || bad "training succeeded after requeue"
job "$tid" | jq -e '.attempts == 2 and (.failures // 0) == 0' >/dev/null \
    && ok || bad "two attempts, no failure: $(job "$tid" | jq -c '{attempts, failures}')"
logs "$tid" 1 >"$tmp/a1.out"
logs "$tid" 2 >"$tmp/a2.out"
grep -q "^notice: priority, [0-9]* ms left$" "$tmp/a1.out" && ok || { bad "notice on the socket"; cat "$tmp/a1.out"; }
saved=$(sed -n 's/^preempted: saved step \([0-9]*\)$/\1/p' "$tmp/a1.out")
resumed=$(sed -n 's/^resumed at step \([0-9]*\)$/\1/p' "$tmp/a2.out")
echo "preempted at step $saved, resumed at step $resumed of $steps"
[ -n "$saved" ] && [ "$saved" = "$resumed" ] && ok || bad "resume at the saved step ($saved vs $resumed)"
[ -n "$saved" ] && [ "$saved" -lt "$steps" ] && ok || bad "preempted before the end"
final=$(tail -n 1 "$tmp/a2.out")
[ "$final" = "$ref" ] && ok || bad "final weights $final != uninterrupted $ref"
ckpts "$tid" | jq -e --argjson s "${saved:-0}" \
    '[.checkpoints[] | select(.attempt == 1 and .step == $s and (.digest | length) == 64 and .seconds > 0)] | length == 1' \
    >/dev/null && ok || bad "the notice's checkpoint reported: $(ckpts "$tid" | jq -c '[.checkpoints[] | {attempt, step}]')"
ckpts "$tid" | jq -e --argjson n $steps '.latest.step == $n and .latest.attempt == 2' >/dev/null \
    && ok || bad "last checkpoint: $(ckpts "$tid" | jq -c .latest)"
job "$tid" | jq -e --arg s "requeued after preemption (priority); attempt 2 resumes from checkpoint step ${saved:-x}" \
    '[.history[] | select(.reason == $s)] | length == 1' >/dev/null \
    && ok || bad "history: $(job "$tid" | jq -c '[.history[] | .reason]')"
c describe job "$tid" >"$tmp/describe.out"
grep -q "^Checkpoint: *step $steps of attempt 2 " "$tmp/describe.out" && ok || { bad "describe"; cat "$tmp/describe.out"; }
# another tenant does not see the job's checkpoints
c create tenant other >/dev/null 2>&1
otok=$(c create token --tenant other -o json 2>/dev/null | jq -r '.token // empty')
if [ -n "$otok" ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $otok" "$url/api/v1/jobs/$tid/checkpoints")
    [ "$code" = 404 ] && ok || bad "other tenant got $code"
fi
# ---- the C client (libcrater-ckpt) against the real agent: the C example
# reports each save and leaves on its time limit's notice
if [ -x "${CKPT_TOY_TRAIN_BIN:-}" ]; then
    cat >"$tmp/toy.yaml" <<Y
name: toy
timeLimit: 3s
gracePeriod: 30s
checkpoint: {dir: $tmp/ck/toy}
command: [sh, -c, 'trap : TERM; "\$@"', $mark, $CKPT_TOY_TRAIN_BIN, $tmp/ck/toy, "1000000", "20", "2000"]
resources: {cpu: 100m, memory: 64Mi}
Y
    yid=$(c submit -f "$tmp/toy.yaml" -o json | jq -r .id)
    wait_for 60 "$yid" '(.state == "failed" or .state == "succeeded") and .logs_complete' || bad "C example ended"
    c logs "$yid" --stream stderr | has "^toy_train: notice: time-limit, [0-9]* ms left; saved step [0-9]*$" \
        && ok || bad "C client got no notice: $(c logs "$yid" --stream stderr | tail -n 3)"
    ckpts "$yid" | jq -e '(.checkpoints | length) >= 2 and (.latest.digest | length) == 64 and .latest.bytes > 0' >/dev/null \
        && ok || bad "C client reports: $(ckpts "$yid" | jq -c .latest)"
    wait_for 10 "$yid" '.progress.step >= 20' && ok || bad "C client progress: $(job "$yid" | jq -c .progress)"
else
    echo "SKIP: C client end to end (CKPT_TOY_TRAIN_BIN unset)"
fi
[ "$(pgrep -fc -- "$mark" || true)" = 0 ] && ok || bad "task processes left"

echo "test_preempt_ckpt: $pass passed, $fail failed"
[ "$fail" = 0 ]
