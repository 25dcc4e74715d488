#!/usr/bin/env bash
# Runs the escape suite (and the gateway's and the shared store's tests) as an ordinary user (created here if missing), after
# `cargo test` has built it as root. The sandbox must hold for both: as root
# there is no user namespace and RLIMIT_NPROC does not apply; as a user every
# call gets a user namespace. Each binary runs twice: normally, and with
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
built=$(cargo test --no-run --locked --test 'escape_*' --test gateway --test store_redis --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*"' | cut -d'"' -f4)
status=0
for name in escape_fs escape_net escape_domains escape_proc escape_root escape_tree escape_operator escape_home gateway store_redis; do
  bin=$(grep "/$name-[0-9a-f]*\$" <<<"$built") || { echo "no test binary for $name" >&2; exit 1; }
  # The gateway tests drive the binary, which picks its mode itself.
  modes="0 1"
  [ "$name" = gateway ] && modes="0"
  for nsfree in $modes; do
    echo "== $name as $user (namespace-free: $nsfree)"
    # A fresh TMPDIR the user owns; CARGO_* stand in for what cargo sets.
    tmp=$(mktemp -d)
    chown "$user" "$tmp"
    if ! runuser -u "$user" -- env TMPDIR="$tmp" HOME="$tmp" \
        TOOLCAGE_TEST_NAMESPACE_FREE="$nsfree" \
        CARGO_PKG_NAME=toolcage CARGO_MANIFEST_DIR="$PWD" "$bin" --test-threads=2; then
      status=1
    fi
    rm -rf "$tmp"
  done
done
exit $status
