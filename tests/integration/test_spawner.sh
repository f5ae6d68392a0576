#!/usr/bin/env bash
# test_spawner.sh - the shim spawner (src/agent/spawner.c, crater-shim
# --spawner): on `crater up` (tests/data/hw-small.yaml, three nodes), each
# agent has one spawner; a task's shim is the spawner's child and shows
# "crater-shim EXIT_PATH" in ps; a task started that way ends with its real
# exit code and output; a task whose environment is too large for a
# spawner message starts by posix_spawn (its shim is crater up's child); a
# clean stop leaves no spawner running; spawners killed with -9: the
# agents warn and start tasks by posix_spawn.
set -uo pipefail
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
mark=spw$RANDOM$RANDOM
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
    job "$2" | jq -c '{state, reason, exit}'
    return 1
}
. "$src/tests/integration/craterd_lib.sh" # until_
submit() { # submit NAME SHELL_SCRIPT [EXTRA_YAML] -> job id
    printf 'name: %s\ncommand: [sh, -c, %s, %s]\nresources: {cpu: 100m, memory: 64Mi}\n%s\n' \
        "$1" "$(jq -Rn --arg s "$2" '$s')" "$mark" "${3:-}" >"$tmp/j.yaml"
    c submit -f "$tmp/j.yaml" -o json | jq -r .id
}
start_up() {
    "$bin" up --data "$tmp/var" --listen 127.0.0.1:0 \
        --hardware "$src/tests/data/hw-small.yaml" >"$tmp/up.out" 2>&1 &
    up=$!
    url=""
    for _ in $(seq 1 300); do
        url=$(sed -n 's/.*API on \(http:[^,]*\),.*/\1/p' "$tmp/up.out" | tail -1)
        [ -n "$url" ] && break
        kill -0 "$up" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$url" ] || { echo "crater up did not start:"; cat "$tmp/up.out"; exit 1; }
    token=$(cat "$tmp/var/admin.token")
}
spawners() { pgrep -P "$up" -f -- "crater-shim --spawner" | sort; }
ppid_of() { ps -o ppid= -p "$1" | tr -d ' '; }
args_of() { ps -o args= -p "$1"; }
task_pid() { pgrep -f -- "# $1 $mark" | head -1; } # the task (sh) of a job

start_up
until_ 20 '[ "$(spawners | wc -l)" -eq 3 ]' && ok || bad "one spawner per agent: $(spawners | wc -l)"
sp=$(spawners | tr '\n' ' ')

# ---- a task under a spawner-forked shim ---------------------------------------------
id=$(submit held "echo out-held; while [ ! -e $tmp/go ]; do sleep 0.05; done; echo bye >&2; exit 4 # held")
wait_for 30 "$id" '.state == "running"' && ok || bad "held job running"
until_ 10 '[ -n "$(task_pid held)" ]' || true
t=$(task_pid held)
shim=$(ppid_of "$t")
case " $sp " in *" $(ppid_of "$shim") "*) ok ;; *) bad "the shim's parent is not a spawner: $(ps -o pid,ppid,args -p "$shim")" ;; esac
args_of "$shim" | has "^crater-shim $tmp/var/agent-.*/tasks/$id\.1/exit *$" && ok || bad "the shim's command line: $(args_of "$shim")"
touch "$tmp/go"
wait_for 30 "$id" '.state == "failed" and .exit.code == 4' && ok || bad "held job's exit code"
until_ 10 'c logs "$id" 2>/dev/null | has out-held' && ok || bad "held job's output: $(c logs "$id" 2>&1)"

# ---- an environment too large for one message: posix_spawn --------------------------
v=$(head -c 4000 /dev/zero | tr '\0' x) env=env:
for i in $(seq 1 40); do env="$env"$'\n'"  V$i: $v"; done # 160 KB
id=$(submit big "env | grep -c '^V[0-9]*=x*\$'; while [ ! -e $tmp/go2 ]; do sleep 0.05; done # big" "$env")
wait_for 30 "$id" '.state == "running"' && ok || bad "big-environment job running: $(job "$id" | jq -c '{state, reason}')"
until_ 10 '[ -n "$(task_pid big)" ]' || true
shim=$(ppid_of "$(task_pid big)")
[ "$(ppid_of "$shim")" = "$up" ] && ok || bad "big environment: the shim's parent is $(ppid_of "$shim"), not crater up ($up)"
touch "$tmp/go2"
wait_for 30 "$id" '.state == "succeeded"' && ok || bad "big-environment job succeeded"
until_ 10 'c logs "$id" 2>/dev/null | has "^40$"' && ok || bad "big environment's output: $(c logs "$id" 2>&1 | head -c 200)"

# ---- a clean stop leaves no spawner ----------------------------------------------
kill -TERM "$up"; wait "$up" 2>/dev/null; up=""
left=""
for p in $sp; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
[ -z "$left" ] && ok || bad "spawners left after a clean stop:$left"

# ---- spawners killed: tasks start by posix_spawn ------------------------------------
start_up
until_ 20 '[ "$(spawners | wc -l)" -eq 3 ]' && ok || bad "spawners after a restart: $(spawners | wc -l)"
for p in $(spawners); do kill -9 "$p"; done
for n in 1 2 3 4; do
    id=$(submit "after$n" "exit 0 # after$n")
    wait_for 30 "$id" '.state == "succeeded"' && ok || bad "job $n after the spawners died"
done
has "the shim spawner is gone; tasks start by posix_spawn" <"$tmp/up.out" && ok || bad "no warning about the spawner: $(grep -i spawn "$tmp/up.out")"

echo "test_spawner: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
