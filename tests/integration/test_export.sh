#!/usr/bin/env bash
# test_export.sh - `crater export k8s` (doc/cli.md): the Pod of a job spec
# (resources, the crater.io slice annotations), a batch/v1 Indexed Job for
# replicas, refusals naming the problem, and with --job the placement of a
# job bound by a real craterd (a hand-registered node) as node affinity and
# the GPU environment. kubectl create --dry-run=client -f checks the
# manifests when kubectl can reach an API server (it needs discovery even
# for a client dry run); otherwise that part is skipped with a message.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
bin=${CRATER_BIN:?}
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check NAME FILE JQ_FILTER
    if jq -e "$3" "$2" >/dev/null 2>&1; then ok; else bad "$1: $3"; head -c 900 "$2"; echo; fi
}

"$bin" export k8s "$src/examples/jobs/bert-finetune.yaml" -o json >"$tmp/pod.json" \
    && ok || bad "export bert-finetune"
check "a Pod with the slice annotations" "$tmp/pod.json" '.apiVersion == "v1" and .kind == "Pod" and .metadata.name == "bert-finetune" and .metadata.annotations["crater.io/gpu"] == "1" and .metadata.annotations["crater.io/gpu-memory"] == "21474836480"'
check "cpu and memory requests" "$tmp/pod.json" '.spec.containers[0].resources.requests == {"cpu": "8000m", "memory": "68719476736"} and .spec.containers[0].command[0] == "python" and .spec.restartPolicy == "Never"'
check "unplaced: no affinity, no GPU env" "$tmp/pod.json" '.spec.affinity == null and .spec.containers[0].env == null'
"$bin" export k8s "$src/examples/jobs/bert-finetune.yaml" >"$tmp/pod.yaml" && ok || bad "export as YAML"
grep -q '^"kind": "Pod"' "$tmp/pod.yaml" && ok || bad "YAML output"
if python3 -c 'import yaml' 2>/dev/null; then # the YAML is the same object
    python3 -c 'import json, sys, yaml; sys.exit(yaml.safe_load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' \
        "$tmp/pod.yaml" "$tmp/pod.json" && ok || bad "YAML and JSON outputs differ"
fi
"$bin" export k8s "$src/examples/jobs/train-ddp.yaml" -o json >"$tmp/job.json" && ok || bad "export train-ddp"
check "replicas: an Indexed batch/v1 Job, whole GPUs as nvidia.com/gpu" "$tmp/job.json" '.apiVersion == "batch/v1" and .kind == "Job" and .spec.completions == 2 and .spec.parallelism == 2 and .spec.completionMode == "Indexed" and .spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"] == "8" and (.spec.template.spec.containers[0].env | map(.name) | index("NCCL_DEBUG") != null)'
printf 'name: x\ncommand: [a]\nresources: {memory: 3 apples}\n' >"$tmp/bad.yaml"
"$bin" export k8s "$tmp/bad.yaml" 2>"$tmp/err"; [ $? -eq 1 ] && grep -q 'resources.memory' "$tmp/err" && ok || bad "invalid spec refused naming the field"
"$bin" export yaml "$tmp/bad.yaml" 2>/dev/null; [ $? -eq 2 ] && ok || bad "unknown target is a usage error"

# ---- --job: a placed job's node and GPUs ------------------------------------
# the example job has an image: the node advertises a container runtime
# (doc/containers.md), as an agent with podman does
hw=$tmp/h100x8.yaml
sed 's|^labels:|labels:\n  crater.io/runtimes: podman|' \
    "$src/examples/hardware/h100x8.yaml" >"$hw"
start_craterd "$tmp/data" --no-sync --hardware "$hw" || exit 1
"$bin" validate -o json "$hw" >"$tmp/nodes.json" 2>/dev/null
proto=$(sed -n 's/^#define CRATER_AGENT_PROTOCOL \([0-9]*\).*/\1/p' "$src/src/daemon/buildinfo.h")
python3 "$src/tests/integration/k8s_nodes.py" register "$url" "$admin" "$tmp/nodes.json" "$proto" \
    && ok || bad "register the node"
api POST /api/v1/jobs "$admin" "$src/examples/jobs/bert-finetune.yaml"; id=$(jq -r .id "$tmp/body")
until_ 5 'api GET "/api/v1/jobs/$id" "$admin"; [ "$(jq -r .state "$tmp/body")" = bound ]' && ok || bad "job bound"
uuid=$(jq -r '.placement.gpus[0].uuid' "$tmp/body")
"$bin" export k8s "$src/examples/jobs/bert-finetune.yaml" --job "$id" -o json \
    --server "$url" --token "$admin" >"$tmp/placed.json" && ok || bad "export --job"
check "node affinity on the placed node" "$tmp/placed.json" '.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0] == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-h100-0"]}'
check "the slice environment" "$tmp/placed.json" "[.spec.containers[0].env[] | {(.name): .value}] | add | .CUDA_VISIBLE_DEVICES == \"$uuid\" and .CRATER_GPUSLICE_CTX_OVERHEAD == \"314572800\" and (.CRATER_GPUSLICE_FILE | test(\"bert-finetune.slice\$\")) and .LD_PRELOAD != null"
"$bin" export k8s "$src/examples/jobs/bert-finetune.yaml" --job 999 --server "$url" --token "$admin" >/dev/null 2>&1
[ $? -eq 1 ] && ok || bad "export --job of an unknown job fails"
stop_craterd && ok || bad "craterd stops cleanly"
pid=""

# ---- kubectl ------------------------------------------------------------------
# A client dry run still asks the API server for discovery: with a
# reachable server kubectl validates fully; without one a discovery-only
# stub (k8s_discovery.py) lets it parse the manifests and map their kinds
# (--validate=false: no schema; the fields are checked with jq above).
kube() { kubectl create --dry-run=client "$@" -o name >/dev/null 2>"$tmp/kerr" || { cat "$tmp/kerr"; return 1; }; }
if ! command -v kubectl >/dev/null; then
    echo "SKIP: kubectl create --dry-run=client (kubectl not installed)"
elif timeout 10 kubectl version >/dev/null 2>&1; then
    for f in pod.json pod.yaml job.json placed.json; do kube -f "$tmp/$f" && ok || bad "kubectl accepts $f"; done
else
    python3 "$src/tests/integration/k8s_discovery.py" >"$tmp/kport" & pid=$!
    until_ 5 '[ -s "$tmp/kport" ]' || bad "discovery stub did not start"
    ks=(--server "http://127.0.0.1:$(head -1 "$tmp/kport")" --validate=false)
    echo "kubectl: no API server; against a discovery stub, without schema validation"
    for f in pod.json pod.yaml job.json placed.json; do
        HOME=$tmp kube "${ks[@]}" -f "$tmp/$f" && ok || bad "kubectl reads $f"
    done
    jq '.kind = "Podd"' "$tmp/pod.json" >"$tmp/podd.json"
    HOME=$tmp kube "${ks[@]}" -f "$tmp/podd.json" >/dev/null && bad "kubectl took kind Podd" || ok
    kill "$pid"; wait "$pid" 2>/dev/null; pid=""
fi

echo "test_export: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
