#!/bin/bash
# test_gpuslice.sh - libcrater-gpuslice.so against the stub libcuda.so.1,
# no GPU needed. ctest sets GS_CHECK, GS_MKSLICE, GS_PRELOAD, GS_STUB_DIR
# (see tests/gpuslice/CMakeLists.txt). Each case prints "ok"/"FAIL".
set -u
: "${GS_CHECK:?}" "${GS_MKSLICE:?}" "${GS_PRELOAD:?}" "${GS_STUB_DIR:?}"
tmp=$(mktemp -d /dev/shm/crater-gs-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
MiB=$((1 << 20))
DEV0=GPU-53545542-0000-4000-8000-000000000000
DEV1=GPU-53545542-0000-4000-8000-000000000001
export LD_LIBRARY_PATH=$GS_STUB_DIR STUB_CUDA_MEM=$((1024 * MiB))
export GS_LIMIT=$((64 * MiB)) CRATER_GPUSLICE_CTX_OVERHEAD=$((6 * MiB))

result() { # NAME STATUS
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}
slice() { # NAME UUID LIMIT: create $tmp/NAME, print its path
    "$GS_MKSLICE" create "$tmp/$1" "$2" "$3" && echo "$tmp/$1"
}
with() { # FILE CMD...: run under the interposer with that slice file
    local f=$1; shift
    CRATER_GPUSLICE_FILE=$f LD_PRELOAD=$GS_PRELOAD "$@"
}
used() { "$GS_MKSLICE" used "$1" | awk '{print $3}'; }

# 1. routing: direct calls, dlsym on a libcuda handle, cuGetProcAddress
f=$(slice route $DEV0 $GS_LIMIT)
with "$f" "$GS_CHECK" route; result "route: direct, dlsym, cuGetProcAddress(_ptsz)" $?

# 2. no slice file: a transparent pass-through; without the preload too
LD_PRELOAD=$GS_PRELOAD "$GS_CHECK" passthrough; result "pass-through without CRATER_GPUSLICE_FILE" $?
"$GS_CHECK" passthrough; result "stub alone" $?

# 3. OOM exactly at the limit for every allocator, mem info = the slice
f=$(slice limit $DEV0 $GS_LIMIT)
with "$f" "$GS_CHECK" limit; result "limit: each allocator, cuMemGetInfo, cuDeviceTotalMem" $?
[ "$(used "$f")" = 0 ]; result "limit: share given back at exit" $?

# 4. keyed by UUID: only the GPU in the file is limited
f=$(slice uuid $DEV1 $GS_LIMIT)
with "$f" "$GS_CHECK" uuid; result "uuid: device 1 limited, device 0 not" $?

# 5. return codes for invalid input: identical with and without the preload
f=$(slice codes $DEV0 $GS_LIMIT)
"$GS_CHECK" codes >"$tmp/codes.plain" 2>&1
with "$f" "$GS_CHECK" codes >"$tmp/codes.gs" 2>&1
diff -u "$tmp/codes.plain" "$tmp/codes.gs" && [ "$(wc -l <"$tmp/codes.gs")" -ge 40 ]
result "codes: $(wc -l <"$tmp/codes.gs") invalid-input cases identical to the driver" $?

# 6. two processes of one task race on one file
# (16 chunks of 3 MiB each + overhead: 108 MiB wanted of 64 MiB; 5 rounds)
st=0
for round in 1 2 3 4 5; do
    f=$(slice race$round $DEV0 $GS_LIMIT)
    with "$f" "$GS_CHECK" race || { st=1; break; }
done
result "race: two processes never past the slice (round $round of 5)" $st

# 7. a SIGKILLed process's share is reclaimed by the next allocator
f=$(slice kill $DEV0 $GS_LIMIT)
CRATER_GPUSLICE_FILE=$f LD_PRELOAD=$GS_PRELOAD "$GS_CHECK" hold $((40 * MiB)) >"$tmp/hold.out" &
holder=$! # the process itself, not a subshell: SIGKILL must reach it
for _ in $(seq 1 100); do [ -s "$tmp/hold.out" ] && break; sleep 0.05; done
[ "$(cat "$tmp/hold.out")" = held ] && [ "$(used "$f")" = $((46 * MiB)) ]
result "kill: holder has 40 MiB + overhead" $?
rc=$(with "$f" "$GS_CHECK" alloc $((GS_LIMIT - 6 * MiB)))
[ "$rc" = 2 ]; result "kill: the slice is full while the holder lives" $?
kill -KILL $holder; wait $holder 2>/dev/null
[ "$(used "$f")" = $((46 * MiB)) ]; result "kill: SIGKILL leaves the share in the file" $?
rc=$(with "$f" "$GS_CHECK" alloc $((GS_LIMIT - 6 * MiB)))
[ "$rc" = 0 ]; result "kill: next allocator reclaims the dead share" $?

# 8. an unusable slice file refuses allocations (fail closed)
rc=$(with "$tmp/missing" "$GS_CHECK" alloc 4096 2>"$tmp/err")
[ "$rc" = 2 ] && grep -q "cannot use slice file" "$tmp/err"
result "missing slice file: CUDA_ERROR_OUT_OF_MEMORY and one message" $?

echo "$fails failed"
[ "$fails" -eq 0 ]
