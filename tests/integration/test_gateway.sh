#!/bin/bash
# test_gateway.sh - crater-gateway against fake V2 backends (tests/tools/
# fake_v2.c), real processes on loopback: proxying as is, dynamic batching
# under concurrency (each caller gets exactly its own rows), readiness
# (a backend failing its probe gets no traffic), 429 with Retry-After when
# a service's queue is full, 504 past the request timeout (waiting and in
# flight), 404, 400 naming the field, 413, /metrics checked by promtool,
# and SIGTERM draining (in flight answered, new requests 503).
# Waits for states, never for fixed times; kills what it started on exit.
set -u
: "${GATEWAY_BIN:?}" "${FAKE_V2_BIN:?}"
tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

until_() { # until_ SECONDS 'SHELL CONDITION'
    local n=$(($1 * 20)) i
    for i in $(seq 1 "$n"); do eval "$2" && return 0; sleep 0.05; done
    return 1
}

# start NAME CMD... : run it, wait for "port N" in its output, set $port
start() {
    local name=$1 log=$tmp/$1.out
    shift
    "$@" >"$log" 2>&1 &
    pids+=($!)
    until_ 10 "grep -q 'port [0-9]' '$log'" || { echo "$name did not start:"; cat "$log"; exit 1; }
    port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$log" | head -1)
}

