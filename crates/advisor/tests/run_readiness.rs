//! What a platform team adds around the plan: checkpoint storage sized to the job and
//! mounted in its pods with the plan's deadline, the DCGM exporter on the GPU nodes,
//! and a per-node NCCL check that keeps the one-pod-per-node layout and fails a slow
//! node.

mod common;

use common::{
    artifacts, assert_valid, eksctl_validator, gpu_nodegroups, karpenter_recommendation,
    recommendation,
};
use serde_json::{Value, json};
use trainplace_advisor::artifacts::{node_check, objects, storage};
use trainplace_engine::{Policy, Requester, evaluate};

fn pod_specs(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) if m.get("containers").is_some_and(Value::is_array) => out.push(v.clone()),
        Value::Object(m) => m.values().for_each(|c| pod_specs(c, out)),
        Value::Array(a) => a.iter().for_each(|c| pod_specs(c, out)),
        _ => {}
    }
}

#[test]
fn fsx_sizes_follow_the_persistent_2_steps() {
    for (need, size) in [
        (1, 1200),
        (1200, 1200),
        (1201, 2400),
        (2400, 2400),
        (2401, 4800),
        (15360, 16800),
    ] {
        assert_eq!(storage::fsx_capacity_gib(need), size, "{need} GiB");
    }
}

#[test]
fn checkpoint_storage_is_sized_to_the_job_and_mounted_with_the_deadline() {
    let policy = Policy::embedded();
    for framework in ["pytorchjob", "jobset", "mpijob", "trainjob"] {
        let rec = recommendation("h100-blocks", framework);
        let o = objects(&rec, &policy);
        let [class, claim] = o
            .checkpoint_storage
            .clone()
            .expect("a block plan has storage");
        // 3 checkpoints x 64 H100 x 80 GiB = 15,360 GiB -> 16,800 GiB (7 x 2,400).
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "16800Gi");
        assert_eq!(claim["spec"]["storageClassName"], class["metadata"]["name"]);
        assert_eq!(class["provisioner"], "fsx.csi.aws.com");
        assert_eq!(class["parameters"]["deploymentType"], "PERSISTENT_2");
        let on_karpenter = objects(&karpenter_recommendation("h100-blocks", framework), &policy);
        for job in [&o.job, &on_karpenter.job] {
            let mut specs = Vec::new();
            pod_specs(job, &mut specs);
            assert!(!specs.is_empty());
            for spec in specs {
                let vols = spec["volumes"].as_array().unwrap();
                assert!(
                    vols.iter()
                        .any(|v| v["persistentVolumeClaim"]["claimName"]
                            == claim["metadata"]["name"]),
                    "{framework}: {vols:?}"
                );
                for c in spec["containers"].as_array().unwrap() {
                    let mounts = c["volumeMounts"].as_array().unwrap();
                    assert!(mounts.iter().any(|m| m["mountPath"] == "/checkpoints"));
                    let env = c["env"].as_array().unwrap();
                    assert!(
                        env.contains(
                            &json!({"name": "CHECKPOINT_BY", "value": "2026-12-08T10:50:00Z"})
                        ),
                        "{framework}: {env:?}"
                    );
                }
            }
        }
    }
    // The driver comes with the cluster, and the config stays valid.
    let o = objects(&recommendation("h100-blocks", "pytorchjob"), &policy);
    let addons = o.cluster_config["addons"].as_array().unwrap();
    assert!(
        addons.iter().any(|a| a["name"] == "aws-fsx-csi-driver"
            && a["attachPolicyARNs"][0] == "arn:aws:iam::aws:policy/AmazonFSxFullAccess"),
        "{addons:?}"
    );
    assert_valid(&eksctl_validator(), &o.cluster_config, "eksctl with FSx");
}

#[test]
fn a_short_on_demand_run_gets_no_storage_and_a_long_one_does() {
    let policy = Policy::embedded();
    // 10 hours on-demand: nothing to checkpoint for.
    let o = objects(&recommendation("single-node", "pytorchjob"), &policy);
    assert!(o.checkpoint_storage.is_none());
    assert!(!o.job.to_string().contains("checkpoints"));
    // 30 hours on-demand (16 L40S, 48 GiB each): 3 x 16 x 48 = 2,304 -> 2,400 GiB, no deadline.
    let o = objects(&recommendation("l40s-on-demand", "pytorchjob"), &policy);
    let [_, claim] = o.checkpoint_storage.clone().unwrap();
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "2400Gi");
    assert!(!o.job.to_string().contains("CHECKPOINT_BY"));
    // The script fills in the network, applies it and waits for the file system.
    let script = &artifacts("l40s-on-demand", "pytorchjob")["aws-cli.sh"];
    let apply = script
        .find("kubectl apply -f checkpoint-storage.yaml")
        .unwrap();
    assert!(script.find("aws ec2 describe-subnets").unwrap() < apply);
    assert!(script.contains("wait --for=jsonpath='{.status.phase}'=Bound pvc/train-checkpoints"));
}

