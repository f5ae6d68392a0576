#!/usr/bin/env bash
# test_ha_pause.sh - a leader that cannot renew its lease (its etcd stopped,
# SIGSTOP) is not sure it still leads once ha.renewDeadline has passed:
#   - it pauses: GET /api/v1/leader says "unsure", /readyz 503, every API
#     route 503 with "X-Crater-Leader: none" (applied nothing), /healthz 200;
#   - a submission sent meanwhile is retried by the client and applied
#     once etcd is back, exactly once; the same process leads again, under
#     the same key (it resumed: it never stepped down);
#   - etcd stopped past twice ha.leaseDuration: it steps down and stands
#     by, and leads again (a new campaign) once etcd is back.
# One craterd on a one-member etcd, loopback. Skipped (exit 77) without etcd.
set -uo pipefail
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
command -v etcd >/dev/null || { echo "etcd not installed (apt-get install etcd-server): skipped"; exit 77; }
pass=0 fail=0
tmp=$(mktemp -d)
epid="" pid="" subpid=""
cleanup() {
    [ -n "$epid" ] && kill -CONT "$epid" 2>/dev/null
    [ -n "$subpid" ] && { kill -9 "$subpid"; wait "$subpid"; } 2>/dev/null
    if [ -n "$pid" ]; then # a clean stop (a sanitizer build reports leaks at exit)
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    fi
    [ -n "$epid" ] && kill -9 "$epid" 2>/dev/null
    wait 2>/dev/null
    if [ -n "${KEEP_TMP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
. "$src/tests/integration/craterd_lib.sh"
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cport=$(free_port) pport=$(free_port)
etcd --name p0 --data-dir "$tmp/etcd" \
    --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
    --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "p0=http://127.0.0.1:$pport" >"$tmp/etcd.log" 2>&1 &
epid=$!
until_ 30 'ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$cport" --command-timeout=2s endpoint health >/dev/null 2>&1' \
    && ok || { bad "etcd healthy"; tail -5 "$tmp/etcd.log"; exit 1; }

# renewDeadline 1 s, lease 5 s: a wide window (1-10 s) in which the
# leader is unsure and may come back
cat >"$tmp/c.yaml" <<Y
store:
  backend: etcd
  etcdEndpoints: [http://127.0.0.1:$cport]
  etcdPrefix: /pause/
ha:
  leaseDuration: 5s
  renewDeadline: 1s
  retryPeriod: 200ms
inference:
  gateway: none
server:
  requestRate: 0
Y
start_craterd "$tmp/data" --config "$tmp/c.yaml" || exit 1
log=$craterd_log
role() { curl -s -m 2 "$url/api/v1/leader" | jq -r .role 2>/dev/null; }
until_ 20 '[ "$(role)" = leader ]' && ok || { bad "craterd leads: $(role)"; tail -5 "$log"; exit 1; }
admin=$(cat "$tmp/data/admin.token")
job() { printf '{"name": "%s", "command": ["true"], "resources": {"cpu": "10m", "memory": "16Mi"}}' "$1" >"$tmp/$1.json"; }
job before
CRATER_SERVER=$url "$bin" submit -f "$tmp/before.json" --token "$admin" >/dev/null && ok || bad "a submission while leading"
key_rev() { ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$cport" get --prefix /pause/ -w json 2>/dev/null \
    | jq -r '.kvs[] | select(.key | @base64d | endswith("crater/leader")) | .mod_revision'; }
rev=$(key_rev)
[ -n "$rev" ] && [ "$rev" != null ] && ok || bad "the leader key in etcd: '$rev'"

# ---- etcd stops: the leader is unsure and pauses ---------------------------------
kill -STOP "$epid"
until_ 10 '[ "$(role)" = unsure ]' && ok || bad "etcd stopped: role $(role), not unsure"
code=$(curl -s -D "$tmp/hdr" -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $admin" "$url/api/v1/jobs")
[ "$code" = 503 ] && ok || bad "paused: GET /api/v1/jobs answered $code"
has -i "x-crater-leader: none" <"$tmp/hdr" && ok || bad "paused: X-Crater-Leader none: $(cat "$tmp/hdr")"
jq -e '.code == "EUNAVAIL"' "$tmp/body" >/dev/null && ok || bad "paused: 503 body $(cat "$tmp/body")"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")" = 503 ] && ok || bad "paused: /readyz not 503"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 200 ] && ok || bad "paused: /healthz not 200"
curl -s "$url/api/v1/leader" | jq -e '.leader == ""' >/dev/null && ok || bad "paused: /api/v1/leader names a leader"
grep -q "leader: paused" "$log" && ok || bad "paused: not in the log: $(tail -3 "$log")"
# a submission now: the client retries it (503 + X-Crater-Leader) until
# the leader is back
posts() { curl -s "$url/metrics" | sed -n 's/^crater_http_request_duration_seconds_count{method="POST",route="\/api\/v1\/jobs"} //p'; }
p0=$(posts)
job during
CRATER_SERVER=$url "$bin" submit -f "$tmp/during.json" --token "$admin" -o json >"$tmp/during.out" 2>&1 &
subpid=$!
until_ 10 '[ "$(posts)" -ge $((p0 + 2)) ]' && ok || bad "the client tries again while paused: POSTs $p0 -> $(posts)"
kill -CONT "$epid"
until_ 20 '[ "$(role)" = leader ]' && ok || bad "etcd back: role $(role), not leader"
wait "$subpid" && ok || bad "the submission sent while paused: $(cat "$tmp/during.out")"
subpid=""
grep -q "leader: resumed after" "$log" && ok || bad "resumed: not in the log: $(tail -3 "$log")"
! grep -q "stepped down" "$log" && ok || bad "it stepped down instead of resuming: $(grep 'stepped down' "$log")"
kill -0 "$pid" && ok || bad "craterd exited"
[ "$(key_rev)" = "$rev" ] && ok || bad "the leader key changed: $rev -> $(key_rev)"
n=$(CRATER_SERVER=$url "$bin" get jobs --token "$admin" -o json | jq '[.items[] | select(.name == "during")] | length')
[ "$n" = 1 ] && ok || bad "the submission sent while paused is there once, not $n times"

# ---- etcd stopped past twice the lease: it steps down, then leads again ----------
kill -STOP "$epid"
until_ 30 'grep -q "stepped down" "$log"' && ok || bad "etcd stopped past the lease: no step-down: $(tail -3 "$log")"
kill -CONT "$epid"
until_ 30 '[ "$(role)" = leader ] && curl -sf "$url/readyz" >/dev/null' && ok || bad "etcd back: role $(role), not leader again"
[ "$(key_rev)" != "$rev" ] && ok || bad "a new campaign writes a new leader key"
n=$(CRATER_SERVER=$url "$bin" get jobs --token "$admin" -o json | jq '[.items[] | select(.name == "before" or .name == "during")] | length')
[ "$n" = 2 ] && ok || bad "after the new campaign: $n of the 2 jobs"

echo "test_ha_pause: $pass passed, $fail failed"
[ "$fail" = 0 ]