# req METHOD URL [BODY]: status in $code, body in $tmp/body, headers in $tmp/hdr
req() {
    local args=(-s -o "$tmp/body" -D "$tmp/hdr" -w '%{http_code}' -X "$1")
    [ $# -ge 3 ] && args+=(--data-binary "$3" -H 'Content-Type: application/json')
    code=$(curl "${args[@]}" "$2")
}

metric() { # metric URL 'name{labels}' -> value (empty when absent)
    curl -s "$1/metrics" | awk -v k="$2" '$1 == k { print $2 }'
}

start fast "$FAKE_V2_BIN" -s
fast=http://127.0.0.1:$port
start conc "$FAKE_V2_BIN"
conc=http://127.0.0.1:$port
start slow "$FAKE_V2_BIN" -d 3000
slow=http://127.0.0.1:$port

start gw1 "$GATEWAY_BIN" --listen 127.0.0.1:0 --health 100 --max-body 10000 \
    --service m="$fast" --batch m=16:30ms --service p="$fast,$conc"
gw=http://127.0.0.1:$port
start gw2 "$GATEWAY_BIN" --listen 127.0.0.1:0 --health 100 --queue 3 \
    --timeout 1000 --service s="$conc" --batch s=64:3000ms \
    --service slow="$slow"
gw2=http://127.0.0.1:$port

until_ 10 '[ "$(metric $gw "crater_gateway_backends_ready{service=\"p\"}")" = 2 ]' \
    && ok "gateway sees both backends of p ready" || fail "backends of p not ready"
until_ 10 '[ "$(metric $gw2 "crater_gateway_backends_ready{service=\"slow\"}")" = 1 ]' \
    || fail "backends of gw2 not ready"

# --- proxying -----------------------------------------------------------
req PUT "$gw/p/some/path" '{"x":1}'
[ "$code" = 200 ] && [ "$(jq -r .method "$tmp/body")/$(jq -r .path "$tmp/body")/$(jq -r .body "$tmp/body")" = 'PUT//some/path/{"x":1}' ] \
    && ok "PUT proxied with its path and body" || fail "proxy: $code $(cat "$tmp/body")"
req GET "$gw/m/v2/health/ready"
[ "$code" = 200 ] && [ "$(jq -r .ready "$tmp/body")" = true ] \
    && ok "health path of a batching service proxied" || fail "health: $code"

# --- errors ---------------------------------------------------------------
req GET "$gw/nosuch/v2/health/ready"
[ "$code" = 404 ] && grep -q "no service 'nosuch'" "$tmp/body" \
    && ok "404 names the unknown service" || fail "unknown service: $code $(cat "$tmp/body")"
req POST "$gw/m/v2/models/r/infer" '{"inputs":[{"name":"x"'
[ "$code" = 400 ] && grep -q 'malformed JSON' "$tmp/body" \
    && ok "400 for malformed JSON" || fail "malformed: $code $(cat "$tmp/body")"
req POST "$gw/m/v2/models/r/infer" '{"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[1,2,3]}]}'
[ "$code" = 400 ] && [ "$(jq -r .field "$tmp/body")" = 'inputs[0].data' ] \
    && ok "400 names inputs[0].data" || fail "shape: $code $(cat "$tmp/body")"
big=$(head -c 20000 /dev/zero | tr '\0' 'a')
req POST "$gw/p/x" "$big"
[ "$code" = 413 ] && ok "413 past --max-body" || fail "body limit: $code"

# --- batching under concurrency -------------------------------------------
before=$(curl -s "$fast/fake/stats" | jq .requests)
n=40
for i in $(seq 1 $n); do
    rows=$((i % 3 + 1)) data=""
    for r in $(seq 1 $rows); do data="$data${data:+,}$i,$r"; done
    curl -s -o "$tmp/b.$i" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "{\"id\":\"r$i\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[$rows,2],\"data\":[$data]}]}" \
        "$gw/m/v2/models/r/infer" >"$tmp/c.$i" &
done
for i in $(seq 1 $n); do
    until_ 20 "[ -s $tmp/c.$i ]" || true
done
bad=0
for i in $(seq 1 $n); do
    rows=$((i % 3 + 1)) want=""
    for r in $(seq 1 $rows); do want="$want${want:+,}$((2 * i)),$((2 * r))"; done
    got=$(jq -c '[.id, .outputs[0].shape, .outputs[0].data]' "$tmp/b.$i" 2>/dev/null)
    if [ "$(cat "$tmp/c.$i")" != 200 ] || [ "$got" != "[\"r$i\",[$rows,2],[$want]]" ]; then
        bad=$((bad + 1))
        echo "  request $i: $(cat "$tmp/c.$i") $got, want [\"r$i\",[$rows,2],[$want]]"
    fi
done
[ $bad = 0 ] && ok "$n concurrent callers each got exactly their own rows" \
    || fail "$bad of $n callers got wrong answers"
stats=$(curl -s "$fast/fake/stats")
sent=$(($(echo "$stats" | jq .requests) - before))
[ "$sent" -lt $n ] && [ "$(echo "$stats" | jq .max_rows)" -gt 3 ] \
    && [ "$(echo "$stats" | jq .max_rows)" -le 16 ] \
    && ok "batched: $n requests in $sent backend calls, at most 16 rows" \
    || fail "not batched: $sent backend calls for $n requests ($stats)"

# a request that cannot batch (ragged first dimensions) goes alone, as is
req POST "$gw/m/v2/models/r/infer" '{"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1]},{"name":"b","datatype":"FP32","shape":[2],"data":[1,2]}]}'
[ "$code" = 200 ] && [ "$(jq -c '.outputs[1].data' "$tmp/body")" = '[2,4]' ] \
    && ok "unbatchable request proxied alone" || fail "unbatchable: $code $(cat "$tmp/body")"

# --- readiness --------------------------------------------------------------
curl -s -X PUT "$fast/fake/ready?v=0" >/dev/null
until_ 10 '[ "$(metric $gw "crater_gateway_backends_ready{service=\"m\"}")" = 0 ]' \
    || fail "probe did not notice the backend going unready"
req POST "$gw/m/v2/models/r/infer" '{"inputs":[{"name":"x","datatype":"INT32","shape":[1,1],"data":[1]}]}'
[ "$code" = 503 ] && grep -q 'no ready backend' "$tmp/body" \
    && ok "503 while no backend is ready" || fail "unready: $code $(cat "$tmp/body")"
okp=0
for i in 1 2 3 4 5 6; do
    req GET "$gw/p/who"
    [ "$code" = 200 ] && okp=$((okp + 1))
done
[ $okp = 6 ] && ok "p still served by its other ready backend" || fail "p: $okp of 6"
curl -s -X PUT "$fast/fake/ready?v=1" >/dev/null
until_ 10 '[ "$(metric $gw "crater_gateway_backends_ready{service=\"m\"}")" = 1 ]' \
    && ok "backend ready again after its probe" || fail "backend not back"

# --- queue full: 429; timeouts: 504 -----------------------------------------
body='{"inputs":[{"name":"x","datatype":"INT32","shape":[1,1],"data":[1]}]}'
for i in 1 2 3; do
    curl -s -o /dev/null -w '%{http_code}' --data-binary "$body" \
        "$gw2/s/v2/models/r/infer" >"$tmp/q.$i" &
done
until_ 10 '[ "$(metric $gw2 "crater_gateway_queue_depth{service=\"s\"}")" = 3 ]' \
    || fail "queue did not fill"
req POST "$gw2/s/v2/models/r/infer" "$body"
[ "$code" = 429 ] && grep -qi '^Retry-After: 1' "$tmp/hdr" \
    && ok "429 with Retry-After when the queue is full" || fail "queue full: $code"
for i in 1 2 3; do until_ 20 "[ -s $tmp/q.$i ]" || true; done
[ "$(cat "$tmp/q.1" "$tmp/q.2" "$tmp/q.3")" = 504504504 ] \
    && ok "504 for requests still waiting at the timeout" \
    || fail "waiting timeouts: $(cat "$tmp/q.1" "$tmp/q.2" "$tmp/q.3")"
req GET "$gw2/slow/v2/models/r/whatever"
[ "$code" = 200 ] || fail "slow backend's echo path: $code"
req POST "$gw2/slow/v2/models/r/infer" "$body"
[ "$code" = 504 ] && ok "504 when the backend does not answer in time" \
    || fail "in-flight timeout: $code $(cat "$tmp/body")"

# --- metrics ------------------------------------------------------------------
curl -s "$gw/metrics" >"$tmp/metrics"
if command -v promtool >/dev/null; then
    promtool check metrics <"$tmp/metrics" >"$tmp/promtool" 2>&1 \
        && ok "promtool accepts /metrics" || { fail "promtool:"; cat "$tmp/promtool"; }
else
    fail "promtool not installed (scripts/deps.sh test)"
fi
got=$(awk '$1 == "crater_gateway_requests_total{service=\"m\",code=\"200\"}" { print $2 }' "$tmp/metrics")
[ "${got:-0}" -ge $((n + 1)) ] && ok "requests_total counts the 200s ($got)" \
    || fail "requests_total: $got"
for k in 'crater_gateway_batch_size_count{service="m"}' \
    'crater_gateway_queue_seconds_count{service="m"}' \
    'crater_gateway_backend_seconds_count{service="m"}' \
    'crater_gateway_backends{service="p"}'; do
    v=$(awk -v k="$k" '$1 == k { print $2 }' "$tmp/metrics")
    [ -n "$v" ] && [ "$v" != 0 ] || fail "metric $k is '$v'"
done
[ "$(metric "$gw2" 'crater_gateway_requests_total{service="s",code="429"}')" = 1 ] \
    && ok "429 counted" || fail "429 not counted"

# --- settling after a batch (inference.md, B9) ----------------------------
# A serial backend taking 1 s, batches of 8 after 300 ms: A goes alone at
# 300 ms; B, sent meanwhile, is due at ~600 ms and waits for the backend;
# C is sent the moment A is answered (~1.3 s). B does not go alone the
# moment the backend frees: it waits a batchTimeout more, and C joins it.
start ser "$FAKE_V2_BIN" -s -d 1000
ser=http://127.0.0.1:$port
start gw3 "$GATEWAY_BIN" --listen 127.0.0.1:0 --health 100 --service z="$ser" \
    --batch z=8:300ms
gw3=http://127.0.0.1:$port
until_ 10 '[ "$(metric "$gw3" "crater_gateway_backends_ready{service=\"z\"}")" = 1 ]'
one='{"inputs":[{"name":"x","datatype":"INT32","shape":[1,1],"data":[1]}]}'
zinfer() { curl -s -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
    --data-binary "$one" "$gw3/z/v2/models/r/infer"; }
(zinfer; zinfer) >"$tmp/ac" &
ac=$!
until_ 10 '[ "$(metric "$gw3" "crater_gateway_batch_size_count{service=\"z\"}")" = 1 ]' \
    || fail "A was not sent"
zinfer >"$tmp/b" &
bpid=$!
wait $ac $bpid
stats=$(curl -s "$ser/fake/stats")
[ "$(cat "$tmp/ac" "$tmp/b" | grep -c 200)" = 3 ] \
    && [ "$(jq .requests <<<"$stats")" = 2 ] && [ "$(jq .max_rows <<<"$stats")" = 2 ] \
    && ok "the batch waiting for a busy backend settles: B and C in one batch" \
    || fail "settling: $(cat "$tmp/ac" "$tmp/b" | tr '\n' ' ') $stats"

# SIGTERM drains: a request in flight (1 s backend) is still answered
# 200, a new one gets 503 with Retry-After, then the gateway exits 0
start dr "$FAKE_V2_BIN" -d 1000
drb=http://127.0.0.1:$port
start gw4 "$GATEWAY_BIN" --listen 127.0.0.1:0 --health 100 --service d="$drb"
gw4=http://127.0.0.1:$port
gw4pid=${pids[-1]}
until_ 10 '[ "$(metric "$gw4" "crater_gateway_backends_ready{service=\"d\"}")" = 1 ]'
curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary '{"inputs":[{"name":"x","datatype":"INT32","shape":[1,1],"data":[1]}]}' \
    "$gw4/d/v2/models/r/infer" >"$tmp/inflight" &
inflight=$!
until_ 10 '[ "$(metric "$gw4" "crater_gateway_queue_depth{service=\"d\"}")" = 1 ]' \
    || fail "drain: the request is not in flight"
kill -TERM "$gw4pid"
until_ 10 "grep -q 'draining 1 request' '$tmp/gw4.out'" || fail "drain: no drain line"
req GET "$gw4/d/v2/health/ready"
[ "$code" = 503 ] && grep -qi '^Retry-After: 1' "$tmp/hdr" && grep -q draining "$tmp/body" \
    && ok "draining: a new request gets 503 with Retry-After" \
    || fail "draining: new request $code $(cat "$tmp/body")"
wait "$inflight"
[ "$(cat "$tmp/inflight")" = 200 ] && ok "draining: the request in flight is answered 200" \
    || fail "draining: in flight got $(cat "$tmp/inflight")"
wait "$gw4pid" && ok "draining: the gateway exits 0 once drained" || fail "drain: exit $?"
unset 'pids[-1]'

# a clean stop, and no sanitizer report in any process's output
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${pids[@]}"; do wait "$p" || fail "process $p exited with $?"; done
pids=()
if grep -lE 'Sanitizer|runtime error' "$tmp"/*.out; then
    fail "sanitizer reports:"
    cat "$tmp"/*.out
else
    ok "all processes stopped cleanly, no sanitizer report"
fi

[ $fails = 0 ] && echo "test_gateway: all passed" || echo "test_gateway: $fails failed"
exit $((fails > 0))
