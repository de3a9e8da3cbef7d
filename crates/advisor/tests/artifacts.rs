//! What the emitted setup needs to run a job: device plugins that land on the tainted
//! nodes, the Karpenter prerequisites, a script that stops where it lacks an id, images
//! with the collective stack, disks, NCCL env through mpirun.

mod common;

use std::path::Path;
use std::process::Command;

use common::{artifacts, karpenter_artifacts, karpenter_recommendation, recommendation};
use serde_json::Value;
use trainplace_advisor::artifacts::objects;
use trainplace_engine::Policy;

/// Kubernetes' toleration/taint match (k8s.io/api core/v1 `Toleration.ToleratesTaint`).
fn tolerates(t: &Value, taint: &Value) -> bool {
    let effect_ok = t
        .get("effect")
        .and_then(Value::as_str)
        .is_none_or(|e| e.is_empty() || Some(e) == taint["effect"].as_str());
    let key = t.get("key").and_then(Value::as_str).unwrap_or("");
    let key_ok = key.is_empty() || Some(key) == taint["key"].as_str();
    let op = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
    let value_ok = match op {
        "Exists" => true,
        _ => {
            t.get("value").and_then(Value::as_str).unwrap_or("")
                == taint["value"].as_str().unwrap_or("")
        }
    };
    effect_ok && key_ok && value_ok
}

