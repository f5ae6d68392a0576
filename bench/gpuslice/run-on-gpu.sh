#!/bin/bash
# run-on-gpu.sh - the prepared GPU check of libcrater-gpuslice.so (issue 7,
# "Proof on the GPU"), for a machine with an NVIDIA GPU, gcc, nvcc, PyTorch
# and nvidia-ml-py (see ../shared/MACHINES.md). Run from the repository root:
#
#     bash bench/gpuslice/run-on-gpu.sh            # about 3-4 minutes
#
# Items: (1) driver-API program, 1 GiB slice; (2) nvcc program with static
# cudart; (3) PyTorch, 20 GiB slice, default / expandable_segments /
# cudaMallocAsync allocators, plus a control without the preload; (4) two
# processes sharing one slice; (5) training-loop overhead with and without
# the interposer, interleaved; (6) NVML per-process memory next to the
# tracked total (printed within 3 and 4); (7) crater-agent --discover and
# --measure-context on the real driver. Every step is logged with its
# command and time; a failing step does not stop the others. The summary at
# the end is Markdown for bench/RESULTS.md. Logs go to $OUT (the device
# tool's output folder) or /tmp/gpuslice-bench.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/bench/gpuslice
WORK=$(mktemp -d /tmp/gpuslice-bench.XXXXXX)
LOGDIR=${OUT:-$WORK}
LOG=$LOGDIR/gpuslice-run.log
SUMMARY=$WORK/summary.md
GiB=$((1 << 30)); MiB=$((1 << 20))
exec > >(tee "$LOG") 2>&1
T0=$(date +%s)
: >"$SUMMARY"

note() { echo "$*" | tee -a "$SUMMARY" >/dev/null; echo "SUMMARY: $*"; }
step() { # NAME TIMEOUT CMD...: run, log command, time and exit status
    local name=$1 limit=$2; shift 2
    echo; echo "=== $name"; echo "+ $*"
    local s=$(date +%s.%N)
    timeout "$limit" "$@"; local rc=$?
    local e=$(date +%s.%N)
    awk -v n="$name" -v r="$rc" -v s="$s" -v e="$e" \
        'BEGIN { printf "=== %s: rc=%d, %.1f s\n", n, r, e - s }'

    return $rc
}
slice() { # NAME LIMIT_BYTES -> path of a fresh slice file for GPU 0
    local f=/dev/shm/crater-gpuslice-bench.$1
    python3 "$HERE/mkslice.py" create "$f" "$UUID" "$2" && echo "$f"
}
pre() { # FILE OVERHEAD: set PRE to the env prefix that runs a command
    # under the interposer (an array, so `timeout` can run it)
    PRE=(env CRATER_GPUSLICE_FILE="$1" CRATER_GPUSLICE_CTX_OVERHEAD="$2"
         LD_PRELOAD="$LIB")
}
result() { # ITEM RC TEXT
    if [ "$2" -eq 0 ]; then note "| $1 | PASS | $3 |"; else note "| $1 | **FAIL** (rc $2) | $3 |"; fi
}

echo "=== environment"
date -u; uname -a
nvidia-smi --query-gpu=name,uuid,memory.total,driver_version --format=csv
nvcc --version | tail -2
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
git -C "$ROOT" log -1 --format='commit %h %s' 2>/dev/null
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | tr -d ' ')
echo "GPU 0 UUID: $UUID"

# --- build: CMake first (needs the project's pkg-config deps), else gcc
LIB=$WORK/build/src/gpuslice/libcrater-gpuslice.so
if ! step "build interposer (cmake)" 180 bash -c "cmake -S '$ROOT' -B '$WORK/build' -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF >/dev/null && cmake --build '$WORK/build' -j8 --target crater-gpuslice"; then
    LIB=$WORK/libcrater-gpuslice.so
    step "build interposer (gcc, cmake unavailable)" 120 \
        gcc -std=c17 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -fPIC -shared \
        -fvisibility=hidden -Wl,-z,defs -I"$ROOT/include" \
        "$ROOT"/src/gpuslice/{interpose,hooks,slice,alloctab}.c \
        -o "$LIB" -ldl -lpthread
