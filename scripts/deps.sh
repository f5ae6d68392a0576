#!/usr/bin/env bash
# Install the Debian packages Crater builds and tests with, only those missing.
# Usage: scripts/deps.sh [build|test]   (test adds the test-only packages)
# Idempotent and quiet when everything is present; needs root (or sudo) only
# when something is missing.
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libjansson-dev libfyaml-dev
            libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev nettle-dev libhwloc-dev)
test_pkgs=(check libsubunit-dev clang libclang-rt-14-dev clang-format
           curl jq prometheus wrk python3 etcd-server etcd-client)

want=("${build_pkgs[@]}")
[ "${1:-build}" = test ] && want+=("${test_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "crater: installing missing Debian packages: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
