#!/usr/bin/env python3
"""The API server's CPU per admission for each exported ValidatingAdmissionPolicy, on
hostile pods that grow one list a tenant controls to a given body size.

Starts a sandbox with no webhook (SANDBOX_WEBHOOK=0), then for each policy of the export
(applied alone, with its binding) and each shape and size sends `kubectl create
--dry-run=server` of the pod and reads kube-apiserver's CPU time (utime + stime of its
process, /proc/PID/stat) before and after. Prints one row per policy, shape and size:
the verdict (admitted, or refused and by what) and the CPU in milliseconds (the median of
REPEAT requests, less the median of a 1 KiB pod's). A benchmark, not a test:
docs/performance.md holds its figures.

  scripts/vap-cost.py [--policy-dir DIR] [--sizes 1,3] [--repeat 3] [--plugin]
                      [--shapes env,labels] [--only-all] [--floor]

With --floor a row "floor" installs a policy that reads nothing (one validation, `true`)
on pods: what the API server spends on any one policy, whatever it checks (it converts the
object for the validations, again for the messages and again for the audit annotations;
k8s.io/apiserver pkg/admission/plugin/policy/validating/validator.go, Validate).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
TICK = os.sysconf("SC_CLK_TCK")


def pod(containers=None, spec=None, meta=None):
    spec = dict(spec or {})
    spec["containers"] = containers or [{
        "name": "t", "image": "registry.example/trainer:1",
        "resources": {"limits": {"nvidia.com/gpu": 8}},
    }]
    spec.setdefault("nodeSelector", {"node.kubernetes.io/instance-type": "p5.48xlarge",
                                     "topology.kubernetes.io/zone": "us-east-1a"})
    m = {"name": "hostile", "namespace": "cost"}
    m.update(meta or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": spec}


def grow(make, size):
    """The object `make(n)` with n raised until its JSON reaches `size` bytes."""
    n = 16
    while len(json.dumps(make(n))) < size:
        n *= 2
    lo, hi = n // 2, n
    while lo < hi:
        mid = (lo + hi) // 2
        if len(json.dumps(make(mid))) < size:
            lo = mid + 1
        else:
            hi = mid
    return make(lo)


def container(extra):
    c = {"name": "t", "image": "registry.example/trainer:1",
         "resources": {"limits": {"nvidia.com/gpu": 8}}}
    c.update(extra)
    return [c]


SHAPES = {
    "env": lambda n: pod(container({"env": [{"name": f"E{i}", "value": "x" * 8} for i in range(n)]})),
    "env-launcher": lambda n: pod(container({
        "command": ["torchrun", "--nnodes=4"],
        "env": [{"name": "PET_NNODES" if i % 2 else f"E{i}", "value": "4"} for i in range(n)]})),
    "args": lambda n: pod(container({"args": [f"--a{i}=$(E{i})" for i in range(n)]})),
    "containers": lambda n: pod([{"name": f"c{i}", "image": "i",
                                  "resources": {"limits": {"nvidia.com/gpu": 1}}} for i in range(n)]),
    "tolerations": lambda n: pod(spec={"tolerations": [{"key": f"k{i}", "operator": "Exists"} for i in range(n)]}),
    "affinity-values": lambda n: pod(spec={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In",
             "values": ["us-east-1a"] + [f"z{i}" for i in range(n)]}]}]}}}}),
    "labels": lambda n: pod(meta={"labels": {f"l{i}": "v" for i in range(n)}}),
    "resource-names": lambda n: pod(container({"resources": {"limits": dict(
        [("nvidia.com/gpu", 8)] + [(f"example.com/r{i}", 1) for i in range(n)])}})),
}


def run(args, stdin=None, env=None, check=True):
    return subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, check=check)


def plugin_seconds(kubectl, env):
    """The ValidatingAdmissionPolicy admission plugin's time so far, every request (the
    API server's own histogram: apiserver_admission_controller_admission_duration_seconds,
    name="ValidatingAdmissionPolicy"): the policies' evaluation and the object's
    conversion for it, and nothing else the API server does with the request."""
    text = run(kubectl + ["get", "--raw", "/metrics"], env=env).stdout
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_admission_controller_admission_duration_seconds_sum{") and \
                'name="ValidatingAdmissionPolicy"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK


def floor(label):
    """A policy on pods that reads nothing, and its binding."""
    meta = {"name": "vap-cost-floor", "labels": {label: "floor"}}
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": meta,
         "spec": {"failurePolicy": "Fail", "validations": [{"expression": "true"}],
                  "matchConstraints": {"resourceRules": [{
                      "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                      "operations": ["CREATE", "UPDATE"]}]}}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": meta,
         "spec": {"policyName": "vap-cost-floor", "validationActions": ["Deny"]}},
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy-dir")
    ap.add_argument("--sizes", default="1,3")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plugin", action="store_true",
                    help="report the admission plugin's own time (its histogram) instead of the "
                         "API server's CPU above a run with no policy")
    ap.add_argument("--shapes", help="the shapes to send, comma-separated (default: all of them)")
    ap.add_argument("--only-all", action="store_true",
                    help="only the rows with no policy and with every policy installed")
    ap.add_argument("--floor", action="store_true",
                    help="add a row for a policy that reads nothing: the API server's cost of "
                         "any one policy")
    a = ap.parse_args()
    shapes = a.shapes.split(",") if a.shapes else list(SHAPES)
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        ap.error(f"unknown shape(s) {unknown}; the shapes are {', '.join(SHAPES)}")
    trainplace = os.environ.get("TRAINPLACE_BIN") or os.path.join(ROOT, "target/release/trainplace")
    if not os.path.exists(trainplace):
        trainplace = os.path.join(ROOT, "target/debug/trainplace")
    sb = tempfile.mkdtemp(prefix="vap-cost-")
    env = dict(os.environ, SANDBOX_DIR=sb, SANDBOX_WEBHOOK="0", SANDBOX_PROFILING="false",
               SANDBOX_OWNER_PID=str(os.getpid()), TRAINPLACE_BIN=trainplace,
               SANDBOX_FLEET=os.path.join(ROOT, "tests/sandbox/fleet.yaml"))
    up = run([os.path.join(ROOT, "scripts/sandbox.sh"), "up"], env=env)
    env["KUBECONFIG"] = up.stdout.strip().splitlines()[-1].split("=", 1)[1]
    try:
        pid = int(open(os.path.join(sb, "pids", "kube-apiserver")).read().split()[0])
        kubectl = ["kubectl"]
        run(kubectl + ["create", "namespace", "cost"], env=env)
        export = [trainplace, "policy", "export", "--format", "vap", "-o", "json"]
        if a.policy_dir:
            export += ["--policy-dir", a.policy_dir]
        items = json.loads(run(export, env=env).stdout)["items"]
        # "none": the API server's own work on each object (decoding, defaulting, Pod
        # validation), with no policy installed; each policy's row is its cost above it.
        label = "trainplace.io/rules"
        each = [] if a.only_all else sorted({o["metadata"]["labels"][label] for o in items})
        rules = ["none"] + each + (["floor"] if a.floor else []) + ["all"]
        own = {}
        print("| policy | shape | body | verdict | API server CPU ms (above the API server's own) |")
        print("|---|---|---|---|---|")
        for rule in rules:
            mine = items if rule == "all" else [] if rule == "none" else \
                floor(label) if rule == "floor" else \
                [o for o in items if o["metadata"]["labels"][label] == rule]
            run(kubectl + ["delete", "validatingadmissionpolicies,validatingadmissionpolicybindings",
                           "--all"], env=env)
            if mine:
                run(kubectl + ["apply", "-f", "-"], json.dumps({"apiVersion": "v1", "kind": "List",
                                                                 "items": mine}), env=env)
            # In force: a 1-GPU pod of the rule's kind is judged (or 30 s pass).
            subprocess.run(["sleep", "5"])

            def send(obj):
                before = plugin_seconds(kubectl, env) if a.plugin else cpu(pid)
                out = run(kubectl + ["create", "--dry-run=server", "--validate=ignore", "-o", "name",
                                     "-f", "-"], json.dumps(obj), env=env, check=False)
                spent = (plugin_seconds(kubectl, env) - before) * 1000 if a.plugin else cpu(pid) - before
                if out.returncode == 0:
                    return "admitted", spent
                err = out.stderr
                if "ValidatingAdmissionPolicy" in err:
                    return "refused: " + err.split("denied request:", 1)[-1].strip()[:40], spent
                return "refused by the API server: " + err.strip()[:40], spent

            base = statistics.median(send(pod())[1] for _ in range(a.repeat))
            for shape in shapes:
                make = SHAPES[shape]
                for mib in a.sizes.split(","):
                    obj = grow(make, int(float(mib) * MIB))
                    runs = [send(obj) for _ in range(a.repeat)]
                    ms = statistics.median(r[1] for r in runs) - base
                    if rule == "none":
                        own[(shape, mib)] = ms
                    else:
                        ms = max(0.0, ms - own[(shape, mib)])
                    print(f"| {rule} | {shape} | {mib} MiB | {runs[0][0]} | {ms:.0f} |", flush=True)
    finally:
        run([os.path.join(ROOT, "scripts/sandbox.sh"), "down"], env=env, check=False)


if __name__ == "__main__":
    sys.exit(main())