fi
ls -l "$LIB" || { note "interposer did not build; nothing else can run"; exit 1; }
step "build drv_slice (gcc)" 60 gcc -std=c17 -O2 -Wall -D_GNU_SOURCE \
    -I"$ROOT/src/gpuslice" "$HERE/drv_slice.c" -o "$WORK/drv_slice" -l:libcuda.so.1
step "build rt_slice (nvcc, static cudart)" 180 nvcc -O2 -cudart static \
    "$HERE/rt_slice.cu" -o "$WORK/rt_slice"
note "| item | result | details |"
note "|---|---|---|"

# --- 1. driver API, 1 GiB slice, no context overhead charged
pre "$(slice drv $GiB)" 0
step "1 driver API, 1 GiB slice" 60 "${PRE[@]}" EXPECT_TOTAL_MIB=1024 "$WORK/drv_slice" check | tee "$WORK/1.out"
result "1 driver API, 1 GiB slice" "${PIPESTATUS[0]}" "$(grep -E 'alloc|total|refused' "$WORK/1.out" | tr '\n' ';' | sed 's/|/\//g')"
step "1 control: driver API without the preload" 60 "$WORK/drv_slice" check | tee "$WORK/1c.out"
note "| 1 control (no preload) | info | $(grep -E 'alloc\+free|512 MiB more' "$WORK/1c.out" | tr '\n' ';') |"

# --- 2. CUDA runtime, static cudart, 1 GiB slice
pre "$(slice rt $GiB)" 0
step "2 CUDA runtime (static), 1 GiB slice" 60 "${PRE[@]}" EXPECT_TOTAL_MIB=1024 "$WORK/rt_slice" | tee "$WORK/2.out"
result "2 nvcc -cudart static, 1 GiB slice" "${PIPESTATUS[0]}" "$(grep -E 'cuda' "$WORK/2.out" | tr '\n' ';')"

# --- 3. PyTorch, 20 GiB slice, three allocators; control without preload
for conf in "" "expandable_segments:True" "backend:cudaMallocAsync"; do
    pre "$(slice torch $((20 * GiB)))" $((300 * MiB))
    step "3 PyTorch [${conf:-default}], 20 GiB slice" 180 "${PRE[@]}" \
        PYTORCH_CUDA_ALLOC_CONF="$conf" EXPECT_TOTAL_GIB=20 \
        python3 "$HERE/torch_slice.py" oom 16 8 | tee "$WORK/3.out"
    result "3 PyTorch ${conf:-default allocator}, 20 GiB slice" "${PIPESTATUS[0]}" \
        "$(grep -E 'mem_get_info|GiB (tensor|more)' "$WORK/3.out" | sed 's/ (CUDA out of memory.*)//' | tr '\n' ';')"
    note "| 6 NVML vs tracked [${conf:-default}] | info | $(grep '^nvml' "$WORK/3.out" | tr '\n' ';') |"
done
step "3 control: PyTorch without the preload, 24 GiB" 120 \
    python3 "$HERE/torch_slice.py" control 24 | tee "$WORK/3c.out"
result "3 control: 24 GiB without the preload" "${PIPESTATUS[0]}" "$(grep '^control' "$WORK/3c.out" | tr '\n' ';')"

# --- 4. two processes share a 4 GiB slice (300 MiB overhead each), each
# wanting 7 x 256 MiB + 300 MiB = 2092 MiB: together 4184 > 4096 MiB, so
# one of them must be refused its last chunk
f=$(slice share $((4 * GiB)))
step "4 two processes, 4 GiB slice" 60 bash -c "
    for i in 1 2; do
        env CRATER_GPUSLICE_FILE='$f' CRATER_GPUSLICE_CTX_OVERHEAD=$((300 * MiB)) \
            LD_PRELOAD='$LIB' '$WORK/drv_slice' fill 256 7 6 > \"$WORK/4.\$i\" &
    done
    sleep 4
    python3 '$HERE/mkslice.py' used '$f'
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv
    wait; cat \"$WORK/4.1\" \"$WORK/4.2\"" | tee "$WORK/4.out"
