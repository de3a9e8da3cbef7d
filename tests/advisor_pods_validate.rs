//! The advisor's job pods as the Pods their operators create: every pod template of
//! every framework and scenario passes `kubernetes-validate --strict` (official
//! Kubernetes schemas: resources, hugepages, tolerations, volumes, affinity).

mod common;

use serde_json::{Value, json};
use trainplace_advisor::{AdviceRequest, RawFacts, advise};
use trainplace_engine::Policy;

fn templates(job: &Value) -> Vec<Value> {
    let spec = &job["spec"];
    match job["kind"].as_str().unwrap() {
        "PyTorchJob" => spec["pytorchReplicaSpecs"]
            .as_object()
            .unwrap()
            .values()
            .map(|r| r["template"].clone())
            .collect(),
        "MPIJob" => spec["mpiReplicaSpecs"]
            .as_object()
            .unwrap()
            .values()
            .map(|r| r["template"].clone())
            .collect(),
        "JobSet" => vec![spec["replicatedJobs"][0]["template"]["spec"]["template"].clone()],
        other => panic!("{other}"),
    }
}

#[test]
fn job_pods_pass_strict_kubernetes_validation() {
    let policy = Policy::embedded();
    let offerings = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/advisor/fixtures/capacity-block-offerings.json"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let asks = [
        ("h100", 64, Some(offerings.as_str())),
        ("l40s", 16, None),
        ("l40s", 1, None),
        ("trainium", 32, None),
    ];
    for (family, gpus, offers) in asks {
        for framework in ["pytorchjob", "jobset", "mpijob"] {
            let req = AdviceRequest {
                gpus: Some(gpus),
                family: Some(family.into()),
                duration_days: Some(2.0),
                framework: Some(framework.into()),
                now: Some("2026-11-22T00:00:00Z".into()),
                ..Default::default()
            };
            let facts = RawFacts {
                offerings: offers.map(String::from),
                ..Default::default()
            };
            let advice = advise(&req, &facts, &policy, jiff::Timestamp::now()).unwrap();
            let job: Value = serde_yaml_ng::from_str(
                &advice
                    .artifacts
                    .iter()
                    .find(|a| a.name.starts_with("job-"))
                    .unwrap()
                    .content,
            )
            .unwrap();
            for (i, t) in templates(&job).into_iter().enumerate() {
                let mut meta = t.get("metadata").cloned().unwrap_or_else(|| json!({}));
                meta["name"] = json!(format!("{family}-{gpus}-{framework}-{i}"));
                let pod =
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]});
                let path = dir
                    .path()
                    .join(format!("{family}-{gpus}-{framework}-{i}.yaml"));
                std::fs::write(&path, serde_yaml_ng::to_string(&pod).unwrap()).unwrap();
                files.push(path);
            }
        }
    }
    common::assert_strictly_valid("emitted job pods", &files);
    // It would catch a broken pod: a string where a list belongs.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers: [{name: c, image: x}]\n  tolerations: nvidia.com/gpu\n",
    )
    .unwrap();
    assert!(!common::strict_validate(&[&bad]).status.success());
}
