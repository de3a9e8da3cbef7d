//! The advisor's emitted set for 16 x H100 (2 x p5.48xlarge on a Capacity Block), applied
//! to the sandbox's real control plane with kwok nodes made from its eksctl-cluster.yaml:
//! the nodegroups' labels, taints and allocatable (GPUs, EFA, hugepages), the system
//! nodegroup's untainted nodes. Then, as aws-cli.sh does: the EFA device plugin (the
//! eks-charts chart, vendored, rendered by the real helm with the emitted values) and the
//! DCGM exporter (NVIDIA's chart, likewise) land on the GPU nodes; the checkpoint claim
//! binds; the per-node NCCL check's Indexed Job puts one pod on each GPU node; the operators' Deployments (the Training Operator through the emitted
//! kustomization over its vendored upstream overlay, the MPI Operator's release manifest)
//! land on the system nodes; the NCCL check's MPIJob is accepted by its CRD and its
//! launcher and workers (as Jobs: the MPI Operator is not on the Go module proxy, so its
//! controller cannot be built here) land on a system node and one per GPU node; the real
//! Training Operator v1.9.4 controller (tools/training-operator) runs the emitted
//! PyTorchJob, whose two pods land one per GPU node in one zone. Vendored sources:
//! tests/fixtures/baseline/README.md.

mod nodes;
mod training_operator;

use crate::sandbox;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nodes::make_nodes;
use sandbox::{Sandbox, stderr, wait_until};
use serde_json::{Value, json};
use training_operator::start_training_operator;

const NAMESPACE: &str = "advisor-job";
const JOB: &str = "llm";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sandbox() -> &'static Sandbox {
    let fleet = repo().join("tests/fixtures/baseline/no-nodes.yaml");
    // A control plane of its own: its fleet is the nodes the emitted eksctl config makes
    // and nothing else, so where the scheduler puts the plan's pods says something about
    // the plan (the shared fleet's p5 nodes in the same zone would take them too).
    sandbox::own(
        "cluster_advisor",
        &[("SANDBOX_FLEET", fleet.to_str().unwrap())],
    )
}

/// `trainplace advise` for 16 x H100 for 3 days on the fixture's Capacity Blocks, emitted
/// into a fresh directory.
fn emit() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let offerings = repo().join("crates/advisor/fixtures/capacity-block-offerings.json");
    let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["advise", "--gpus", "16", "--family", "h100", "--days", "3"])
        .args([
            "--capacity",
            "capacity-block",
            "--now",
            "2026-11-22T00:00:00Z",
        ])
        .args(["--namespace", NAMESPACE, "--job-name", JOB, "--emit"])
        .arg(dir.path())
        .arg("--offerings")
        .arg(&offerings)
        .output()
        .unwrap();
    assert!(out.status.success(), "advise: {}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("2 x p5.48xlarge in us-east-1a"), "{text}");
    dir
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_yaml_ng::from_str(&text).unwrap()
}

/// Pods matching `selector` in `ns` once `count` of them are bound: their node names.
fn bound(sb: &Sandbox, ns: &str, selector: &str, count: usize) -> Vec<String> {
    let mut nodes = Vec::new();
    wait_until(
        Duration::from_secs(90),
        &format!("{count} pods {selector} bound in {ns}"),
        || {
            nodes = sb
                .pods(ns, selector)
                .iter()
                .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
                .collect();
            nodes.len() >= count
        },
    );
    nodes.sort();
    nodes
}

fn helm() -> PathBuf {
    let out = Command::new(repo().join("scripts/go-tool.sh"))
        .args(["helm", "path"])
        .output()
        .unwrap();
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(
        path.is_file(),
        "helm is not built ({path:?}): run scripts/test-deps.sh"
    );
    path
}

