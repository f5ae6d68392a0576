#!/usr/bin/env bash
# test_crash.sh - nothing acknowledged is lost on kill -9 (doc/api.md,
# "Durability"), and ids are never reused after a crash.
#
# Phase 1: `crater bench submit` sends 10,000 jobs named crash-<i> from 64
# connections and records every 201 as "<i> <id>" in acked.txt; once 2,000
# are acknowledged craterd gets kill -9. After a restart on the same data
# directory every acknowledged (i, id) is listed with its name, and no name
# or id appears twice (jobs in flight at the kill may or may not exist: a
# 201 is the only promise). Phase 2: restart again, submit 200 more jobs
# without a kill: all are acknowledged and listed, every earlier job is
# still there, and all ids are unique (the id counter survived the crash).
# Every clean shutdown (SIGTERM) must exit 0 without a sanitizer report,
# including the first start of a fresh data directory (phase 3). A store
# truncated to zero bytes beside its admin.token is refused at start with a
# clear error and the token is kept (phase 4). 2,000 cancels answered
# before a kill -9 are all still cancelled after it (phase 5), and so are
# acknowledged cordons, uncordons, drains and tenant quotas (phase 5b;
# crash_writes.py sends them and kills). A row that cannot be loaded is set
# aside and reported while the rest of the cluster starts (phase 6).
#
# Phases 1 and 2 use only bash, curl and coreutils: the JSON is compact, so
# "id" and "name" are read with grep; the later ones use jq and python3.
set -Eeuo pipefail
export LC_ALL=C
crater=${CRATER_BIN:?} craterd=${CRATERD_BIN:?} src=${CRATER_SOURCE_DIR:?}
tmp=$(mktemp -d)
pid='' bench_pid='' url='' nfail=0
t_start=$SECONDS

