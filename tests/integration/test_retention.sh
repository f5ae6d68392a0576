#!/usr/bin/env bash
# test_retention.sh - server.jobRetention: a finished job is forgotten once
# the retention has passed (the API answers 404, its log files are deleted,
# and it stays gone after a restart: the store forgot it too); a finished
# job that a waiting job names in "after" is kept until the waiter is done.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} agentbin=${CRATER_AGENT_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
pid="" apid=""
trap 'kill -9 $pid $apid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$admin"; }
state() { c get job "$1" -o json 2>/dev/null | jq -r .state; }
gone() { api GET "/api/v1/jobs/$1" "$admin"; [ "$code" = 404 ]; }
job() { # job NAME [AFTER]: submit an echo job, print its id
    printf 'name: %s\ncommand: [echo, "out of %s"]\nresources: {cpu: 1, memory: 64Mi}\n' "$1" "$1" >"$tmp/$1.yaml"
    [ -n "${2:-}" ] && printf 'after: [%s]\n' "$2" >>"$tmp/$1.yaml"
    c submit -f "$tmp/$1.yaml" -o json | jq -r .id
}

cat >"$tmp/craterd.yaml" <<'EOF2'
apiVersion: crater/v1
kind: Config
server:
  jobRetention: 2s
agent:
  heartbeatInterval: 200ms
EOF2
"$bin" validate "$tmp/craterd.yaml" >/dev/null && ok || bad "config with jobRetention validates"
printf 'apiVersion: crater/v1\nkind: Config\nserver:\n  jobRetention: 10ms\n' >"$tmp/bad.yaml"
{ "$bin" validate "$tmp/bad.yaml" 2>&1 || true; } | has 'server.jobRetention' && ok || bad "jobRetention below 1s is refused, naming the field"

start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
atok=$(c token create --role agent --node small-0 -o json | jq -r .token)
"$agentbin" --server "$url" --token "$atok" --hardware "$src/tests/data/hw-small.yaml" \
    --node small-0 --data "$tmp/agent" --config "$tmp/craterd.yaml" 2>>"$tmp/agent.err" &
apid=$!

# a finished job is visible, with its logs, until the retention passes
a=$(job alone)
until_ 15 'test "$(state "$a")" = succeeded' && ok || { bad "job succeeded"; cat "$tmp/agent.err"; }
until_ 5 'c logs "$a" 2>/dev/null | has "out of alone"' && ok || bad "logs served"
[ -s "$tmp/data/logs/$a.1.stdout" ] && ok || bad "log file kept by craterd"

# a finished job that a waiting job names stays
b=$(job first)
until_ 15 'test "$(state "$b")" = succeeded' && ok || bad "first succeeded"
c nodes cordon small-0 --reason "hold the waiter" >/dev/null && ok || bad "cordon"
w=$(job waiter first)
until_ 10 'gone "$a"' && ok || bad "the lone finished job is forgotten after jobRetention"
[ ! -e "$tmp/data/logs/$a.1.stdout" ] && ok || bad "its log file is deleted"
sleep 3 # past the retention of "first" again
[ "$(state "$b")" = succeeded ] && ok || bad "a job awaited by a waiting job is kept"
[ "$(state "$w")" = pending ] && ok || bad "the waiter waits (node cordoned)"
c nodes uncordon small-0 >/dev/null && ok || bad "uncordon"
until_ 15 'test "$(state "$w")" = succeeded' && ok || bad "the waiter ran: its dependency was still known"
until_ 10 'gone "$b" && gone "$w"' && ok || bad "both forgotten once nothing waits"

# an array whose early jobs were forgotten still finds its later ones:
# indexes 0-89 finish and are forgotten, 90-99 keep running
printf 'name: tail\ncommand: [sh, -c, "[ $CRATER_ARRAY_INDEX -lt 90 ] || exec sleep 60"]\narray: "0-99"\nresources: {cpu: 10m, memory: 8Mi}\n' >"$tmp/tail.yaml"
arr=$(c submit -f "$tmp/tail.yaml" -o json | jq -r .id)
until_ 60 'api GET "/api/v1/arrays/$arr" "$admin"; jq -e ".count == 10" "$tmp/body" >/dev/null' \
    && ok || bad "90 of the array forgotten: $(cat "$tmp/body")"
until_ 20 'api GET "/api/v1/arrays/$arr" "$admin"; jq -e ".states.running == 10" "$tmp/body" >/dev/null' \
    && ok || bad "the 10 left are found running: $(cat "$tmp/body")"
api GET "/api/v1/jobs/${arr}_95" "$admin"; expect_ok=$code
[ "$expect_ok" = 200 ] && ok || bad "index 95 found after its neighbours were forgotten ($expect_ok)"
api POST "/api/v1/arrays/$arr/cancel" "$admin"
jq -e '.cancelled == 10' "$tmp/body" >/dev/null && ok || bad "cancel --array reaches the 10 left: $(cat "$tmp/body")"
until_ 30 'api GET "/api/v1/arrays/$arr" "$admin"; [ "$code" = 404 ]' && ok || bad "the array is forgotten once all of it is"

# forgotten in the store too: a restart does not bring them back
stop_craterd && ok || bad "craterd clean stop"
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
gone "$a" && gone "$b" && gone "$w" && ok || bad "still forgotten after a restart"
c get jobs -o json | jq -e '.items | length == 0' >/dev/null && ok || bad "no jobs listed"

kill -TERM "$apid"; wait "$apid"; apid=""
grep -q Sanitizer "$tmp/agent.err" && { bad "agent sanitizer report"; cat "$tmp/agent.err"; } || ok
stop_craterd && ok || bad "craterd clean stop"
grep -q Sanitizer "$craterd_log" && { bad "craterd sanitizer report"; cat "$craterd_log"; } || ok

echo "test_retention: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
