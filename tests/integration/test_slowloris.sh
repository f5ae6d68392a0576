#!/usr/bin/env bash
# test_slowloris.sh - issue 12's connection attacks on craterd, driven by
# slowloris.py: 5,000 slow connections from 127.0.0.2 while a normal client
# on 127.0.0.1 keeps getting answers; a client trickling its header is
# dropped by server.headerTimeout; server.maxConnectionsPerClient holds;
# server.requestRate answers 429 with Retry-After, and admin tokens are
# exempt. Then craterd must still answer and stop cleanly.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap 'kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cat >"$tmp/craterd.yaml" <<'EOF2'
apiVersion: crater/v1
kind: Config
server:
  maxConnectionsPerClient: 64
  headerTimeout: 3s
  requestRate: 20
  requestBurst: 20
EOF2
start_craterd "$tmp/data" --config "$tmp/craterd.yaml" || exit 1
port=${url##*:}

python3 "$src/tests/integration/slowloris.py" "$port" "$admin" >"$tmp/out" 2>&1 \
    && ok || bad "slowloris.py"
cat "$tmp/out"

api GET /readyz && [ "$code" = 200 ] && ok || bad "craterd answers after the attacks ($code)"
kill -0 "$pid" 2>/dev/null && ok || bad "craterd is still running"
stop_craterd && ok || bad "craterd stops cleanly"
pid=""

echo "test_slowloris: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
