#!/usr/bin/env bash
# test_history.sh - the store's change history is compacted on the schedule
# of store.historyRetention (doc/store.md), so the store stays flat under a
# steady stream of jobs: 6,000 jobs (six arrays of 1,000, each submitted,
# cancelled and forgotten after jobRetention: 1s) leave the history event
# count, the database file and the WAL no larger after the last round than
# after the second; once the stream stops the history empties. Before, each
# job left three history rows forever (a store with 3 keys held 333,809
# rows after 40,300 jobs). The crater_store_* metrics are checked against
# the database itself after a clean stop.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {printf "%d\n", $2}'; }
gone() { api GET "/api/v1/arrays/$1" "$admin"; [ "$code" = 404 ]; }

cat >"$tmp/craterd.yaml" <<'EOF2'
apiVersion: crater/v1
kind: Config
server:
  jobRetention: 1s
store:
  historyRetention: 1s
EOF2
"$bin" validate "$tmp/craterd.yaml" >/dev/null && ok || bad "config with historyRetention validates"
printf 'apiVersion: crater/v1\nkind: Config\nstore:\n  historyRetention: -1s\n' >"$tmp/bad.yaml"
{ "$bin" validate "$tmp/bad.yaml" 2>&1 || true; } | has 'store.historyRetention' \
    && ok || bad "a negative historyRetention is refused, naming the field"

start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
# no node: the jobs stay pending until cancelled, then are forgotten
printf 'name: h\ncommand: ["true"]\narray: "0-999"\nresources: {cpu: 1, memory: 1Mi}\n' >"$tmp/array.yaml"
rounds=6
for r in $(seq 1 $rounds); do
    api POST /api/v1/jobs "$admin" "$tmp/array.yaml"
    id=$(jq -r .array.id "$tmp/body")
    [ "$code" = 201 ] && [ "$id" != null ] || { bad "round $r: submit answered $code"; break; }
    api POST "/api/v1/arrays/$id/cancel" "$admin"
    [ "$(jq -r .cancelled "$tmp/body")" = 1000 ] || bad "round $r: cancel: $(head -c 200 "$tmp/body")"
    until_ 30 'gone "$id"' || bad "round $r: array $id not forgotten after jobRetention"
    ev[$r]=$(metric crater_store_history_events)
    db[$r]=$(metric crater_store_db_bytes)
    wal[$r]=$(metric crater_store_wal_bytes)
    echo "round $r: $((r * 1000)) jobs, revision $(metric crater_store_revision)," \
        "compacted $(metric crater_store_compacted_revision), history events ${ev[$r]}," \
        "db ${db[$r]} B, wal ${wal[$r]} B"
done
# each round writes 3,000 events (submit, cancel, forget); without
# compaction the sixth would end at 18,000
max_ev=0
for r in $(seq 1 $rounds); do [ "${ev[$r]:-0}" -gt "$max_ev" ] && max_ev=${ev[$r]}; done
[ "$max_ev" -le 7000 ] && ok || bad "history kept growing: up to $max_ev events"
[ "${db[$rounds]:-0}" -gt 0 ] && [ "${db[$rounds]}" -le $(( ${db[2]:-0} * 5 / 4 )) ] \
    && ok || bad "database grew after round 2: ${db[2]:-?} -> ${db[$rounds]:-?} bytes (freed pages not reused?)"
[ "${wal[$rounds]:-0}" -le $((16 << 20)) ] && ok || bad "WAL at ${wal[$rounds]:-?} bytes"
until_ 15 '[ "$(metric crater_store_history_events)" -le 10 ]' \
    && ok || bad "history not emptied once idle: $(metric crater_store_history_events) events"
rev=$(metric crater_store_revision)
until_ 15 '[ "$(metric crater_store_compacted_revision)" -ge "$rev" ]' \
    && ok || bad "not compacted up to revision $rev: $(metric crater_store_compacted_revision)"
events=$(metric crater_store_history_events)

stop_craterd && ok || bad "craterd clean stop"
grep -q Sanitizer "$craterd_log" && { bad "craterd sanitizer report"; cat "$craterd_log"; } || ok
rows=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM changes").fetchone()[0])' "$tmp/data/crater.db")
[ "$rows" = "$events" ] && ok || bad "the change table holds $rows rows, the metric said $events"
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
[ "$(metric crater_store_history_events)" = "$rows" ] && ok || bad "history count after a restart: $(metric crater_store_history_events), want $rows"
stop_craterd && ok || bad "craterd clean stop after the restart"

echo "test_history: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
