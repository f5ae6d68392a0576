#!/usr/bin/env bash
# test_agent.sh - craterd and crater-agent as separate processes: discovery
# output is a valid hardware file; an agent with a hardware file registers
# and runs a job; a partition (SIGSTOP the agent past heartbeatTimeout,
# then SIGCONT) makes the node NotReady and Ready again, and under the
# conservative migrationPolicy the long-running job is neither lost nor
# duplicated; kill -9 of the agent leaves its tasks running and the next
# agent adopts them (one copy, real exit code, whole log); an agent
# restart re-reports its node without running anything twice.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} agentbin=${CRATER_AGENT_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
pid="" apid=""
trap 'kill -CONT $apid 2>/dev/null; kill -9 $pid $apid 2>/dev/null; pkill -f "sleep $s31" 2>/dev/null; pkill -f "sleep $s7" 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$admin"; }
state() { c get job "$1" -o json | jq -r .state; }
nstate() { c get nodes -o json | jq -r ".items[] | select(.name == \"$1\") | .state"; }

s7='' s31=31.$RANDOM # unique: other test runs on this machine do not confuse pgrep

# ---- discovery --------------------------------------------------------------------
"$agentbin" --discover -o yaml >"$tmp/me.yaml" 2>"$tmp/disc.err" && ok || { bad "discover"; cat "$tmp/disc.err"; }
"$bin" validate "$tmp/me.yaml" >/dev/null 2>&1 && ok || { bad "discovered file validates"; "$bin" validate "$tmp/me.yaml"; }
grep -q '^"kind": "Node"' "$tmp/me.yaml" && ok || bad "discovered kind Node"

# ---- craterd + one agent ------------------------------------------------------------
cat >"$tmp/craterd.yaml" <<'EOF'
apiVersion: crater/v1
kind: Config
agent:
  heartbeatInterval: 200ms
  heartbeatTimeout: 3s
  migrationPolicy: conservative
  migrationMinRuntime: 1s
EOF
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
atok=$(c token create --role agent --node small-0 -o json | jq -r .token)
( umask 077; printf '%s\n' "$atok" >"$tmp/agent.token" )
start_agent() {
    "$agentbin" --server "$url" --token-file "$tmp/agent.token" --hardware "$src/tests/data/hw-small.yaml" \
        --node small-0 --data "$tmp/agent" --config "$tmp/craterd.yaml" 2>>"$tmp/agent.err" &
    apid=$!
}

# ---- the agent's token: never where tasks can read it -------------------------------
cp "$tmp/agent.token" "$tmp/open.token"; chmod 644 "$tmp/open.token"
"$agentbin" --server "$url" --token-file "$tmp/open.token" --hardware "$src/tests/data/hw-small.yaml" \
    --node small-0 --data "$tmp/agent-x" 2>"$tmp/open.err" && bad "a world-readable token file accepted" \
    || { grep -q "readable by others" "$tmp/open.err" && ok || bad "token file error: $(cat "$tmp/open.err")"; }
"$agentbin" --server http://127.0.0.1:1 --token "$atok" --hardware "$src/tests/data/hw-small.yaml" \
    --node small-0 --data "$tmp/agent-y" 2>"$tmp/argv.err" &
xpid=$!
until_ 10 'grep -q "token puts the token" "$tmp/argv.err"' && ok || bad "no warning for --token"
tr '\0' ' ' </proc/$xpid/cmdline | has -- "$atok" && bad "the token is still in /proc/$xpid/cmdline" || ok
kill -9 $xpid 2>/dev/null; wait $xpid 2>/dev/null

start_agent
until_ 10 'test "$(nstate small-0)" = Ready' && ok || { bad "agent registered"; cat "$tmp/agent.err"; }

printf 'name: long\ncommand: [sleep, "%s"]\nresources: {cpu: 1, memory: 64Mi}\n' "$s31" >"$tmp/j.yaml"
id=$(c submit -f "$tmp/j.yaml" -o json | jq -r .id)
until_ 10 'test "$(state "$id")" = running' && ok || bad "job running"
sleep 1.5 # past migrationMinRuntime

