#!/usr/bin/env bash
# run-fuzzer.sh BINARY SEED_CORPUS SECONDS: fuzz on a scratch copy of the
# seed corpus for a bounded time; fails on any crash, leak or sanitizer report.
set -euo pipefail
bin=$1 seeds=$2 secs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$seeds"/. "$work"/ 2>/dev/null || true
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$work/" "$work" 2>&1 | tail -n 5
