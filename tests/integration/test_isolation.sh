#!/usr/bin/env bash
# test_isolation.sh - tenants on one node are isolated from each other
# (doc/security.md), tried as attacks that must fail, on `crater up`:
# tenant A's task holds a secret in its environment and its argv; tenant
# B's task, on the same node, tries to read A's /proc/PID/environ and
# cmdline, to see A's process or the agent at all, and to kill A: every
# attempt fails, and A finishes normally (exit 0). Each tenant runs under
# its own uid from server.taskUidRange, the same after a restart. A
# working directory under a root-only (0700) directory is refused, with
# the reason in the task's stderr log (it is entered after the privilege
# drop, never as root). The data directories are 0700 although they
# existed as 0755. Needs root (uids, mount namespaces).
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
if [ "$(id -u)" != 0 ]; then
    echo "test_isolation: skipped (needs root: per-tenant task uids)"
    exit 0
fi
pass=0 fail=0
tmp=$(mktemp -d)
chmod 711 "$tmp" # the work root below must be reachable by task uids
up=""
mark=iso$RANDOM$RANDOM # in every task's argv: cleanup finds only ours
cleanup() { # no process, cgroup or file left behind
    [ -n "$up" ] && kill -9 "$up" 2>/dev/null
    for p in $(pgrep -f -- "$mark"); do kill -9 "$p" 2>/dev/null; done
    for f in "$tmp"/var/agent-*/tasks/*/task.json; do
        [ -f "$f" ] || continue
        g=$(jq -r .cgroup "$f")
        for _ in 1 2 3 4 5; do
            left=$(find /sys/fs/cgroup -maxdepth 3 -type d -name "$g" 2>/dev/null)
            [ -z "$left" ] && break
            rmdir $left 2>/dev/null
            sleep 0.1
        done
    done
    rm -f /dev/shm/crater-job-*-"$mark"* 2>/dev/null
    mountpoint -q "$tmp/late" 2>/dev/null && umount "$tmp/late"
    rm -rf "$tmp"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "${tok:-$token}"; }
job() { c get job "$1" -o json 2>/dev/null; }
wait_for() { # wait_for SECONDS JOB JQ_FILTER
    local t=$(($1 * 10)) i
    for i in $(seq 1 "$t"); do
        job "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for job $2: $3"
    job "$2" | jq -c '{state, exit, history: [.history[] | .state + ": " + .reason]}'
    return 1
}
submit() { # submit TOKEN SHELL_SCRIPT [ARG] [EXTRA_YAML] -> job id (sh -c)
    printf 'command: [sh, -c, %s, %s, %s]\nresources: {cpu: 100m, memory: 64Mi}\n%s\n' \
        "$(jq -Rn --arg s "$2" '$s')" "$mark" "${3:-x}" "${4:-}" >"$tmp/j.yaml"
    tok=$1 c submit -f "$tmp/j.yaml" -o json | jq -r .id
}
pid_of() { # the task's pid, from its started event
    job "$1" | jq -r '[.history[] | select(.state == "running")][0].reason' |
        sed -n 's/.*pid \([0-9]*\).*/\1/p'
}

cat >"$tmp/config.yaml" <<EOF2
apiVersion: crater/v1
kind: Config
agent:
  workRoot: $tmp/work
server:
  taskUidRange: 510000-510099
EOF2

