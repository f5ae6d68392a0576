#!/usr/bin/env bash
# test_dashboard.sh - the web dashboard in Debian's chromium (headless),
# driven by puppeteer-core (tests/browser/dashboard.test.js, installed by
# scripts/deps.sh test into $CRATER_NODE_CACHE). It starts `crater up`
# with tests/data/hw-small.yaml and makes a cluster worth looking at: a
# GPU job running, a preemptible job preempted by a high-priority one and
# requeued (a timeline with a preemption, two attempts, logs), and a job
# pending with a reason; then the browser test logs in, loads every view
# and compares what it shows with the API. Screenshots go to
# $CRATER_ARTIFACTS (default: ./dashboard-artifacts in the build tree).
# The static files' headers are checked with curl first; the browser part
# is skipped, saying so, where chromium, node or the driver are missing.
set -uo pipefail
# grep -q on a pipe under pipefail: it may exit before the writer is done,
# whose SIGPIPE then fails the pipeline; has reads all its input first
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
chromium=${CRATER_CHROMIUM:-$(command -v chromium || true)}
nodedir=${CRATER_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crater/browser-tests}
art=${CRATER_ARTIFACTS:-$PWD/dashboard-artifacts}
pass=0 fail=0
tmp=$(mktemp -d)
chmod 755 "$tmp"
up=""
trap '[ -n "$up" ] && kill -9 $up 2>/dev/null; rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }
job() { c get job "$1" -o json 2>/dev/null; }
wait_for() { # wait_for SECONDS JOB JQ_FILTER
    local i
    for i in $(seq 1 $(( $1 * 10 ))); do
        job "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for job $2: $3"; job "$2" | jq -c '{state, reason, attempts}'
    return 1
}
submit() { printf '%s\n' "$1" >"$tmp/j.yaml"; c submit -f "$tmp/j.yaml" -o json | jq -r .id; }

s60=60.$RANDOM
cd "$tmp"
# frequent heartbeats: jobs are charged (doc/cost.md) within the test
printf 'scheduler:\n  preemptionMinRuntime: 0s\nagent:\n  heartbeatInterval: 300ms\n' >"$tmp/up.yaml"
"$bin" up --data "$tmp/var" --listen 127.0.0.1:0 --config "$tmp/up.yaml" \
    --hardware "$src/tests/data/hw-small.yaml" >"$tmp/up.out" 2>&1 &
up=$!
for _ in $(seq 1 100); do
    url=$(sed -n 's/.*API on \(http:[^,]*\),.*/\1/p' "$tmp/up.out")
    [ -n "$url" ] && break; sleep 0.1
done
[ -n "$url" ] || { echo "crater up did not start:"; cat "$tmp/up.out"; exit 1; }
token=$(cat "$tmp/var/admin.token")
grep -q "dashboard: $url/" "$tmp/up.out" && ok || bad "banner names the dashboard"
for _ in $(seq 1 100); do
    [ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ] && break
    sleep 0.1
done

run=$(submit 'name: gpu-run
command: [sleep, "'"$s60"'"]
resources: {gpu: {count: 1}, cpu: 1, memory: 64Mi}')
low=$(submit 'name: low
command: [sh, -c, "echo attempt $CRATER_ATTEMPT; exec sleep '"$s60"'"]
priority: -10
preemptible: true
nodeSelector: {zone: b}
resources: {cpu: 2, memory: 64Mi}')
wait_for 20 "$run" '.state == "running"' && ok || bad "GPU job running"
wait_for 20 "$low" '.state == "running"' && ok || bad "low running"
high=$(submit 'name: high
command: [sh, -c, "sleep 1.5; echo high ran"]
priorityClass: high
nodeSelector: {zone: b}
resources: {cpu: 2, memory: 64Mi}')
wait_for 40 "$high" '.state == "succeeded" and .logs_complete and .cost.total_micros > 0' && ok || bad "high ran and was charged"
wait_for 30 "$low" '.state == "running" and .attempts == 2' && ok || bad "low requeued"
wait=$(submit 'name: waiter
command: ["true"]
priority: -20
nodeSelector: {zone: b}
resources: {cpu: 1, memory: 64Mi}')
wait_for 20 "$wait" '.state == "pending" and (.reason | test("CPU"))' && ok || bad "waiter pending for CPU"
user=$(curl -s -H "Authorization: Bearer $token" -d '{"role": "user", "tenant": "default", "name": "viewer"}' \
    "$url/api/v1/tokens" | jq -r .token)

# ---- the static files, without a browser ----------------------------------
hdr() { curl -s -o /dev/null -D - "$url$1" | tr -d '\r'; }
h=$(hdr /)
grep -qi '^content-type: text/html; charset=utf-8$' <<<"$h" && ok || bad "/ is text/html"
grep -qi "^content-security-policy: default-src 'none'; script-src 'self';" <<<"$h" && ok || bad "CSP on /"
grep -qi 'unsafe-inline\|unsafe-eval' <<<"$h" && bad "CSP allows inline script" || ok
grep -qi '^x-content-type-options: nosniff$' <<<"$h" && ok || bad "nosniff on /"
grep -qi '^referrer-policy: no-referrer$' <<<"$h" && ok || bad "no-referrer on /"
hdr /ui/app.js | has -i '^content-type: text/javascript' && ok || bad "app.js Content-Type"
hdr /ui/app.css | has -i '^content-type: text/css' && ok || bad "app.css Content-Type"
for p in /ui/nope.js /ui/..%2Fapp.js /ui/app.js/x /index.html /web/app.js; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url$p")" = 404 ] && ok || bad "$p is not a 404"
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/api/v1/jobs")" = 401 ] && ok || bad "API without a token"
curl -s "$url/ui/app.js" | cmp -s - "$src/web/app.js" && ok || bad "app.js is web/app.js"
curl -s -H "Authorization: Bearer $token" "$url/api/v1/resources?filter=type:gpu" |
    jq -e '.items | length == 2 and all(.measured.util | type == "number")' >/dev/null &&
    ok || bad "GPU resources carry measured.util"

# ---- the browser ---------------------------------------------------------------
browser=""
if [ -z "$chromium" ] || [ ! -x "$chromium" ]; then browser="no chromium"
elif ! command -v node >/dev/null; then browser="no node"
elif [ ! -d "$nodedir/node_modules/puppeteer-core" ]; then browser="no puppeteer-core in $nodedir"
fi
if [ -n "$browser" ]; then
    echo "SKIP: the browser part: $browser (scripts/deps.sh test installs it)"
else
DASH_URL=$url TOKEN=$token USER_TOKEN=$user JOB_RUN=$run JOB_LOW=$low JOB_HIGH=$high \
    JOB_WAIT=$wait ARTIFACTS=$art CHROMIUM=$chromium NODE_PATH=$nodedir/node_modules \
    timeout 300 node "$src/tests/browser/dashboard.test.js" && ok || bad "browser test"
echo "screenshots in $art"
fi

for j in "$run" "$low" "$wait"; do c cancel "$j" >/dev/null 2>&1; done
kill -INT "$up"
for _ in $(seq 1 100); do kill -0 "$up" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$up" 2>/dev/null; then bad "crater up still running 10 s after Ctrl-C"; else
    wait "$up"; rc=$?; up=""
    [ "$rc" = 0 ] && ok || { bad "crater up exit $rc"; tail -n 40 "$tmp/up.out"; }
fi
grep -q 'Sanitizer' "$tmp/up.out" && { bad "sanitizer report"; cat "$tmp/up.out"; } || ok
pgrep -f "sleep $s60" >/dev/null && bad "tasks left running" || ok

echo "test_dashboard: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