/// The vendored EFA chart rendered by the real helm, with `values` (or none).
fn efa_plugin(release: &str, values: Option<&Path>) -> String {
    let chart = repo().join("tests/fixtures/baseline/charts/aws-efa-k8s-device-plugin");
    let mut cmd = Command::new(helm());
    cmd.args(["template", release])
        .arg(&chart)
        .args(["-n", "kube-system"]);
    if let Some(v) = values {
        cmd.arg("-f").arg(v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "helm template: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The EFA device plugin with the emitted values has a pod on each GPU node; without
/// them, on none (the DaemonSet does not tolerate the GPU taint).
fn efa_plugin_lands_on_the_gpu_nodes(sb: &Sandbox, emitted: &Path, gpu: &[String]) {
    let with = efa_plugin("efa", Some(&emitted.join("efa-device-plugin-values.yaml")));
    let out = sb.kubectl_stdin(&["apply", "-n", "kube-system", "-f", "-"], Some(&with));
    assert!(out.status.success(), "{}", stderr(&out));
    let on = bound(
        sb,
        "kube-system",
        "name=efa-aws-efa-k8s-device-plugin",
        gpu.len(),
    );
    assert_eq!(on, gpu, "the EFA plugin on every GPU node");
    let without = efa_plugin("efa-default", None);
    let out = sb.kubectl_stdin(&["apply", "-n", "kube-system", "-f", "-"], Some(&without));
    assert!(out.status.success(), "{}", stderr(&out));
    let mut status = Value::Null;
    wait_until(
        Duration::from_secs(30),
        "the default DaemonSet's status",
        || {
            status = sb.json(&[
                "-n",
                "kube-system",
                "get",
                "daemonset",
                "efa-default-aws-efa-k8s-device-plugin",
            ])["status"]
                .clone();
            status["observedGeneration"].as_u64().is_some()
        },
    );
    assert_eq!(status["desiredNumberScheduled"], 0, "untolerated: {status}");
}

/// The emitted Training Operator kustomization over the vendored upstream overlay (its
/// resource URL swapped for the local copy), rendered by the real kubectl kustomize.
fn training_operator_manifest(emitted: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let upstream = dir.path().join("upstream");
    std::fs::create_dir_all(&upstream).unwrap();
    let vendored = repo().join("tests/fixtures/baseline/training-operator");
    std::fs::copy(
        vendored.join("standalone-v1.9.4.yaml"),
        upstream.join("standalone.yaml"),
    )
    .unwrap();
    // Its CRDs are the ones vendored in schemas/ (same release).
    for crd in ["kubeflow.org_pytorchjobs.yaml", "kubeflow.org_mpijobs.yaml"] {
        std::fs::copy(repo().join("schemas").join(crd), upstream.join(crd)).unwrap();
    }
    std::fs::write(
        upstream.join("kustomization.yaml"),
        "resources: [standalone.yaml, kubeflow.org_pytorchjobs.yaml, kubeflow.org_mpijobs.yaml]\n",
    )
    .unwrap();
    let mut k = read_yaml(&emitted.join("training-operator/kustomization.yaml"));
    assert!(
        k["resources"][0]
            .as_str()
            .unwrap()
            .contains("overlays/standalone?ref=v1.9.4")
    );
    k["resources"] = json!(["../upstream"]);
    let ours = dir.path().join("training-operator");
    std::fs::create_dir_all(&ours).unwrap();
    std::fs::write(
        ours.join("kustomization.yaml"),
        serde_yaml_ng::to_string(&k).unwrap(),
    )
    .unwrap();
    let out = sandbox().kubectl(&["kustomize", ours.to_str().unwrap()]);
    assert!(out.status.success(), "kustomize: {}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("name: pytorchjobs.kubeflow.org"),
        "the PyTorchJob CRD stays"
    );
    assert!(
        !text.contains("name: mpijobs.kubeflow.org"),
        "the v1 MPIJob CRD is gone"
    );
    assert!(
        text.contains("--enable-scheme=pytorchjob"),
        "PyTorchJob only"
    );
    text
}

/// The operators' Deployments run on the system nodes (the GPU nodes are tainted).
fn operators_land_on_the_system_nodes(sb: &Sandbox, emitted: &Path, system: &[String]) {
    let manifests = [
        training_operator_manifest(emitted),
        std::fs::read_to_string(repo().join("tests/fixtures/baseline/mpi-operator-v0.8.0.yaml"))
            .unwrap(),
    ];
    for m in &manifests {
        let out = sb.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(m));
        assert!(out.status.success(), "operator: {}", stderr(&out));
    }
    for (ns, deployment) in [
        ("kubeflow", "training-operator"),
        ("mpi-operator", "mpi-operator"),
    ] {
        sb.ok(&[
            "-n",
            ns,
            "rollout",
            "status",
            &format!("deployment/{deployment}"),
            "--timeout=90s",
        ]);
        let pods = sb.json(&["-n", ns, "get", "pods"]);
        for pod in pods["items"].as_array().unwrap() {
            let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
            assert!(
                system.iter().any(|s| s == node),
                "{deployment} on {node}, not a system node"
            );
        }
    }
}

/// The NCCL check as aws-cli.sh applies it: the MPIJob passes its CRD's schema; its
/// launcher (as a Job) lands on a system node and its workers (an Indexed Job of the
/// worker template) one per GPU node. Deleted after, as the check ends before the job.
fn nccl_check_lands(sb: &Sandbox, emitted: &Path, gpu: &[String], system: &[String]) {
    let mpijob = read_yaml(&emitted.join("nccl-tests-mpijob.yaml"));
    let out = sb.kubectl_stdin(&["apply", "-f", "-"], Some(&mpijob.to_string()));
    assert!(out.status.success(), "the MPIJob: {}", stderr(&out));
    let specs = &mpijob["spec"]["mpiReplicaSpecs"];
    let launcher = &specs["Launcher"]["template"];
    let mut worker = specs["Worker"]["template"].clone();
    worker["spec"]["restartPolicy"] = json!("Never");
    let jobs = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": "nccl-launcher", "namespace": NAMESPACE},
         "spec": {"template": launcher}},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": "nccl-workers", "namespace": NAMESPACE},
         "spec": {"completionMode": "Indexed", "completions": gpu.len(), "parallelism": gpu.len(),
                  "template": worker}},
    ]});
    let out = sb.kubectl_stdin(&["apply", "-f", "-"], Some(&jobs.to_string()));
    assert!(out.status.success(), "the check's Jobs: {}", stderr(&out));
    let on = bound(sb, NAMESPACE, "job-name=nccl-launcher", 1);
    assert!(
        system.contains(&on[0]),
        "the launcher on {on:?}, not a system node"
    );
    let on = bound(sb, NAMESPACE, "job-name=nccl-workers", gpu.len());
    assert_eq!(on, gpu, "one worker per GPU node");
    sb.ok(&[
        "-n",
        NAMESPACE,
        "delete",
        "job",
        "nccl-launcher",
        "nccl-workers",
        "--wait",
    ]);
    sb.ok(&["-n", NAMESPACE, "delete", "mpijob", "--all"]);
    wait_until(Duration::from_secs(60), "the check's pods gone", || {
        sb.pods(NAMESPACE, "batch.kubernetes.io/job-name")
            .is_empty()
    });
}

