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
        let req = AdviceRequest {
            gpus: Some(gpus),
            family: Some(family.into()),
            duration_days: Some(2.0),
            now: Some("2026-11-22T00:00:00Z".into()),
            ..Default::default()
        };
        let facts = RawFacts {
            offerings: offers.map(String::from),
            ..Default::default()
        };
        let advice = advise(&req, &facts, &Policy::embedded(), jiff::Timestamp::now()).unwrap();
        for name in ["checkpoint-storage.yaml", "nccl-node-check.yaml"] {
            let content = &advice
                .artifacts
                .iter()
                .find(|a| a.name == name)
                .unwrap_or_else(|| panic!("{family}: {name} not emitted"))
                .content;
            let path = dir.path().join(format!("{family}-{name}"));
            std::fs::write(&path, content).unwrap();
            files.push(path);
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
