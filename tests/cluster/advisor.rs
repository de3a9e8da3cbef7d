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
//! PyTorchJob, whose two pods land one per GPU node in one zone; GPU Feature Discovery,
//! as a GB200 plan installs it (NVIDIA's device plugin chart, vendored, rendered by helm
//! with the emitted values), lands with its NFD worker on every GPU node. And every object
//! of the GB200 plan and of a two-block p5 plan is created with `--dry-run=server`.
//! Vendored sources:
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
    gpu_feature_discovery_lands_on_the_gpu_nodes(sb, &gpu, &system);
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

/// The GB200 plan (one u-p6e-gb200x72 UltraServer block in the Dallas Local Zone),
/// emitted into a fresh directory, in its own namespace.
fn emit_gb200() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let offerings = repo().join("crates/advisor/fixtures/gb200-offerings.json");
    let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["advise", "--gpus", "72", "--family", "gb200", "--days", "7"])
        .args([
            "--capacity",
            "capacity-block",
            "--now",
            "2026-11-22T00:00:00Z",
        ])
        .args(["--namespace", GB200_NAMESPACE, "--job-name", JOB, "--emit"])
        .arg(dir.path())
        .arg("--offerings")
        .arg(&offerings)
        .output()
        .unwrap();
    assert!(out.status.success(), "advise: {}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("18 x p6e-gb200.36xlarge in us-east-1-dfw-2a"),
        "{text}"
    );
    dir
}

const GB200_NAMESPACE: &str = "advisor-gb200";

/// Every Kubernetes object in the emitted files: YAML documents with an apiVersion and a
/// kind, less eksctl's ClusterConfig and the kustomization (inputs of eksctl and kustomize,
/// not objects); Helm values files have neither.
fn emitted_objects(dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in walk(dir) {
        if entry.extension().is_some_and(|e| e == "yaml") {
            files.push(entry);
        }
    }
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            let api = v["apiVersion"].as_str().unwrap_or_default();
            if v["kind"].is_string()
                && !api.is_empty()
                && !api.starts_with("eksctl.io/")
                && !api.starts_with("kustomize.config.k8s.io/")
            {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                out.push((name, v));
            }
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Every object of the GB200 plan is created by the real API server with
/// `--dry-run=server` (its validation, defaulting, the CRDs' schemas and the admission
/// chain, the trainplace webhook included), not only checked against a schema. The same
/// pod with the job's hugepages but without its cpu and memory requests is refused, as
/// the issue found every GB200 pod refused before.
#[test]
fn every_object_of_the_gb200_plan_is_accepted_by_the_api_server() {
    let sb = sandbox();
    let emitted = emit_gb200();
    sb.ok(&["create", "namespace", GB200_NAMESPACE]);
    let objects = emitted_objects(emitted.path());
    let kinds: Vec<String> = objects
        .iter()
        .map(|(f, v)| format!("{f}: {}", v["kind"].as_str().unwrap()))
        .collect();
    for kind in [
        "ComputeDomain",
        "PyTorchJob",
        "MPIJob",
        "Job",
        "StorageClass",
        "PersistentVolumeClaim",
    ] {
        assert!(
            kinds.iter().any(|k| k.ends_with(&format!(": {kind}"))),
            "{kind} missing from {kinds:?}"
        );
    }
    assert!(
        !kinds.iter().any(|k| k.contains("karpenter")),
        "GB200 has no Karpenter route: {kinds:?}"
    );
    dry_run_all(sb, &objects);
    // The check can fail: the job's pod without cpu and memory is refused for its
    // hugepages.
    let job = objects
        .iter()
        .find(|(_, v)| v["kind"] == "PyTorchJob")
        .map(|(_, v)| v.clone())
        .unwrap();
    let mut spec = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].clone();
    let requests = &mut spec["containers"][0]["resources"]["requests"];
    assert!(
        requests.get("hugepages-2Mi").is_some(),
        "the job asks for hugepages: {requests}"
    );
    requests.as_object_mut().unwrap().remove("cpu");
    requests.as_object_mut().unwrap().remove("memory");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "no-cpu-or-memory", "namespace": GB200_NAMESPACE},
        "spec": spec});
    let out = sb.kubectl_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&pod.to_string()),
    );
    assert!(
        !out.status.success() && stderr(&out).contains("HugePages require cpu or memory"),
        "{}",
        stderr(&out)
    );
}

