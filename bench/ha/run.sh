#!/usr/bin/env bash
# bench/ha/run.sh - failover soak for leader election (issue 17; B10 in
# bench/RESULTS.md): a three-member etcd, three craterds and one agent on
# loopback, CLIENTS crater CLIs submitting without pause (each with the list
# of the three craterds), and the leader killed with kill -9 every
# INTERVAL seconds for DURATION seconds (the killed craterd is started again
# as a standby at once). Prints the time without a leader after each kill
# (from the kill to the first ready leader) with p50 and max, the
# acknowledged submissions and their rate, the failed attempts, and checks
# that every acknowledged job is listed exactly once and every task started
# exactly once (each task appends its name to a file).
#
#   bench/ha/run.sh [BUILD_DIR] [DURATION_S] [INTERVAL_S] [CLIENTS]
#   bench/ha/run.sh build 300 20 2
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
dur=${2:-300} every=${3:-20} nclients=${4:-2}
bin=$build/crater craterd=$build/craterd agentbin=$build/crater-agent
command -v etcd >/dev/null || { echo "etcd not installed"; exit 77; }
tmp=$(mktemp -d)
chmod 755 "$tmp"
epid=() cpid=("" "" "") apid="" lpids=()
cleanup() {
    touch "$tmp/stop"
    for p in "${lpids[@]}" $apid "${cpid[@]}" "${epid[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$(cd "$(dirname "$0")" && pwd)/etcd3.sh"
start_etcd3
urls=()
for i in 0 1 2; do
    urls+=("http://127.0.0.1:${hport[$i]}")
    printf 'store:\n  backend: etcd\n  etcdEndpoints: [%s]\n  etcdPrefix: /bench-ha/\ninference:\n  gateway: none\nagent:\n  heartbeatInterval: 500ms\n  heartbeatTimeout: 10s\nserver:\n  requestRate: 0\n' \
        "$eps" >"$tmp/c$i.yaml"
done
servers=$(IFS=,; echo "${urls[*]}")
start_cd() { "$craterd" --config "$tmp/c$1.yaml" --data "$tmp/d$1" --listen "127.0.0.1:${hport[$1]}" >>"$tmp/cd$1.log" 2>&1 & cpid[$1]=$!; }
leader() {
    local i
    for i in 0 1 2; do
        [ "$(curl -s -m 1 "${urls[$i]}/api/v1/leader" | jq -r .role 2>/dev/null)" = leader ] \
            && curl -sf -m 1 "${urls[$i]}/readyz" >/dev/null && { echo "$i"; return; }
    done
}
for i in 0 1 2; do start_cd "$i"; done
until_ 30 '[ -n "$(leader)" ]' || { echo "no leader"; exit 1; }
admin=$(cat "$tmp"/d*/admin.token 2>/dev/null | head -1)
atok=$(CRATER_SERVER=$servers "$bin" token create --role agent --node small-0 --token "$admin" -o json | jq -r .token)
( umask 077; printf '%s\n' "$atok" >"$tmp/agent.token" )
"$agentbin" --server "$servers" --token-file "$tmp/agent.token" --hardware "$src/tests/data/hw-small.yaml" \
    --node small-0 --data "$tmp/agent" --config "$tmp/c0.yaml" 2>>"$tmp/agent.err" &
apid=$!
: >"$tmp/starts"; chmod 666 "$tmp/starts"
client() { # client K: submissions named cK-N until stop
    local k=$1 n=0 out
    while [ ! -e "$tmp/stop" ]; do
        n=$((n + 1))
        printf '{"name": "c%s-%s", "command": ["sh", "-c", "echo c%s-%s >>%s; sleep 0.5"], "resources": {"cpu": "10m", "memory": "16Mi"}}' \
            "$k" "$n" "$k" "$n" "$tmp/starts" >"$tmp/job$k.json"
        if out=$(CRATER_SERVER=$servers "$bin" submit -f "$tmp/job$k.json" --token "$admin" -o json 2>&1); then
            echo "c$k-$n" >>"$tmp/acked"
        else
            echo "c$k-$n $out" >>"$tmp/failed"
        fi
    done
}
: >"$tmp/acked"; : >"$tmp/failed"
t_start=$(now)
for k in $(seq 1 "$nclients"); do client "$k" & lpids+=($!); done
gaps=()
end=$(( $(date +%s) + dur ))
while [ "$(date +%s)" -lt "$end" ]; do
    sleep "$every"
    L=$(leader)
    [ -n "$L" ] || continue
    kill -9 "${cpid[$L]}"; wait "${cpid[$L]}" 2>/dev/null
    t0=$(now)
    until_ 30 'n=$(leader); [ -n "$n" ] && [ "$n" != "$L" ]' || { echo "no new leader after 30 s"; break; }
    gaps+=("$(echo "$(now) - $t0" | bc)")
    echo "kill ${#gaps[@]}: craterd $L, ${gaps[-1]} s without a leader"
    start_cd "$L"
done
touch "$tmp/stop"
for p in "${lpids[@]}"; do wait "$p" 2>/dev/null; done
lpids=()
t_end=$(now)
L=$(leader)
acked=$(wc -l <"$tmp/acked")
until_ 120 '[ "$(curl -s -H "Authorization: Bearer $admin" "${urls[$L]}/api/v1/jobs?state=pending&limit=1" | jq ".items | length")" = 0 ] && [ "$(curl -s -H "Authorization: Bearer $admin" "${urls[$L]}/api/v1/jobs?state=running&limit=1" | jq ".items | length")" = 0 ]' \
    || echo "warning: jobs still pending or running"
: >"$tmp/names"
after=""
while :; do
    page=$(curl -s -H "Authorization: Bearer $admin" "${urls[$L]}/api/v1/jobs?limit=1000${after:+&after=$after}")
    jq -r '.items[].name' <<<"$page" >>"$tmp/names"
    after=$(jq -r '.next // empty' <<<"$page")
    [ -n "$after" ] || break
done
sort -o "$tmp/names" "$tmp/names"
missing=$(sort "$tmp/acked" | comm -23 - "$tmp/names" | wc -l)
listed_twice=$(uniq -d "$tmp/names" | wc -l)
started_twice=$(sort "$tmp/starts" | uniq -d | wc -l)
not_started=$(sort "$tmp/acked" | comm -23 - <(sort -u "$tmp/starts") | wc -l)
p50=$(printf '%s\n' "${gaps[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
max=$(printf '%s\n' "${gaps[@]}" | sort -n | tail -1)
secs=$(echo "$t_end - $t_start" | bc)
echo "kills ${#gaps[@]}, time without a leader: p50 ${p50} s, max ${max} s"
echo "acknowledged $acked in ${secs} s ($(echo "scale=1; $acked / $secs" | bc)/s), failed attempts $(wc -l <"$tmp/failed")"
echo "acknowledged but missing $missing, listed twice $listed_twice, started twice $started_twice, acknowledged never started $not_started"
[ "$missing" = 0 ] && [ "$listed_twice" = 0 ] && [ "$started_twice" = 0 ] && [ "$not_started" = 0 ]
