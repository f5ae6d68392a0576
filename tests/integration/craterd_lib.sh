# craterd_lib.sh - helpers for integration tests that run craterd: start it
# on a free loopback port with a temporary data directory, wait until it is
# ready, call the API with curl. Source it; needs $CRATERD_BIN and $tmp.
#
#   start_craterd DATA_DIR [craterd flags...]  -> sets $url, $pid, $admin
#   api METHOD PATH [TOKEN] [BODY_FILE|-]      -> body in $tmp/body, status in $code
#   until_ SECONDS 'SHELL CONDITION'          -> 0 once it holds, 1 at the deadline

start_craterd() {
    local data=$1; shift
    local log=$tmp/craterd.$RANDOM.out
    : >"$log"
    "${CRATERD_BIN:?}" --data "$data" --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
    pid=$!
    local port="" i
    for i in $(seq 1 200); do
        port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
        [ -n "$port" ] && break
        kill -0 "$pid" 2>/dev/null || { echo "craterd died:"; cat "$log"; return 1; }
        sleep 0.05
    done
    [ -n "$port" ] || { echo "craterd did not start:"; cat "$log"; return 1; }
    url=http://127.0.0.1:$port
    for i in $(seq 1 200); do
        curl -sf "$url/readyz" >/dev/null && break
        sleep 0.05
    done
    admin=$(cat "$data/admin.token")
    craterd_log=$log
}

stop_craterd() { # SIGTERM and wait; fails if it does not exit cleanly
    kill -TERM "$pid" 2>/dev/null || return 0
    wait "$pid"
}

api() {
    local method=$1 path=$2 token=${3:-} body=${4:-}
    local args=(-s -o "$tmp/body" -w '%{http_code}' -X "$method")
    [ -n "$token" ] && args+=(-H "Authorization: Bearer $token")
    [ -n "$body" ] && args+=(--data-binary "@$body")
    code=$(curl "${args[@]}" "$url$path")
}

until_() { # until_ SECONDS 'SHELL CONDITION': re-evaluated until true
    local n=$(( $1 * 10 )) i
    for i in $(seq 1 "$n"); do eval "$2" && return 0; sleep 0.1; done
    return 1
}
