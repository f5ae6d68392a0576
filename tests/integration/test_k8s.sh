#!/usr/bin/env bash
# test_k8s.sh - craterd as a kube-scheduler extender (doc/kubernetes.md),
# over loopback, with the request shapes kube-scheduler sends
# (tests/data/k8s/*-args.json: extender/v1 field names, v1.Pod and
# v1.NodeList objects) and golden answers (*-result.json, compared as
# JSON): node-cache mode (NodeNames), the NodeList mode, prioritize,
# bind recording the placement in craterd's view, strict errors naming the
# field, auth; then the 5 s budget: filter + prioritize on 1,000 nodes
# (and 5,000 with K8S_BENCH_NODES=5000, for bench/RESULTS.md).
# K8S_UPDATE_GOLDEN=1 rewrites the golden files from the answers.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?}
data=$src/tests/data/k8s
pass=0 fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$src/tests/integration/craterd_lib.sh"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; [ -f "$tmp/body" ] && head -c 900 "$tmp/body" && echo; }
expect() { # expect NAME STATUS [JQ_FILTER]
    local name=$1 want=$2 filter=${3:-}
    if [ "$code" != "$want" ]; then bad "$name: status $code, wanted $want"; return; fi
    if [ -n "$filter" ] && ! jq -e "$filter" "$tmp/body" >/dev/null 2>&1; then
        bad "$name: $filter"; return
    fi
    ok
}
golden() { # golden NAME FILE: the answer equals tests/data/k8s/FILE
    if [ "${K8S_UPDATE_GOLDEN:-}" = 1 ]; then jq -S . "$tmp/body" >"$data/$2"; fi
    if [ "$(jq -cS . "$tmp/body")" = "$(jq -cS . "$data/$2")" ]; then ok
    else bad "$1: differs from $2"; diff <(jq -S . "$data/$2") <(jq -S . "$tmp/body"); fi
}
proto=$(sed -n 's/^#define CRATER_AGENT_PROTOCOL \([0-9]*\).*/\1/p' "$src/src/daemon/buildinfo.h")
cluster() { # cluster N FILE: N nodes gpu-0.. with two A100-80GB each
    cat >"$2" <<EOT
apiVersion: crater/v1
kind: Cluster
nodes:
  - name: gpu
    count: $1
    cpus:
      - {model: epyc-7742, threads: 128, numa_node: 0}
    memory:
      - {numa_node: 0, capacity: 512Gi, bandwidth: 204.8GB/s, latency: 95ns}
    gpus:
      - {model: a100-sxm4-80gb, count: 2, numa_node: 0}
EOT
    "${CRATER_BIN:?}" validate -o json "$2" >"$2.json" 2>/dev/null
}

# ---- the contract: three nodes, two of them up ------------------------------
cluster 3 "$tmp/c3.yaml"
start_craterd "$tmp/data" --no-sync --hardware "$tmp/c3.yaml" || exit 1
python3 "$src/tests/integration/k8s_nodes.py" register "$url" "$admin" \
    "$tmp/c3.yaml.json" "$proto" gpu-0 gpu-1 && ok || bad "register gpu-0, gpu-1"

api POST /k8s/extender/filter "" "$data/filter-args.json"
expect "filter needs a token" 401
echo '{"role":"user","tenant":"default"}' >"$tmp/t"
api POST /api/v1/tokens "$admin" "$tmp/t"; user=$(jq -r .token "$tmp/body")
api POST /k8s/extender/filter "$user" "$data/filter-args.json"
expect "filter needs an admin token" 403

api POST /k8s/extender/filter "$admin" "$data/filter-args.json"
expect "filter (NodeNames)" 200 '.NodeNames == ["gpu-0","gpu-1"] and .Nodes == null and (.FailedNodes | keys) == ["gpu-2"] and (.FailedAndUnresolvableNodes | keys) == ["kind-worker"] and .Error == ""'
golden "filter (NodeNames)" filter-result.json

api POST /k8s/extender/prioritize "$admin" "$data/prioritize-args.json"
expect "prioritize: equal empty nodes score equal, others 0" 200 \
    '[.[] | {(.Host): .Score}] | add == {"gpu-0": 10, "gpu-1": 10, "gpu-2": 0, "kind-worker": 0}'
golden "prioritize" prioritize-result.json

