#!/usr/bin/env bash
# Runs the escape suite (and the gateway's, the shared store's and serve's pool's tests) as an ordinary user (created here if missing), after
# `cargo test` has built it as root. The sandbox must hold for both: as root
# there is no user namespace and RLIMIT_NPROC does not apply; as a user every
# call gets a user namespace. Each runs twice (the gateway's once): normally, and with
# TOOLCAGE_TEST_NAMESPACE_FREE=1 (a container-like seccomp filter refuses
# namespaces, so calls run namespace-free).
# Usage: bash tests/unprivileged.sh [USER]
set -euo pipefail
cd "$(dirname "$0")/.."
user="${1:-toolcage-test}"
if ! id "$user" >/dev/null 2>&1; then
  useradd --no-create-home --shell /bin/sh "$user"
fi
# The executables cargo just built (not the newest file by name: stale
# builds pile up in target/debug/deps).
built=$(cargo test --no-run --locked --test escape --test gateway --test engine --test mcp --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*"' | cut -d'"' -f4)
status=0
# Each run: the test binary, a filter ("" for all its tests; a module
# path otherwise) and the namespace-free modes. The whole escape suite;
# from the gateway binary the upstream servers (which drive the binary,
# which picks its mode itself); from the engine binary the shared store;
# from the mcp binary serve's pool (its maker forks, its inits are adopted).
runs=(
  "escape||0 1"
  "gateway|upstreams::|0"
  "gateway|resources::|0"
  "gateway|prompts::|0"
  "gateway|unprefixed::|0"
  "engine|store_redis::|0 1"
  "mcp|serve_pool::|0 1"
)
for run in "${runs[@]}"; do
  IFS='|' read -r name filter modes <<<"$run"
  bin=$(grep "/$name-[0-9a-f]*\$" <<<"$built") || { echo "no test binary for $name" >&2; exit 1; }
  for nsfree in $modes; do
    echo "== $name ${filter:-(all)} as $user (namespace-free: $nsfree)"
    # A fresh TMPDIR the user owns; CARGO_* stand in for what cargo sets.
    tmp=$(mktemp -d)
    chown "$user" "$tmp"
    # shellcheck disable=SC2086 # an empty filter is no argument
    if ! runuser -u "$user" -- env TMPDIR="$tmp" HOME="$tmp" \
        TOOLCAGE_TEST_NAMESPACE_FREE="$nsfree" \
        CARGO_PKG_NAME=toolcage CARGO_MANIFEST_DIR="$PWD" "$bin" $filter --test-threads=2; then
      status=1
    fi
    rm -rf "$tmp"
  done
done
exit $status