h1=$(awk '/holds/{print $4}' "$WORK/4.1"); h2=$(awk '/holds/{print $4}' "$WORK/4.2")
tracked=$(awk '/^GPU-/{print int($3 / 1048576)}' "$WORK/4.out")
if [ -n "$h1" ] && [ -n "$h2" ] && [ $((h1 + h2 + 600)) -le 4096 ] \
    && [ $((h1 + h2)) -ge 3328 ]; then rc=0; else rc=1; fi
result "4 two processes, one 4 GiB slice" $rc "held ${h1:-?} + ${h2:-?} MiB + 2 x 300 MiB overhead (limit 4096 MiB); tracked ${tracked:-?} MiB; NVML: $(grep -E '^[0-9]+, ' "$WORK/4.out" | tr '\n' ';')"

# --- 5. overhead of a training loop, interleaved runs
pre "$(slice train $((20 * GiB)))" $((300 * MiB))
: >"$WORK/5.with"; : >"$WORK/5.without"
for i in 1 2 3; do
    step "5 train without preload (run $i)" 120 python3 "$HERE/torch_slice.py" train 400 | tee -a "$WORK/5.without"
    step "5 train with preload (run $i)" 120 "${PRE[@]}" python3 "$HERE/torch_slice.py" train 400 | tee -a "$WORK/5.with"
done
med() { grep -o '[0-9.]* us/step' "$1" | awk '{print $1}' | sort -n | awk '{a[NR]=$1} END{print (NR ? a[int((NR+1)/2)] : "")}'; }
w=$(med "$WORK/5.with"); wo=$(med "$WORK/5.without")
if [ -n "$w" ] && [ -n "$wo" ]; then
    pct=$(awk -v a="$w" -v b="$wo" 'BEGIN { printf "%.2f", (a - b) * 100 / b }')
    ok=$(awk -v p="$pct" 'BEGIN { print (p <= 1) ? 1 : 0 }')
    result "5 training-loop overhead (goal <= 1%)" $((1 - ok)) "median $w us/step with, $wo us/step without: ${pct}% (runs with: $(grep -o '[0-9.]* us' "$WORK/5.with" | tr '\n' ' '); without: $(grep -o '[0-9.]* us' "$WORK/5.without" | tr '\n' ' '))"
else
    result "5 training-loop overhead" 1 "no timings"
fi

# --- 7. the agent on real NVML: discovery and the measured context cost
# (needs the project's build dependencies; skipped if crater-agent does not
# build here)
AGENT=$WORK/build/crater-agent
if step "build crater-agent (cmake)" 300 cmake --build "$WORK/build" -j8 --target crater-agent; then
    step "7 discover" 60 bash -c "'$AGENT' --discover -o yaml >'$LOGDIR/h200-discovered.yaml'"
    result "7 discovery (NVML, hwloc)" $? "hardware file in h200-discovered.yaml ($(grep -c 'uuid' "$LOGDIR/h200-discovered.yaml" 2>/dev/null) GPU uuids)"
    step "7 measure context" 120 "$AGENT" --measure-context | tee "$WORK/7.ctx"
    result "7 context overhead measured" $? "$(head -1 "$WORK/7.ctx")"
else
    note "| 7 agent discovery / context | not run | crater-agent did not build here |"
fi

rm -f /dev/shm/crater-gpuslice-bench.*
echo
echo "=== total $(($(date +%s) - T0)) s"
echo "=== RESULTS (Markdown for bench/RESULTS.md)"
cat "$SUMMARY"
cp "$SUMMARY" "$LOGDIR/gpuslice-summary.md" 2>/dev/null
sleep 1 # let tee write the last lines of the log