start_up() { # start_up NAME: crater up on $tmp/var; sets up, url, token
    "$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/config.yaml" \
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

mode() { stat -c %a "$1"; }

mkdir -p "$tmp/var" && chmod 755 "$tmp/var" # an older release's mode
cd "$tmp"
start_up up1
[ "$(mode "$tmp/var")" = 700 ] && ok || bad "craterd's data directory is $(mode "$tmp/var"), not 700"
for d in "$tmp"/var/agent-*; do
    [ "$(mode "$d")" = 700 ] && [ "$(mode "$d/tasks")" = 700 ] && [ "$(mode "$d/spare")" = 700 ] && ok ||
        bad "agent directory $d is $(mode "$d") (tasks $(mode "$d/tasks"), spare $(mode "$d/spare")), not 700"
done
[ "$(mode "$tmp/work")" = 711 ] && ok || bad "work root is $(mode "$tmp/work"), not 711"

ta=$(c token create --role user --tenant team-a -o json | jq -r .token)
tb=$(c token create --role user --tenant team-b -o json | jq -r .token)
secret=s3cr3t$RANDOM$RANDOM

# ---- tenant A: a secret in its environment and argv; waits to be released ----
a=$(submit "$ta" 'echo "home $HOME"; while [ ! -e "$HOME/release" ]; do sleep 0.05; done; echo released' \
    "$secret" "env: {API_KEY: $secret}")
[ -n "$a" ] && [ "$a" != null ] || { echo "submit A failed"; exit 1; }
wait_for 20 "$a" '.state == "running"' && ok || bad "A running"
pa=$(pid_of "$a")
[ -n "$pa" ] && [ -r "/proc/$pa/environ" ] && grep -qa "$secret" "/proc/$pa/environ" && ok ||
    bad "A's task (pid '$pa') has the secret in its environment"
ua=$(stat -c %u "/proc/$pa" 2>/dev/null)

# ---- tenant B on the same node: read A's environ and cmdline, see A, kill A -----
probe='P=$1
cat /proc/$P/environ >/dev/null 2>&1 && echo "environ readable"
tr "\0" " " </proc/$P/environ 2>/dev/null
tr "\0" " " </proc/$P/cmdline 2>/dev/null
[ -e /proc/$P ] && echo "A visible"
ls /proc | grep -qx '"$up"' && echo "agent visible"
kill -9 $P 2>/dev/null && echo "A killed"
kill -STOP $P 2>/dev/null && echo "A stopped"
echo "uid $(id -u) done"'
# (the agents of `crater up` share this machine's kernel and /proc: B is
# on A's machine whichever node it is placed on)
b=$(submit "$tb" "$probe" "$pa")
if ! wait_for 20 "$b" '.state == "succeeded" or .state == "failed"'; then
    bad "B finished"
fi
tok=$tb c logs "$b" >"$tmp/b.out" 2>&1
grep -q "done" "$tmp/b.out" && ok || { bad "B's probe ran"; cat "$tmp/b.out"; }
grep -q "$secret" "$tmp/b.out" && bad "B read A's secret: $(cat "$tmp/b.out")" || ok
grep -q "environ readable" "$tmp/b.out" && bad "B opened A's environ" || ok
grep -q "A visible" "$tmp/b.out" && bad "B sees A's process in /proc" || ok
grep -q "agent visible" "$tmp/b.out" && bad "B sees the agent in /proc" || ok
grep -q "A killed" "$tmp/b.out" && bad "B killed A" || ok
grep -q "A stopped" "$tmp/b.out" && bad "B stopped A" || ok
ub=$(sed -n 's/^uid \([0-9]*\) done/\1/p' "$tmp/b.out")
[ -n "$ua" ] && [ -n "$ub" ] && [ "$ua" != "$ub" ] && [ "$ua" -ge 510000 ] && [ "$ua" -le 510099 ] &&
    [ "$ub" -ge 510000 ] && [ "$ub" -le 510099 ] && ok ||
    bad "A and B run under their own uids from the range (A $ua, B $ub)"
kill -0 "$pa" 2>/dev/null && ok || bad "A is still alive after B's attempts"

# A finishes normally once released (its HOME is its own working directory)
home=$(tok=$ta c logs "$a" 2>/dev/null | sed -n 's/^home //p')
[ -n "$home" ] && [ "$(stat -c '%u %a' "$home")" = "$ua 700" ] && ok ||
    bad "A's HOME '$home' is its own 0700 directory"
touch "$home/release" 2>/dev/null
wait_for 20 "$a" '.state == "succeeded" and .exit.code == 0' && ok || bad "A succeeded"

# the tenants' uids, as craterd keeps them
c get tenants -o json >/dev/null 2>&1
api_uid() { curl -s -H "Authorization: Bearer $token" "$url/api/v1/tenants" |
    jq -r --arg t "$1" '.items[] | select(.name == $t) | .task_uid'; }
uida=$(api_uid team-a) uidb=$(api_uid team-b)
[ "$uida" = "$ua" ] && [ "$uidb" = "$ub" ] && ok || bad "GET /tenants: team-a $uida (ran $ua), team-b $uidb (ran $ub)"

# ---- a working directory under a root-only directory is refused -------------
mkdir -p "$tmp/rootonly/inside" && chmod 700 "$tmp/rootonly"
echo "root secret" >"$tmp/rootonly/inside/key"
w=$(submit "$ta" 'cat key' x "workdir: $tmp/rootonly/inside")
wait_for 20 "$w" '.state == "failed"' && ok || bad "a job in a root-only workdir fails"
[ "$(job "$w" | jq -r .exit.code)" = 126 ] && ok || bad "its exit code is 126"
tok=$ta c logs "$w" --stream stderr >"$tmp/w.err" 2>&1
grep -q "crater: cannot enter the working directory $tmp/rootonly/inside: permission denied" "$tmp/w.err" && ok ||
    bad "the reason is in its stderr log: $(cat "$tmp/w.err")"
grep -q "root secret" "$tmp/w.err" && bad "the job read the root-only file" || ok

# ---- a mount made after the agent started is there for the next task -------
# (tasks share one prepared namespace with the hidden /proc: it is made
# again when the node's mounts change, never a stale copy)
mkdir -p "$tmp/late" && mount -t tmpfs -o size=1m "late-$mark" "$tmp/late" && ok ||
    bad "mount a tmpfs for the late-mount check"
m=$(submit "$ta" 'grep -c " $1 " /proc/self/mounts; ls /proc | grep -qx '"$up"' && echo "agent visible"; echo done' "$tmp/late")
wait_for 20 "$m" '.state == "succeeded"' && ok || bad "the late-mount probe ran"
tok=$ta c logs "$m" >"$tmp/m.out" 2>&1
[ "$(head -1 "$tmp/m.out")" = 1 ] && ok || bad "a task sees a mount made after the agent started: $(cat "$tmp/m.out")"
grep -q "agent visible" "$tmp/m.out" && bad "that task sees the agent in /proc" || ok
umount "$tmp/late"

# ---- the uids survive a restart -------------------------------------------------
kill -INT "$up"; wait "$up" 2>/dev/null; up=""
start_up up2
[ "$(api_uid team-a)" = "$uida" ] && [ "$(api_uid team-b)" = "$uidb" ] && ok ||
    bad "tenant uids after a restart: team-a $(api_uid team-a) (was $uida), team-b $(api_uid team-b) (was $uidb)"
kill -INT "$up"; wait "$up" 2>/dev/null; up=""

echo "test_isolation: $pass passed, $fail failed"
[ "$fail" = 0 ]
