#!/usr/bin/env bash
# run-fuzzer.sh BINARY SEED_CORPUS SECONDS: fuzz on a scratch copy of the
# seed corpus for a bounded time; fails on any crash, leak or sanitizer report.
# The random seed is fixed (FUZZ_SEED, default 1) so that a CI run is
# repeatable; set FUZZ_SEED=0 for a fresh one. On a failure the whole report
# and the crashing input (base64) are printed, so a CI log is enough to
# reproduce it: base64 -d > crash && BINARY crash.
set -uo pipefail
bin=$1 seeds=$2 secs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$seeds"/. "$work"/ 2>/dev/null || true
"$bin" -seed="${FUZZ_SEED:-1}" -max_total_time="$secs" -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$work/" "$work" >"$work/log" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
    tail -n 3 "$work/log"
    exit 0
fi
grep -v '^#[0-9]' "$work/log" | tail -n 80
for f in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$f" ] || continue
    echo "--- $(basename "$f") (base64):"
    base64 "$f"
done
exit "$rc"
