#!/usr/bin/env bash
# test_slice.sh - a GPU-memory slice enforced end to end without a GPU:
# `crater up` with a node whose GPU is device 0 of the stub libcuda.so.1;
# the agent writes the task's slice file and preloads the interposer, so a
# CUDA allocation past the slice fails with CUDA_ERROR_OUT_OF_MEMORY (2)
# inside the task while one within it succeeds; isolation: none turns
# enforcement off; isolation: mps sets the MPS limits instead; the slice
# file is removed when the task ends.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?} gs=${GS_CHECK_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
trap '[ -n "$up" ] && kill -9 $up 2>/dev/null; rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }
finished() { # finished ID: wait up to 20 s for a final state, print the log
    local i
    for i in $(seq 1 200); do
        c get job "$1" -o json | jq -e '.state == "succeeded" or .state == "failed"' >/dev/null 2>&1 && break
        sleep 0.1
    done
    for i in $(seq 1 20); do [ -n "$(c logs "$1" 2>/dev/null)" ] && break; sleep 0.1; done
    c logs "$1" 2>/dev/null
}
run_job() { # run_job ISOLATION SLICE_MIB COMMAND... -> job id
    local iso=$1 mib=$2; shift 2
    local argv
    argv=$(for a in "$@"; do printf '%s' "$a" | jq -Rs .; done | jq -cs .)
    cat >"$tmp/j.yaml" <<EOF
name: slice
command: $argv
env: {STUB_CUDA_MEM: "4294967296"}
resources: {gpu: {count: 1, memory: ${mib}Mi, isolation: $iso}, cpu: 1, memory: 64Mi}
EOF
    c submit -f "$tmp/j.yaml" -o json | jq -r .id
}

cat >"$tmp/craterd.yaml" <<'EOF'
apiVersion: crater/v1
kind: Config
scheduler:
  gpuContextOverhead: 64Mi
EOF
cd "$tmp"
"$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/craterd.yaml" \
    --hardware "$src/tests/data/hw-stubgpu.yaml" >"$tmp/up.out" 2>&1 &
up=$!
for i in $(seq 1 100); do
    url=$(sed -n 's/.*API on \(http:[^,]*\),.*/\1/p' "$tmp/up.out")
    [ -n "$url" ] && break; sleep 0.1
done
[ -n "$url" ] || { echo "crater up did not start:"; cat "$tmp/up.out"; exit 1; }
token=$(cat "$tmp/var/admin.token")

mib=$((1 << 20))
id=$(run_job slice 512 "$gs" alloc $((400 * mib)))
[ "$(finished "$id")" = 0 ] && ok || bad "400 MiB within a 512 MiB slice: CUDA_SUCCESS"
id=$(run_job slice 512 "$gs" alloc $((600 * mib)))
[ "$(finished "$id")" = 2 ] && ok || bad "600 MiB past a 512 MiB slice: CUDA_ERROR_OUT_OF_MEMORY"
ls /dev/shm/crater-job-"$id"-* >/dev/null 2>&1 && bad "slice file left behind" || ok
id=$(run_job none 512 "$gs" alloc $((600 * mib)))
[ "$(finished "$id")" = 0 ] && ok || bad "isolation none: not enforced"
id=$(run_job slice 512 sh -c 'echo "$CRATER_GPUSLICE_FILE $(wc -c <"$CRATER_GPUSLICE_FILE") $LD_PRELOAD"')
out=$(finished "$id")
case $out in /dev/shm/crater-job-"$id"-1-*.slice\ 37392\ *libcrater-gpuslice.so*) ok ;; *) bad "slice env and file: '$out'" ;; esac
id=$(run_job mps 20480 sh -c 'echo "$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE ${CRATER_GPUSLICE_FILE:-none}"')
out=$(finished "$id")
[ "$out" = "0=20544M 25 none" ] && ok || bad "mps env: '$out'"
id=$(run_job mig 512 "true")
finished "$id" >/dev/null
c get job "$id" -o json | jq -e '.state == "failed" and (.history[-1].reason | test("mig needs NVML"))' >/dev/null \
    && ok || { bad "mig without NVML fails at start, saying why"; c get job "$id" -o json; }

kill -INT "$up"; wait "$up"; rc=$?; up=""
[ "$rc" = 0 ] && ok || bad "crater up exit $rc"
grep -q Sanitizer "$tmp/up.out" && { bad "sanitizer report"; cat "$tmp/up.out"; } || ok
echo "test_slice: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
