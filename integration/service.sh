#!/usr/bin/env bash
# toolcage as a service, with the real parts (Debian's redis-server and
# haproxy, installed by install.sh), driven by the Python SDK
# (python_service.py). Usage: service.sh BIN WORKDIR
#
# Two `serve --http` replicas, each with its own state directory (as on two
# machines) and the same project and policy (as from one ConfigMap), behind
# HAProxy with a stick table on Mcp-Session-Id:
#   - sessions stick to their replica and see their own upstream state;
#     control: the same replicas without the stick table break a session
#   - a rate limit of 4 per minute: without --store each replica counts
#     alone (8 of 10 admitted); with --store exactly 4 of 10
#   - an upstream definition changed and approved on one replica: without
#     --store the other still holds it back; with --store it is honoured
#   - SIGKILL to one replica: new sessions go to the other, whose audit
#     records (JSON lines on stdout, [audit] path = "-") match every call
#   - Redis stopped: on a replica a limited call and an upstream call
#     (pins) fail closed, an unlimited local call runs; /readyz stays 200
#     saying "degraded", so HAProxy keeps both replicas up and unlimited
#     calls still reach them; Redis back: limited calls run again through
#     HAProxy
#   - a pod's restrictions: a replica as user toolcage-test under the
#     namespace-refusing seccomp filter of a container runtime (nons.c)
#   - bench: 8 concurrent sessions, two replicas vs one (figures printed)
# The --store parts run when `serve --help` lists --store, else they are
# skipped with the reason. Everything listens on 127.0.0.1; every process
# started here is stopped on any exit.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# INTEGRATION_PYTHON: a venv's python with `mcp` for another user than the
# one who ran install.sh (its venv may sit where that user cannot read).
py="${INTEGRATION_PYTHON:-$here/.deps/venv/bin/python}"
venv="$(dirname "$(dirname "$py")")"
bin="$1"
work="$2"
mkdir -p "$work"

for cmd in redis-server redis-cli haproxy gcc; do
  command -v "$cmd" >/dev/null || { echo "FAIL: $cmd is missing (integration/install.sh installs it)"; exit 1; }
done

declare -A pids=()
cleanup() {
  for name in "${!pids[@]}"; do kill -9 "${pids[$name]}" 2>/dev/null; done
  wait 2>/dev/null
  if [ -n "${pod:-}" ]; then rm -rf "$pod"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rc=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; rc=1; }
scenario() { timeout 300 "$py" "$here/python_service.py" "$@" || rc=1; }

