#!/usr/bin/env bash
# test_ports_held.sh - MASTER_PORT and CRATER_SERVICE_PORT avoid ports a
# process outside Crater listens on (agent protocol 7: the node's
# listening ports in heartbeats; doc/agent.md "Ports"). On `crater up`
# (tests/data/hw-small.yaml: every node is this host) with gang ports
# [B, B+100) and service ports [B+100, B+200), a process of the test's
# listens on all of them but B+98, B+99, B+198 and B+199:
#   - the nodes show the held ports (heldPorts, in craterd's ranges only);
#   - a gang of two gets MASTER_PORT B+98 or B+99 (it was B + its job id);
#   - a service replica gets CRATER_SERVICE_PORT B+198 or B+199;
#   - once the holder exits, the nodes report the ports free again.
# Waits are for states, with deadlines.
set -uo pipefail
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up="" holder=""
mark=ph$RANDOM$RANDOM # in every task's argv: cleanup reaches only ours
cleanup() {
    [ -n "$holder" ] && kill -9 "$holder" 2>/dev/null
    [ -n "$up" ] && kill -INT "$up" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$up" 2>/dev/null || break; sleep 0.1; done
    [ -n "$up" ] && kill -9 "$up" 2>/dev/null
    for p in $(pgrep -f -- "$mark"); do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
. "$src/tests/integration/craterd_lib.sh" # until_
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }

# a base of our own, below the other tests' (10000-31999) and the
# ephemeral ports
B=$((4000 + RANDOM % 25 * 200))
# the holder: listens on every port of both ranges but the last two of
# each (a port something else on this host already holds is held anyway)
cat >"$tmp/hold.py" <<'PY'
import socket, sys, time
base, out = int(sys.argv[1]), sys.argv[2]
socks, held = [], []
for p in list(range(base, base + 98)) + list(range(base + 100, base + 198)):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p)); s.listen(1); socks.append(s); held.append(p)
    except OSError:
        s.close()
with open(out + ".tmp", "w") as f:
    f.write("\n".join(map(str, held)) + "\n")
import os; os.rename(out + ".tmp", out)
while True:
    time.sleep(60)
PY
python3 "$tmp/hold.py" "$B" "$tmp/held" "$mark" &
holder=$!
until_ 10 '[ -s "$tmp/held" ]' && ok || { bad "the holder listens"; exit 1; }
nheld=$(wc -l <"$tmp/held")
free_now() { python3 -c "import socket,sys; s=socket.socket(); s.bind(('0.0.0.0', int(sys.argv[1])))" "$1" 2>/dev/null; }
for p in $((B + 98)) $((B + 99)) $((B + 198)) $((B + 199)); do
    free_now "$p" || echo "note: port $p is taken on this host (the test still holds)"
done

cat >"$tmp/config.yaml" <<YAML
apiVersion: crater/v1
kind: Config
server:
  gangPortBase: $B
  gangPorts: 100
agent:
  heartbeatInterval: 300ms
inference:
  activationTimeout: 0s
YAML
"$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/config.yaml" \
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
until_ 30 '[ "$(c get nodes -o json | jq "[.items[] | select(.state == \"Ready\")] | length")" = 3 ]' \
    && ok || bad "three nodes ready"

# ---- the nodes report what is held -----------------------------------------------
heldn() { c get nodes -o json | jq --arg n "$1" '[.items[] | select(.name == $n) | .heldPorts // [] | .[]] | length'; }
until_ 20 '[ "$(heldn small-0)" -ge "$nheld" ] && [ "$(heldn small-1)" -ge "$nheld" ]' \
    && ok || bad "heldPorts: small-0 $(heldn small-0), small-1 $(heldn small-1) of $nheld"
c get nodes -o json | jq -e --argjson lo "$B" --argjson hi $((B + 200)) \
    '[.items[].heldPorts // [] | .[] | select(. < $lo or . >= $hi)] | length == 0' >/dev/null \
    && ok || bad "heldPorts lists only craterd's ranges"

# ---- a gang: MASTER_PORT is one of the two free ones ---------------------------------
printf 'name: g\nreplicas: 2\ngang: true\ncommand: [sh, -c, %s, %s]\nresources: {cpu: 100m, memory: 32Mi, gpu: {count: 1}}\n' \
    "$(jq -Rn '"echo MP=$MASTER_PORT"')" "$mark" >"$tmp/g.yaml"
gid=$(c submit -f "$tmp/g.yaml" -o json | jq -r .id)
until_ 60 '[ "$(c get job "$gid" -o json | jq -r .state)" = succeeded ]' \
    && ok || bad "the gang succeeds: $(c get job "$gid" -o json | jq -c '{state, history: [.history[] | .state + ": " + .reason]}')"
mp=$(c logs "$gid" --replica 0 2>/dev/null | sed -n 's/^MP=//p')
{ [ "$mp" = $((B + 98)) ] || [ "$mp" = $((B + 99)) ]; } \
    && ok || bad "MASTER_PORT $mp, not B+98 or B+99 (B=$B)"
[ "$(c logs "$gid" --replica 1 2>/dev/null | sed -n 's/^MP=//p')" = "$mp" ] \
    && ok || bad "both replicas got MASTER_PORT $mp"

# ---- a service replica: CRATER_SERVICE_PORT is one of the two free ones -----------
cat >"$tmp/s.yaml" <<YAML
name: s
workloadType: inference
command: [sh, -c, 'exec sleep 300', $mark]
resources: {cpu: 100m, memory: 32Mi}
inference:
  minReplicas: 1
  maxReplicas: 1
  maxBatchSize: 1
YAML
c submit -f "$tmp/s.yaml" >/dev/null 2>"$tmp/s.err" && ok || bad "service submitted: $(cat "$tmp/s.err")"
sport() { c describe service s -o json 2>/dev/null | jq -r '.items[0].url // empty' | sed -n 's/.*:\([0-9]*\)$/\1/p'; }
until_ 30 '[ -n "$(sport)" ]' && ok || bad "the replica has a port: $(c describe service s -o json | jq -c .items)"
sp=$(sport)
{ [ "$sp" = $((B + 198)) ] || [ "$sp" = $((B + 199)) ]; } \
    && ok || bad "CRATER_SERVICE_PORT $sp, not B+198 or B+199 (B=$B)"

# ---- the holder exits: the ports are free again -----------------------------------
kill -9 "$holder"; wait "$holder" 2>/dev/null; holder=""
until_ 20 '[ "$(heldn small-0)" -lt "$nheld" ]' && ok || bad "held ports after the holder exited: $(heldn small-0)"

echo "test_ports_held: $pass passed, $fail failed"
[ "$fail" = 0 ]
