#!/usr/bin/env bash
# test_ha.sh - three craterds with leader election on a three-member etcd
# (issue 17), all on loopback ports this script picks, one agent that
# knows all three craterds, and clients (the crater CLI with a server
# list) submitting all along:
#   - one leader; the standbys answer 503 naming it (X-Crater-Leader);
#   - failover: the leader is killed with -9 three times under load; a new
#     leader serves each time (the times are printed; the 5 s goal is
#     bench/ha's, B10: no timing assertion here), loading
#     the state from its warm copy (the standby followed the change feed);
#   - partition: the leader's only etcd member is stopped (SIGSTOP): it
#     steps down (stops answering as leader, its writes are fenced), another
#     craterd leads; never two leaders at once (a monitor samples roles);
#   - member loss: one etcd member (not the leader's) killed under load: no
#     client error; two killed: a write fails with a clear error, and
#     writes resume when one member returns;
#   - every acknowledged job is present exactly once and every job ran
#     exactly once (each task appends its name to a file: starts counted);
#   - warm equals full: with every job finished, a leader killed once more
#     and the warm-loaded successor lists the same jobs, field by field.
# Each craterd lists one etcd member only, so that stopping a member cuts
# exactly that craterd off while the other two keep a quorum.
# Skipped (exit 77) when etcd is not installed.
set -uo pipefail
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} agentbin=${CRATER_AGENT_BIN:?}
command -v etcd >/dev/null || { echo "etcd not installed (apt-get install etcd-server): skipped"; exit 77; }
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
epid=("" "" "") cpid=("" "" "") apid="" loadpid="" monpid=""
cleanup() {
    touch "$tmp/stop"
    for p in "${epid[@]}"; do [ -n "$p" ] && kill -CONT "$p" 2>/dev/null; done
    { for p in $loadpid $monpid $apid; do kill -9 "$p"; wait "$p"; done; } 2>/dev/null
    # craterds stop cleanly (a sanitizer build reports leaks at exit)
    for p in "${cpid[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
    for i in $(seq 1 50); do
        alive=0
        for p in "${cpid[@]}"; do [ -n "$p" ] && kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for p in "${cpid[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
    for p in "${epid[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ -n "${KEEP_TMP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }

# ---- etcd: three members ---------------------------------------------------------
cport=() pport=() hport=()
for i in 0 1 2; do cport+=("$(free_port)"); pport+=("$(free_port)"); hport+=("$(free_port)"); done
cluster="m0=http://127.0.0.1:${pport[0]},m1=http://127.0.0.1:${pport[1]},m2=http://127.0.0.1:${pport[2]}"
start_member() { # start_member I (again after a kill: the data dir holds the member)
    local i=$1
    etcd --name "m$i" --data-dir "$tmp/etcd$i" \
        --listen-client-urls "http://127.0.0.1:${cport[$i]}" --advertise-client-urls "http://127.0.0.1:${cport[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${pport[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${pport[$i]}" \
        --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "ha$$" \
        >>"$tmp/etcd$i.log" 2>&1 &
    epid[$i]=$!
}
eps="http://127.0.0.1:${cport[0]},http://127.0.0.1:${cport[1]},http://127.0.0.1:${cport[2]}"
healthy() { ETCDCTL_API=3 etcdctl --endpoints "$eps" --command-timeout=2s endpoint health 2>&1 | grep -c "is healthy"; }
for i in 0 1 2; do start_member "$i"; done
until_ 30 '[ "$(healthy)" = 3 ]' && ok || { bad "etcd cluster healthy"; tail -5 "$tmp"/etcd*.log; exit 1; }

# ---- three craterds ------------------------------------------------------------------
urls=()
for i in 0 1 2; do
    urls+=("http://127.0.0.1:${hport[$i]}")
    cat >"$tmp/c$i.yaml" <<Y
store:
  backend: etcd
  etcdEndpoints: [http://127.0.0.1:${cport[$i]}]
  etcdPrefix: /ha/
inference:
  gateway: none
agent:
  heartbeatInterval: 200ms
  heartbeatTimeout: 15s
  migrationPolicy: conservative
  migrationMinRuntime: 10m
server:
  requestRate: 0
Y
done
servers=$(IFS=,; echo "${urls[*]}")
start_cd() { # start_cd I
    "${CRATERD_BIN:?}" --config "$tmp/c$1.yaml" --data "$tmp/d$1" --listen "127.0.0.1:${hport[$1]}" \
        >>"$tmp/cd$1.log" 2>&1 &
    cpid[$1]=$!
}
role() { curl -s -m 2 "${urls[$1]}/api/v1/leader" | jq -r .role 2>/dev/null; }
leader() { # the index of the one craterd that leads and is ready, or nothing
    local i n=0 at=""
    for i in 0 1 2; do
        [ "$(role "$i")" = leader ] && curl -sf -m 2 "${urls[$i]}/readyz" >/dev/null && { n=$((n + 1)); at=$i; }
    done
    [ "$n" = 1 ] && echo "$at"
}
for i in 0 1 2; do start_cd "$i"; done
until_ 20 '[ -n "$(leader)" ]' && ok || { bad "a leader is elected"; tail -5 "$tmp"/cd*.log; exit 1; }
L=$(leader)
admin=$(cat "$tmp"/d*/admin.token 2>/dev/null | head -1)
[ -n "$admin" ] && ok || bad "the first leader wrote admin.token"
n_lead=0
for i in 0 1 2; do [ "$(role "$i")" = leader ] && n_lead=$((n_lead + 1)); done
[ "$n_lead" = 1 ] && ok || bad "exactly one leader, not $n_lead"

# a standby answers 503 naming the leader
S=$(( (L + 1) % 3 ))
curl -s -D "$tmp/hdr" -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $admin" \
    "${urls[$S]}/api/v1/jobs" >"$tmp/code"
[ "$(cat "$tmp/code")" = 503 ] && ok || bad "standby answers 503, not $(cat "$tmp/code")"
has -i "x-crater-leader: ${urls[$L]}" <"$tmp/hdr" && ok || bad "X-Crater-Leader names the leader: $(cat "$tmp/hdr")"
jq -e --arg u "${urls[$L]}" '.leader == $u and .code == "EUNAVAIL"' "$tmp/body" >/dev/null && ok || bad "503 body: $(cat "$tmp/body")"
# the CLI pointed at the standby first follows to the leader
CRATER_SERVER="${urls[$S]},${urls[$L]}" "$bin" get jobs --token "$admin" >/dev/null 2>"$tmp/cli.err" \
    && ok || bad "CLI follows the leader: $(cat "$tmp/cli.err")"

# ---- one agent that knows every craterd ---------------------------------------------
atok=$(CRATER_SERVER=$servers "$bin" token create --role agent --node small-0 --token "$admin" -o json | jq -r .token)
( umask 077; printf '%s\n' "$atok" >"$tmp/agent.token" )
"$agentbin" --server "$servers" --token-file "$tmp/agent.token" --hardware "$src/tests/data/hw-small.yaml" \
    --node small-0 --data "$tmp/agent" --config "$tmp/c0.yaml" 2>>"$tmp/agent.err" &
apid=$!
nready() { CRATER_SERVER=$servers "$bin" get nodes --token "$admin" -o json 2>/dev/null \
    | jq -r '.items[] | select(.name == "small-0") | .state'; }
until_ 15 '[ "$(nready)" = Ready ]' && ok || { bad "agent registered"; tail -5 "$tmp/agent.err"; }

# ---- clients submit all along -----------------------------------------------------------
starts=$tmp/starts
: >"$starts"; chmod 666 "$starts"
cat >"$tmp/load.sh" <<'EOS'
# load.sh TMP BIN SERVERS TOKEN: one submission after another until TMP/stop;
# acknowledged names go to TMP/acked, failures (with the CLI's message) to
# TMP/failed. Each name is used once: a failed attempt is not resent.
tmp=$1 bin=$2 n=0
while [ ! -e "$tmp/stop" ]; do
    if [ -e "$tmp/pause" ]; then sleep 0.1; continue; fi
    n=$((n + 1)); name=ld-$n
    printf '{"name": "%s", "command": ["sh", "-c", "echo %s >>%s; sleep 0.2"], "resources": {"cpu": "10m", "memory": "16Mi"}}' \
        "$name" "$name" "$tmp/starts" >"$tmp/job.json"
    if out=$(CRATER_SERVER=$3 "$bin" submit -f "$tmp/job.json" --token "$4" -o json 2>&1); then
        echo "$name $(jq -r .id <<<"$out")" >>"$tmp/acked"
    else
        echo "$name $(date +%s.%N) $out" >>"$tmp/failed"
    fi
done
EOS
: >"$tmp/acked"; : >"$tmp/failed"
bash "$tmp/load.sh" "$tmp" "$bin" "$servers" "$admin" &
loadpid=$!
acked() { wc -l <"$tmp/acked"; }
failed() { wc -l <"$tmp/failed"; }
until_ 20 '[ "$(acked)" -ge 5 ]' && ok || bad "load runs: $(acked) acked, $(cat "$tmp/failed")"

# ---- the monitor: never two leaders --------------------------------------------------------
cat >"$tmp/mon.sh" <<'EOS'
tmp=$1; shift
while [ ! -e "$tmp/stop" ]; do
    n=0
    for u in "$@"; do
        [ "$(curl -s -m 1 "$u/api/v1/leader" | jq -r .role 2>/dev/null)" = leader ] && n=$((n + 1))
    done
    [ "$n" -gt 1 ] && echo "$(date +%s.%N) $n leaders" >>"$tmp/two"
    sleep 0.1
done
EOS
bash "$tmp/mon.sh" "$tmp" "${urls[@]}" &
monpid=$!

# ---- failover: kill -9 of the leader, three times, under load ------------------------------
gaps=()
nwarm() { cat "$tmp"/cd*.log | grep -c "state loaded (warm copy)"; }
for round in 1 2 3; do
    L=$(leader)
    [ -n "$L" ] || { bad "round $round: no leader before the kill"; break; }
    base=$(acked) w0=$(nwarm)
    kill -9 "${cpid[$L]}"; wait "${cpid[$L]}" 2>/dev/null
    t0=$(now)
    until_ 15 'n=$(leader); [ -n "$n" ] && [ "$n" != "$L" ]' || { bad "round $round: no new leader"; break; }
    gap=$(echo "$(now) - $t0" | bc)
    gaps+=("$gap")
    # the time is printed, not asserted (a test checks states, not speed:
    # on a loaded CI machine it varies); the 5 s goal is measured by
    # bench/ha (B10). A new leader within until_'s 15 s is the check.
    echo "failover $round: craterd $L killed, craterd $(leader) leads after ${gap}s"
    [ "$(nwarm)" -gt "$w0" ] && ok || bad "round $round: not loaded warm: $(grep -h "warm:\|state loaded" "$tmp"/cd*.log | tail -4)"
    start_cd "$L" # back as a standby
    until_ 20 '[ "$(acked)" -ge $((base + 3)) ]' && ok || bad "round $round: submissions resume ($(acked) acked)"
done
echo "failover gaps (s): ${gaps[*]}"

# ---- partition: the leader's etcd member stops; its agents still reach it ---------------------
L=$(leader)
kill -STOP "${epid[$L]}"
t0=$(now)
until_ 15 'n=$(leader); [ -n "$n" ] && [ "$n" != "$L" ]' && ok || bad "partition: no new leader"
echo "partition: craterd $L cut off from etcd, craterd $(leader) leads after $(echo "$(now) - $t0" | bc)s"
until_ 20 '[ "$(role "$L")" != leader ]' && ok || bad "partition: craterd $L still claims to lead"
until_ 20 'grep -q "stepped down" "$tmp/cd$L.log"' && ok || bad "partition: craterd $L did not step down: $(tail -3 "$tmp/cd$L.log")"
# for the record (the monitor checks the rest): paused at renewDeadline,
# stepped down at leaseDuration
grep -E "leader: (no renewal|paused|resumed|stepped down)" "$tmp/cd$L.log" | sed "s/^/partition: craterd $L: /"
base=$(acked)
until_ 20 '[ "$(acked)" -ge $((base + 3)) ]' && ok || bad "partition: submissions go on at the new leader"
kill -CONT "${epid[$L]}"
until_ 30 '[ "$(healthy)" = 3 ]' && ok || bad "etcd member back"
until_ 15 '[ "$(role "$L")" = standby ]' && ok || bad "partition over: craterd $L stands by"

# ---- etcd member loss under load ----------------------------------------------------------------
L=$(leader)
O=$(( (L + 1) % 3 )) P=$(( (L + 2) % 3 ))
fbase=$(failed) base=$(acked)
kill -9 "${epid[$O]}"; wait "${epid[$O]}" 2>/dev/null
until_ 20 '[ "$(acked)" -ge $((base + 10)) ]' && ok || bad "one member down: submissions go on"
[ "$(failed)" = "$fbase" ] && ok || bad "one member down: client errors: $(tail -n +$((fbase + 1)) "$tmp/failed")"
[ "$(leader)" = "$L" ] && ok || bad "one member down: the leader stays"
grep -E "leader: (paused|resumed)" "$tmp/cd$L.log" | sed "s/^/one member down: craterd $L: /"
touch "$tmp/pause"; sleep 0.5
kill -9 "${epid[$P]}"; wait "${epid[$P]}" 2>/dev/null
t0=$(now)
printf '{"name": "noquorum", "command": ["true"], "resources": {"cpu": "10m", "memory": "16Mi"}}' >"$tmp/nq.json"
CRATER_SERVER=$servers "$bin" submit -f "$tmp/nq.json" --token "$admin" >"$tmp/nq.out" 2>&1
rc=$?
echo "two members down: submit rc $rc after $(echo "$(now) - $t0" | bc)s: $(head -c 300 "$tmp/nq.out")"
[ "$rc" -ne 0 ] && ok || bad "two members down: a write succeeded"
# the first may meet the leader as it steps down ("server shutting down",
# or etcd's timeout); once it has, every craterd stands by and says that no
# leader is elected
for try in 1 2 3; do
    t0=$(now)
    CRATER_SERVER=$servers "$bin" submit -f "$tmp/nq.json" --token "$admin" >"$tmp/nq.out" 2>&1
    rc=$?
    echo "two members down, try $try: submit rc $rc after $(echo "$(now) - $t0" | bc)s: $(head -c 300 "$tmp/nq.out")"
    [ "$rc" -ne 0 ] || break
    has "no leader is elected" <"$tmp/nq.out" && break
done
[ "$rc" -ne 0 ] && ok || bad "two members down: a write succeeded"
has "no leader is elected" <"$tmp/nq.out" && ok || bad "two members down: unclear error: $(cat "$tmp/nq.out")"
start_member "$O"
until_ 40 '[ -n "$(leader)" ]' && ok || bad "one member back: a leader again"
rm -f "$tmp/pause"
base=$(acked)
until_ 30 '[ "$(acked)" -ge $((base + 3)) ]' && ok || bad "one member back: writes resume"
start_member "$P"

# ---- every acknowledged job exactly once; every task ran once ------------------------------------
touch "$tmp/stop"; wait "$loadpid" 2>/dev/null; loadpid=""
wait "$monpid" 2>/dev/null; monpid=""
[ ! -s "$tmp/two" ] && ok || bad "two leaders at once: $(cat "$tmp/two")"
L=$(leader)
url=${urls[$L]}
total=$(acked)
done_all() {
    api GET "/api/v1/jobs?limit=1000" "$admin"
    jq -e '[.items[] | select(.name | startswith("ld-")) | select(.state != "succeeded")] | length == 0' "$tmp/body" >/dev/null
}
until_ 60 done_all && ok || bad "every job finished: $(jq -c '[.items[] | select(.state != "succeeded") | {id, name, state}] | .[:5]' "$tmp/body")"
api GET "/api/v1/jobs?limit=1000" "$admin"
jq -r '.items[] | .name' "$tmp/body" | sort >"$tmp/names"
dups=$(uniq -d "$tmp/names" | wc -l)
[ "$dups" = 0 ] && ok || bad "names listed twice: $(uniq -d "$tmp/names" | head)"
missing=0
while read -r name id; do grep -qx "$name" "$tmp/names" || missing=$((missing + 1)); done <"$tmp/acked"
[ "$missing" = 0 ] && ok || bad "$missing acknowledged jobs missing"
sort "$starts" | uniq -d >"$tmp/twice"
[ ! -s "$tmp/twice" ] && ok || bad "tasks started twice: $(head "$tmp/twice")"
ran=0
while read -r name id; do grep -qx "$name" "$starts" && ran=$((ran + 1)); done <"$tmp/acked"
[ "$ran" = "$total" ] && ok || bad "$ran of $total acknowledged jobs ran"
echo "acknowledged $total, failed attempts $(failed), started $(wc -l <"$starts"), started twice $(wc -l <"$tmp/twice")"

# ---- warm equals full: nothing changes any more; one more kill ------------------------------------
until_ 30 '[ "$(healthy)" = 3 ]' && ok || bad "etcd members back for the last kill"
# .cost: a job's zero ledger entry lives in memory until the ledger's next
# flush, so a restart of any kind (warm or full) may not show it
jobs_now() { api GET "/api/v1/jobs?limit=1000" "$admin"; jq -S '[.items[] | del(.cost)] | sort_by(.id)' "$tmp/body"; }
L=$(leader) w0=$(nwarm)
url=${urls[$L]}
jobs_now >"$tmp/before.json"
kill -9 "${cpid[$L]}"; wait "${cpid[$L]}" 2>/dev/null
until_ 15 'n=$(leader); [ -n "$n" ] && [ "$n" != "$L" ]' && ok || bad "last kill: no new leader"
url=${urls[$(leader)]}
[ "$(nwarm)" -gt "$w0" ] && ok || bad "last kill: not loaded warm: $(grep -h "warm:\|state loaded" "$tmp"/cd*.log | tail -4)"
jobs_now >"$tmp/after.json"
[ "$(jq length "$tmp/after.json")" = "$(jq length "$tmp/before.json")" ] && cmp -s "$tmp/before.json" "$tmp/after.json" \
    && ok || bad "warm leader's jobs differ: $(diff "$tmp/before.json" "$tmp/after.json" | head -20)"

echo "test_ha: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