/// GPU Feature Discovery, as a GB200 plan installs it: NVIDIA's device plugin chart
/// (vendored, rendered by the real helm) with the emitted `gpu-feature-discovery-values.yaml`
/// puts GFD and the Node Feature Discovery worker, which publishes GFD's
/// `nvidia.com/gpu.clique` label, on every GPU node. The GB200 plan's GPU nodes carry the
/// same taint and label as these (`plugins::node_taints`, `node_labels`). With the
/// chart's defaults for the worker (toleration `nvidia.com/gpu=present`) the worker lands
/// on no GPU node, so no label would be written.
fn gpu_feature_discovery_lands_on_the_gpu_nodes(sb: &Sandbox, gpu: &[String], system: &[String]) {
    let emitted = emit_gb200();
    let values = emitted.path().join("gpu-feature-discovery-values.yaml");
    let chart = repo().join("tests/fixtures/baseline/charts/nvidia-device-plugin");
    let ns = "gpu-feature-discovery";
    sb.ok(&["create", "namespace", ns]);
    let render = |release: &str, args: &[&std::ffi::OsStr]| -> String {
        let out = Command::new(helm())
            .args(["template", release])
            .arg(&chart)
            .args(["-n", ns, "--include-crds", "--no-hooks"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "helm template: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let manifest = render("gfd", &["-f".as_ref(), values.as_os_str()]);
    let out = sb.kubectl_stdin(
        &["apply", "--server-side", "-n", ns, "-f", "-"],
        Some(&manifest),
    );
    assert!(out.status.success(), "GFD: {}", stderr(&out));
    let on = bound(
        sb,
        ns,
        "app.kubernetes.io/instance=gfd,app.kubernetes.io/name=nvidia-device-plugin",
        gpu.len(),
    );
    assert_eq!(on, gpu, "GFD on every GPU node");
    // The worker runs on every node, the untainted system nodes too.
    let workers: Vec<String> = bound(
        sb,
        ns,
        "app.kubernetes.io/instance=gfd,app.kubernetes.io/name=node-feature-discovery,role=worker",
        gpu.len() + system.len(),
    )
    .into_iter()
    .filter(|n| gpu.contains(n))
    .collect();
    assert_eq!(workers, gpu, "the NFD worker on every GPU node");
    // The chart's own worker toleration does not match the GPU nodes' taint.
    let defaults = render(
        "gfd-default",
        &[
            "--set".as_ref(),
            "devicePlugin.enabled=false".as_ref(),
            "--set".as_ref(),
            "gfd.enabled=true".as_ref(),
        ],
    );
    let worker: Value = serde_yaml_ng::Deserializer::from_str(&defaults)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .find(|d: &Value| {
            d["kind"] == "DaemonSet"
                && d["metadata"]["name"] == "gfd-default-node-feature-discovery-worker"
        })
        .expect("the default worker DaemonSet");
    let tolerations = worker["spec"]["template"]["spec"]["tolerations"].to_string();
    assert!(
        tolerations.contains("\"value\":\"present\"") && !tolerations.contains("Exists"),
        "{tolerations}"
    );
    sb.ok(&["delete", "namespace", ns, "--wait=false"]);
}

/// `kubectl create --dry-run=server` of each object: the API server accepts every one.
fn dry_run_all(sb: &Sandbox, objects: &[(String, Value)]) {
    for (file, object) in objects {
        let out = sb.kubectl_stdin(
            &["create", "--dry-run=server", "-o", "name", "-f", "-"],
            Some(&object.to_string()),
        );
        assert!(
            out.status.success(),
            "{file}: the API server refuses {} {}: {}",
            object["kind"],
            object["metadata"]["name"],
            stderr(&out)
        );
    }
}

const P5_NAMESPACE: &str = "advisor-p5";

/// Every object of the two-block plan (64 x H100: 8 x p5.48xlarge on two Capacity Blocks),
/// on each route (the default eksctl one, and `--route karpenter`), is created by the API
/// server with `--dry-run=server`.
#[test]
fn every_object_of_the_two_block_p5_plan_is_accepted_by_the_api_server() {
    let sb = sandbox();
    let offerings = repo().join("crates/advisor/fixtures/capacity-block-offerings.json");
    let mut objects = Vec::new();
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    for (route, dir) in ["eksctl", "karpenter"].into_iter().zip(&dirs) {
        let out = Command::new(env!("CARGO_BIN_EXE_trainplace"))
            .args(["advise", "--gpus", "64", "--family", "h100", "--days", "7"])
            .args([
                "--capacity",
                "capacity-block",
                "--now",
                "2026-11-22T00:00:00Z",
                "--route",
                route,
            ])
            .args(["--namespace", P5_NAMESPACE, "--job-name", JOB, "--emit"])
            .arg(dir.path())
            .arg("--offerings")
            .arg(&offerings)
            .output()
            .unwrap();
        assert!(out.status.success(), "advise: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("cb-0f1a2b3c4d5e60001 + cb-0f1a2b3c4d5e60002"),
            "two blocks: {text}"
        );
        objects.extend(
            emitted_objects(dir.path())
                .into_iter()
                .map(|(file, v)| (format!("{route}/{file}"), v)),
        );
    }
    sb.ok(&["create", "namespace", P5_NAMESPACE]);
    let kinds: Vec<&str> = objects
        .iter()
        .map(|(_, v)| v["kind"].as_str().unwrap())
        .collect();
    for kind in ["EC2NodeClass", "NodePool", "PyTorchJob", "MPIJob", "Job"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    dry_run_all(sb, &objects);
}
