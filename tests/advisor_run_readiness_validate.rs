//! The checkpoint storage (StorageClass + PersistentVolumeClaim) and the per-node NCCL
//! check (an Indexed Job) the advisor emits pass `kubernetes-validate --strict`
//! (official Kubernetes schemas), as written to disk.

mod common;

use trainplace_advisor::{AdviceRequest, RawFacts, advise};
use trainplace_engine::Policy;

#[test]
fn checkpoint_storage_and_the_node_check_pass_strict_kubernetes_validation() {
    let offerings = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/advisor/fixtures/capacity-block-offerings.json"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (family, gpus, offers) in [("h100", 64, Some(offerings.as_str())), ("l40s", 16, None)] {
        // A plan on each route: the Karpenter plan's node check is its own file.
        for (route, names) in [
            (
                "eksctl",
                &["checkpoint-storage.yaml", "nccl-node-check.yaml"][..],
            ),
            ("karpenter", &["nccl-node-check-karpenter.yaml"][..]),
        ] {
            let req = AdviceRequest {
                gpus: Some(gpus),
                family: Some(family.into()),
                duration_days: Some(2.0),
                now: Some("2026-11-22T00:00:00Z".into()),
                route: Some(route.into()),
                ..Default::default()
            };
            let facts = RawFacts {
                offerings: offers.map(String::from),
                ..Default::default()
            };
            let advice = advise(&req, &facts, &Policy::embedded(), jiff::Timestamp::now()).unwrap();
            for name in names {
                let content = &advice
                    .artifacts
                    .iter()
                    .find(|a| a.name == *name)
                    .unwrap_or_else(|| panic!("{family}: {name} not emitted"))
                    .content;
                let path = dir.path().join(format!("{family}-{name}"));
                std::fs::write(&path, content).unwrap();
                files.push(path);
            }
        }
    }
    common::assert_strictly_valid("checkpoint storage and node check", &files);
    // It would catch a broken claim: a size that is not a quantity.
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains("storage: 16800Gi"), "{text}");
    std::fs::write(&bad, text.replace("storage: 16800Gi", "storage: [16800]")).unwrap();
    assert!(!common::strict_validate(&[&bad]).status.success());
}

/// `trainplace check` on the emitted files, as a platform engineer runs it before
/// applying: the per-node check and the job that mounts the checkpoints are admitted
/// unchanged, the storage passes through.
#[test]
fn trainplace_check_admits_the_node_check_and_the_job_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let offerings = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/advisor/fixtures/capacity-block-offerings.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["advise", "--gpus", "16", "--family", "h100", "--days", "3"])
        .args([
            "--capacity",
            "capacity-block",
            "--now",
            "2026-11-22T00:00:00Z",
        ])
        .arg("--offerings")
        .arg(&offerings)
        .arg("--emit")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["check", "-f", &file("nccl-node-check.yaml")])
        .args(["-f", &file("job-pytorchjob.yaml")])
        .args(["-f", &file("checkpoint-storage.yaml")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for line in [
        "Job default/train-node-check: allowed (no changes)",
        "PyTorchJob default/train: allowed (no changes)",
        "PersistentVolumeClaim default/train-checkpoints: allowed (no changes)",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    assert!(!text.contains("warn") && !text.contains("deny"), "{text}");
    // The job mounts the claim the storage file makes.
    let job = std::fs::read_to_string(file("job-pytorchjob.yaml")).unwrap();
    assert!(job.contains("claimName: train-checkpoints"), "{job}");
}