api POST /k8s/extender/bind "$admin" "$data/bind-args.json"
expect "bind" 200 '.Error == "" and .placement.node == "gpu-1" and (.placement.gpus | length) == 1 and .placement.gpus[0].memory_bytes == 21789409280 and .placement.cpu_millis == 2500'
golden "bind" bind-result.json
uuid=$(jq -r '.placement.gpus[0].uuid' "$tmp/body")
jq -e --arg u "$uuid" '[.env[] | {(.name): .value}] | add | .CUDA_VISIBLE_DEVICES == $u and (.CRATER_GPUSLICE_FILE | endswith("6c1e2a5e-3f0b-4c1d-9a55-0c4f3e2b1a01.slice")) and .CRATER_GPUSLICE_CTX_OVERHEAD == "314572800"' "$tmp/body" >/dev/null \
    && ok || bad "bind env"
api POST /k8s/extender/bind "$admin" "$data/bind-args.json"
expect "a retried bind answers the same" 200 ".Error == \"\" and .placement.gpus[0].uuid == \"$uuid\""
echo 'name: crater-job
command: [sleep, "1"]
resources: {gpu: {count: 2}, cpu: 1, memory: 1Gi}' >"$tmp/j"
api POST /api/v1/schedule "$admin" "$tmp/j"
expect "Crater sees the pod's slice on gpu-1: 2 whole GPUs only on gpu-0" 200 '.fits and .placement.node == "gpu-0"'

# NodeList mode: 2 whole GPUs (extended resource) fit only the empty node;
# the init container's 8 CPUs are the pod's CPU (max rule)
api POST /k8s/extender/filter "$admin" "$data/filter-args-nodes.json"
expect "filter (Nodes)" 200 '.NodeNames == null and [.Nodes.items[].metadata.name] == ["gpu-0"] and (.FailedNodes | keys) == ["gpu-1"]'
golden "filter (Nodes)" filter-nodes-result.json
jq '.PodUID = "0b8f4d2c-7e61-4a3b-8c9d-5f2e1a0b7c02" | .PodName = "resnet-ddp" | .PodNamespace = "vision" | .Node = "gpu-0"' \
    "$data/bind-args.json" >"$tmp/b2"
api POST /k8s/extender/bind "$admin" "$tmp/b2"
expect "bind whole GPUs" 200 '.Error == "" and .placement.whole_gpus and (.placement.gpus | length) == 2 and .placement.cpu_millis == 8000 and ([.env[].name] | index("LD_PRELOAD") == null)'
api POST /api/v1/schedule "$admin" "$tmp/j"
expect "Crater sees both pods: no node has 2 whole GPUs left" 200 '.fits == false'
api GET /k8s/pods "$admin"
expect "bound pods listed" 200 '[.items[].name] | sort == ["bert-finetune","resnet-ddp"]'
# bindings are stored: after kill -9 the pods are charged where they were
# (before, a restart forgot them and handed their GPUs to Crater jobs)
kill -9 "$pid"; wait "$pid" 2>/dev/null
start_craterd "$tmp/data" --no-sync --hardware "$tmp/c3.yaml" || exit 1
python3 "$src/tests/integration/k8s_nodes.py" register "$url" "$admin" \
    "$tmp/c3.yaml.json" "$proto" gpu-0 gpu-1 && ok || bad "register gpu-0, gpu-1 again"
api GET /k8s/pods "$admin"
expect "bound pods survive kill -9" 200 "([.items[].name] | sort) == [\"bert-finetune\",\"resnet-ddp\"] and ([.items[] | select(.name == \"bert-finetune\") | .placement.gpus[0].uuid] == [\"$uuid\"])"
# the charges are back too: Crater's jobs and another pod of 2 whole GPUs
# do not fit while resnet-ddp holds gpu-0's GPUs
api POST /api/v1/schedule "$admin" "$tmp/j"
expect "after the restart Crater still sees both pods" 200 '.fits == false and (.reason | test("2 not enough free GPUs"))'
jq '.Pod.metadata.uid = "1c2d3e4f-0000-4000-8000-000000000003" | .Pod.metadata.name = "resnet-2"' \
    "$data/filter-args-nodes.json" >"$tmp/f2"
api POST /k8s/extender/filter "$admin" "$tmp/f2"
jq '.PodUID = "1c2d3e4f-0000-4000-8000-000000000003" | .PodName = "resnet-2" | .PodNamespace = "vision" | .Node = "gpu-0"' \
    "$data/bind-args.json" >"$tmp/b4"
