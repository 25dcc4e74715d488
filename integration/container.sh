#!/usr/bin/env bash
# deploy/Containerfile's runtime stage, built and run with podman from
# Debian (installed by install.sh). Usage: container.sh BIN WORKDIR
#
# No registry is reachable from CI, so neither base image can be pulled:
# the `build` stage is given as a build context holding the host-built BIN
# in the stage's /out layout (`--build-context build=DIR`, which replaces
# the stage), and RUNTIME_IMAGE is a local image of busybox-static plus the
# shared libraries BIN needs. Everything else (user 10001, HOME, state
# directory, entrypoint) is the Containerfile's. The image then runs as a
# pod runs it: read-only root, every capability dropped, no-new-privileges,
# a writable /tmp and state directory, and either podman's default seccomp
# profile or one that refuses namespaces as containerd's RuntimeDefault
# does; /readyz, `doctor` and a tool call over MCP must work in both.
#
# This machine's quirks (cgroup v1/v2 hybrid: crun refuses it; a hard
# RLIMIT_NOFILE/NPROC below podman's defaults): podman runs with
# --runtime runc and explicit --ulimit. When podman cannot run a container
# at all, the reason is printed and the run is skipped (exit 0): the
# service test's pod run (service.sh) covers the same restrictions without
# a container.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
py="$here/.deps/venv/bin/python"
bin="$1"
work="$2"
mkdir -p "$work"

if [ "$(id -u)" != 0 ]; then echo "SKIP the container run: needs root (rootful podman)"; exit 0; fi
for cmd in podman runc busybox; do
  command -v "$cmd" >/dev/null || { echo "SKIP the container run: $cmd is missing (integration/install.sh installs it)"; exit 0; }
done
pod=(podman --runtime runc)
run=("${pod[@]}" run --rm --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
tag="localhost/toolcage:ci-$$"
base="localhost/toolcage-ci-base:$$"
cid=""
cleanup() {
  [ -n "$cid" ] && "${pod[@]}" rm -f "$cid" >/dev/null 2>&1
  "${pod[@]}" rmi -f "$tag" "$base" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rc=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; rc=1; }

# Can podman run anything here? (a scratch image with busybox)
probe="$work/probe"
mkdir -p "$probe"
cp "$(command -v busybox)" "$probe/busybox"
printf 'FROM scratch\nCOPY busybox /bin/busybox\nUSER 10001:10001\nENTRYPOINT ["/bin/busybox", "id", "-u"]\n' >"$probe/Containerfile"
if ! out="$("${pod[@]}" build -q -t "$base" "$probe" 2>&1 && "${run[@]}" "$base" 2>&1)" || [ "$(tail -n1 <<<"$out")" != 10001 ]; then
  echo "SKIP the container run: podman cannot run a container here:"
  echo "$out" | tail -n5
  exit 0
fi
"${pod[@]}" rmi -f "$base" >/dev/null 2>&1

echo "-- a base image without a registry: busybox-static and the libraries of the binary"
rootfs="$work/rootfs"
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
chmod 1777 "$rootfs/tmp"   # as in Debian; podman copies it up into the tmpfs
cp "$(command -v busybox)" "$rootfs/bin/busybox"
for app in sh cat echo ls id hostname env true; do ln -sf busybox "$rootfs/bin/$app"; done
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
printf 'root:x:0:0::/root:/bin/sh\ntoolcage:x:10001:10001::/home/toolcage:/bin/sh\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\ntoolcage:x:10001:\n' >"$rootfs/etc/group"
tar -C "$rootfs" -cf "$work/rootfs.tar" . && "${pod[@]}" import -q "$work/rootfs.tar" "$base" >/dev/null \
  || { fail "podman import of the base"; exit 1; }

echo "-- podman build deploy/Containerfile --target runtime (build stage: the host's binary)"
ctx="$work/build-stage"
mkdir -p "$ctx/out/usr/local/bin" "$ctx/out/var/lib/toolcage" "$ctx/out/home/toolcage" "$ctx/out/project"
strip -o "$ctx/out/usr/local/bin/toolcage" "$bin" 2>/dev/null || cp "$bin" "$ctx/out/usr/local/bin/toolcage"
empty="$work/context"
mkdir -p "$empty"
if "${pod[@]}" build -f "$root/deploy/Containerfile" --target runtime --build-context "build=$ctx" \
    --build-arg "RUNTIME_IMAGE=$base" -t "$tag" "$empty" >"$work/build.log" 2>&1; then
  pass "image-built"
else
  tail -n 20 "$work/build.log"; fail "image-built"; exit 1
fi
user="$("${pod[@]}" image inspect -f '{{.Config.User}}' "$tag")"
[ "$user" = 10001:10001 ] && pass "image-user-non-root ($user)" || fail "image-user-non-root: $user"
out="$("${run[@]}" --entrypoint /bin/id "$tag" 2>&1)"
grep -q 'uid=10001' <<<"$out" && pass "runs-as-10001" || fail "runs-as-10001: $out"

# A seccomp profile as containerd's RuntimeDefault is to namespaces:
# podman's default without unshare, setns and mount, clone only without
# CLONE_NEW* flags, clone3 ENOSYS (so libc falls back to clone).
"$py" - /usr/share/containers/seccomp.json "$work/runtime-default.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
gone = {"unshare", "setns", "mount", "clone", "clone3"}
for rule in p["syscalls"]:
    if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("includes") and not rule.get("args"):
        rule["names"] = [n for n in rule["names"] if n not in gone]
new_ns = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
p["syscalls"].append({"names": ["clone"], "action": "SCMP_ACT_ALLOW",
                      "args": [{"index": 0, "value": new_ns, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]})
p["syscalls"].append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38})
json.dump(p, open(sys.argv[2], "w"))
PY

