#!/usr/bin/env bash
# bench/ha/kept.sh - failover time with many jobs kept in the store (B10,
# warm standbys): a three-member etcd and three craterds on loopback, JOBS
# jobs stored first (arrays of 100: etcd allows 128 operations a
# transaction; then cancelled:
# finished jobs as server.jobRetention keeps them; no agent), then KILLS
# times: the leader is killed with kill -9, and the time is measured from
# the kill to the first write a new leader serves (a POST /api/v1/jobs
# answered 201 by any of the three craterds, tried back to back). The
# killed craterd comes back as a standby and the next kill waits until
# both standbys follow the store again (warm) or answer as standbys (cold).
# WARM is the craterds' ha.warmStandby: false is the code path of a
# standby that holds no state (every craterd before warm standbys); unset
# leaves the key out, for a build that predates it.
# Prints each kill's time and the new leader's own log line (load time).
#
#   bench/ha/kept.sh [BUILD_DIR] [JOBS] [KILLS] [WARM]
#   bench/ha/kept.sh build 10000 5 true
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
njobs=${2:-10000} kills=${3:-5} warm=${4:-true}
craterd=$build/craterd
command -v etcd >/dev/null || { echo "etcd not installed"; exit 77; }
tmp=$(mktemp -d)
epid=() cpid=("" "" "")
cleanup() {
    for p in "${cpid[@]}" "${epid[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$(cd "$(dirname "$0")" && pwd)/etcd3.sh"
start_etcd3
urls=()
for i in 0 1 2; do
    urls+=("http://127.0.0.1:${hport[$i]}")
    printf 'store:\n  backend: etcd\n  etcdEndpoints: [%s]\n  etcdPrefix: /bench-kept/\ninference:\n  gateway: none\nserver:\n  requestRate: 0\n' \
        "$eps" >"$tmp/c$i.yaml"
    [ "$warm" = unset ] || printf 'ha:\n  warmStandby: %s\n' "$warm" >>"$tmp/c$i.yaml"
done
start_cd() { "$craterd" --config "$tmp/c$1.yaml" --data "$tmp/d$1" --listen "127.0.0.1:${hport[$1]}" >>"$tmp/cd$1.log" 2>&1 & cpid[$1]=$!; }
role() { curl -s -m 1 "${urls[$1]}/api/v1/leader" | jq -r .role 2>/dev/null; }
leader() {
    local i
    for i in 0 1 2; do
        [ "$(role "$i")" = leader ] && curl -sf -m 1 "${urls[$i]}/readyz" >/dev/null && { echo "$i"; return; }
    done
}
for i in 0 1 2; do start_cd "$i"; done
until_ 30 '[ -n "$(leader)" ]' || { echo "no leader"; exit 1; }
admin=$(cat "$tmp"/d*/admin.token 2>/dev/null | head -1)
post() { # post URL PATH BODY_FILE: the HTTP code
    curl -s -m "${4:-30}" -o "$tmp/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $admin" \
        -H 'Content-Type: application/json' --data-binary "@$3" "$1$2"
}

# ---- JOBS jobs: arrays of 100, cancelled -------------------------------------
L=$(leader)
left=$njobs
t0=$(now)
while [ "$left" -gt 0 ]; do
    n=$(( left < 100 ? left : 100 ))
    printf '{"name": "kept", "array": "0-%d", "command": ["true"], "resources": {"cpu": "10m", "memory": "16Mi"}}' \
        $((n - 1)) >"$tmp/arr.json"
    code=$(post "${urls[$L]}" /api/v1/jobs "$tmp/arr.json")
    [ "$code" = 201 ] || [ "$code" = 200 ] || { echo "submit: $code $(head -c 300 "$tmp/body")"; exit 1; }
    aid=$(jq -r .array.id "$tmp/body")
    echo '{}' >"$tmp/empty.json"
    code=$(post "${urls[$L]}" "/api/v1/arrays/$aid/cancel" "$tmp/empty.json")
    [ "$code" = 200 ] || { echo "cancel: $code $(head -c 300 "$tmp/body")"; exit 1; }
    left=$((left - n))
done
echo "stored $njobs jobs (cancelled) in $(echo "$(now) - $t0" | bc) s; ha.warmStandby $warm"

printf '{"name": "probe", "command": ["true"], "resources": {"cpu": "10m", "memory": "16Mi"}}' >"$tmp/probe.json"
written() { # a write served by any craterd
    local i
    for i in 0 1 2; do
        code=$(post "${urls[$i]}" /api/v1/jobs "$tmp/probe.json" 2)
        [ "$code" = 201 ] && return 0
    done
    return 1
}
standbys_ready() { # the two others stand by (and follow the store, when warm)
    local i
    for i in 0 1 2; do
        [ "$i" = "$1" ] && continue
        [ "$(role "$i")" = standby ] || return 1
        [ "$warm" != true ] || grep -q "warm: .* records at revision" "$tmp/cd$i.log" || return 1
    done
}
gaps=()
for k in $(seq 1 "$kills"); do
    L=$(leader)
    [ -n "$L" ] || { echo "no leader"; exit 1; }
    until_ 120 "standbys_ready $L" || { echo "standbys not ready"; exit 1; }
    kill -9 "${cpid[$L]}"; wait "${cpid[$L]}" 2>/dev/null
    t0=$(now)
    until_ 60 written || { echo "no write served 60 s after the kill"; exit 1; }
    gaps+=("$(echo "$(now) - $t0" | bc)")
    N=$(leader)
    echo "kill $k: craterd $L killed, first write served after ${gaps[-1]} s by craterd $N: $(grep -h "state loaded" "$tmp/cd$N.log" | tail -1 | sed 's/^craterd: //')"
    grep -h "warm: caught up" "$tmp/cd$N.log" | tail -1 | sed 's/^craterd: /    /'
    mv "$tmp/cd$L.log" "$tmp/cd$L.log.$k" # its next life logs afresh
    start_cd "$L"
done
p50=$(printf '%s\n' "${gaps[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
max=$(printf '%s\n' "${gaps[@]}" | sort -n | tail -1)
grep -h "warm: .* records at revision" "$tmp"/cd*.log* | sed 's/^craterd: /standby: /'
echo "jobs $njobs, warmStandby $warm: kill -> first write served: p50 $p50 s, max $max s (${gaps[*]})"