api POST /k8s/extender/bind "$admin" "$tmp/b4"
expect "after the restart gpu-0's GPUs are still resnet-ddp's" 200 '(.Error | test("no longer fits")) and (.Error | test("not ready") | not)'
jq '.PodUID = "a/b"' "$data/bind-args.json" >"$tmp/f"
api POST /k8s/extender/bind "$admin" "$tmp/f"
expect "bind: a PodUID that is no UID" 400 '.field == "PodUID"'

jq '.Node = "gpu-2" | .PodUID = "never-filtered"' "$data/bind-args.json" >"$tmp/b3"
api POST /k8s/extender/bind "$admin" "$tmp/b3"
expect "bind of a pod filter never saw: Error set" 200 '.Error | test("was not filtered")'
jq '.Pod.spec.containers[0].resources.requests.cpu = "lots"' "$data/filter-args.json" >"$tmp/f"
api POST /k8s/extender/filter "$admin" "$tmp/f"
expect "bad quantity names the field" 400 '.field == "Pod.spec.containers[0].resources.requests.cpu" and (.Error | test("lots"))'
jq '.Podd = .Pod' "$data/filter-args.json" >"$tmp/f"
api POST /k8s/extender/filter "$admin" "$tmp/f"
expect "unknown ExtenderArgs key" 400 '.field == "Podd" and .code == "EFIELD"'
jq '.Pod.metadata.annotations["crater.io/gpu"] = "1.5"' "$data/filter-args.json" >"$tmp/f"
api POST /k8s/extender/filter "$admin" "$tmp/f"
expect "fractional GPU count" 400 '.field | test("crater.io/gpu")'
jq 'del(.NodeNames)' "$data/filter-args.json" >"$tmp/f"
api POST /k8s/extender/filter "$admin" "$tmp/f"
expect "no nodes at all" 400 '.code == "EMISSING"'
jq '{PodName, PodNamespace, PodUID, Node: 3}' "$data/bind-args.json" >"$tmp/f"
api POST /k8s/extender/bind "$admin" "$tmp/f"
expect "bind: Node not a string" 400 '.field == "Node"'

api DELETE /k8s/pods/0b8f4d2c-7e61-4a3b-8c9d-5f2e1a0b7c02 "$admin"
expect "unbind" 200
api DELETE /k8s/pods/0b8f4d2c-7e61-4a3b-8c9d-5f2e1a0b7c02 "$admin"
expect "unbind again: 404" 404
api POST /k8s/extender/bind "$admin" "$tmp/b4"
expect "the released GPUs can be bound again" 200 '.Error == "" and .placement.node == "gpu-0" and (.placement.gpus | length) == 2'
stop_craterd && ok || bad "craterd stops cleanly"
start_craterd "$tmp/data" --no-sync --hardware "$tmp/c3.yaml" || exit 1
api GET /k8s/pods "$admin"
expect "an unbound pod stays unbound after a restart" 200 '([.items[].name] | sort) == ["bert-finetune", "resnet-2"]'
stop_craterd && ok || bad "craterd stops cleanly"
pid=""

# ---- the budget: filter + prioritize under 5 s ------------------------------
for n in 1000 ${K8S_BENCH_NODES:-}; do
    cluster "$n" "$tmp/cb.yaml"
    rm -rf "$tmp/data"
    start_craterd "$tmp/data" --no-sync --hardware "$tmp/cb.yaml" || exit 1
    t0=$(date +%s.%N)
    python3 "$src/tests/integration/k8s_nodes.py" register "$url" "$admin" "$tmp/cb.yaml.json" "$proto" \
        || bad "register $n nodes"
    t1=$(date +%s.%N)
    res=$(python3 "$src/tests/integration/k8s_nodes.py" time "$url" "$admin" "$tmp/cb.yaml.json" 5)
    echo "k8s extender, $n nodes (registered in $(echo "$t1 - $t0" | bc) s), worst of 5: $res"
    echo "$res" | jq -e ".fit == $n and .scored == $n and .total_ms < 5000" >/dev/null \
        && ok || bad "filter + prioritize on $n nodes within 5 s: $res"
    stop_craterd && ok || bad "craterd stops cleanly ($n nodes)"
    pid=""
done

echo "test_k8s: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
