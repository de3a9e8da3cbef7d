//! `advise` and `advisor serve` read `--policy-dir`: an InstanceCatalog in the directory
//! adds instance types the advisor can then choose (through the real binary).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");

/// A catalog with one made-up type of a made-up family: only a policy directory can
/// make the advisor know it.
const CATALOG: &str = r#"apiVersion: trainplace.io/v1alpha1
kind: InstanceCatalog
instances:
  - name: x9.48xlarge
    family: z100
    accelerator: Z100
    acceleratorResource: nvidia.com/gpu
    accelerators: 8
    acceleratorMemoryGiB: 96
    memoryGiB: 2048
    intraNode: NVSwitch
    nvlink: true
    maxEfa: 8
    networkGbps: 800
    rdma: read-write
    capacityBlocks: false
    pricePerHourUsd: 50.0
    shmDefault: 128Gi
    source: "test fixture"
"#;

fn policy_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("catalog.yaml"), CATALOG).unwrap();
    // A directory names its policy; this one means the embedded defaults.
    std::fs::write(
        dir.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\n",
    )
    .unwrap();
    dir
}

#[test]
fn advise_chooses_a_type_from_the_policy_dir_catalog() {
    let dir = policy_dir();
    let out = Command::new(BIN)
        .args(["advise", "--gpus", "16", "--family", "z100", "--days", "1"])
        .args(["-o", "json", "--policy-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["recommendation"]["instance"]["name"], "x9.48xlarge");
    assert_eq!(v["recommendation"]["shape"]["nodes"], 2);
    // Without the directory the family is unknown: exit 2 naming the field.
    let out = Command::new(BIN)
        .args(["advise", "--gpus", "16", "--family", "z100", "--days", "1"])
        .env_remove("TRAINPLACE_POLICY_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("family"));
}

#[test]
fn advise_reports_a_broken_policy_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("catalog.yaml"), "kind: Nonsense\n").unwrap();
    let out = Command::new(BIN)
        .args(["advise", "--gpus", "8", "--days", "1", "--policy-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("catalog.yaml"), "{err}");
}

fn serve(dir: &Path) -> (common::ServeProcess, String) {
    let [addr] = common::free_addrs::<1>();
    let child = Command::new(BIN)
        .args([
            "advisor",
            "serve",
            "--addr",
            &addr.to_string(),
            "--policy-dir",
        ])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (common::ServeProcess(child), format!("http://{addr}"))
}

#[tokio::test]
async fn advisor_serve_uses_the_policy_dir_catalog() {
    let dir = policy_dir();
    let (_server, base) = serve(dir.path());
    let client = reqwest::Client::new();
    let types: serde_json::Value = common::eventually("advisor serve answering", || async {
        let res = client
            .get(format!("{base}/v1/instance-types"))
            .send()
            .await
            .ok()?;
        Some(res.json().await.unwrap())
    })
    .await;
    assert!(
        types
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "x9.48xlarge"),
        "{types}"
    );
    let res = client
        .post(format!("{base}/v1/recommendations"))
        .json(&serde_json::json!({"gpus": 8, "family": "z100", "durationDays": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["recommendation"]["instance"]["name"], "x9.48xlarge");
}