/// Kubernetes' toleration/taint match (`Toleration.ToleratesTaint`), for `Exists`.
fn tolerated(tolerations: &Value, taint: &Value) -> bool {
    tolerations.as_array().unwrap().iter().any(|t| {
        t["operator"] == "Exists" && t["key"] == taint["key"] && t["effect"] == taint["effect"]
    })
}

#[test]
fn dcgm_exporter_lands_on_every_gpu_node_and_trainium_is_skipped() {
    for scenario in ["h100-blocks", "l40s-on-demand", "a100-odcr"] {
        let rec = recommendation(scenario, "pytorchjob");
        let files = artifacts(scenario, "pytorchjob");
        let values: Value = serde_yaml_ng::from_str(&files["dcgm-exporter-values.yaml"]).unwrap();
        let o = objects(&rec, &Policy::embedded());
        let groups = gpu_nodegroups(&o.cluster_config);
        assert!(!groups.is_empty());
        for ng in groups {
            for taint in ng["taints"].as_array().unwrap() {
                assert!(
                    tolerated(&values["tolerations"], taint),
                    "{scenario}: {taint}"
                );
            }
            assert_eq!(
                values["nodeSelector"]["node.kubernetes.io/instance-type"], ng["instanceType"],
                "{scenario}"
            );
        }
        assert_eq!(values["serviceMonitor"]["enabled"], false);
        assert!(files["aws-cli.sh"].contains(
            "helm upgrade --install dcgm-exporter gpu-helm-charts/dcgm-exporter --version 4.8.2"
        ));
    }
    let files = artifacts("trainium", "pytorchjob");
    assert!(!files.contains_key("dcgm-exporter-values.yaml"));
    assert!(!files["aws-cli.sh"].contains("dcgm-exporter --version"));
    assert!(files["aws-cli.sh"].contains("neuron-monitor"));
    assert!(!files.contains_key("nccl-node-check.yaml"));
}

#[test]
fn the_node_check_keeps_the_layout_the_webhook_enforces() {
    let policy = Policy::embedded();
    let who = Requester {
        namespace: "default",
        ..Default::default()
    };
    for scenario in ["h100-blocks", "l40s-on-demand", "single-node"] {
        let rec = recommendation(scenario, "pytorchjob");
        let check = objects(&rec, &policy).node_check.unwrap();
        assert_eq!(check["spec"]["completions"], rec.shape.nodes);
        assert_eq!(check["spec"]["parallelism"], rec.shape.nodes);
        let v = evaluate(&check, &policy, &who).unwrap();
        assert!(
            v.allowed && v.patch.is_empty(),
            "{scenario} Job: {:?} {:#?}",
            v.reasons(),
            v.changes
        );
        // A pod of it as the Job controller makes it.
        let t = &check["spec"]["template"];
        let mut meta = t["metadata"].clone();
        meta["name"] = json!("check-0");
        meta["namespace"] = json!("default");
        meta["labels"]["batch.kubernetes.io/job-completion-index"] = json!("0");
        meta["labels"]["job-name"] = check["metadata"]["name"].clone();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]});
        let v = evaluate(&pod, &policy, &who).unwrap();
        assert!(
            v.allowed && v.patch.is_empty(),
            "{scenario} pod: {:?} {:#?}",
            v.reasons(),
            v.changes
        );
        let res = &t["spec"]["containers"][0]["resources"]["limits"];
        assert_eq!(
            res["nvidia.com/gpu"], rec.instance.accelerators,
            "{scenario}"
        );
    }
}

