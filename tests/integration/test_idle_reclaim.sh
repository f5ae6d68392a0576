#!/usr/bin/env bash
# test_idle_reclaim.sh - idle-GPU reclaim (issue 14, doc/scheduling.md
# "Idle-GPU reclaim"): real craterd and crater-agent on loopback, one node
# with synthetic samples (tests/data/hw-idle.yaml) whose GPUs read what
# their tasks set in CRATER_SYNTHETIC_GPU_UTIL. With idleGpuWindow 2s and
# idleGpuGrace 4s:
#   - a job holding a GPU slice that stays idle is warned (history entry,
#     "idle" in its JSON, `describe`, crater_idle_gpu_jobs 1), then
#     reclaimed: its task gets the notice "idle" on its agent socket, the
#     job is requeued as attempt 2 without a failure, never failed;
#   - a busy job (whole GPU, 0.9), an idle slice with idleReclaim: false
#     and an idle slice of a tenant with idleReclaim: false (tenants API)
#     run on untouched: one attempt, no idle entry.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} agentbin=${CRATER_AGENT_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
pid="" apid=""
mark=idl$RANDOM$RANDOM # in every task's argv: cleanup finds only ours
cleanup() {
    kill -9 $apid $pid 2>/dev/null && wait $apid $pid 2>/dev/null
    for p in $(pgrep -f -- "$mark"); do kill -9 "$p" 2>/dev/null; done
    # what the agent made for its tasks: slice files, cgroups
    for f in "$tmp"/agent/tasks/*/task.json; do
        [ -f "$f" ] || continue
        g=$(jq -r .cgroup "$f")
        [ -n "$g" ] && [ "$g" != null ] || continue
        rm -f "/dev/shm/crater-$g.slice"
        for _ in 1 2 3 4 5; do
            left=$(find /sys/fs/cgroup -maxdepth 3 -type d -name "$g" 2>/dev/null)
            [ -z "$left" ] && break
            for d in $left; do # whatever still runs in it is ours
                for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
            done
            rmdir $left 2>/dev/null
            sleep 0.1
        done
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$admin"; }
job() { c get job "$1" -o json 2>/dev/null; }
show() { job "$1" | jq -c '{state, attempts, failures, idle, history: [.history[] | .state + ": " + .reason]}'; }
logs() { curl -s -H "Authorization: Bearer $admin" "$url/api/v1/jobs/$1/logs?attempt=$2&limit=100000"; }
metric() { curl -s "$url/metrics" | sed -n "s/^$1 //p"; }
submit() { # submit NAME EXTRA_YAML_LINES... -> job id
    local name=$1; shift
    { echo "name: $name"; for l in "$@"; do echo "$l"; done; } >"$tmp/$name.yaml"
    c submit -f "$tmp/$name.yaml" -o json | jq -r .id
}

# The idle job's task: waits for a notice on its agent socket and prints
# it, then waits for SIGTERM.
cat >"$tmp/idle.py" <<'PY'
import signal, sys, time
sys.path.insert(0, sys.argv[1])
from crater_ckpt.agent import AgentClient
term = []
signal.signal(signal.SIGTERM, lambda *a: term.append(time.time()))
agent = AgentClient()
print("socket: %s" % agent.available, flush=True)
while not (term and time.time() - term[0] > 5):
    n = agent.wait_for_notice(0.5)
    if n:
        print("notice: %s" % n.get("reason"), flush=True)
        agent.ack()
        break
while not term:
    time.sleep(0.1)
sys.exit(143)
PY

cat >"$tmp/craterd.yaml" <<'EOF'
apiVersion: crater/v1
kind: Config
scheduler:
  idleGpuWindow: 2s
  idleGpuGrace: 4s
  gpuContextOverhead: 0
agent:
  heartbeatInterval: 200ms
EOF
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
atok=$(c token create --role agent --node idlegpu -o json | jq -r .token)
"$agentbin" --server "$url" --token "$atok" --hardware "$src/tests/data/hw-idle.yaml" \
    --node idlegpu --data "$tmp/agent" --config "$tmp/craterd.yaml" 2>>"$tmp/agent.err" &
apid=$!

sleeper="command: [sh, -c, 'sleep 600; :', $mark]" # sh stays: argv keeps $mark
busy=$(submit busy "$sleeper" "resources: {gpu: {count: 1}, cpu: 500m, memory: 64Mi}")
# a tenant that opted out; a bad value is refused naming the field
echo '{"idleReclaim": "no"}' >"$tmp/t.json"
api PUT /api/v1/tenants/lab "$admin" "$tmp/t.json"
[ "$code" = 400 ] && jq -e '.field == "idleReclaim"' "$tmp/body" >/dev/null && ok || bad "bad idleReclaim: $code $(cat "$tmp/body")"
echo '{"idleReclaim": false}' >"$tmp/t.json"
api PUT /api/v1/tenants/lab "$admin" "$tmp/t.json"
[ "$code" = 200 ] && jq -e '.idleReclaim == false' "$tmp/body" >/dev/null && ok || bad "tenant opt-out: $code $(cat "$tmp/body")"
lab=$(submit lab "$sleeper" 'tenant: lab' 'env: {CRATER_SYNTHETIC_GPU_UTIL: "0"}' \
    "resources: {gpu: {count: 1, memory: 8Gi}, cpu: 500m, memory: 64Mi}")
kept=$(submit kept "$sleeper" 'idleReclaim: false' 'env: {CRATER_SYNTHETIC_GPU_UTIL: "0"}' \
    "resources: {gpu: {count: 1, memory: 8Gi}, cpu: 500m, memory: 64Mi}")
idle=$(submit idle "command: [python3, $tmp/idle.py, $src/python, $mark]" \
    'env: {CRATER_SYNTHETIC_GPU_UTIL: "0"}' \
    "resources: {gpu: {count: 1, memory: 8Gi}, cpu: 500m, memory: 64Mi}")
[ -n "$busy" ] && [ -n "$kept" ] && [ -n "$idle" ] && ok || bad "submitted: '$busy' '$kept' '$idle'"
job "$kept" | jq -e '.spec.idleReclaim == false' >/dev/null && ok || bad "idleReclaim in the spec: $(job "$kept" | jq -c .spec)"
until_ 30 '[ "$(job "$idle" | jq -r .state)" = running ]' && ok \
    || { bad "idle job running: $(show "$idle")"; cat "$tmp/agent.err"; }
job "$idle" | jq -e '.placement.whole_gpus == false' >/dev/null && ok || bad "the idle job holds a slice"

# ---- warned after the window ---------------------------------------------------
until_ 20 'job "$idle" | jq -e "[.history[].reason | select(startswith(\"idle GPU:\"))] | length == 1" >/dev/null' \
    && ok || bad "warning in the history: $(show "$idle")"
job "$idle" | jq -e '.state == "running" and .attempts == 1 and .idle.warned and .idle.reclaim_at_ms > .idle.since_ms' \
    >/dev/null && ok || bad "warned, still running: $(show "$idle")"
c describe job "$idle" >"$tmp/desc.out"
grep -q "^Idle reclaim: *warned; reclaimed .* unless busy again$" "$tmp/desc.out" && grep -q "^Idle GPUs:" "$tmp/desc.out" \
    && ok || { bad "describe shows the warning"; cat "$tmp/desc.out"; }
[ "$(metric crater_idle_gpu_jobs)" = 1 ] && ok || bad "crater_idle_gpu_jobs: '$(metric crater_idle_gpu_jobs)'"

# ---- reclaimed after the grace: notice idle, requeued, no failure ------------
until_ 30 'job "$idle" | jq -e ".attempts >= 2" >/dev/null' && ok || bad "requeued: $(show "$idle")"
job "$idle" | jq -e '[.history[] | select(.reason | startswith("requeued: idle GPU reclaim"))] | length >= 1' \
    >/dev/null && ok || bad "reclaim reason: $(show "$idle")"
job "$idle" | jq -e '(.failures // 0) == 0 and .state != "failed"' >/dev/null && ok || bad "no failure: $(show "$idle")"
until_ 10 'logs "$idle" 1 | has "^notice: idle$"' && ok || bad "notice idle on the socket: $(logs "$idle" 1)"
[ "$(metric crater_idle_reclaims_total)" -ge 1 ] 2>/dev/null && ok || bad "crater_idle_reclaims_total: '$(metric crater_idle_reclaims_total)'"
grep -q '"idle-reclaim"' "$tmp"/data/decisions.log 2>/dev/null && ok || bad "idle-reclaim decision logged: $(ls "$tmp/data")"

# ---- the busy job and the opted-out job are untouched --------------------------
for j in "$busy" "$kept" "$lab"; do
    job "$j" | jq -e '.state == "running" and .attempts == 1 and (.idle == null)
        and ([.history[].reason | select(test("idle GPU"))] | length == 0)' >/dev/null \
        && ok || bad "job $j untouched: $(show "$j")"
done

echo "test_idle_reclaim: $pass passed, $fail failed"
[ "$fail" = 0 ]
