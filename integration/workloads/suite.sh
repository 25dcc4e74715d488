#!/usr/bin/env bash
# One user's part of the real-workload suite (integration/workloads.sh runs
# it as root and as the unprivileged user). For each workload: a control run
# without toolcage (the fixture itself passes), then the same steps under
# `toolcage exec --profile ci [preset flags]` normally and in namespace-free
# mode (under the nons launcher). Every sandboxed step must exit 0, print
# the workload's marker, and change nothing outside the project: not /tmp,
# not the user's home, not the directory around the project.
#
# Environment (set by workloads.sh): WL_BIN (toolcage), WL_NONS (launcher),
# WL_SRC (fixtures), WL_AREA (this user's scratch dir), WL_RESULTS (result
# lines are appended there), WL_NSFREE_REQUIRED (1: namespace-free runs are
# required; 0: expected to fail until toolcage runs there).
set -uo pipefail
bin="$WL_BIN"
nons="$WL_NONS"
src="$WL_SRC"
area="$WL_AREA"
results="$WL_RESULTS"
user="$(id -un)"
syspath=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
logs="$area/logs"
controls="$area/controls"
mkdir -p "$logs" "$controls/home" "$controls/tmp"
stamp="$logs/stamp"

# The message of a toolcage that cannot run without namespaces (main today).
nsfree_known='sandbox setup failed at clone (namespaces)'

result() { # STATUS WORKLOAD MODE DETAIL
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$user" "$2" "$3" "$4" >>"$results"
  echo "   $1: $4"
}

# --- workloads: fixture dir, steps (one toolcage call each), the marker
# the last step prints, and what must exist in the project afterwards.
workloads=(c rust python node git-new git-checkout)
declare -A fixture=([c]=c [rust]=rust [python]=python [node]=node [git-new]=git [git-checkout]=git)
declare -A steps=(
  [c]="make|make test"
  [rust]="cargo build --offline|cargo test --offline"
  [python]="python3 -m pytest -q"
  [node]="npm test"
  [git-new]="sh new-repo.sh"
  [git-checkout]="sh checkout.sh"
)
declare -A marker=(
  [c]="make test: passed"
  [rust]="test result: ok. 1 passed"
  [python]="3 passed"
  [node]="npm test: passed"
  [git-new]="git init/add/commit/log: passed"
  [git-checkout]="git log/describe/status/diff in a checkout: passed"
)
declare -A product=([c]=hello [rust]=target/debug/workload)

# --- the rust toolchain. rustup's lives in home, which the sandbox cannot
# read without a grant; a system toolchain (Debian's cargo, used by the
# unprivileged user) needs no flag.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
rust_path="$syspath"
rflags=()
rust_flags() {
  if [ -x "$cargo_home/bin/cargo" ]; then
    rust_path="$cargo_home/bin:$syspath"
    rflags=(--with rust)
  fi
}
rust_flags

# Why a workload cannot run here (empty: it can).
missing() {
  local p="$syspath"
  [ "$1" = rust ] && p="$rust_path"
  case "$1" in
    c) PATH="$p" command -v gcc >/dev/null && PATH="$p" command -v make >/dev/null || echo "gcc or make not installed" ;;
    rust) PATH="$p" command -v cargo >/dev/null || echo "no cargo in $cargo_home/bin or on $syspath (install Debian's cargo)" ;;
    python) PATH="$p" python3 -c 'import pytest' 2>/dev/null || echo "python3 on $syspath has no pytest (install python3-pytest)" ;;
    node) PATH="$p" command -v npm >/dev/null || echo "npm not installed" ;;
    git-*) PATH="$p" command -v git >/dev/null || echo "git not installed" ;;
  esac
}

# A fresh project for workload $1, run $2 (control, normal, nsfree).
fresh_project() {
  proj="$area/$1-$2"
  rm -rf "$proj"
  cp -r "$src/${fixture[$1]}" "$proj"
  if [ "$1" = git-checkout ]; then
    # The checkout a CI runner makes before the job (outside toolcage).
    local -a g=(env HOME="$controls/home" GIT_AUTHOR_DATE=2020-01-01T00:00:00Z
      GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
      git -C "$proj" -c user.name=CI -c user.email=ci@example.invalid)
    { "${g[@]}" init -q && "${g[@]}" add -A && "${g[@]}" commit -q -m "release 1.0" &&
      "${g[@]}" tag v1.0; } >/dev/null
  fi
}