free_port() {
  "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# Waits (bounded) until URL answers 200.
wait_ok() {
  for _ in $(seq 1 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0
    sleep 0.05
  done
  echo "no 200 from $1"
  return 1
}
stop() {
  local name="$1" sig="${2:-TERM}"
  [ -n "${pids[$name]:-}" ] || return 0
  kill -"$sig" "${pids[$name]}" 2>/dev/null
  wait "${pids[$name]}" 2>/dev/null
  unset "pids[$name]"
  # A replica started again at once must not be taken for the old one.
  if [[ "$name" == r[12] && -n "${pids[haproxy]:-}" ]]; then wait_server "$name" DOWN; fi
}

# --- the project, as a ConfigMap would give it to every replica ----------
project="$work/svc-project"
mkdir -p "$project"
cp "$here/service/tools.toml" "$project/"
echo "Keep a note for this session (v1)" >"$project/notes-desc.txt"
cat >"$project/.mcp.json" <<JSON
{"mcpServers": {"notes": {"command": "$py", "args": ["$here/service/upstream.py", "$project/notes-desc.txt"]}}}
JSON
# The CLI's policy (approvals), and the replicas' (audit to stdout).
cat >"$work/cli.toml" <<TOML
[tools.tick.rate_limit]
requests = 4
window = "1m"
[tools.tock.rate_limit]
requests = 1000
window = "1m"
[upstreams.notes]
with = ["python"]
[upstreams.notes.fs]
add_read = ["$venv", "$here/service"]
TOML
{ printf '[audit]\npath = "-"\n'; cat "$work/cli.toml"; } >"$work/serve.toml"
token_file="$work/token"
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token_file")
export TOOLCAGE_HTTP_TOKEN
TOOLCAGE_HTTP_TOKEN="$(cat "$token_file")"
proxy_name="mcp.service.test"

declare -A port=([r1]="$(free_port)" [r2]="$(free_port)")
store=""       # redis://... when the replicas use the store
generation=0   # a new state directory per start: a replica with a fresh disk

# start_replica NAME: `serve --http` on its port, its own state directory,
# audit records on stdout ($work/NAME.GEN.audit), --store when $store is set.
start_replica() {
  local name="$1"
  generation=$((generation + 1))
  local tag="$name.$generation"
  local extra=()
  [ -n "$store" ] && extra=(--store "$store")
  XDG_STATE_HOME="$work/state-$tag" "$bin" -C "$project" serve --http "127.0.0.1:${port[$name]}" \
    --policy "$work/serve.toml" --no-watch --token-file "$token_file" --allow-host "$proxy_name" \
    --env "REPLICA=$name" --drain 5s "${extra[@]}" \
    </dev/null >"$work/$tag.audit" 2>"$work/$tag.log" &
  pids[$name]=$!
  state[$name]="$work/state-$tag"
  audit[$name]="$work/$tag.audit"
  wait_ok "http://127.0.0.1:${port[$name]}/readyz" || { cat "$work/$tag.log"; return 1; }
}
declare -A state=() audit=()

# --- HAProxy: sticky (the README's config), plain (control), one replica --
fe_sticky="$(free_port)" fe_plain="$(free_port)" fe_one="$(free_port)"
cat >"$work/haproxy.cfg" <<CFG
global
    maxconn 512
    stats socket $work/haproxy.sock mode 600 level admin
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    option redispatch
    retries 2
frontend sticky
    bind 127.0.0.1:$fe_sticky
    default_backend sticky
frontend plain
    bind 127.0.0.1:$fe_plain
    default_backend plain
frontend one
    bind 127.0.0.1:$fe_one
    default_backend one
backend sticky
    balance roundrobin
    stick-table type string len 64 size 10k expire 30m
    stick on req.hdr(Mcp-Session-Id)
    stick store-response res.hdr(Mcp-Session-Id)
    option httpchk GET /readyz
    http-request set-header Host $proxy_name
    server r1 127.0.0.1:${port[r1]} check inter 300ms fall 1 rise 2
    server r2 127.0.0.1:${port[r2]} check inter 300ms fall 1 rise 2
backend plain
    balance roundrobin
    http-request set-header Host $proxy_name
    server r1 127.0.0.1:${port[r1]}
    server r2 127.0.0.1:${port[r2]}
backend one
    http-request set-header Host $proxy_name
    server r1 127.0.0.1:${port[r1]} check inter 300ms
CFG
haproxy -c -q -f "$work/haproxy.cfg" || { echo "FAIL: haproxy.cfg does not parse"; exit 1; }
sticky="http://127.0.0.1:$fe_sticky/mcp"
plain="http://127.0.0.1:$fe_plain/mcp"
one="http://127.0.0.1:$fe_one/mcp"

haproxy_cmd() {
  "$py" - "$work/haproxy.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while chunk := s.recv(65536):
    out += chunk
print(out.decode(), end="")
PY
}
# wait_server NAME UP|DOWN: until HAProxy's health check says so (bounded).
wait_server() {
  for _ in $(seq 1 100); do
    [ "$(haproxy_cmd "show stat" | awk -F, -v s="$1" '$1 == "sticky" && $2 == s { print $18 }')" = "$2" ] && return 0
    sleep 0.1
  done
  echo "HAProxy never saw $1 $2"
  return 1
}
start_haproxy() {
  haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
  pids[haproxy]=$!
  for _ in $(seq 1 100); do [ -S "$work/haproxy.sock" ] && return 0; sleep 0.05; done
  echo "haproxy did not start"; cat "$work/haproxy.log"; return 1
}
# start_both: both replicas, once HAProxy's health checks see them.
start_both() {
  start_replica r1 && start_replica r2 && wait_server r1 UP && wait_server r2 UP
}
# SERVICE_PHASES (default: all) runs some of the phases, e.g. "store".
phase() { [[ " ${SERVICE_PHASES:-local store kill pod bench} " == *" $1 "* ]]; }

# Final audit records (not `started`) of TOOL in the file FILE.
audit_count() {
  "$py" - "$1" "$2" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        rec = json.loads(line)
    except ValueError:
        continue
    if rec.get("tool") == sys.argv[2] and rec.get("phase", rec.get("event")) != "started":
        n += 1
print(n)
PY
}

# approve_on NAME: what an operator does on that replica's machine.
approve_on() {
  local name="$1" extra=()
  [ -n "$store" ] && extra=(--store "$store")
  local digest
  digest="$(XDG_STATE_HOME="${state[$name]}" "$bin" -C "$project" upstreams show notes --json \
    --policy "$work/cli.toml" "${extra[@]}" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["digest"])')"
  XDG_STATE_HOME="${state[$name]}" "$bin" -C "$project" upstreams approve notes --digest "$digest" \
    --policy "$work/cli.toml" "${extra[@]}"
}

start_haproxy || exit 1
if phase local; then
echo "-- replicas without a shared store, HAProxy in front"
start_both || exit 1

echo "-- Host: only the proxy's name (--allow-host) and loopback are accepted"
code() {
  curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:${port[r1]}/mcp" -H "Host: $1" \
    -H "Authorization: Bearer $TOOLCAGE_HTTP_TOKEN" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}'
}
c="$(code "$proxy_name")"; [ "$c" = 200 ] && pass "host-allowed ($c)" || fail "host-allowed: HTTP $c for $proxy_name"
c="$(code other.test)"; [ "$c" = 403 ] && pass "host-other-refused ($c)" || fail "host-other-refused: HTTP $c for other.test"

echo "-- sessions stick to their replica (stick table on Mcp-Session-Id)"
scenario sticky "$sticky" 6
learned="$(haproxy_cmd "show table sticky" | grep -c 'key=')"
[ "$learned" -ge 6 ] && pass "stick-table-learned ($learned ids)" || fail "stick-table-learned: $learned ids"
echo "-- control: the same replicas behind round robin without the stick table"
scenario unstuck "$plain"

echo "-- rate limit 4/min without --store: each replica counts alone"
scenario limit "$sticky" tick 10 8 alone

echo "-- approval without --store: honoured only on the replica that approved"
scenario listed "$sticky" "r1=Keep a note for this session (v1)" "r2=Keep a note for this session (v1)"
echo "Keep a note for this session (v2)" >"$project/notes-desc.txt"
scenario listed "$sticky" r1=held r2=held
approve_on r1 || fail "approve on r1"
scenario listed "$sticky" "r1=Keep a note for this session (v2)" r2=held

stop r1; stop r2
fi

if ! phase store; then
  :
elif ! "$bin" serve --help | grep -q -- '--store'; then
  echo "SKIP the --store scenarios: this toolcage has no \`serve --store\` (\`serve --help\` does not list it)"
else
  echo "-- Redis, replicas with --store"
  echo "Keep a note for this session (v1)" >"$project/notes-desc.txt"
  redis_port="$(free_port)"
  start_redis() {
    redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
      >"$work/redis.log" 2>&1 &
    pids[redis]=$!
    for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && return 0; sleep 0.05; done
    echo "redis did not start"; cat "$work/redis.log"; return 1
  }
  start_redis || exit 1
  store="redis://127.0.0.1:$redis_port/0"
  start_both || exit 1

  echo "-- rate limit 4/min with --store: exactly 4 of 10 across both replicas"
  scenario limit "$sticky" tick 10 4 shared

  echo "-- approval with --store: approved on r1, honoured on r2"
  scenario listed "$sticky" "r1=Keep a note for this session (v1)" "r2=Keep a note for this session (v1)"
  echo "Keep a note for this session (v2)" >"$project/notes-desc.txt"
  scenario listed "$sticky" r1=held r2=held
  approve_on r1 || fail "approve on r1 (store)"
  scenario listed "$sticky" "r1=Keep a note for this session (v2)" "r2=Keep a note for this session (v2)"

  echo "-- Redis stopped: limited calls fail closed; back: they run"
  stop redis
  # The replica itself: limited calls refused, others run.
  scenario store_down "http://127.0.0.1:${port[r1]}/mcp"
  # /readyz stays 200 and says the store is degraded: the store is every
  # replica's, so marking them down would stop the unlimited calls too.
  # /readyz keeps its answer 5 s: ask until it changes (at most 15 s).
  for _ in $(seq 1 30); do
    body="$(curl -s -w ' %{http_code}' "http://127.0.0.1:${port[r1]}/readyz" | tr -d '\n')"
    [[ "$body" == *degraded*200 ]] && break
    sleep 0.5
  done
  [[ "$body" == *degraded*200 ]] && pass "store-down-ready-degraded ($body)" || fail "store-down-ready-degraded: $body"
  wait_server r1 UP && wait_server r2 UP && pass "store-down-balancer-keeps-both-up" \
    || fail "store-down-balancer-keeps-both-up"
  start_redis || exit 1
  scenario recovers "$sticky" 20
  stop r1; stop r2
  store=""
fi

if phase kill; then
echo "-- a replica killed: new sessions go to the survivor, whose audit is whole"
start_both || exit 1
scenario calls "$sticky" 4 3 "$work/before.json"
stop r1 KILL
wait_server r1 DOWN || fail "HAProxy did not mark r1 down"
scenario only "$sticky" r2 4
scenario calls "$sticky" 2 3 "$work/after.json"
want="$("$py" -c 'import json,sys; print(sum(json.load(open(f)).get("r2", 0) for f in sys.argv[1:]) + 4)' \
  "$work/before.json" "$work/after.json")"
stop r2   # SIGTERM with --drain: ends with every record written
got="$(audit_count "${audit[r2]}" where)"
[ "$got" = "$want" ] && pass "survivor-audit-whole ($got records of $want answered calls)" \
  || fail "survivor-audit-whole: r2's audit has $got \`where\` records, it answered $want"
fi

if phase pod; then
echo "-- a pod's restrictions: user toolcage-test, namespaces refused by seccomp"
gcc -O2 -Wall -o "$work/nons" "$here/nons.c" || fail "build nons"
if [ "$(id -u)" = 0 ]; then
  id toolcage-test >/dev/null 2>&1 || useradd --system --no-create-home toolcage-test
  # Its own directory under /tmp, open to the user (the harness's work
  # directory is root's 0700 mktemp, which toolcage-test cannot enter).
  pod="$(mktemp -d /tmp/toolcage-pod.XXXXXX)"
  chmod 755 "$pod"
  mkdir -p "$pod/state"
  cp "$work/nons" "$pod/nons"
  cp "$bin" "$pod/toolcage"
  cp -a "$project" "$pod/project"
  cp "$token_file" "$pod/token"
  chown -R toolcage-test "$pod"
  chmod 755 "$work"
  pod_port="$(free_port)"
  runuser -u toolcage-test -- env HOME="$pod" XDG_STATE_HOME="$pod/state" TMPDIR="$pod" \
    "$pod/nons" "$pod/toolcage" -C "$pod/project" serve --http "127.0.0.1:$pod_port" \
    --token-file "$pod/token" --env REPLICA=pod </dev/null >"$work/pod.out" 2>"$work/pod.log" &
  pids[pod]=$!
  if wait_ok "http://127.0.0.1:$pod_port/readyz"; then
    pass "pod-readyz"
    "$pod/nons" unshare -U true 2>/dev/null && fail "nons let a user namespace through" \
      || pass "pod-control-namespaces-refused"
    scenario only "http://127.0.0.1:$pod_port/mcp" pod 1
    XDG_STATE_HOME="$pod/state" runuser -u toolcage-test -- env HOME="$pod" XDG_STATE_HOME="$pod/state" \
      "$pod/nons" "$pod/toolcage" -C "$pod/project" doctor | grep -E '^(user|namespaces|profile default)' \
      | tee "$work/pod-doctor"
    grep -q 'profile default *namespace-free' "$work/pod-doctor" && pass "pod-runs-namespace-free" \
      || fail "pod-runs-namespace-free"
  else
    cat "$work/pod.log"; fail "pod-readyz"
  fi
  stop pod
else
  echo "SKIP the pod run: needs root to run as toolcage-test"
fi
fi

if phase bench; then
echo "-- bench: 8 concurrent sessions over HAProxy, two replicas vs one"
start_both || exit 1
rate() { sed -n 's/^BENCH .*= \([0-9.]*\) calls\/s$/\1/p' <<<"$1"; }
out="$(timeout 600 "$py" "$here/python_service.py" bench "$sticky" 8 10)" || rc=1
echo "$out"
two="$(rate "$out")"
stop r2
out="$(timeout 600 "$py" "$here/python_service.py" bench "$one" 8 10)" || rc=1
echo "$out"
one_rate="$(rate "$out")"
if [ -n "$two" ] && [ -n "$one_rate" ]; then
  echo "BENCH two replicas $two calls/s, one replica $one_rate calls/s: ratio $("$py" -c "print(f'{$two/$one_rate:.2f}')") on $(nproc) cores"
fi
fi
exit $rc
