#!/usr/bin/env bash
# bench/ha/pause.sh - what a leader does when etcd stops answering it, and
# whether two craterds ever answer "leader" at once (B10, "The leader's
# pause"). A three-member etcd and three craterds on loopback, each craterd
# listing one member only (as test_ha), two clients submitting all along
# (the CLI with the three URLs), a monitor sampling the three craterds'
# GET /api/v1/leader every 50 ms. ROUNDS times, alternately:
#   partition  - the leader's own member stopped (SIGSTOP) for 8 s: it
#                must pause at renewDeadline and step down at leaseDuration;
#                another craterd leads;
#   raft loss  - etcd's own leader, first moved (etcdctl move-leader) to a
#                member the craterd leader does not list, killed (kill -9)
#                and restarted after 8 s: etcd elects a new leader of its
#                own; the craterd leader pauses and resumes, or steps down
#                when the election outlasts its lease.
# Per round: when the old leader was first seen "unsure" and last seen
# "leader", who led after, the time without any "leader". At the end: the
# samples with two or more "leader" answers (the goal: none), the failed
# client attempts.
#
#   bench/ha/pause.sh [BUILD_DIR] [ROUNDS]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
rounds=${2:-6}
bin=$build/crater craterd=$build/craterd
command -v etcd >/dev/null || { echo "etcd not installed"; exit 77; }
tmp=$(mktemp -d)
epid=() cpid=("" "" "") lpids=() monpid=""
cleanup() {
    touch "$tmp/stop"
    for p in "${epid[@]}"; do [ -n "$p" ] && kill -CONT "$p" 2>/dev/null; done
    for p in "${lpids[@]}" $monpid "${cpid[@]}" "${epid[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$here/etcd3.sh"
start_etcd3
start_member() { # again after a kill: the data dir holds the member
    local i=$1 cluster="m0=http://127.0.0.1:${pport[0]},m1=http://127.0.0.1:${pport[1]},m2=http://127.0.0.1:${pport[2]}"
    etcd --name "m$i" --data-dir "$tmp/etcd$i" \
        --listen-client-urls "http://127.0.0.1:${cport[$i]}" --advertise-client-urls "http://127.0.0.1:${cport[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${pport[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${pport[$i]}" \
        --initial-cluster "$cluster" --initial-cluster-state new >>"$tmp/etcd$i.log" 2>&1 &
    epid[$i]=$!
}
healthy() { ETCDCTL_API=3 etcdctl --endpoints "$eps" --command-timeout=2s endpoint health 2>&1 | grep -c "is healthy"; }
ectl() { ETCDCTL_API=3 etcdctl --command-timeout=2s "$@" 2>/dev/null; }
# simple format: "ENDPOINT, ID, VERSION, DB SIZE, IS LEADER, ..."
raft_leader() { # the index of etcd's leader member
    local i
    for i in 0 1 2; do
        [ "$(ectl --endpoints "http://127.0.0.1:${cport[$i]}" endpoint status | cut -d, -f5 | tr -d ' ')" = true ] \
            && { echo "$i"; return; }
    done
}
member_id() { ectl --endpoints "http://127.0.0.1:${cport[$1]}" endpoint status | cut -d, -f2 | tr -d ' '; }
# move_raft T: etcd's leadership to member T (from the current leader)
move_raft() {
    local cur to=$1
    cur=$(raft_leader)
    [ -n "$cur" ] && [ "$cur" != "$to" ] || return 0
    ectl --endpoints "http://127.0.0.1:${cport[$cur]}" move-leader "$(member_id "$to")" >/dev/null
    until_ 10 '[ "$(raft_leader)" = "$to" ]'
}
urls=()
for i in 0 1 2; do
    urls+=("http://127.0.0.1:${hport[$i]}")
    printf 'store:\n  backend: etcd\n  etcdEndpoints: [http://127.0.0.1:%s]\n  etcdPrefix: /bench-pause/\ninference:\n  gateway: none\nserver:\n  requestRate: 0\n' \
        "${cport[$i]}" >"$tmp/c$i.yaml"
done
servers=$(IFS=,; echo "${urls[*]}")
for i in 0 1 2; do
    "$craterd" --config "$tmp/c$i.yaml" --data "$tmp/d$i" --listen "127.0.0.1:${hport[$i]}" >>"$tmp/cd$i.log" 2>&1 &
    cpid[$i]=$!
done
role() { curl -s -m 1 "${urls[$1]}/api/v1/leader" | jq -r .role 2>/dev/null; }
leader() { local i; for i in 0 1 2; do [ "$(role "$i")" = leader ] && { echo "$i"; return; }; done; }
until_ 30 '[ -n "$(leader)" ]' || { echo "no leader"; exit 1; }
admin=$(cat "$tmp"/d*/admin.token 2>/dev/null | head -1)

# the monitor: "TIME ROLE0 ROLE1 ROLE2" every 50 ms (the three asked at once)
cat >"$tmp/mon.sh" <<'EOS'
tmp=$1; shift
while [ ! -e "$tmp/stop" ]; do
    t=$(date +%s.%N) r=()
    for u in "$@"; do curl -s -m 1 "$u/api/v1/leader" >"$tmp/m.$((${#r[@]}))" & r+=($!); done
    wait "${r[@]}"
    echo "$t $(for i in 0 1 2; do jq -r '.role // "-"' "$tmp/m.$i" 2>/dev/null || echo -; done | tr '\n' ' ')"
    sleep 0.05
done >>"$tmp/roles"
EOS
bash "$tmp/mon.sh" "$tmp" "${urls[@]}" &
monpid=$!
client() {
    local k=$1 n=0 out
    while [ ! -e "$tmp/stop" ]; do
        n=$((n + 1))
        printf '{"name": "p%s-%s", "command": ["true"], "resources": {"cpu": "10m", "memory": "16Mi"}}' "$k" "$n" >"$tmp/job$k.json"
        if out=$(CRATER_SERVER=$servers "$bin" submit -f "$tmp/job$k.json" --token "$admin" -o json 2>&1); then
            echo "p$k-$n" >>"$tmp/acked"
        else
            echo "p$k-$n $(date +%s.%N) $out" >>"$tmp/failed"
        fi
    done
}
: >"$tmp/acked"; : >"$tmp/failed"
for k in 1 2; do client "$k" & lpids+=($!); done

# first_seen ROLE IDX T0: seconds after T0 of the first sample where
# craterd IDX answered ROLE ("-" when never)
first_seen() { awk -v r="$1" -v c=$(($2 + 2)) -v t0="$3" '$1 >= t0 && $c == r { printf "%.2f", $1 - t0; f = 1; exit } END { if (!f) printf "-" }' "$tmp/roles"; }
# no_leader T0 T1: the longest run of samples in [T0, T1] without a leader
no_leader() { awk -v t0="$1" -v t1="$2" '$1 >= t0 && $1 <= t1 { l = ($2 == "leader" || $3 == "leader" || $4 == "leader"); if (!l && s == "") s = $1; if (l && s != "") { if ($1 - s > m) m = $1 - s; s = "" } } END { printf "%.2f", m }' "$tmp/roles"; }
printf '%-5s %-10s %-9s %-8s %-7s %-7s %-22s %s\n' round kind leader member unsure "left" after "no leader (s)"
for r in $(seq 1 "$rounds"); do
    sleep 3
    L=$(leader)
    [ -n "$L" ] || { until_ 30 '[ -n "$(leader)" ]'; L=$(leader); }
    t0=$(now) l0=$(wc -l <"$tmp/cd$L.log")
    if [ $((r % 2)) = 1 ]; then
        kind=partition M=$L
        kill -STOP "${epid[$M]}"
        sleep 8
        kill -CONT "${epid[$M]}"
    else
        # etcd's leader on a member the craterd leader does not talk to:
        # only etcd's election stands between it and its lease
        kind="raft loss" M=$(( (L + 1) % 3 ))
        move_raft "$M" || { echo "round $r: etcd's leadership did not move to m$M"; continue; }
        t0=$(now)
        kill -9 "${epid[$M]}"; wait "${epid[$M]}" 2>/dev/null
        sleep 8
        start_member "$M"
    fi
    until_ 30 '[ "$(healthy)" = 3 ] && [ -n "$(leader)" ]' || echo "round $r: etcd or a leader missing after 30 s"
    t1=$(now)
    N=$(leader)
    left=$(awk -v c=$((L + 2)) -v t0="$t0" '$1 >= t0 && $c != "leader" { printf "%.2f", $1 - t0; exit }' "$tmp/roles")
    after=$([ "$N" = "$L" ] && echo "craterd $L resumed" || echo "craterd $N leads")
    tail -n +$((l0 + 1)) "$tmp/cd$L.log" | grep -q "stepped down" && [ "$N" = "$L" ] && after="craterd $L again (new campaign)"
    printf '%-5s %-10s %-9s %-8s %-7s %-7s %-22s %s\n' "$r" "$kind" "craterd $L" "m$M" "$(first_seen unsure "$L" "$t0")" "${left:--}" "$after" "$(no_leader "$t0" "$t1")"
done
touch "$tmp/stop"
for p in "${lpids[@]}" $monpid; do wait "$p" 2>/dev/null; done
lpids=() monpid=""
two=$(awk '{ n = ($2 == "leader") + ($3 == "leader") + ($4 == "leader"); if (n > 1) c++ } END { print c + 0 }' "$tmp/roles")
echo "samples $(wc -l <"$tmp/roles"), with two or more leaders: $two"
echo "acknowledged $(wc -l <"$tmp/acked"), failed attempts $(wc -l <"$tmp/failed")"
cut -d' ' -f3- "$tmp/failed" | sed 's/^/  failed: /' | sort | uniq -c | sort -rn | head -5
[ "$two" = 0 ]
