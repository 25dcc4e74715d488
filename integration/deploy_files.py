"""Checks deploy/: every Kubernetes manifest parses (PyYAML; no kubectl
here) and says what README "Deploying" promises, the policy and tools in
the ConfigMaps load in the real binary, and the Containerfile runs as a
non-root user on the ports the manifests name.

Usage: deploy_files.py BIN REPO
Prints one PASS/FAIL line per check; exits 1 if any failed.
"""

import glob
import os
import re
import subprocess
import sys
import tempfile

import yaml

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + str(detail) if detail and not ok else ''}", flush=True)


def seconds(dur):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", dur)
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def arg_after(args, flag):
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def main():
    binary, repo = sys.argv[1], sys.argv[2]
    k8s = os.path.join(repo, "deploy", "k8s")
    docs = {}
    for path in sorted(glob.glob(os.path.join(k8s, "*.yaml"))):
        try:
            parsed = [d for d in yaml.safe_load_all(open(path, encoding="utf-8")) if d is not None]
        except yaml.YAMLError as e:
            check(f"parses-{os.path.basename(path)}", False, e)
            continue
        check(f"parses-{os.path.basename(path)}", all("kind" in d for d in parsed))
        for d in parsed:
            docs[(d["kind"], d.get("metadata", {}).get("name"))] = d

    kust = docs.get(("Kustomization", None), {})
    listed = set(kust.get("resources", []))
    files = {os.path.basename(p) for p in glob.glob(os.path.join(k8s, "*.yaml"))} - {"kustomization.yaml"}
    check("kustomization-lists-every-file", listed == files, f"{sorted(listed)} vs {sorted(files)}")

    dep = docs.get(("Deployment", "toolcage"))
    check("deployment", dep is not None)
    if dep is None:
        return
    pod = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    check("deployment-selector-matches", dep["spec"]["selector"]["matchLabels"].items() <= labels.items())
    c = next(x for x in pod["containers"] if x["name"] == "toolcage")
    args = c["args"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    http = arg_after(args, "--http")
    check("serves-http-on-the-mcp-port", http == [f"0.0.0.0:{ports['mcp']}"], f"{http} {ports}")
    check("readiness-readyz", c["readinessProbe"]["httpGet"]["path"] == "/readyz", c.get("readinessProbe"))
    check("liveness-healthz", c["livenessProbe"]["httpGet"]["path"] == "/healthz", c.get("livenessProbe"))
    psc = pod["securityContext"]
    check("run-as-non-root", psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) != 0, psc)
    check("seccomp-runtime-default", psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", psc)
    for ctr in pod["containers"] + pod.get("initContainers", []):
        sc = ctr.get("securityContext", {})
        check(f"{ctr['name']}-no-privilege-escalation",
              sc.get("allowPrivilegeEscalation") is False and not sc.get("privileged", False)
              and sc.get("capabilities", {}).get("drop") == ["ALL"] and not sc.get("capabilities", {}).get("add"),
              sc)
    drain = arg_after(args, "--drain")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    check("grace-above-drain", len(drain) == 1 and grace > seconds(drain[0]), f"grace {grace}, drain {drain}")

    # --store names the Redis Service.
    store = arg_after(args, "--store")
    rsvc = docs.get(("Service", "toolcage-redis"))
    rdep = docs.get(("Deployment", "toolcage-redis"))
    check("redis-deployment-and-service", rsvc is not None and rdep is not None)
    if store and rsvc:
        m = re.fullmatch(r"rediss?://([^:/]+):(\d+)(/\d+)?", store[0])
        check("store-is-the-redis-service", m is not None and m.group(1) == "toolcage-redis"
              and int(m.group(2)) == rsvc["spec"]["ports"][0]["port"], store)
        rlabels = rdep["spec"]["template"]["metadata"]["labels"]
        check("redis-service-selects-redis", rsvc["spec"]["selector"].items() <= rlabels.items())
    else:
        check("deployment-uses-store", False, args)

    svc = docs.get(("Service", "toolcage"))
    check("service-selects-toolcage", svc is not None and svc["spec"]["selector"].items() <= labels.items())
    check("service-targets-mcp", svc is not None and svc["spec"]["ports"][0]["targetPort"] in ("mcp", ports["mcp"]))
    pdb = docs.get(("PodDisruptionBudget", "toolcage"))
    check("pdb-selects-toolcage", pdb is not None
          and pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
          and pdb["spec"].get("minAvailable", 0) >= 1)

    # Every volume a container mounts exists, and the ConfigMaps load in the
    # real binary: the policy (toolcage policy) and the tools (check).
    vols = {v["name"]: v for v in pod["volumes"]}
    for ctr in pod["containers"] + pod.get("initContainers", []):
        for m in ctr.get("volumeMounts", []):
            check(f"{ctr['name']}-mount-{m['name']}", m["name"] in vols)
    cm_policy = docs.get(("ConfigMap", "toolcage-policy"))
    cm_project = docs.get(("ConfigMap", "toolcage-project"))
    check("configmaps", cm_policy is not None and cm_project is not None)
    with tempfile.TemporaryDirectory() as tmp:
        project = os.path.join(tmp, "project")
        os.mkdir(project)
        for name, text in cm_project["data"].items():
            open(os.path.join(project, name), "w", encoding="utf-8").write(text)
        policy = os.path.join(tmp, "policy.toml")
        open(policy, "w", encoding="utf-8").write(cm_policy["data"]["policy.toml"])
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state"))
        r = subprocess.run([binary, "-C", project, "policy", "--policy", policy],
                           capture_output=True, text=True, env=env, timeout=60)
        check("configmap-policy-loads", r.returncode == 0, r.stderr[-500:])
        r = subprocess.run([binary, "-C", project, "check", "--policy", policy],
                           capture_output=True, text=True, env=env, timeout=60)
        check("configmap-tools-load", r.returncode == 0 and "0 errors" in r.stdout, (r.stdout + r.stderr)[-500:])
        # Every serve flag the Deployment passes exists in this binary.
        r = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=60)
        flags = {a for a in args if a.startswith("--")}
        missing = sorted(f for f in flags if f"{f} " not in r.stdout and f"{f}\n" not in r.stdout)
        check("deployment-flags-exist", not missing, f"not in `serve --help`: {missing}")

    cf = open(os.path.join(repo, "deploy", "Containerfile"), encoding="utf-8").read()
    users = re.findall(r"^USER\s+(\S+)", cf, re.M)
    uid = users[-1].split(":")[0] if users else "0"
    check("containerfile-user-non-root", uid.isdigit() and int(uid) != 0
          and int(uid) == psc.get("runAsUser"), f"USER {users}, runAsUser {psc.get('runAsUser')}")
    exposed = {int(p) for p in re.findall(r"^EXPOSE\s+(.*)$", cf, re.M)[0].split()}
    check("containerfile-exposes-ports", set(ports.values()) <= exposed, f"{exposed} vs {ports}")
    check("containerfile-multi-stage-static", "AS build" in cf and "crt-static" in cf
          and "--from=build" in cf)


if __name__ == "__main__":
    main()
    print(f"deploy files: {sum(results)} passed, {len(results) - sum(results)} failed")
    sys.exit(0 if all(results) else 1)
