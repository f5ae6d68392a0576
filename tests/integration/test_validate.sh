#!/usr/bin/env bash
# test_validate.sh - `crater validate` as a user runs it: every shipped
# example is accepted, every known-bad input is rejected with exit 1 and a
# message naming file, line and field, usage errors exit 2, and -o json
# prints the normalised form in base units.
set -uo pipefail
bin=${CRATER_BIN:?} src=${CRATER_SOURCE_DIR:?}
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

cd "$src"
check "examples validate" run 0 validate examples/*.yaml examples/*/*.yaml
check "examples summary" grep -q ' 0 rejected' "$tmp/err"

# the seeds' bug: 20000MB is decimal bytes, never 20000 MiB
cat >"$tmp/mb.yaml" <<'YAML'
name: mb
resources:
  gpu: {count: 1, memory: 20000MB}
command: [python3, infer.py]
YAML
check "20000MB normalised" run 0 validate -o json "$tmp/mb.yaml"
check "20000MB bytes" grep -q '"memory": 20000000000' "$tmp/out"

cat >"$tmp/typo.yaml" <<'YAML'
name: typo
resourses:
  cpu: 2
YAML
check "typo rejected" run 1 validate "$tmp/typo.yaml"
check "typo message" grep -q "typo.yaml:2:1: resourses: unknown field 'resourses' (did you mean 'resources'?)" "$tmp/err"

cat >"$tmp/unit.yaml" <<'YAML'
name: unit
resources:
  memory: 64GB/s
YAML
check "wrong dimension rejected" run 1 validate "$tmp/unit.yaml"
check "wrong dimension message" grep -q "unit.yaml:3:3: resources.memory: '64GB/s': 'GB/s' is a bandwidth unit" "$tmp/err"

# every bad input shipped for the unit tests is rejected with a location
for f in tests/data/*/bad-*; do
    [ -e "$f" ] || continue
    check "rejects $f" run 1 validate "$f"
    check "locates $f" grep -q "$f" "$tmp/err"
done

check "no files is a usage error" run 2 validate
check "bad format is a usage error" run 2 validate -o xml examples/craterd.yaml
check "unknown command" run 2 frobnicate
check "missing file" run 1 validate "$tmp/nope.yaml"
check "missing file message" grep -q "nope.yaml: No such file or directory" "$tmp/err"
check "config reference" run 0 config --markdown
check "config reference is doc/config.md" cmp -s "$tmp/out" doc/config.md
check "kb lists H100" run 0 kb -o json
check "kb content" grep -q 'h100' "$tmp/out"

echo "test_validate: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