# Everything changed outside the project since the stamp: /tmp, home and
# the area around the project (less the suite's own logs and controls).
# The roots' and toolcage's runtime dir's own mtimes are left out: a new
# entry in them is listed itself.
# With WL_HOME_UPPER (the upper layer of an overlay on home, where every
# write under home lands) only that is searched, so that what the rest of
# the machine writes to the real home does not count.
home_watch="${WL_HOME_UPPER:-$HOME}"
outside_changes() {
  find /tmp "$home_watch" "$area" -xdev \
    \( -path "$proj" -o -path "$logs" -o -path "$controls" \) -prune -o \
    -newer "$stamp" -print 2>/dev/null |
    grep -vxF -e /tmp -e "$home_watch" -e "$area" -e "/tmp/.toolcage-$(id -u)" |
    sed "s|^$home_watch/|$HOME/|" | sort -u
  return 0 # find fails on what this user cannot read (root's runtime dir)
}

# Whether outside_changes lists exactly the path $1.
sees() { grep -qxF -- "$1" <<<"$(outside_changes)"; }

# Start watching: the stamp is older than anything written after this
# returns (file times have the kernel's coarse clock, ticks up to 10 ms).
mark() {
  touch "$stamp"
  sleep 0.02
}

# Run the steps of workload $1 in mode $2; 0 when all passed.
run_steps() {
  local w="$1" mode="$2" log="$logs/$1-$2.log" step argv rc
  local -a flags=() pre=()
  local path="$syspath"
  if [ "$w" = rust ]; then
    flags=("${rflags[@]}")
    path="$rust_path"
  fi
  [ "$mode" = nsfree ] && pre=("$nons")
  : >"$log"
  IFS='|' read -ra list <<<"${steps[$w]}"
  for step in "${list[@]}"; do
    read -ra argv <<<"$step"
    if [ "$mode" = control ]; then
      echo "   \$ $step" | tee -a "$log"
      # Its own home and temp dir, outside what the sandboxed runs check.
      local -a toolchain=()
      [ "$path" != "$syspath" ] && toolchain=(CARGO_HOME="$cargo_home" RUSTUP_HOME="$rustup_home")
      (cd "$proj" && env PATH="$path" HOME="$controls/home" TMPDIR="$controls/tmp" \
        "${toolchain[@]}" "${argv[@]}") >>"$log" 2>&1
      rc=$?
    else
      echo "   \$ ${pre[*]:+nons }toolcage exec --profile ci ${flags[*]}${flags[*]:+ }-- $step" | tee -a "$log"
      mark
      (cd "$proj" && env -u TMPDIR PATH="$path" "${pre[@]}" "$bin" exec --profile ci "${flags[@]}" -- "${argv[@]}") >>"$log" 2>&1
      rc=$?
      local changed
      changed="$(outside_changes)"
      if [ -n "$changed" ]; then
        echo "   written outside the project by: $step" >>"$log"
        mapfile -t lines <<<"$changed"
        printf '     %s\n' "${lines[@]}" >>"$log"
        why="wrote outside the project: $(head -n1 <<<"$changed")"
        return 1
      fi
    fi
    if [ $rc -ne 0 ]; then
      why="'$step' exited $rc"
      return 1
    fi
  done
  if ! grep -qF -- "${marker[$w]}" "$log"; then
    why="no '${marker[$w]}' in the output"
    return 1
  fi
  if [ -n "${product[$w]:-}" ] && [ ! -x "$proj/${product[$w]}" ]; then
    why="${product[$w]} was not built as an executable"
    return 1
  fi
  return 0
}

show_log() { sed 's/^/     | /' "$logs/$1-$2.log" | tail -n 30; }

# --- namespace-free mode: can this toolcage run under the launcher?
nsfree_state=required
probe_dir="$area/probe"
mkdir -p "$probe_dir"
(cd "$probe_dir" && env -u TMPDIR PATH="$syspath" "$bin" exec --profile ci -- true) >"$logs/probe.log" 2>&1 ||
  { echo "toolcage exec --profile ci -- true fails as $user:"; cat "$logs/probe.log"; }
if [ "${WL_NSFREE_REQUIRED:-0}" != 1 ]; then
  if (cd "$probe_dir" && env -u TMPDIR PATH="$syspath" "$nons" "$bin" exec --profile ci -- true) >"$logs/nsfree-probe.log" 2>&1; then
    echo "-- namespace-free mode: toolcage runs under the launcher; its runs are required"
  elif grep -qF "$nsfree_known" "$logs/nsfree-probe.log"; then
    nsfree_state=expected-fail
    echo "-- namespace-free mode: not in this toolcage yet ($(head -n1 "$logs/nsfree-probe.log")); its runs are EXPECTED-FAIL"
  else
    echo "-- namespace-free mode: toolcage -- true fails under the launcher with an unknown error; its runs are required:"
    sed 's/^/     | /' "$logs/nsfree-probe.log"
  fi
fi

