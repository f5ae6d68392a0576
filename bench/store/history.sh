#!/usr/bin/env bash
# history.sh - store size under a long stream of jobs with a short
# retention (issue 12: "after 40,300 jobs the key table held 3 keys, the
# change table 333,809 rows and the database 549 MB").
#
#   bench/store/history.sh [BUILD_DIR] [JOBS] [HISTORY_RETENTION]
#
# Starts craterd (BUILD_DIR/craterd, default build/) on a fresh data
# directory with server.jobRetention: 1s and store.historyRetention:
# HISTORY_RETENTION (default 1s; 0 = never compact, the behaviour before
# compaction existed), then pushes JOBS jobs (default 40,000) through in
# arrays of 1,000: submitted, cancelled (no node: they are pending) and
# forgotten after the retention. Prints one line per 5,000 jobs from
# /metrics, then, after a clean stop, the table sizes and files as the
# database holds them.
set -euo pipefail
build=${1:-build} jobs=${2:-40000} keep=${3:-1s}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
pid=""
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
export CRATERD_BIN=$build/craterd
. "$src/tests/integration/craterd_lib.sh"
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {printf "%d\n", $2}'; }

printf 'apiVersion: crater/v1\nkind: Config\nserver:\n  jobRetention: 1s\nstore:\n  historyRetention: %s\n' \
    "$keep" >"$tmp/craterd.yaml"
printf 'name: h\ncommand: ["true"]\narray: "0-999"\nresources: {cpu: 1, memory: 1Mi}\n' >"$tmp/array.yaml"
start_craterd "$tmp/data" --config "$tmp/craterd.yaml"
echo "jobs revision compacted history_events db_bytes wal_bytes seconds"
t0=$SECONDS
for r in $(seq 1 $((jobs / 1000))); do
    api POST /api/v1/jobs "$admin" "$tmp/array.yaml"
    id=$(jq -r .array.id "$tmp/body")
    api POST "/api/v1/arrays/$id/cancel" "$admin"
    until_ 60 'api GET "/api/v1/arrays/$id" "$admin"; [ "$code" = 404 ]'
    if [ $((r % 5)) = 0 ]; then
        echo "$((r * 1000)) $(metric crater_store_revision) $(metric crater_store_compacted_revision)" \
            "$(metric crater_store_history_events) $(metric crater_store_db_bytes)" \
            "$(metric crater_store_wal_bytes) $((SECONDS - t0))"
    fi
done
wal_running=$(stat -c %s "$tmp/data/crater.db-wal")
stop_craterd
python3 - "$tmp/data/crater.db" "$wal_running" <<'PY'
import os, sqlite3, sys
path, wal = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(path)
q = lambda s: db.execute(s).fetchone()[0]
print("after a clean stop: kv %d keys, changes %d rows, database %d bytes "
      "(%d of %d pages free), wal while running %d bytes"
      % (q("SELECT count(*) FROM kv"), q("SELECT count(*) FROM changes"),
         os.path.getsize(path), q("PRAGMA freelist_count"),
         q("PRAGMA page_count"), wal))
PY
