#!/usr/bin/env bash
# test_craterd_etcd.sh - craterd on etcd (store.backend: etcd, issue 17): starts
# a real etcd on free loopback ports with a temporary data dir and craterd
# with store.backend etcd and two endpoints (the first one dead, so every
# request fails over), submits jobs, restarts craterd (SIGTERM, then kill -9)
# and finds them with their state; checks the keys are in etcd under the
# prefix and that craterd refuses to start, naming store.etcdEndpoints, when
# no endpoint answers. Skipped (exit 77) when etcd is not installed.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
command -v etcd >/dev/null || { echo "etcd not installed (apt-get install etcd-server): skipped"; exit 77; }
pass=0 fail=0
tmp=$(mktemp -d)
pid="" etcd_pid=""
cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    [ -n "$etcd_pid" ] && { kill "$etcd_pid"; wait "$etcd_pid"; } 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; [ -f "$tmp/body" ] && head -c 600 "$tmp/body" && echo; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cp=$(free_port) pp=$(free_port) dead=$(free_port)
eurl=http://127.0.0.1:$cp
etcd --name t --data-dir "$tmp/etcd" --listen-client-urls "$eurl" \
    --advertise-client-urls "$eurl" --listen-peer-urls "http://127.0.0.1:$pp" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
    --initial-cluster "t=http://127.0.0.1:$pp" >"$tmp/etcd.log" 2>&1 &
etcd_pid=$!
until_ 20 'curl -sf "$eurl/health" | grep -q true' || { echo "etcd did not start"; cat "$tmp/etcd.log"; exit 1; }

cat >"$tmp/craterd.yaml" <<Y
store:
  backend: etcd
  etcdEndpoints: [http://127.0.0.1:$dead, $eurl]
  etcdPrefix: /itest/
Y
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" --hardware "$src/examples/hardware/h100x8.yaml" || exit 1
grep -q "store: etcd" "$craterd_log" && ok || bad "craterd log names the etcd store: $(cat "$craterd_log")"

ids=()
for n in 1 2 3; do
    printf '{"name": "e%s", "command": ["sleep", "100"], "resources": {"cpu": "100m", "memory": "64Mi"}}' "$n" >"$tmp/j"
    api POST /api/v1/jobs "$admin" "$tmp/j"
    [ "$code" = 201 ] && ok || bad "submit e$n: $code"
    ids+=("$(jq -r .id "$tmp/body")")
done
api DELETE "/api/v1/jobs/${ids[2]}" "$admin"
until_ 10 'api GET "/api/v1/jobs/${ids[2]}" "$admin"; jq -e ".state == \"cancelled\"" "$tmp/body" >/dev/null' \
    && ok || bad "cancel e3: $(cat "$tmp/body")"

# the keys are in etcd, under the prefix
ETCDCTL_API=3 etcdctl --endpoints "$eurl" get --prefix /itest/ --keys-only >"$tmp/keys" 2>&1
grep -q "${ids[0]}" "$tmp/keys" && ok || bad "job key in etcd: $(head -20 "$tmp/keys")"

check_jobs() { # check_jobs WHEN
    api GET /api/v1/jobs "$admin"
    for i in 0 1; do
        jq -e --arg id "${ids[$i]}" '[.items[] | select(.id == $id)] | length == 1' "$tmp/body" >/dev/null \
            && ok || bad "$1: job ${ids[$i]} listed"
    done
    api GET "/api/v1/jobs/${ids[2]}" "$admin"
    jq -e '.state == "cancelled"' "$tmp/body" >/dev/null && ok || bad "$1: e3 cancelled"
}

stop_craterd && ok || bad "craterd exited cleanly"
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" --hardware "$src/examples/hardware/h100x8.yaml" || exit 1
check_jobs "after restart"
kill -9 "$pid"; wait "$pid" 2>/dev/null
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" --hardware "$src/examples/hardware/h100x8.yaml" || exit 1
check_jobs "after kill -9"
stop_craterd
pid=""

# no endpoint answers: refused at start, naming the field
printf 'store:\n  backend: etcd\n  etcdEndpoints: [http://127.0.0.1:%s]\n' "$dead" >"$tmp/dead.yaml"
"${CRATERD_BIN:?}" --data "$tmp/data2" --listen 127.0.0.1:0 --config "$tmp/dead.yaml" \
    --hardware "$src/examples/hardware/h100x8.yaml" >"$tmp/dead.out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -q "store.etcdEndpoints" "$tmp/dead.out" && ok \
    || bad "no etcd: rc $rc, $(cat "$tmp/dead.out")"

echo "test_craterd_etcd: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
