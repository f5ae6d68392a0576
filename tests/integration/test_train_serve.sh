#!/usr/bin/env bash
# test_train_serve.sh - examples/train-serve end to end: a training job
# fits a tiny CPU PyTorch model (Debian's python3-torch) and saves it; a
# service with `after: [train-tiny]` waits for it, then serves the model
# with a small KServe V2 server (examples/train-serve/serve.py) from
# CRATER_MODEL_PATH; a query through craterd's gateway gets y = 2x + 1.
# Skipped (exit 0, with a message) when no python3 imports torch.
set -uo pipefail
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
py=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then
        py=$(command -v "$p")
        break
    fi
done
[ -n "$py" ] || { echo "test_train_serve: SKIPPED: no python3 with torch (apt-get install python3-torch)"; exit 0; }
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
mark=ts$RANDOM$RANDOM # in every job's argv: pkill reaches only ours
cleanup() {
    [ -n "$up" ] && kill -INT "$up" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$up" 2>/dev/null || break; sleep 0.1; done
    [ -n "$up" ] && kill -9 "$up" 2>/dev/null
    pkill -9 -f "$mark" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }

cp "$src/examples/train-serve/train.py" "$src/examples/train-serve/serve.py" "$tmp/"
chmod 644 "$tmp"/*.py
mkdir -m 1777 "$tmp/ckpt"
cat >"$tmp/config.yaml" <<YAML
apiVersion: crater/v1
kind: Config
server: # replica ports away from other tests' on this host
  gangPortBase: $((10000 + RANDOM % 110 * 200)) # below the ephemeral ports (32768-)
  gangPorts: 100
YAML
"$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/config.yaml" \
    --hardware "$src/tests/data/hw-small.yaml" >"$tmp/up.out" 2>&1 &
up=$!
url=""
for _ in $(seq 1 300); do
    url=$(sed -n 's/.*API on \(http:[^,]*\),.*/\1/p' "$tmp/up.out")
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { echo "crater up did not start:"; cat "$tmp/up.out"; exit 1; }
gw=$(sed -n 's/.*inference gateway on \(http:[^ ]*\) .*/\1/p' "$tmp/up.out")
token=$(cat "$tmp/var/admin.token")
for _ in $(seq 1 300); do
    [ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ] && break
    sleep 0.1
done

# the example's specs, with this checkout's interpreter and paths
sed -e "s|command: .*|command: [$py, $tmp/train.py, $mark]|" \
    -e "s|dir: .*}|dir: $tmp/ckpt/1}|" "$src/examples/train-serve/train.yaml" >"$tmp/train.yaml"
sed -e "s|command: .*|command: [$py, $tmp/serve.py, $mark]|" \
    "$src/examples/train-serve/serve.yaml" >"$tmp/serve.yaml"
tid=$(c submit -f "$tmp/train.yaml" -o json | jq -r .id)
c submit -f "$tmp/serve.yaml" >/dev/null && ok || bad "the service is accepted"
for _ in $(seq 1 1200); do
    [ "$(c describe service tiny -o json | jq .replicas.ready)" = 1 ] && break
    sleep 0.1
done
c describe service tiny -o json | jq -e ".replicas.ready == 1 and .model.job == $tid" >/dev/null \
    && ok || bad "tiny serves job $tid's model: $(c describe service tiny -o json | jq -c '{replicas, model}'); $(c get job "$tid" -o json | jq -c '{state, reason}')"
out=$(curl -s -X POST -d '{"inputs":[{"name":"x","shape":[2,1],"datatype":"FP32","data":[3,-1]}]}' \
    "$gw/tiny/v2/models/tiny/infer")
jq -e '(.outputs[0].data[0] - 7 | fabs) < 0.01 and (.outputs[0].data[1] + 1 | fabs) < 0.01' \
    <<<"$out" >/dev/null && ok || bad "y = 2x + 1 through the gateway: $out"

echo "test_train_serve: $pass passed, $fail failed"
[ "$fail" = 0 ]