project="$work/project"
mkdir -p "$project"
cp "$here/service/tools.toml" "$project/"
cat >"$work/policy.toml" <<'TOML'
[sandbox]
namespace_free = "allow"
TOML
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token")
chown 10001:10001 "$work/token"
export TOOLCAGE_HTTP_TOKEN
TOOLCAGE_HTTP_TOKEN="$(cat "$work/token")"

# serve_in NAME SECCOMP_PROFILE MODE runs|refused [PODMAN_OPTION...]: the image as
# a pod runs it; checks doctor says MODE, /readyz, and that a call runs (or
# is refused, failing closed) over MCP with the Python SDK.
serve_in() {
  local name="$1" seccomp="$2" want_mode="$3" scenario="$4"
  shift 4
  local extra=("$@")
  mkdir -p "$work/state-$name" && chown 10001:10001 "$work/state-$name" && chmod 700 "$work/state-$name"
  local port
  port="$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  local pod_opts=(--network host --read-only --tmpfs /tmp:rw,mode=1777 -v "$work/state-$name:/var/lib/toolcage"
    --cap-drop all --security-opt no-new-privileges --security-opt "seccomp=$seccomp"
    -v "$project:/project:ro" -v "$work/policy.toml:/etc/toolcage/policy.toml:ro" -v "$work/token:/run/toolcage/token:ro"
    "${extra[@]}")
  local doctor
  doctor="$("${run[@]}" "${pod_opts[@]}" "$tag" -C /project doctor 2>&1)"
  echo "$doctor" | grep -E '^(kernel|user|landlock|seccomp|namespaces|profile default)'
  grep -q "^profile default *$want_mode" <<<"$doctor" && pass "$name-doctor-$want_mode" \
    || { fail "$name-doctor-$want_mode"; echo "$doctor" | tail -n 20; }
  cid="$("${run[@]}" -d "${pod_opts[@]}" --env REPLICA=container "$tag" -C /project serve --http "127.0.0.1:$port" \
    --policy /etc/toolcage/policy.toml --token-file /run/toolcage/token --drain 5s --env REPLICA)" || { fail "$name-start"; return; }
  # /readyz: 200 where calls run, 503 where they fail closed (its trial
  # call fails as theirs do).
  local code="" want=200
  [ "$scenario" = refused ] && want=503
  for _ in $(seq 1 200); do
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")"
    [ "$code" = "$want" ] && break
    sleep 0.05
  done
  [ "$code" = "$want" ] && pass "$name-readyz-$want" || { fail "$name-readyz: HTTP $code, not $want"; "${pod[@]}" logs "$cid" | tail; }
  local args=(only "http://127.0.0.1:$port/mcp" container 1)
  [ "$scenario" = refused ] && args=(refused "http://127.0.0.1:$port/mcp")
  timeout 120 "$py" "$here/python_service.py" "${args[@]}" \
    || { rc=1; "${pod[@]}" logs "$cid" 2>&1 | tail -n 20; }
  # SIGTERM, as the kubelet stops a pod: with --drain, exit 0.
  "${pod[@]}" stop -t 10 "$cid" >/dev/null 2>&1
  cid=""
}

echo "-- podman's default seccomp profile (namespaces allowed), /proc unmasked"
# A call's fresh /proc can only be mounted where no part of the container's
# /proc is covered: podman masks /proc/kcore and others (Kubernetes too,
# unless procMount: Unmasked), and the kernel then refuses the mount.
serve_in podman-default /usr/share/containers/seccomp.json namespaces runs --security-opt unmask=/proc/*
echo "-- the same with podman's /proc masks: calls fail closed"
# (doctor does not see this: its probe creates the namespaces but mounts no
# /proc; /readyz's trial call does, so it is 503 with the reason; the call
# itself is refused, never run unsandboxed)
serve_in podman-masked /usr/share/containers/seccomp.json namespaces refused
echo "-- a RuntimeDefault-like seccomp profile (namespaces refused)"
serve_in runtime-default "$work/runtime-default.json" namespace-free runs
exit $rc
