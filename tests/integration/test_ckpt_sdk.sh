#!/usr/bin/env bash
# test_ckpt_sdk.sh - the checkpoint SDK (doc/checkpoint.md) from outside:
# the Python module's tests (ckpt_py_tests.py); the C library and the
# Python module read each other's checkpoints (dumps compared line for
# line, incremental saves of one on top of the other's sharing chunks);
# the Python SDK killed at 60 random points (ckpt_crash.py, every load
# complete, some checked by the C library too); the C example killed with
# SIGKILL three times and restarted ends with the same weights as an
# uninterrupted run; and with python3-torch the PyTorch example does the
# same after SIGKILLs and after a SIGTERM, which saves and exits and is
# resumed at exactly that step (skipped with a message without torch).
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} tool=${CRATER_CKPT_BIN:?} toy=${CKPT_TOY_TRAIN_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
export PYTHONPATH=$src/python
check() { # check NAME COMMAND...: the command must succeed
    local name=$1; shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $name"; fi
}
py=python3
tpy=""
for p in python3 /usr/bin/python3; do
    "$p" -c 'import torch' 2>/dev/null && { tpy=$(command -v "$p"); break; }
done

# ---- the Python module's own tests -----------------------------------------
check "python sdk tests" "$py" "$src/tests/integration/ckpt_py_tests.py"
if [ -n "$tpy" ] && [ "$tpy" != "$(command -v $py)" ]; then
    check "python sdk tests with torch" "$tpy" "$src/tests/integration/ckpt_py_tests.py"
fi

# ---- C and Python read each other's checkpoints ----------------------------
d=$tmp/x
mkdir -p "$d/in" "$d/out"
head -c 3000000 /dev/urandom >"$d/in/model.bin"
printf 'step data\n' >"$d/in/meta.txt"
: >"$d/in/empty"
pysave() { "$py" -m crater_ckpt save -c 65536 "$@" >/dev/null; }
csave() { "$tool" save -c 65536 "$@" >/dev/null; }
same_dump() { diff <("$py" -m crater_ckpt dump "$@") <("$tool" dump "$@"); }
check "python saves" pysave "$d/ck" 1 "$d/in/model.bin" "$d/in/meta.txt" "$d/in/empty"
check "C loads python's" same_dump "$d/ck"
printf 'x' | dd of="$d/in/model.bin" bs=1 seek=1000000 conv=notrunc 2>/dev/null
check "C saves on top" csave "$d/ck" 2 "$d/in/model.bin" "$d/in/meta.txt" "$d/in/empty"
check "python loads C's" same_dump "$d/ck"
check "python loads step 1" same_dump "$d/ck" 1
check "C restores" "$tool" load "$d/ck" "$d/out" >/dev/null
check "restored equal" cmp "$d/in/model.bin" "$d/out/model.bin"
n1=$(ls "$d/ck/chunks" | wc -l)
check "python saves on top" pysave -k 1 "$d/ck" 3 "$d/in/model.bin" "$d/in/meta.txt" "$d/in/empty"
check "incremental across SDKs" test "$(ls "$d/ck/chunks" | wc -l)" -le "$n1"
check "both list one step" test "$("$tool" ls "$d/ck")" = 3
check "python restores" "$py" -m crater_ckpt load "$d/ck" "$d/out"
check "python restored equal" cmp "$d/in/meta.txt" "$d/out/meta.txt"

# ---- the Python SDK killed at random points ---------------------------------
check "python crash safety" "$py" "$src/tests/integration/ckpt_crash.py" 60 "$tool"

# ---- the C example: killed and restarted, same final weights ---------------
want=$("$toy" "$tmp/toy-ref" 300 20 2>/dev/null)
for i in 1 2 3; do
    "$toy" "$tmp/toy" 300 20 2000 >/dev/null 2>&1 &
    pids+=($!)
    sleep "0.$((RANDOM % 4 + 1))"
    kill -9 $! 2>/dev/null
    wait $! 2>/dev/null
done
got=$("$toy" "$tmp/toy" 300 20 2>"$tmp/toy.err")
check "C example resumed" grep -q 'resumed at step [1-9]' "$tmp/toy.err"
check "C example same weights" test "$got" = "$want"

# ---- the PyTorch example ----------------------------------------------------
if [ -z "$tpy" ]; then
    echo "SKIP: python3-torch is not installed (apt-get install python3-torch): no PyTorch resume test"
else
    ex=$src/examples/ckpt/train_torch.py
    want=$("$tpy" "$ex" --dir "$tmp/t-ref" --steps 80 --every 10 | tail -1)
    for i in 1 2; do
        "$tpy" "$ex" --dir "$tmp/t" --steps 80 --every 10 --sleep 0.02 >"$tmp/t$i.out" 2>&1 &
        pids+=($!)
        for _ in $(seq 1 100); do grep -q resumed "$tmp/t$i.out" 2>/dev/null || [ -d "$tmp/t/step-$((i * 20))" ] && break; sleep 0.1; done
        kill -9 $! 2>/dev/null
        wait $! 2>/dev/null
    done
    "$tpy" "$ex" --dir "$tmp/t" --steps 80 --every 10 --sleep 0.05 >"$tmp/t3.out" 2>&1 &
    p=$!
    pids+=($p)
    for _ in $(seq 1 200); do grep -q resumed "$tmp/t3.out" && break; sleep 0.05; done
    sleep 0.3
    kill -TERM $p
    wait $p
    check "torch SIGTERM exits 0" test $? -eq 0
    check "torch SIGTERM saved" grep -q 'preempted: saved step' "$tmp/t3.out"
    at=$(sed -n 's/preempted: saved step //p' "$tmp/t3.out")
    "$tpy" "$ex" --dir "$tmp/t" --steps 80 --every 10 >"$tmp/t4.out" 2>&1
    check "torch resumed at the SIGTERM step" grep -q "resumed at step $at\$" "$tmp/t4.out"
    check "torch same final weights" test "$(tail -1 "$tmp/t4.out")" = "$want"
    [ "$(tail -1 "$tmp/t4.out")" = "$want" ] || cat "$tmp"/t*.out
fi

echo "test_ckpt_sdk: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