cleanup() {
    [ -z "$bench_pid" ] || kill -9 "$bench_pid" 2>/dev/null || true
    [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL: line $LINENO: a command exited $?"' ERR

fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
die() { echo "FAIL: $*"; exit 1; }

# start_daemon DIR NAME: craterd on DIR, stdout/stderr in $tmp/NAME.{out,err};
# sets pid and url once /readyz answers 200.
start_daemon() {
    local dir=$1 name=$2 port='' code=''
    "$craterd" --data "$dir" --listen 127.0.0.1:0 >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pid=$!
    for _ in $(seq 400); do # up to 20 s for the listening line
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/$name.out")
        [ -n "$port" ] && break
        kill -0 "$pid" 2>/dev/null || { cat "$tmp/$name.err"; die "$name: craterd exited at start"; }
        sleep 0.05
    done
    [ -n "$port" ] || die "$name: no 'listening on' line in 20 s"
    url=http://127.0.0.1:$port
    for _ in $(seq 400); do # up to 20 s for /readyz
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/readyz" || true)
        [ "$code" = 200 ] && return 0
        sleep 0.05
    done
    die "$name: /readyz not 200 within 20 s (last: $code)"
}

# stop_daemon NAME: SIGTERM, bounded wait, exit 0 and no sanitizer report.
stop_daemon() {
    local name=$1 rc=0
    kill -TERM "$pid"
    for _ in $(seq 400); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$pid" 2>/dev/null && die "$name: craterd still running 20 s after SIGTERM"
    wait "$pid" || rc=$?
    pid=''
    [ "$rc" -eq 0 ] || fail "$name: craterd exited $rc after SIGTERM"
    if grep -Eq 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$tmp/$name.err"; then
        fail "$name: sanitizer report at shutdown:"
        sed -n '1,40p' "$tmp/$name.err"
    fi
}

# list_jobs FILE: every job as "<id> <name>", sorted, paging by 1000.
list_jobs() {
    local out=$1 after='' page=$tmp/page.json tok
    tok=$(cat "$tmp/data/admin.token")
    : >"$out.raw"
    for _ in $(seq 1000); do
        curl -sf --max-time 30 -H "Authorization: Bearer $tok" \
            "$url/api/v1/jobs?limit=1000${after:+&after=$after}" >"$page" \
            || die "listing jobs after '$after' failed"
        grep -o '"id":"[0-9]*","name":"[^"]*"' "$page" \
            | sed 's/^"id":"\([0-9]*\)","name":"\(.*\)"$/\1 \2/' >>"$out.raw" || true
        after=$(grep -o '"next":"[0-9]*"' "$page" | sed 's/[^0-9]//g' || true)
        [ -z "$after" ] && break
    done
    grep -q '"next":null' "$page" || die "listing did not end with next: null"
    sort "$out.raw" >"$out"
}

# list_jobs_state DATA FILE: every job as "<id> <state>", sorted by id as text.
list_jobs_state() {
    local tok after='' page=$tmp/page.json
    tok=$(cat "$1/admin.token")
    : >"$2.raw"
    for _ in $(seq 1000); do
        curl -sf --max-time 30 -H "Authorization: Bearer $tok" \
            "$url/api/v1/jobs?limit=1000${after:+&after=$after}" >"$page" \
            || die "listing jobs after '$after' failed"
        jq -r '.items[] | "\(.id) \(.state)"' "$page" >>"$2.raw"
        after=$(jq -r '.next // empty' "$page")
        [ -z "$after" ] && break
    done
    sort "$2.raw" >"$2"
}

# bench ARGS...: crater bench submit against $url as admin.
bench() {
    "$crater" bench submit --server "$url" --token "$(cat "$tmp/data/admin.token")" "$@"
}

# ---- phase 1: kill -9 under load ---------------------------------------------
start_daemon "$tmp/data" first
[ -s "$tmp/data/admin.token" ] || die "no admin.token after the first start"
bench --jobs 10000 --concurrency 64 --name-prefix crash- --acked "$tmp/acked.txt" \
    >"$tmp/bench1.out" 2>&1 &
bench_pid=$!
for _ in $(seq 3000); do # up to 60 s for 2,000 acknowledgements
    [ -f "$tmp/acked.txt" ] && [ "$(wc -l <"$tmp/acked.txt")" -ge 2000 ] && break
    kill -0 "$bench_pid" 2>/dev/null || break
    sleep 0.02
done
[ "$(wc -l <"$tmp/acked.txt")" -ge 2000 ] || { cat "$tmp/bench1.out"; die "fewer than 2000 acked before the kill"; }
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=''
for _ in $(seq 600); do # the tool stops 2 s after the server is gone
    kill -0 "$bench_pid" 2>/dev/null || break
    sleep 0.05
done
kill -0 "$bench_pid" 2>/dev/null && die "bench still running 30 s after kill -9"
brc=0
wait "$bench_pid" || brc=$?
bench_pid=''
sed 's/^/  bench: /' "$tmp/bench1.out"
[ "$brc" -eq 0 ] || fail "bench submit exited $brc after the kill (want 0)"
grep -q '^stopped: server unreachable' "$tmp/bench1.out" \
    || grep -q '^acknowledged: 10000$' "$tmp/bench1.out" \
    || fail "bench neither stopped on the dead server nor finished"

acked=$(wc -l <"$tmp/acked.txt")
grep -Evq '^[0-9]+ [0-9]+$' "$tmp/acked.txt" && fail "acked.txt has a malformed line"
[ -z "$(cut -d' ' -f1 "$tmp/acked.txt" | sort | uniq -d)" ] || fail "an index acked twice"
[ -z "$(cut -d' ' -f2 "$tmp/acked.txt" | sort | uniq -d)" ] || fail "one id acked for two jobs"

start_daemon "$tmp/data" restart1
list_jobs "$tmp/listed1.txt"
present=$(wc -l <"$tmp/listed1.txt")
awk '{print $2 " crash-" $1}' "$tmp/acked.txt" | sort >"$tmp/expected.txt"
missing=$(comm -23 "$tmp/expected.txt" "$tmp/listed1.txt" | wc -l)
echo "phase 1: acked $acked, present after restart $present (stored, never acked: $((present - acked))), acked but missing $missing"
if [ "$missing" -ne 0 ]; then
    fail "$missing acknowledged jobs lost or changed by kill -9; first ones (id name):"
    comm -23 "$tmp/expected.txt" "$tmp/listed1.txt" | head -5
fi
[ "$present" -ge "$acked" ] || fail "fewer jobs listed ($present) than acked ($acked)"
# a job present but never acknowledged must come from a request whose
# outcome the tool could not know (reset or timed out at the kill)
unknown=$(sed -n 's/^transport errors: \([0-9]*\) .*/\1/p' "$tmp/bench1.out")
[ -n "$unknown" ] || fail "no transport error count in the bench output"
[ $((present - acked)) -le "${unknown:-0}" ] \
    || fail "$((present - acked)) jobs stored but not acked, only ${unknown:-0} requests had no answer"
dup=$(cut -d' ' -f2 "$tmp/listed1.txt" | sort | uniq -d | head -5)
[ -z "$dup" ] && [ -z "$(cut -d' ' -f1 "$tmp/listed1.txt" | uniq -d)" ] \
    || fail "duplicate job names or ids after restart: $dup"
grep -Evq ' crash-[0-9]+$' "$tmp/listed1.txt" && fail "a listed job is not one the bench sent"
stop_daemon restart1

# ---- phase 2: ids after the crash ----------------------------------------------
start_daemon "$tmp/data" restart2
bench --jobs 200 --concurrency 16 --name-prefix after- --acked "$tmp/acked2.txt" \
    >"$tmp/bench2.out" 2>&1 || { cat "$tmp/bench2.out"; die "bench submit (200) failed"; }
acked2=$(wc -l <"$tmp/acked2.txt")
[ "$acked2" -eq 200 ] || { cat "$tmp/bench2.out"; fail "200 submitted, $acked2 acknowledged"; }
list_jobs "$tmp/listed2.txt"
awk '{print $2 " after-" $1}' "$tmp/acked2.txt" | sort >"$tmp/expected2.txt"
missing2=$(comm -23 "$tmp/expected2.txt" "$tmp/listed2.txt" | wc -l)
lost1=$(comm -23 "$tmp/listed1.txt" "$tmp/listed2.txt" | wc -l)
total=$(wc -l <"$tmp/listed2.txt")
echo "phase 2: acked $acked2 of 200, listed $total (want $((present + 200))), new missing $missing2, earlier jobs gone $lost1"
[ "$missing2" -eq 0 ] || fail "$missing2 of the 200 new jobs not listed as acknowledged"
[ "$lost1" -eq 0 ] || fail "$lost1 jobs present before phase 2 are gone (id reused?)"
[ "$total" -eq $((present + 200)) ] || fail "listed $total jobs, want $((present + 200))"
[ -z "$(cut -d' ' -f1 "$tmp/listed2.txt" | uniq -d)" ] || fail "an id is used twice"
[ -z "$(cut -d' ' -f2 "$tmp/listed2.txt" | sort | uniq -d)" ] || fail "a name is used twice"
stop_daemon restart2

# ---- phase 3: first start of a fresh data directory, clean shutdown ----------
# an existing world-readable store (an older version, a loose umask) is
# made 0600 with its WAL files: it holds every spec and token hash
start_daemon "$tmp/fresh" fresh
stop_daemon fresh
chmod 644 "$tmp/fresh/crater.db"
start_daemon "$tmp/fresh" fresh
for f in "$tmp"/fresh/crater.db*; do
    [ "$(stat -c %a "$f")" = 600 ] || fail "$f is mode $(stat -c %a "$f"), want 600"
done
stop_daemon fresh

# ---- phase 5: acknowledged cancels survive kill -9 ----------------------------
# 2,400 pending jobs (no node exists), cancelled from 16 connections;
# craterd gets kill -9 the moment 2,000 were answered, with more in flight;
# every job whose cancel was answered 200 must be cancelled after the
# restart (issue 12: 1 of 2,000 was undone when cancels were answered
# before their commit).
start_daemon "$tmp/cancel" cancel
tok=$(cat "$tmp/cancel/admin.token")
for f in $(seq 1 12); do
    for i in $(seq 1 200); do
        printf -- '---\nname: c%s-%s\ncommand: ["true"]\nresources: {cpu: 1, memory: 1Mi}\n' "$f" "$i"
    done >"$tmp/cancel.yaml"
    curl -s -H "Authorization: Bearer $tok" --data-binary @"$tmp/cancel.yaml" "$url/api/v1/jobs" \
        | jq -r '.items[].id' >>"$tmp/cancel-ids"
done
[ "$(wc -l <"$tmp/cancel-ids")" = 2400 ] || fail "2400 jobs not submitted: $(wc -l <"$tmp/cancel-ids")"
sed 's|.*|POST /api/v1/jobs/&/cancel|' "$tmp/cancel-ids" >"$tmp/cancel-reqs"
python3 "$src/tests/integration/crash_writes.py" "$url" "$tok" "$pid" 2000 \
    "$tmp/cancel-acked" "@$tmp/cancel-reqs" || fail "crash_writes (cancels) failed"
kill -9 "$pid" 2>/dev/null || true # already, unless too few were answered
wait "$pid" 2>/dev/null || true; pid=''
start_daemon "$tmp/cancel" cancel2
list_jobs_state "$tmp/cancel" "$tmp/cancel-states"
undone=$(sed 's|POST /api/v1/jobs/\(.*\)/cancel|\1|' "$tmp/cancel-acked" | sort \
    | join - "$tmp/cancel-states" | awk '$2 != "cancelled"' | wc -l)
nack=$(wc -l <"$tmp/cancel-acked")
echo "phase 5: $nack cancels acknowledged, $undone undone after kill -9"
[ "$nack" -ge 2000 ] || fail "only $nack cancels acknowledged before the kill"
[ "$undone" = 0 ] || fail "$undone acknowledged cancels were undone by kill -9"
stop_daemon cancel2

# ---- phase 5b: acknowledged node and tenant changes survive kill -9 -----------
# 8 registered nodes and 16 tenants; cordons and quotas, then uncordons,
# drains and new quotas, each round sent from 16 connections with kill -9
# the moment the last is answered; after each restart every acknowledged
# change holds.
start_daemon "$tmp/admin" admin1
tok=$(cat "$tmp/admin/admin.token")
"$crater" validate -o json "$src/tests/data/hw-small.yaml" 2>/dev/null >"$tmp/hw.json"
for n in $(seq 0 7); do
    atok=$(curl -s -H "Authorization: Bearer $tok" -d "{\"role\": \"agent\", \"node\": \"n$n\"}" \
        "$url/api/v1/tokens" | jq -r .token)
    jq --arg n "n$n" '{version: "0.1.0", protocol: 4, tasks: [], node: (.nodes = [.nodes[0] | .name = $n])}' \
        "$tmp/hw.json" >"$tmp/reg.json"
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $atok" \
        --data-binary @"$tmp/reg.json" "$url/api/v1/agents/n$n/register")" = 200 ] || fail "n$n did not register"
done
: >"$tmp/admin-reqs"
for n in $(seq 0 7); do echo "POST /api/v1/nodes/n$n/cordon" >>"$tmp/admin-reqs"; done
for t in $(seq 0 15); do echo "PUT /api/v1/tenants/t$t {\"quota\": {\"gpus\": $((t + 1))}}" >>"$tmp/admin-reqs"; done
python3 "$src/tests/integration/crash_writes.py" "$url" "$tok" "$pid" 0 \
    "$tmp/admin-acked" "@$tmp/admin-reqs" || fail "crash_writes (cordons, quotas) failed"
kill -9 "$pid" 2>/dev/null || true # already, unless too few were answered
wait "$pid" 2>/dev/null || true; pid=''
start_daemon "$tmp/admin" admin2
check_admin() { # check_admin ROUND CORDONED_JQ DRAINING_JQ GPUS_OFFSET
    local nodes tenants
    nodes=$(curl -s -H "Authorization: Bearer $tok" "$url/api/v1/nodes")
    tenants=$(curl -s -H "Authorization: Bearer $tok" "$url/api/v1/tenants")
    echo "$nodes" | jq -e "[.items[] | select(.name | test(\"^n[0-7]$\"))] | length == 8 and all($2) and all($3)" \
        >/dev/null || fail "$1: acknowledged cordon/uncordon/drain undone: $(echo "$nodes" | jq -c '[.items[] | [.name, .cordoned, .draining]]')"
    echo "$tenants" | jq -e "[.items[] | select(.name | test(\"^t[0-9]+$\")) | .quota.gpus - (.name[1:] | tonumber)] | length == 16 and all(. == $4)" \
        >/dev/null || fail "$1: acknowledged quota changes undone: $(echo "$tenants" | jq -c '[.items[] | [.name, .quota.gpus]]')"
}
[ "$(wc -l <"$tmp/admin-acked")" = 24 ] || fail "24 changes sent, $(wc -l <"$tmp/admin-acked") acknowledged"
check_admin "cordon" '.cordoned' '.draining | not' 1
: >"$tmp/admin-reqs"
for n in 0 1 2 3; do echo "POST /api/v1/nodes/n$n/uncordon" >>"$tmp/admin-reqs"; done
for n in 4 5 6 7; do echo "POST /api/v1/nodes/n$n/drain" >>"$tmp/admin-reqs"; done
for t in $(seq 0 15); do echo "PUT /api/v1/tenants/t$t {\"quota\": {\"gpus\": $((t + 100))}}" >>"$tmp/admin-reqs"; done
python3 "$src/tests/integration/crash_writes.py" "$url" "$tok" "$pid" 0 \
    "$tmp/admin-acked" "@$tmp/admin-reqs" || fail "crash_writes (uncordons, drains, quotas) failed"
kill -9 "$pid" 2>/dev/null || true # already, unless too few were answered
wait "$pid" 2>/dev/null || true; pid=''
start_daemon "$tmp/admin" admin3
[ "$(wc -l <"$tmp/admin-acked")" = 24 ] || fail "24 changes sent, $(wc -l <"$tmp/admin-acked") acknowledged"
check_admin "drain" '(.name | test("^n[0-3]$")) != .cordoned' '(.name | test("^n[4-7]$")) == .draining' 100
stop_daemon admin3

# ---- phase 6: a row that cannot be loaded is set aside, the rest starts -----
start_daemon "$tmp/q" q1
tok=$(cat "$tmp/q/admin.token")
for i in 1 2 3; do
    printf 'name: q%s\ncommand: ["true"]\nresources: {cpu: 1, memory: 1Mi}\n' "$i" \
        | curl -s -o /dev/null -H "Authorization: Bearer $tok" --data-binary @- "$url/api/v1/jobs"
done
stop_daemon q1
python3 - "$tmp/q/crater.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("UPDATE kv SET value = CAST('{\"id\": \"two\"}' AS BLOB) WHERE key LIKE '/crater/jobs/%2'").rowcount
db.commit()
sys.exit(0 if n == 1 else 1)
PY
start_daemon "$tmp/q" q2
grep -q "crater/jobs/.*2 cannot be loaded" "$tmp/q2.err" "$tmp/q2.out" || fail "the bad row is not reported"
for i in 1 3; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$url/api/v1/jobs/$i")" = 200 ] \
        || fail "job $i did not survive a bad neighbour"
