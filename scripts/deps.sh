#!/usr/bin/env bash
# Install the Debian packages Crater builds and tests with, only those missing.
# Usage: scripts/deps.sh [build|test]   (test adds the test-only packages)
# test adds podman with runc (crun 1.8 refuses cgroup v1 hosts whose
# cgroup2 mount holds a controller: doc/containers.md), catatonit for
# --init and busybox-static for test_container.sh's image.
# Idempotent and quiet when everything is present; needs root (or sudo) only
# when something is missing.
#
# test also installs the dashboard's browser test driver (puppeteer-core,
# pinned by tests/browser/package-lock.json) with npm into a cache
# directory, $CRATER_NODE_CACHE (default ~/.cache/crater/browser-tests),
# where tests/integration/test_dashboard.sh finds it; the browser is
# Debian's chromium, never one npm would download (puppeteer-core fetches
# none, and install scripts are not run).
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libjansson-dev libfyaml-dev
            libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev nettle-dev libhwloc-dev
            musl-tools)
test_pkgs=(check libsubunit-dev clang libclang-rt-14-dev clang-format
           curl jq prometheus wrk python3 chromium nodejs etcd-server
           etcd-client python3-torch podman runc crun catatonit busybox-static)

want=("${build_pkgs[@]}")
[ "${1:-build}" = test ] && want+=("${test_pkgs[@]}")

apt_install() {
    local missing=() p sudo=""
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
            missing+=("$p")
        fi
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "crater: installing missing Debian packages: ${missing[*]}" >&2
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >&2
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# npm ci into the cache when the lock file changed since the last install.
browser_driver() {
    local src dir
    src="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
    dir=${CRATER_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crater/browser-tests}
    if [ -d "$dir/node_modules/puppeteer-core" ] &&
        cmp -s "$src/package-lock.json" "$dir/package-lock.json"; then
        return 0
    fi
    echo "crater: installing the browser test driver into $dir" >&2
    mkdir -p "$dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts \
        --no-audit --no-fund --loglevel=error >&2)
}

apt_install "${want[@]}"
if [ "${1:-build}" = test ]; then
    # Debian's nodejs leaves npm to its own package; NodeSource's has it
    command -v npm >/dev/null || apt_install npm
    browser_driver
fi
