#!/usr/bin/env bash
# test_bench.sh - `crater bench sched` as a user runs it, small: 200 nodes,
# 2000 jobs. The fast path must make exactly the brute-force scan's
# decisions and place something; the openb trace and the built-in mix both
# work; bad options are usage errors. No timing is asserted (the machine
# is shared); the numbers live in bench/RESULTS.md.
set -uo pipefail
bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME COMMAND...: the command must succeed
    local name=$1; shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $name"; fi
}

run() { # run EXPECTED_RC ARGS...: output in $tmp/out, $tmp/err
    local want=$1; shift
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || { echo "exit $rc, wanted $want: crater $*"; cat "$tmp/err"; return 1; }
}

# field NAME: the value of "NAME": in $tmp/out (pretty-printed JSON)
field() { sed -n "s/^ *\"$1\": \(.*\),\{0,1\}\$/\1/p" "$tmp/out" | sed 's/,$//'; }

positive() { [ "$(field "$1")" -gt 0 ] 2>/dev/null; }
is() { [ "$(field "$1")" = "$2" ]; }

cd "$tmp" # the trace is found through CRATER_OPENB_DIR or the source tree
check "small bench" run 0 bench sched --nodes 200 --gpus-per-node 8 --jobs 2000 --seed 7 --json
check "identical to brute force" is identical_to_bruteforce true
check "no mismatches" is mismatches 0
check "all decisions compared" is bruteforce_jobs 2000
check "placed > 0" positive placed
check "classes counted" positive classes_live_max
# memory comes from mallinfo2(), which reads 0 under AddressSanitizer
check "memory stated" grep -Eq '"memory_per_node_bytes": [0-9]+' "$tmp/out"
check "nodes echoed" is nodes 200
check "jobs echoed" is jobs 2000

# the built-in mix, asked for; a named trace that is absent is an error
check "builtin mix" run 0 bench sched --nodes 50 --jobs 400 --trace builtin --json
check "builtin says so" is shapes '"builtin"'
check "builtin identical" is identical_to_bruteforce true
check "builtin placed > 0" positive placed

check "no brute force" run 0 bench sched --nodes 20 --jobs 100 --no-bruteforce --json
check "no brute force: null" is identical_to_bruteforce null
check "partial compare" run 0 bench sched --nodes 50 --jobs 500 --bruteforce-jobs 100 --json
check "partial compare count" is bruteforce_jobs 100
check "partial compare identical" is identical_to_bruteforce true
check "text summary" run 0 bench sched --nodes 20 --jobs 100
check "text says identical" grep -q 'identical (0 mismatches)' "$tmp/out"

check "unknown benchmark" run 2 bench frobnicate
check "bad number" run 2 bench sched --nodes 0
check "bad number text" grep -q -- "--nodes: '0' is not an integer >= 1" "$tmp/err"
check "unknown option" run 2 bench sched --frob
check "absent trace" run 1 bench sched --nodes 10 --jobs 10 --trace nosuch
check "absent trace text" grep -q "openb_pod_list_nosuch.csv not found" "$tmp/err"

echo "test_bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
