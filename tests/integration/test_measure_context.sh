#!/usr/bin/env bash
# test_measure_context.sh - `crater-agent --measure-context` against the
# stub NVML and the stub libcuda, which agree on GPU UUIDs and per-process
# memory like a driver: one JSON line per GPU with exactly the context cost
# the stub charges, exit 0; without a CUDA driver, the error per GPU and
# exit 1; without NVML, a clear message and exit 1.
set -uo pipefail
agentbin=${CRATER_AGENT_BIN:?} nvmldir=${NVMLSTUB_DIR:?} cuda=${STUB_CUDA_LIB:?}
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

export NVMLSTUB_PROCS_DIR=$tmp STUB_CUDA_NVML_DIR=$tmp
export STUB_CUDA_UUIDS=GPU-5eed0000-0000-4000-8000-000000000000,GPU-5eed0000-0000-4000-8000-000000000001
export STUB_CUDA_CTX_BYTES=$((123 * 1048576))
LD_LIBRARY_PATH=$nvmldir CRATER_CUDA_LIB=$cuda "$agentbin" --measure-context >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] && ok || { bad "exit $rc"; cat "$tmp/err"; }
[ "$(wc -l <"$tmp/out")" = 2 ] && ok || bad "one line per GPU: $(cat "$tmp/out")"
jq -e -s 'map(.context_bytes) == [128974848, 128974848] and map(.gpu) == [0, 1]
          and .[0].uuid == "GPU-5eed0000-0000-4000-8000-000000000000"
          and .[0].driver == "580.159.04"' "$tmp/out" >/dev/null \
    && ok || bad "measured values: $(cat "$tmp/out")"

LD_LIBRARY_PATH=$nvmldir CRATER_CUDA_LIB=$tmp/none.so "$agentbin" --measure-context >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 1 ] && ok || bad "no CUDA driver: exit $rc"
jq -e -s 'length == 2 and all(.error | test("cannot load the CUDA driver"))' "$tmp/out" >/dev/null \
    && ok || bad "no CUDA driver: $(cat "$tmp/out")"

LD_LIBRARY_PATH=$tmp "$agentbin" --measure-context >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "no NVML" "$tmp/out" && ok || bad "no NVML: exit $rc: $(cat "$tmp/out")"
grep -q Sanitizer "$tmp/out" "$tmp/err" && bad "sanitizer report" || ok

echo "test_measure_context: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