done
printf 'name: q4\ncommand: ["true"]\nresources: {cpu: 1, memory: 1Mi}\n' \
    | curl -s -H "Authorization: Bearer $tok" --data-binary @- "$url/api/v1/jobs" >"$tmp/q4.json"
[ "$(jq -r .id "$tmp/q4.json")" = 4 ] || fail "the set-aside job's id was reused: $(cat "$tmp/q4.json")"
stop_daemon q2
start_daemon "$tmp/q" q3 # the quarantine is not loaded again
stop_daemon q3

# ---- phase 4: a store truncated to zero bytes is refused, not a new cluster --
tok_before=$(cat "$tmp/fresh/admin.token")
: >"$tmp/fresh/crater.db"
rm -f "$tmp/fresh/crater.db-wal" "$tmp/fresh/crater.db-shm"
if "$craterd" --data "$tmp/fresh" --listen 127.0.0.1:0 >"$tmp/zero.out" 2>"$tmp/zero.err"; then
    fail "craterd started on a zero-length store"
fi
grep -q "empty store beside an admin.token" "$tmp/zero.err" "$tmp/zero.out" \
    || fail "no clear error for the zero-length store: $(cat "$tmp/zero.err")"
[ "$(cat "$tmp/fresh/admin.token")" = "$tok_before" ] || fail "admin.token was overwritten"

echo "test_crash: $((SECONDS - t_start)) s, $nfail failed"
if [ "$nfail" -ne 0 ]; then exit 1; fi