#[test]
fn efa_plugin_tolerates_every_taint_of_the_job_nodes() {
    let policy = Policy::embedded();
    for scenario in ["h100-blocks", "l40s-on-demand", "trainium", "a100-odcr"] {
        let rec = recommendation(scenario, "pytorchjob");
        let files = artifacts(scenario, "pytorchjob");
        let values: Value = serde_yaml_ng::from_str(&files["efa-device-plugin-values.yaml"])
            .unwrap_or_else(|e| panic!("{scenario}: {e}"));
        // The chart's DaemonSet always tolerates CriticalAddonsOnly, then the values'.
        let mut tolerations =
            vec![serde_json::json!({"key": "CriticalAddonsOnly", "operator": "Exists"})];
        tolerations.extend(values["tolerations"].as_array().unwrap().iter().cloned());
        let o = objects(&rec, &policy);
        let mut taints: Vec<Value> = Vec::new();
        for ng in common::gpu_nodegroups(&o.cluster_config) {
            taints.extend(ng["taints"].as_array().unwrap().iter().cloned());
        }
        let on_karpenter = objects(&karpenter_recommendation(scenario, "pytorchjob"), &policy);
        taints.extend(
            on_karpenter.node_pool.as_ref().unwrap()["spec"]["template"]["spec"]["taints"]
                .as_array()
                .unwrap()
                .iter()
                .cloned(),
        );
        assert!(!taints.is_empty());
        for taint in &taints {
            assert!(
                tolerations.iter().any(|t| tolerates(t, taint)),
                "{scenario}: EFA plugin does not tolerate {taint}"
            );
        }
        // The job pods tolerate them too.
        let pod = &o.job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
        for taint in &taints {
            assert!(
                pod["tolerations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| tolerates(t, taint))
            );
        }
        let values_text = &files["efa-device-plugin-values.yaml"];
        assert!(
            values_text.contains("Insufficient vpc.amazonaws.com/efa"),
            "{values_text}"
        );
        assert!(values_text.contains("--version v0.5.30"));
        let script = &files["aws-cli.sh"];
        if scenario != "h100-blocks" {
            continue;
        }
        let delete = script
            .find("delete daemonset aws-efa-k8s-device-plugin")
            .unwrap();
        let create = script.find("eksctl create cluster").unwrap();
        let helm = script
            .find("helm upgrade --install aws-efa-k8s-device-plugin eks/aws-efa-k8s-device-plugin --version v0.5.30 -n kube-system -f efa-device-plugin-values.yaml")
            .unwrap();
        assert!(create < delete && delete < helm, "{script}");
    }
}

#[test]
fn nvidia_nodes_carry_the_label_the_nvidia_chart_selects() {
    let o = objects(
        &recommendation("h100-blocks", "pytorchjob"),
        &Policy::embedded(),
    );
    let on_karpenter = objects(
        &karpenter_recommendation("h100-blocks", "pytorchjob"),
        &Policy::embedded(),
    );
    assert_eq!(
        on_karpenter.node_pool.as_ref().unwrap()["spec"]["template"]["metadata"]["labels"]["nvidia.com/gpu.present"],
        "true"
    );
    for ng in common::gpu_nodegroups(&o.cluster_config) {
        assert_eq!(ng["labels"]["nvidia.com/gpu.present"], "true");
    }
}

#[test]
fn karpenter_route_has_prerequisites_and_plugin_installs_with_versions() {
    let gpu = &karpenter_artifacts("h100-blocks", "pytorchjob")["karpenter-prerequisites.sh"];
    for needle in [
        "KarpenterNodeRole-training",
        "karpenter.sh/discovery",
        "older than 1.6",
        "nvdp/nvidia-device-plugin --version 0.20.0",
        "eks/aws-efa-k8s-device-plugin --version v0.5.30",
        "-f efa-device-plugin-values.yaml",
    ] {
        assert!(gpu.contains(needle), "no {needle:?} in:\n{gpu}");
    }
    let trn = &karpenter_artifacts("trainium", "pytorchjob")["karpenter-prerequisites.sh"];
    assert!(
        trn.contains("oci://public.ecr.aws/neuron/neuron-helm-chart --version 1.9.0"),
        "{trn}"
    );
    assert!(!trn.contains("nvidia-device-plugin"));
    // On-demand pools need no reserved-capacity Karpenter check.
    let od = &karpenter_artifacts("l40s-on-demand", "pytorchjob")["karpenter-prerequisites.sh"];
    assert!(!od.contains("older than 1.6"));
    // The version check parses real image tags.
    for (image, ok) in [
        (
            "public.ecr.aws/karpenter/controller:1.14.1@sha256:abc",
            true,
        ),
        ("public.ecr.aws/karpenter/controller:v1.6.0", true),
        ("public.ecr.aws/karpenter/controller:1.5.2", false),
        ("public.ecr.aws/karpenter/controller:0.37.0", false),
    ] {
        let check: Vec<&str> = gpu
            .lines()
            .filter(|l| l.starts_with("KV=") || l.starts_with("if [ -z \"$KV\""))
            .collect();
        let sh = format!("KARPENTER_IMAGE='{image}'\n{}\necho ok", check.join("\n"));
        let out = Command::new("sh").arg("-c").arg(sh).output().unwrap();
        assert_eq!(
            out.status.success(),
            ok,
            "{image}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The stand-in tools (`common::stand_ins`).
fn fake_tools(dir: &Path, diagnose_exit: i32, epoch: i64) {
    common::stand_ins(dir, diagnose_exit, epoch);
}

/// 2026-12-01T11:30:00Z, when the fixture's chosen blocks start.
const BLOCK_START: i64 = 1_796_124_600;

fn run_script(
    files: &std::collections::BTreeMap<String, String>,
    diagnose_exit: i32,
) -> (std::process::Output, String, tempfile::TempDir) {
    run_script_at(files, diagnose_exit, BLOCK_START + 60, &[])
}

fn run_script_at(
    files: &std::collections::BTreeMap<String, String>,
    diagnose_exit: i32,
    epoch: i64,
    args: &[&str],
) -> (std::process::Output, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    fake_tools(dir.path(), diagnose_exit, epoch);
    let path = format!(
        "{}:{}",
        dir.path().join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let mut cmd = Command::new("sh");
    cmd.arg("aws-cli.sh")
        .args(args)
        .current_dir(dir.path())
        .env("PATH", path)
        .env(
            "LISTED_OFFERINGS",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/capacity-block-offerings.json"),
        )
        .env_remove("CONFIRM_PURCHASE_USD");
    // The user's confirmation of the fee the script names (none when it buys nothing).
    if let Some(fee) = files
        .get("aws-cli.sh")
        .and_then(|s| common::confirmation(s))
    {
        cmd.env("CONFIRM_PURCHASE_USD", fee);
    }
    let out = cmd.output().unwrap();
    let calls = std::fs::read_to_string(dir.path().join("calls.log")).unwrap_or_default();
    (out, calls, dir)
}

#[test]
fn script_without_offerings_stops_before_anything_needing_an_id() {
    let files = artifacts("h100-no-offerings", "pytorchjob");
    let (out, calls, dir) = run_script(&files, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        calls
            .lines()
            .all(|l| l.starts_with("aws ec2 describe-capacity-block-offerings")),
        "{calls}"
    );
    // One JSON document (jq and any JSON reader read it), which `--offerings` reads.
    let saved = std::fs::read_to_string(dir.path().join("offerings.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&saved)
        .unwrap_or_else(|e| panic!("offerings.json is not one JSON document ({e}):\n{saved}"));
    let listed = calls
        .lines()
        .filter(|l| l.starts_with("aws ec2 describe-capacity-block-offerings"))
        .count();
    assert!(listed > 1, "{calls}");
    assert_eq!(doc.as_array().map(Vec::len), Some(listed), "{saved}");
    trainplace_advisor::aws::offerings::parse_offerings(&saved).unwrap();
    assert!(
        stdout.contains(
            "trainplace advise --gpus 64 --instance-type p5.48xlarge --hours 168 --region us-east-1"
        ) && stdout.contains("--offerings offerings.json --emit ."),
        "{stdout}"
    );
}

#[test]
fn script_buys_creates_checks_nccl_then_starts_the_job() {
    let files = artifacts("h100-blocks", "pytorchjob");
    let (out, calls, dir) = run_script(&files, 0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let order = [
        "aws ec2 purchase-capacity-block",
        "eksctl create cluster -f eksctl-cluster.yaml",
        "helm upgrade --install aws-efa-k8s-device-plugin",
        "kubectl apply -f nccl-tests-mpijob.yaml",
        "kubectl -n default wait --for=condition=Succeeded mpijob/train-nccl-tests",
        "trainplace diagnose nccl-tests.log",
        "kubectl apply -f job-pytorchjob.yaml",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|s| {
            calls
                .find(s)
                .unwrap_or_else(|| panic!("no {s:?} in {calls}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{calls}");
    let eksctl = std::fs::read_to_string(dir.path().join("eksctl-cluster.yaml")).unwrap();
    assert!(!eksctl.contains("REPLACE-WITH"));
    // Before the block starts the script stops after creating the cluster and says
    // what to run; `run` then checks NCCL and starts the job.
    let (out, calls, _dir) = run_script_at(&files, 0, BLOCK_START - 3600, &[]);
    assert!(out.status.success());
    assert!(
        calls.contains("eksctl create cluster") && !calls.contains("nccl-tests"),
        "{calls}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("sh aws-cli.sh run"));
    let (out, calls, _dir) = run_script_at(&files, 0, BLOCK_START + 60, &["run"]);
    assert!(out.status.success());
    assert!(
        !calls.contains("purchase") && calls.contains("kubectl apply -f job-pytorchjob.yaml"),
        "{calls}"
    );
    // A failing diagnosis stops the script before the training job.
    let (out, calls, _dir) = run_script(&files, 1);
    assert!(!out.status.success());
    assert!(
        calls.contains("trainplace diagnose") && !calls.contains("job-pytorchjob.yaml"),
        "{calls}"
    );
}

#[test]
fn images_carry_the_collective_stack_and_are_pinned() {
    let o = objects(
        &recommendation("h100-blocks", "pytorchjob"),
        &Policy::embedded(),
    );
    let image = o.job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        ["image"]
        .as_str()
        .unwrap();
    assert_eq!(
        image,
        "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"
    );
    let tests = o.nccl_tests.unwrap();
    let text = serde_json::to_string(&tests).unwrap();
    assert!(!text.contains(":latest") && text.contains("/usr/local/bin/all_reduce_perf"));
    let trn = objects(
        &recommendation("trainium", "pytorchjob"),
        &Policy::embedded(),
    );
    let image = trn.job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
        [0]["image"]
        .as_str()
        .unwrap();
    assert_eq!(
        image,
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"
    );
}

#[test]
fn karpenter_nodes_get_disk_and_reserved_pools_are_kept() {
    let blocks = objects(
        &karpenter_recommendation("h100-blocks", "pytorchjob"),
        &Policy::embedded(),
    );
    let bdm = &blocks.node_class.as_ref().unwrap()["spec"]["blockDeviceMappings"][0];
    assert_eq!(
        (
            bdm["deviceName"].as_str(),
            bdm["ebs"]["volumeSize"].as_str()
        ),
        (Some("/dev/xvda"), Some("500Gi"))
    );
    assert_eq!(
        blocks.node_class.as_ref().unwrap()["spec"]["instanceStorePolicy"],
        "RAID0"
    );
    assert_eq!(
        blocks.node_pool.as_ref().unwrap()["spec"]["disruption"]["consolidateAfter"],
        "Never"
    );
    let od = objects(
        &karpenter_recommendation("l40s-on-demand", "pytorchjob"),
        &Policy::embedded(),
    );
    assert_eq!(
        od.node_pool.as_ref().unwrap()["spec"]["disruption"]["consolidateAfter"],
        "10m"
    );
}

#[test]
fn mpijob_launcher_exports_the_nccl_env() {
    let o = objects(
        &recommendation("h100-blocks", "mpijob"),
        &Policy::embedded(),
    );
    let cmd: Vec<&str> = o.job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let worker_env = o.job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        [0]["env"]
        .as_array()
        .unwrap();
    assert!(!worker_env.is_empty());
    for e in worker_env {
        let pair = format!(
            "{}={}",
            e["name"].as_str().unwrap(),
            e["value"].as_str().unwrap()
        );
        let i = cmd
            .iter()
            .position(|c| *c == pair)
            .unwrap_or_else(|| panic!("{pair} not exported: {cmd:?}"));
        assert_eq!(cmd[i - 1], "-x");
    }
}

#[test]
fn eks_version_is_a_flag_with_a_current_default() {
    let o = objects(
        &recommendation("h100-blocks", "pytorchjob"),
        &Policy::embedded(),
    );
    assert_eq!(o.cluster_config["metadata"]["version"], "1.35");
    let (mut req, facts) = common::scenario("single-node");
    req.eks_version = Some("1.34".into());
    let policy = Policy::embedded();
    let rec = trainplace_advisor::recommend(
        &req.validate(&policy.catalog, common::now()).unwrap(),
        &policy.catalog,
        &facts,
    )
    .unwrap();
    assert_eq!(
        objects(&rec, &policy).cluster_config["metadata"]["version"],
        "1.34"
    );
    req.eks_version = Some("latest".into());
    assert_eq!(
        req.validate(&policy.catalog, common::now())
            .unwrap_err()
            .field,
        "eksVersion"
    );
}

#[test]
fn trainium_runs_a_process_per_neuroncore_and_names_only_emitted_files() {
    let policy = Policy::embedded();
    let r = recommendation("trainium", "pytorchjob");
    assert_eq!(
        (r.instance.name.as_str(), r.shape.nodes),
        ("trn2.48xlarge", 2)
    );
    assert_eq!(
        r.processes_per_pod, 64,
        "trn2: 64 logical NeuronCores (LNC=2)"
    );
    let o = objects(&r, &policy);
    assert_eq!(o.job["spec"]["nprocPerNode"], "64");
    let master =
        &o.job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0];
    assert!(
        master["command"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "--nproc_per_node=64")
    );
    assert_eq!(master["resources"]["limits"]["aws.amazon.com/neuron"], 16);
    let mpi = objects(&recommendation("trainium", "mpijob"), &policy);
    let launch = serde_json::to_string(&mpi.job["spec"]["mpiReplicaSpecs"]["Launcher"]).unwrap();
    assert!(launch.contains(r#""-np","128""#), "{launch}");
    let advice = trainplace_advisor::Advice {
        artifacts: trainplace_advisor::artifacts::artifacts(&r, &policy),
        recommendation: r.clone(),
        layout_svg: None,
    };
    let text = trainplace_advisor::render::text(&advice);
    assert!(
        text.starts_with("2 x trn2.48xlarge in us-east-1a (32 accelerators: 2 pods x 64 processes"),
        "{text}"
    );
    assert!(!text.contains("GPU"), "{text}");
    let svg = trainplace_advisor::svg::layout_svg(&r);
    assert!(!svg.contains("GPUs"), "{svg}");
    // Every file an artifact mentions was emitted (or is written by the script itself).
    let files = artifacts("trainium", "pytorchjob");
    let made_by_script = [
        "offerings.json",
        "nccl-tests.log",
        "nccom-test.log",
        "eksctl-cluster.yaml.new",
        "cloudformation.yaml",
        trainplace_advisor::artifacts::topology::INSTANCE_TOPOLOGY_FILE,
    ];
    let re = regex_lite(&files);
    for (name, mention) in re {
        assert!(
            files.contains_key(&mention) || made_by_script.contains(&mention.as_str()),
            "{name} mentions {mention}, which is not emitted"
        );
    }
}

/// (artifact, file name it mentions) for every `*.yaml` / `*.sh` / `*.json` token.
fn regex_lite(files: &std::collections::BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, text) in files {
        // A URL names an upstream file, not one of ours.
        let local: Vec<&str> = text
            .split_whitespace()
            .filter(|w| !w.contains("://"))
            .collect();
        for token in local.iter().flat_map(|w| {
            w.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'))
        }) {
            let token = token.trim_matches('.');
            if [".yaml", ".sh", ".json", ".log"].iter().any(|e| token.ends_with(e))
                && !token.contains("amazonaws")
                // The Karpenter API group / label domain, not a file.
                && token != "karpenter.sh"
            {
                out.push((name.clone(), token.to_string()));
            }
        }
    }
    out
}

#[test]
fn job_pods_request_cpu_memory_for_shm_and_efa_hugepages() {
    let o = objects(
        &recommendation("h100-blocks", "pytorchjob"),
        &Policy::embedded(),
    );
    let res = &o.job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        ["resources"];
    // p5.48xlarge: 128Gi /dev/shm + 32000Mi for the processes; 90% of 191.45 cores.
    assert_eq!(
        res["requests"]["memory"],
        format!("{}Mi", 128 * 1024 + 32_000)
    );
    assert_eq!(res["requests"]["cpu"], "172");
    assert_eq!(res["requests"]["hugepages-2Mi"], "5120Mi");
    assert_eq!(res["limits"]["hugepages-2Mi"], "5120Mi");
    assert!(
        res["limits"].get("memory").is_none(),
        "no memory limit: {res}"
    );
    // A type without EFA gets no hugepages; a small node caps memory at 90%.
    let (mut req, facts) = common::scenario("single-node");
    req.family = Some("l40s".into());
    req.gpus = Some(1);
    let policy = Policy::embedded();
    let r = trainplace_advisor::recommend(
        &req.validate(&policy.catalog, common::now()).unwrap(),
        &policy.catalog,
        &facts,
    )
    .unwrap();
    assert_eq!(r.instance.name, "g6e.xlarge");
    let o = objects(&r, &policy);
    let res = &o.job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        ["resources"];
    assert!(res["requests"].get("hugepages-2Mi").is_none());
    assert_eq!(
        res["requests"]["memory"],
        format!("{}Mi", 29_317 * 90 / 100)
    );
}

#[test]
fn every_emitted_script_parses_as_sh() {
    for scenario in [
        "h100-blocks",
        "h100-no-offerings",
        "l40s-on-demand",
        "a100-odcr",
        "single-node",
        "trainium",
    ] {
        for (name, text) in artifacts(scenario, "mpijob") {
            if !name.ends_with(".sh") {
                continue;
            }
            let out = Command::new("sh")
                .arg("-n")
                .arg("-c")
                .arg(&text)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{scenario}/{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// The pods of a job, wherever its kind keeps their template.
fn pod_templates(job: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for (_, r) in job["spec"]["pytorchReplicaSpecs"]
        .as_object()
        .into_iter()
        .flatten()
    {
        out.push(&r["template"]);
    }
    out
}

#[test]
fn karpenter_route_launches_nodes_and_keeps_them_for_the_run() {
    let policy = Policy::embedded();
    for (scenario, reserved, min) in [
        ("h100-blocks", true, "1.6"),
        ("a100-odcr", true, "1.6"),
        ("l40s-on-demand", false, "1.11"),
    ] {
        let rec = karpenter_recommendation(scenario, "pytorchjob");
        let o = objects(&rec, &policy);
        let (Some(node_class), Some(node_pool)) = (&o.node_class, &o.node_pool) else {
            panic!("{scenario}: no EC2NodeClass or NodePool on the Karpenter route");
        };
        let pods = pod_templates(&o.job);
        assert!(!pods.is_empty());
        for t in pods {
            let c = &t["spec"]["containers"][0]["resources"];
            assert!(
                c["requests"].get("hugepages-2Mi").is_none()
                    && c["limits"].get("hugepages-2Mi").is_none(),
                "{scenario}: Karpenter does not model hugepages: {c}"
            );
            assert_eq!(
                t["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"], "true",
                "{scenario}"
            );
            let sel = &t["spec"]["nodeSelector"];
            assert_eq!(sel["karpenter.sh/nodepool"], node_pool["metadata"]["name"]);
            assert_eq!(
                sel.get("karpenter.sh/capacity-type").is_some(),
                reserved,
                "{scenario}: {sel}"
            );
        }
        // The eksctl route's nodes have hugepages for libfabric: its job keeps them.
        let eksctl = objects(&recommendation(scenario, "pytorchjob"), &policy);
        for t in pod_templates(&eksctl.job) {
            assert!(
                t["spec"]["containers"][0]["resources"]["requests"]
                    .get("hugepages-2Mi")
                    .is_some()
            );
            assert!(t["metadata"].get("annotations").is_none());
        }
        assert_eq!(
            node_pool["spec"]["template"]["spec"]["expireAfter"],
            "Never"
        );
        let alias = node_class["spec"]["amiSelectorTerms"][0]["alias"]
            .as_str()
            .unwrap();
        assert!(
            alias.starts_with("al2023@v2") && !alias.contains("latest"),
            "{alias}"
        );
        assert_eq!(
            node_class["spec"].get("placementGroupSelector").is_some(),
            !reserved
        );
        let script = &karpenter_artifacts(scenario, "pytorchjob")["karpenter-prerequisites.sh"];
        assert!(
            script.contains(&format!("older than {min}")),
            "{scenario}: {script}"
        );
        // The check itself, on real image tags.
        let check: Vec<&str> = script
            .lines()
            .filter(|l| l.starts_with("KV=") || l.starts_with("if [ -z \"$KV\""))
            .collect();
        for (tag, ok) in [("1.10.2", min == "1.6"), ("1.11.0", true), ("1.5.2", false)] {
            let sh = format!(
                "KARPENTER_IMAGE='public.ecr.aws/karpenter/controller:{tag}'\n{}\necho ok",
                check.join("\n")
            );
            let out = Command::new("sh").arg("-c").arg(sh).output().unwrap();
            assert_eq!(out.status.success(), ok, "{scenario}: Karpenter {tag}");
        }
    }
}

#[test]
fn trainium_checks_its_collectives_with_nccom_test_not_nccl_tests() {
    let files = artifacts("trainium", "pytorchjob");
    assert!(!files.contains_key("nccl-tests-mpijob.yaml"));
    let script = &files["aws-cli.sh"];
    assert!(
        script.contains("kubectl apply -f nccom-test-mpijob.yaml")
            && !script.contains("nccl-tests")
            && !script.contains("trainplace diagnose"),
        "{script}"
    );
    let o = objects(
        &recommendation("trainium", "pytorchjob"),
        &Policy::embedded(),
    );
    let job = o.nccl_tests.as_ref().unwrap();
    common::assert_valid(
        &common::crd_validator("mpi-operator-v2beta1/kubeflow.org_mpijobs.yaml"),
        job,
        "nccom-test MPIJob",
    );
    assert_eq!(
        job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
            ["limits"]["aws.amazon.com/neuron"],
        16
    );
    // The launcher starts nccom-test on the first worker with every worker as a host:
    // run its command against a hostfile as the MPI operator writes it and a stand-in ssh.
    let launch =
        job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
            [2]
        .as_str()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hostfile = dir.path().join("hostfile");
    std::fs::write(
        &hostfile,
        "train-nccom-test-worker-0.train-nccom-test.default.svc slots=64\ntrain-nccom-test-worker-1.train-nccom-test.default.svc slots=64\n",
    )
    .unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("ssh"),
        "#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n",
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(bin.join("ssh"))
        .status()
        .unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(launch.replace("/etc/mpi/hostfile", hostfile.to_str().unwrap()))
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .output()
        .unwrap();
    let args = String::from_utf8_lossy(&out.stdout);
    let w0 = "train-nccom-test-worker-0.train-nccom-test.default.svc";
    let w1 = "train-nccom-test-worker-1.train-nccom-test.default.svc";
    assert!(out.status.success(), "{args}");
    assert!(args.contains(&format!("[{w0}]")), "{args}");
    assert!(
        args.contains(&format!(
            "NEURON_RT_ROOT_COMM_ID={w0}:44444 nccom-test -r 128 -N 2 -b 8 -e 1GB -f 2 -n 50 -w 5 -d fp32 allr --hosts {w0} {w1}"
        )) && args.contains("FI_PROVIDER=efa"),
        "{args}"
    );
}

#[test]
fn offerings_saved_as_one_array_read_as_the_answers_one_after_another() {
    use trainplace_advisor::aws::offerings::parse_offerings;
    let one = common::offerings_fixture();
    let gb200 = common::fixture("gb200-offerings.json");
    let array = parse_offerings(&format!("[{one},\n{gb200}]")).unwrap();
    let appended = parse_offerings(&format!("{one}\n{gb200}")).unwrap();
    assert!(array.len() > parse_offerings(&one).unwrap().len());
    assert_eq!(array, appended);
    // A bad answer inside the array is named by its place.
    let err =
        parse_offerings(&format!("[{one}, {{\"CapacityBlockOfferings\": [1]}}]")).unwrap_err();
    assert!(err.field.starts_with("[1]."), "{err}");
}

#[test]
fn no_offerings_at_all_in_the_region_fails_clearly_before_any_choice() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in artifacts("h100-no-offerings", "pytorchjob") {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    common::stand_ins(dir.path(), 0, 0);
    // Every listing answers none: the region sells no Capacity Blocks of the type (or
    // none in this window).
    let (out, calls) = common::run_in_env(dir.path(), None, &[], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no Capacity Block offerings of p5.48xlarge in us-east-1")
            && err.contains(
                "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html"
            ),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("Choose and buy with"),
        "{calls}"
    );
    assert!(!dir.path().join("offerings.json").exists());
}
