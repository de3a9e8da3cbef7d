#!/usr/bin/env python3
"""How many network nodes a job's pods span, with trainplace's network proximity
preferences and without them, through the sandbox's real API server, webhook and
kube-scheduler.

Starts a sandbox on a fleet of 80 p5.48xlarge nodes in one zone under a simulated EC2
instance topology (16 nodes per layer-3 network node, 2 layer-3 nodes per layer-2 node,
2 layer-2 nodes per layer-1 node: 5, 3 and 2 network nodes), with a policy that turns the
preferences off in one namespace. For each job size it runs an Indexed Job of whole-node
pods in each namespace, alone on the empty fleet, and counts the layer-3 and layer-2
nodes its pods run under, and whether every pod was scheduled. Prints a Markdown table.
A measurement, not a test: docs/network.md holds its figures.

  scripts/network-placement.py [--sizes 4,16,64] [--repeat 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLEET = """apiVersion: trainplace.io/v1alpha1
kind: SandboxFleet
region: us-east-1
zones:
  - {name: us-east-1a, id: use1-az4}
nodeGroups:
  - name: p5
    instanceType: p5.48xlarge
    cpu: "192"
    nodes: {us-east-1a: 80}
    network: {nodesPerLayer3: 16, layer3PerLayer2: 2, layer2PerLayer1: 2}
  - name: system
    instanceType: m7i.2xlarge
    cpu: "8"
    memory: 32Gi
    nodes: {us-east-1a: 1}
"""

POLICY = """apiVersion: trainplace.io/v1alpha1
kind: Policy
namespaces:
  - match: {names: [without]}
    defaults:
      networkProximity: {placement: "off"}
"""


def run(cmd, env, check=True, stdin=None):
    out = subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return out


def job(name, ns, pods):
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                     "template": {"spec": {"restartPolicy": "Never",
                                           "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
                                           "containers": [{"name": "c", "image": "busybox",
                                                           "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}


def pods_of(env, ns, name):
    out = run(["kubectl", "get", "pods", "-n", ns, "-l", f"batch.kubernetes.io/job-name={name}", "-o", "json"], env)
    return json.loads(out.stdout)["items"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,16,64")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    trainplace = os.environ.get("TRAINPLACE_BIN", os.path.join(ROOT, "target/release/trainplace"))
    work = tempfile.mkdtemp(prefix="network-placement-")
    os.makedirs(os.path.join(work, "policy"))
    with open(os.path.join(work, "fleet.yaml"), "w") as f:
        f.write(FLEET)
    # The sandbox starts on its system node alone; the GPU fleet joins once it is up
    # (up waits a fixed time for its nodes; kwok readies 80 on a busy machine slower).
    with open(os.path.join(work, "system.yaml"), "w") as f:
        f.write(FLEET.split("  - name: p5")[0] + "  - name: system" + FLEET.split("  - name: system")[1])
    with open(os.path.join(work, "policy", "policy.yaml"), "w") as f:
        f.write(POLICY)
    env = dict(os.environ, SANDBOX_DIR=os.path.join(work, "sandbox"), SANDBOX_OWNER_PID=str(os.getpid()),
               TRAINPLACE_BIN=trainplace, SANDBOX_FLEET=os.path.join(work, "system.yaml"),
               SANDBOX_POLICY_DIR=os.path.join(work, "policy"))
    up = run([os.path.join(ROOT, "scripts/sandbox.sh"), "up"], env)
    env["KUBECONFIG"] = up.stdout.strip().splitlines()[-1].split("=", 1)[1]
    bin_dir = run([os.path.join(ROOT, "scripts/control-plane.sh"), "path"], env).stdout.strip()
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    nodes = run([trainplace, "sandbox", "nodes", "-f", os.path.join(work, "fleet.yaml")], env).stdout
    run(["kubectl", "apply", "-f", "-"], env, stdin=nodes)
    want = len(json.loads(nodes)["items"])
    deadline = time.time() + 600
    while True:
        listed = json.loads(run(["kubectl", "get", "nodes", "-o", "json"], env).stdout)["items"]
        ready = [n for n in listed if any(c["type"] == "Ready" and c["status"] == "True"
                                          for c in n.get("status", {}).get("conditions", []))]
        if len(ready) >= want:
            break
        if time.time() > deadline:
            sys.exit(f"{len(ready)} of {want} nodes Ready after 600 s")
        time.sleep(2)
    labels = {n["metadata"]["name"]: n["metadata"]["labels"]
              for n in json.loads(run(["kubectl", "get", "nodes", "-o", "json"], env).stdout)["items"]}
    try:
        for ns in ("with", "without"):
            run(["kubectl", "create", "namespace", ns], env)
        print("| pods | preferences | layer-3 nodes spanned (each run) | layer-2 nodes spanned | all scheduled |")
        print("|---|---|---|---|---|")
        for size in sizes:
            for ns in ("with", "without"):
                l3s, l2s, all_ok = [], [], True
                for r in range(args.repeat):
                    name = f"j{size}-{r}"
                    run(["kubectl", "apply", "-f", "-"], env, stdin=json.dumps(job(name, ns, size)))
                    deadline = time.time() + 180
                    while True:
                        pods = pods_of(env, ns, name)
                        bound = [p for p in pods if p["spec"].get("nodeName")]
                        if len(pods) == size and len(bound) == size:
                            break
                        if time.time() > deadline:
                            all_ok = False
                            break
                        time.sleep(1)
                    nodes = [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]
                    l3s.append(len({labels[n]["topology.k8s.aws/network-node-layer-3"] for n in nodes}))
                    l2s.append(len({labels[n]["topology.k8s.aws/network-node-layer-2"] for n in nodes}))
                    run(["kubectl", "delete", "job", name, "-n", ns, "--cascade=foreground", "--wait=true"], env)
                    while pods_of(env, ns, name):
                        time.sleep(1)
                print(f"| {size} | {'yes' if ns == 'with' else 'off'} | {', '.join(map(str, l3s))} "
                      f"| {', '.join(map(str, l2s))} | {'yes' if all_ok else 'no'} |", flush=True)
    finally:
        run([os.path.join(ROOT, "scripts/sandbox.sh"), "down"], env, check=False)


if __name__ == "__main__":
    main()