/// The pod's verdict on a log: the script's judging half run over `log`.
fn verdict(check: &Value, log: &str) -> (bool, String) {
    let script = check["spec"]["template"]["spec"]["containers"][0]["command"][2]
        .as_str()
        .unwrap();
    let judge = script.split("tee /tmp/nccl.log; ").nth(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nccl.log");
    std::fs::write(&path, log).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(judge.replace("/tmp/nccl.log", path.to_str().unwrap()))
        .env("NODE_NAME", "ip-10-0-0-1")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn diagnose_fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../diagnose/fixtures")
            .join(name),
    )
    .unwrap()
}

#[test]
fn the_node_check_fails_a_node_below_the_tables_single_node_figure() {
    let rec = recommendation("h100-blocks", "pytorchjob");
    let check = objects(&rec, &Policy::embedded()).node_check.unwrap();
    let table = trainplace_catalog::bandwidth::Expectations::embedded();
    let low = |nvls| {
        table
            .lookup_nvls("p5.48xlarge", 1, Some(8), Some(nvls))
            .unwrap()
            .low
    };
    assert_eq!((low(false), low(true)), (333.0, 432.0));
    // 351.7 GB/s without NVLink SHARP: a healthy 8 x H100 node (370 GB/s measured).
    let good = diagnose_fixture("nccl_tests_p5_nvls_off.txt");
    let (ok, line) = verdict(&check, &good);
    assert!(ok, "{line}");
    assert!(
        line.contains("node ip-10-0-0-1: NVLS off, peak busbw 351.7 GB/s (pass at 333.0)"),
        "{line}"
    );
    // The same figure with NVLS in use: 27% under a healthy node's 480 GB/s, which the
    // old single floor (315 GB/s) passed.
    let (ok, line) = verdict(&check, &diagnose_fixture("nccl_tests_p5_nvls_on.txt"));
    assert!(!ok, "{line}");
    assert!(
        line.contains("NVLS on, peak busbw 351.7 GB/s (pass at 432.0)"),
        "{line}"
    );
    // No NCCL log in the output: judged as NVLS off (the lower floor).
    let (ok, line) = verdict(&check, &diagnose_fixture("nccl_tests_p5_single_node.txt"));
    assert!(ok && line.contains("NVLS off"), "{line}");
    // The same node with NVLink at half speed: the out-of-place busbw halved.
    let slow: String = good
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() >= 12 && f[0].chars().all(|c| c.is_ascii_digit()) {
                let half = f[7].parse::<f64>().unwrap() / 2.0;
                let mut f: Vec<String> = f.iter().map(|s| s.to_string()).collect();
                f[7] = format!("{half:.2}");
                f.join(" ")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let (ok, line) = verdict(&check, &slow);
    assert!(!ok, "{line}");
    assert!(line.contains("peak busbw 175.9 GB/s"), "{line}");
    // No figures at all (the run died): a failure, not a pass.
    assert!(!verdict(&check, "# nThread 1\n").0);
    // The pod asks NCCL for the log that says it.
    let script = check["spec"]["template"]["spec"]["containers"][0]["command"][2]
        .as_str()
        .unwrap();
    assert!(
        script.starts_with("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT"),
        "{script}"
    );
}

#[test]
fn the_script_checks_each_node_before_the_multi_node_check_and_the_job() {
    let script = &artifacts("h100-blocks", "pytorchjob")["aws-cli.sh"];
    let node = script
        .find("kubectl apply -f nccl-node-check.yaml")
        .unwrap();
    let multi = script
        .find("kubectl apply -f nccl-tests-mpijob.yaml")
        .unwrap();
    let job = script.find("kubectl apply -f job-pytorchjob.yaml").unwrap();
    assert!(node < multi && multi < job, "{script}");
    assert!(script.contains("failedIndexes"));
    // The file says what passes and where the figure comes from, once.
    let file = &artifacts("h100-blocks", "pytorchjob")["nccl-node-check.yaml"];
    assert!(
        file.contains("below 432 GB/s with NVLink SHARP (measured: docs/measurements.md: 8 x H100 with NVLS, 480 GB/s")
            && file.contains("or 333 GB/s without (measured: docs/measurements.md: 8 x H100 without NVLS (ring), 370 GB/s"),
        "{file}"
    );
    // The name the script waits on is the Job's.
    let check = objects(
        &recommendation("h100-blocks", "pytorchjob"),
        &Policy::embedded(),
    )
    .node_check
    .unwrap();
    let name = check["metadata"]["name"].as_str().unwrap();
    assert_eq!(name, node_check::name("train"));
    assert!(script.contains(&format!("get job {name} -o jsonpath")));
}