# --- the check itself sees a write outside the project: in /tmp, in home
# and beside the project (the last by a sandboxed call granted that dir).
echo "-- the outside-the-project check sees writes there"
proj="$area/detector"
beside="$area/beside"
mkdir -p "$proj" "$beside"
for f in "/tmp/.workloads-detector-$$" "$HOME/.workloads-detector-$$"; do
  mark
  touch "$f"
  if sees "$f"; then
    echo "   ok: sees $f"
  else
    result FAILED detector - "the check does not see $f"
  fi
  rm -f "$f"
done
mark
(cd "$proj" && env -u TMPDIR PATH="$syspath" "$bin" exec --profile ci --write "$beside" -- touch "$beside/x") >"$logs/detector.log" 2>&1
if sees "$beside/x"; then
  echo "   ok: sees $beside/x, written by a call granted --write $beside"
else
  cat "$logs/detector.log"
  result FAILED detector - "the check does not see $beside/x written by a granted call"
fi
rm -rf "$proj" "$beside"

# --- no network: with the flags the workloads use, a connection to a
# listener on the host's loopback fails under toolcage; the control makes
# the same connection without it.
connect_py='import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    print("CONNECTED")
except OSError as e:
    print("REFUSED:" + type(e).__name__)'
listen_py='import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
time.sleep(300)'
coproc LISTENER { PATH="$syspath" exec python3 -c "$listen_py"; }
listener=$LISTENER_PID # bash unsets it as soon as the listener is reaped
read -r port <&"${LISTENER[0]}"
echo
echo "== [$user] network"
if [ "$(PATH="$syspath" python3 -c "$connect_py" "$port")" != CONNECTED ]; then
  result FAILED network control "cannot connect to 127.0.0.1:$port without toolcage"
else
  result PASS network control "127.0.0.1:$port reachable without toolcage"
  for mode in normal nsfree; do
    pre=()
    [ "$mode" = nsfree ] && pre=("$nons")
    for set in plain rust; do
      fl=()
      if [ "$set" = rust ]; then
        [ ${#rflags[@]} -gt 0 ] || continue
        fl=("${rflags[@]}")
      fi
      got="$(cd "$probe_dir" && env -u TMPDIR PATH="$syspath" "${pre[@]}" "$bin" exec --profile ci "${fl[@]}" -- python3 -c "$connect_py" "$port" 2>&1)"
      what="toolcage exec --profile ci ${fl[*]}${fl[*]:+ }-- connect 127.0.0.1:$port"
      # The probe's answer is its own line; toolcage's notes on stderr
      # (namespace-free: "ran degraded: ...") come with it and would break
      # the one-line result.
      answer="$(grep -m1 -e '^REFUSED:' -e '^CONNECTED$' <<<"$got")"
      if [[ "$answer" == REFUSED:* ]]; then
        result PASS network "$mode" "$what: ${answer#REFUSED:}"
      elif [ "$mode" = nsfree ] && [ "$nsfree_state" = expected-fail ] && [[ "$got" == *"$nsfree_known"* ]]; then
        result EXPECTED-FAIL network "$mode" "$nsfree_known"
      else
        result FAILED network "$mode" "$what: $got"
      fi
    done
  done
fi
kill "$listener" 2>/dev/null
wait "$listener" 2>/dev/null

for w in "${workloads[@]}"; do
  echo
  echo "== [$user] $w"
  why="$(missing "$w")"
  if [ -n "$why" ]; then
    for mode in control normal nsfree; do result SKIP "$w" "$mode" "$why"; done
    continue
  fi
  fresh_project "$w" control
  SECONDS=0
  if ! run_steps "$w" control; then
    show_log "$w" control
    result FAILED "$w" control "the fixture fails without toolcage: $why"
    for mode in normal nsfree; do result SKIP "$w" "$mode" "its control failed"; done
    continue
  fi
  result PASS "$w" control "without toolcage (${SECONDS}s)"
  for mode in normal nsfree; do
    fresh_project "$w" "$mode"
    SECONDS=0
    if run_steps "$w" "$mode"; then
      result PASS "$w" "$mode" "under toolcage, ${mode/nsfree/namespace-free} mode (${SECONDS}s)"
    elif [ "$mode" = nsfree ] && [ "$nsfree_state" = expected-fail ] && grep -qF "$nsfree_known" "$logs/$w-$mode.log"; then
      result EXPECTED-FAIL "$w" "$mode" "$nsfree_known"
    else
      show_log "$w" "$mode"
      result FAILED "$w" "$mode" "$why"
    fi
    if [ "$w" = git-new ] && [ "$mode" != control ]; then
      # A .git the call created is a protected path: toolcage moves it aside.
      grep -F 'protected path' "$logs/$w-$mode.log" | sed 's/^/   note: /'
    fi
  done
done
exit 0