/// The emitted PyTorchJob, run by the real Training Operator: one pod per GPU node, all
/// in the plan's zone, on the Capacity Block nodegroup's nodes.
fn pytorchjob_lands_one_pod_per_gpu_node(sb: &Sandbox, emitted: &Path, gpu: &[String]) {
    let _operator = start_training_operator(sb);
    let out = sb.kubectl(&[
        "apply",
        "-f",
        emitted.join("job-pytorchjob.yaml").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "the PyTorchJob: {}", stderr(&out));
    let selector = format!("training.kubeflow.org/job-name={JOB}");
    let on = bound(sb, NAMESPACE, &selector, gpu.len());
    assert_eq!(on, gpu, "one pod per GPU node");
    for node in &on {
        let labels = sb.node_labels(node);
        assert_eq!(
            labels["topology.kubernetes.io/zone"], "us-east-1a",
            "{node}"
        );
        assert_eq!(
            labels["eks.amazonaws.com/capacityType"], "CAPACITY_BLOCK",
            "{node}"
        );
    }
    let services = sb.json(&["-n", NAMESPACE, "get", "services", "-l", &selector]);
    assert_eq!(
        services["items"].as_array().unwrap().len(),
        gpu.len(),
        "the operator made a Service per replica (the rendezvous' names)"
    );
}

#[test]
fn the_emitted_set_for_16_h100_runs_in_the_sandbox() {
    let sb = sandbox();
    let emitted = emit();
    let config = read_yaml(&emitted.path().join("eksctl-cluster.yaml"));
    let (gpu, system) = make_nodes(sb, &config);
    assert_eq!((gpu.len(), system.len()), (2, 2), "{gpu:?} {system:?}");
    sb.ok(&["create", "namespace", NAMESPACE]);
    efa_plugin_lands_on_the_gpu_nodes(sb, emitted.path(), &gpu);
    operators_land_on_the_system_nodes(sb, emitted.path(), &system);
    dcgm_exporter_lands_on_the_gpu_nodes(sb, emitted.path(), &gpu, &system);
    checkpoint_claim_binds(sb, emitted.path());
    node_check_lands_one_pod_per_gpu_node(sb, emitted.path(), &gpu);
    nccl_check_lands(sb, emitted.path(), &gpu, &system);
    pytorchjob_lands_one_pod_per_gpu_node(sb, emitted.path(), &gpu);
}

/// NVIDIA's dcgm-exporter chart (vendored, rendered by the real helm) as `aws-cli.sh`
/// installs it: with the emitted values its DaemonSet has a pod on each GPU node and on
/// no other. With the chart's defaults it does not install here (its ServiceMonitor
/// needs the Prometheus Operator's CRD), and with only the ServiceMonitor off it lands
/// on no GPU node (it tolerates only the control-plane taint).
fn dcgm_exporter_lands_on_the_gpu_nodes(
    sb: &Sandbox,
    emitted: &Path,
    gpu: &[String],
    system: &[String],
) {
    let chart = repo().join("tests/fixtures/baseline/charts/dcgm-exporter");
    sb.ok(&["create", "namespace", "gpu-monitoring"]);
    let apply = |release: &str, args: &[&std::ffi::OsStr]| {
        let out = Command::new(helm())
            .args(["template", release])
            .arg(&chart)
            .args(["-n", "gpu-monitoring"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "helm template: {}", stderr(&out));
        sb.kubectl_stdin(
            &["apply", "-n", "gpu-monitoring", "-f", "-"],
            Some(&String::from_utf8(out.stdout).unwrap()),
        )
    };
    let values = emitted.join("dcgm-exporter-values.yaml");
    let out = apply("dcgm", &["-f".as_ref(), values.as_os_str()]);
    assert!(out.status.success(), "dcgm-exporter: {}", stderr(&out));
    let on = bound(
        sb,
        "gpu-monitoring",
        "app.kubernetes.io/instance=dcgm",
        gpu.len(),
    );
    assert_eq!(on, gpu, "the DCGM exporter on every GPU node and no other");
    let out = apply("dcgm-default", &[]);
    assert!(
        !out.status.success() && stderr(&out).contains("ServiceMonitor"),
        "the chart's defaults need the ServiceMonitor CRD: {}",
        stderr(&out)
    );
    let out = apply(
        "dcgm-untolerating",
        &["--set".as_ref(), "serviceMonitor.enabled=false".as_ref()],
    );
    assert!(out.status.success(), "dcgm-exporter: {}", stderr(&out));
    let on = bound(
        sb,
        "gpu-monitoring",
        "app.kubernetes.io/instance=dcgm-untolerating",
        system.len(),
    );
    assert_eq!(on, system, "without the tolerations: untainted nodes only");
    sb.ok(&["delete", "namespace", "gpu-monitoring", "--wait=false"]);
}

/// The emitted StorageClass and claim apply; the claim binds to the volume the FSx CSI
/// driver would make (a stand-in PersistentVolume: FSx is AWS's), so the job's pods,
/// which mount it, can schedule.
fn checkpoint_claim_binds(sb: &Sandbox, emitted: &Path) {
    let path = emitted.join("checkpoint-storage.yaml");
    let out = sb.kubectl(&["apply", "-f", path.to_str().unwrap()]);
    assert!(out.status.success(), "checkpoint storage: {}", stderr(&out));
    let text = std::fs::read_to_string(&path).unwrap();
    let claim: Value = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .find(|d: &Value| d["kind"] == "PersistentVolumeClaim")
        .unwrap();
    let name = claim["metadata"]["name"].as_str().unwrap();
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume",
    "metadata": {"name": format!("{name}-fsx")},
    "spec": {
        "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
        "accessModes": ["ReadWriteMany"],
        "storageClassName": claim["spec"]["storageClassName"],
        "persistentVolumeReclaimPolicy": "Retain",
        "claimRef": {"namespace": NAMESPACE, "name": name},
        "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": "fs-0123456789abcdef0",
                "volumeAttributes": {"dnsname": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "mountname": "abcdefgh"}},
    }});
    let out = sb.kubectl_stdin(&["apply", "-f", "-"], Some(&pv.to_string()));
    assert!(
        out.status.success(),
        "the stand-in volume: {}",
        stderr(&out)
    );
    wait_until(
        Duration::from_secs(60),
        "the checkpoint claim bound",
        || sb.json(&["-n", NAMESPACE, "get", "pvc", name])["status"]["phase"] == "Bound",
    );
}

/// The per-node NCCL check as aws-cli.sh applies it: the real Job controller makes one
/// indexed pod per GPU node and the scheduler puts each on its own GPU node. Deleted
/// after, as the script does once it passed.
fn node_check_lands_one_pod_per_gpu_node(sb: &Sandbox, emitted: &Path, gpu: &[String]) {
    let path = emitted.join("nccl-node-check.yaml");
    let out = sb.kubectl(&["apply", "-f", path.to_str().unwrap()]);
    assert!(out.status.success(), "the node check: {}", stderr(&out));
    let name = format!("{JOB}-node-check");
    let on = bound(sb, NAMESPACE, &format!("job-name={name}"), gpu.len());
    assert_eq!(on, gpu, "one check pod per GPU node");
    sb.ok(&["-n", NAMESPACE, "delete", "job", &name, "--wait"]);
    wait_until(
        Duration::from_secs(60),
        "the node check's pods gone",
        || sb.pods(NAMESPACE, &format!("job-name={name}")).is_empty(),
    );
}
