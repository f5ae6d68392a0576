#!/usr/bin/env bash
# test_cli.sh - the crater CLI against a real craterd on loopback: run and
# submit, get/describe/explain/cancel, nodes cordon/drain, top, token
# create, server and token from flags, environment and the config file, and
# the exit codes scripts rely on (0 ok, 1 rejected, 2 usage, 3 unreachable).
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

check() { # check NAME WANT_RC COMMAND...: output in $tmp/out, $tmp/err
    local name=$1 want=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: $name: exit $rc, wanted $want"; cat "$tmp/out" "$tmp/err"
    fi
}
has() { # has NAME PATTERN: the last check's stdout+stderr match
    if grep -qE -e "$2" "$tmp/out" "$tmp/err"; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL: $1: no /$2/ in:"; cat "$tmp/out" "$tmp/err"
    fi
}

# the example jobs have an image: the node advertises a container runtime
# (doc/containers.md), as an agent with podman does
sed 's|^labels:|labels:\n  crater.io/runtimes: podman|' \
    "$src/examples/hardware/h100x8.yaml" >"$tmp/h100x8.yaml"
start_craterd "$tmp/data" --hardware "$tmp/h100x8.yaml" || exit 1
export HOME=$tmp/home XDG_CONFIG_HOME=
mkdir -p "$HOME/.config/crater"

# `crater up` is crater-up (the server side, its own program): the client
# loads no server library, and up finds crater-up beside it or at $CRATER_UP
if readelf -d "$bin" | grep -qE 'NEEDED.*(sqlite|microhttpd|hwloc)'; then
    fail=$((fail + 1)); echo "FAIL: crater links server libraries:"; readelf -d "$bin" | grep NEEDED
else pass=$((pass + 1)); fi
check "up --help through crater-up" 0 "$bin" up --help
has "up usage" "crater up"
check "up without crater-up" 1 env CRATER_UP="$tmp/nowhere/crater-up" "$bin" up --help
has "up names what is missing" "cannot run $tmp/nowhere/crater-up: No such file"

# no server configured anywhere but the default port: unreachable or not
check "flags" 0 "$bin" get jobs --server "$url" --token "$admin"
has "empty table" "^ID +NAME"
check "unreachable" 3 "$bin" get jobs --server http://127.0.0.1:1 --token x
has "unreachable names server" "cannot reach http://127.0.0.1:1"
check "bad token" 1 "$bin" get jobs --server "$url" --token crt_wrong
has "bad token message" "invalid token"

# the config file, then the environment over it
printf 'server: %s\ntoken: %s\n' "$url" "$admin" >"$HOME/.config/crater/config"
check "config file" 0 "$bin" get nodes
has "node listed" "gpu-h100-0 +Unknown"
printf 'server: %s\ntokn: x\n' "$url" >"$HOME/.config/crater/config"
check "config typo" 2 "$bin" get nodes
has "config typo named" "config:2:1: tokn: unknown field 'tokn' \(did you mean 'token'\?\)"
rm "$HOME/.config/crater/config"
export CRATER_SERVER=$url CRATER_TOKEN=$admin

check "run" 0 "$bin" run --name hello --gpu 1 --gpu-mem 20Gi --cpu 2 --mem 4Gi -- echo hi
has "run submitted" "^job 1 submitted \(pending\)"
check "run bad unit" 2 "$bin" run --gpu-mem 20GB/s -- echo hi
has "run unit error names flag" "--gpu-mem"
check "run no command" 2 "$bin" run --gpu 1
check "submit" 0 "$bin" submit -f "$src/examples/jobs/bert-finetune.yaml"
has "submit ok" "^job 2 submitted"
printf 'name: x\nresources: {memory: 3 apples}\n' >"$tmp/bad.yaml"
check "submit invalid" 1 "$bin" submit -f "$tmp/bad.yaml"
has "local validation names line" "bad.yaml:2:.*resources.memory"
check "get jobs" 0 "$bin" get jobs
has "jobs table" "^2 +bert-finetune +nlp +pending"
check "get job json" 0 "$bin" get job 1 -o json
has "json id" '"id": "1"'
check "describe" 0 "$bin" describe job 1
has "describe history" "pending +submitted"
check "explain" 0 "$bin" explain 1
has "explain reason" "node not ready"
check "cancel" 0 "$bin" cancel 2 --reason "wrong data"
check "cancel again" 1 "$bin" cancel 2
has "cancel conflict" "already cancelled"
check "missing job" 1 "$bin" get job 999
check "cordon" 0 "$bin" nodes cordon gpu-h100-0 --reason maintenance
check "top" 0 "$bin" top
has "top cordoned" "gpu-h100-0 +Unknown,Cordoned"
check "uncordon" 0 "$bin" nodes uncordon gpu-h100-0
check "token" 0 "$bin" token create --role user --tenant team-a
user=$(grep -o 'crt_[A-Za-z0-9_-]*' "$tmp/out" | head -1)
check "user cannot drain" 1 "$bin" nodes drain gpu-h100-0 --token "$user"
has "drain forbidden" "admin"
check "user sees nothing of default" 0 "$bin" get jobs --token "$user"
if grep -q hello "$tmp/out"; then fail=$((fail + 1)); echo "FAIL: tenant leak"; else pass=$((pass + 1)); fi
check "usage" 2 "$bin" get widgets

stop_craterd && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: clean stop"; }
echo "test_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