# ---- partition ------------------------------------------------------------------------
kill -STOP "$apid"
until_ 10 'test "$(nstate small-0)" = NotReady' && ok || bad "node NotReady while the agent is stopped"
until_ 10 'test "$(state "$id")" = lost' && ok || bad "job lost, not requeued (conservative)"
[ "$(pgrep -fc "sleep $s31")" = 1 ] && ok || bad "the task keeps running during the partition"
kill -CONT "$apid"
until_ 10 'test "$(nstate small-0)" = Ready' && ok || bad "node Ready after SIGCONT"
until_ 10 'test "$(state "$id")" = running' && ok || bad "job running again"
c get job "$id" -o json | jq -e '.attempts == 1' >/dev/null && ok || bad "not requeued"
[ "$(pgrep -fc "sleep $s31")" = 1 ] && ok || bad "exactly one copy of the task"

# ---- a partition longer than the wait: requeued once, never duplicated ------------------
kill -STOP "$apid"
until_ 10 'test "$(state "$id")" = lost' && ok || bad "lost again"
until_ 15 'test "$(state "$id")" = pending -o "$(state "$id")" = bound' && ok || bad "requeued after heartbeatTimeout more"
kill -CONT "$apid"
# the agent reports the old attempt: craterd orders it stopped; the new attempt runs
until_ 15 'test "$(state "$id")" = running' && ok || bad "new attempt running"
sleep 1
c get job "$id" -o json | jq -e '.attempts == 2' >/dev/null && ok || bad "attempt 2"
until_ 10 'test "$(pgrep -fc "sleep $s31")" = 1' && ok || bad "old attempt stopped: one copy"

# ---- kill -9 of the agent: its tasks are adopted, never run twice ------------------
s7=7.$RANDOM
printf 'name: survivor\ncommand: [sh, -c, "echo up; sleep %s; echo down; exit 7"]\nresources: {cpu: 1, memory: 64Mi}\n' "$s7" >"$tmp/k.yaml"
k=$(c submit -f "$tmp/k.yaml" -o json | jq -r .id)
until_ 10 'test "$(state "$k")" = running' && ok || bad "survivor running"
{ kill -9 "$apid"; wait "$apid"; } 2>/dev/null
[ "$(pgrep -fc "^sleep $s7")" = 1 ] && ok || bad "the task outlives kill -9 of its agent"
start_agent
until_ 10 'test "$(nstate small-0)" = Ready' && ok || bad "agent back after kill -9"
# (the node may still show Ready from the killed agent's last heartbeat:
# wait for the new agent's word, not for the state)
until_ 10 'grep -q "adopted" "$tmp/agent.err"' && ok || bad "the new agent adopts the task"
[ "$(pgrep -fc "^sleep $s7")" -le 1 ] && ok || bad "two copies after the agent restart"
until_ 20 'test "$(state "$k")" = failed' && ok || bad "survivor ends"
c get job "$k" -o json | jq -e '.exit.code == 7 and .attempts == 1' >/dev/null && ok || bad "its own exit code, one attempt"
[ "$(c logs "$k")" = "$(printf 'up\ndown')" ] && ok || bad "its whole log: '$(c logs "$k")'"
[ "$(state "$id")" = running ] && ok || bad "the long job kept running through the agent's kill -9"
[ "$(pgrep -fc "sleep $s31")" = 1 ] && ok || bad "one copy of the long job after kill -9"

# ---- agent restart -----------------------------------------------------------------
kill -TERM "$apid"; wait "$apid"
until_ 10 'test "$(state "$id")" != running' || true
start_agent
until_ 10 'test "$(nstate small-0)" = Ready' && ok || bad "agent back"
until_ 15 'test "$(state "$id")" = running' && ok || bad "job runs after agent restart"
[ "$(pgrep -fc "sleep $s31")" = 1 ] && ok || bad "one copy after agent restart"

c cancel "$id" >/dev/null
kill -TERM "$apid"; wait "$apid"; apid=""
grep -q Sanitizer "$tmp/agent.err" && { bad "agent sanitizer report"; cat "$tmp/agent.err"; } || ok
stop_craterd && ok || bad "craterd clean stop"
grep -q Sanitizer "$craterd_log" && { bad "craterd sanitizer report"; cat "$craterd_log"; } || ok

echo "test_agent: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
