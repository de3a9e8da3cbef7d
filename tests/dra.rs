//! DRA claims through the real binary and the server: a ResourceClaimTemplate or
//! ComputeDomain in the same input file, in `--cluster DIR` or in the server's inventory
//! counts the devices of the pods that claim it; one found nowhere is reported, not
//! passed as a CPU pod.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn check(file: &Path, extra: &[&str]) -> (Output, Vec<Value>) {
    let o = Command::new(BIN)
        .args(["check", "-o", "json", "-f"])
        .arg(file)
        .args(extra)
        .current_dir(root())
        .output()
        .expect("binary runs");
    let entries = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, entries)
}

/// The fixture's object, and its submitted objects before it when `with_objects`.
fn input(dir: &Path, fixture: &str, with_objects: bool) -> std::path::PathBuf {
    let case: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures").join(fixture)).unwrap(),
    )
    .unwrap();
    let mut text = String::new();
    if with_objects {
        for o in case["objects"].as_array().into_iter().flatten() {
            text.push_str(&serde_yaml_ng::to_string(o).unwrap());
            text.push_str("---\n");
        }
    }
    text.push_str(&serde_yaml_ng::to_string(&case["object"]).unwrap());
    let path = dir.join(fixture.replace('/', "-"));
    std::fs::write(&path, text).unwrap();
    path
}

fn rules(entry: &Value) -> Vec<String> {
    entry["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect()
}

fn entry<'v>(entries: &'v [Value], kind: &str) -> &'v Value {
    entries
        .iter()
        .find(|e| e["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {entries:#?}"))
}

#[test]
fn a_template_in_the_same_file_counts_the_claimed_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let with = input(dir.path(), "pods/dra-gpu-one-per-pod.yaml", true);
    let (o, entries) = check(&with, &[]);
    assert_eq!(o.status.code(), Some(1), "one GPU per pod is denied");
    assert_eq!(rules(entry(&entries, "Pod")), ["partial-node"]);
    // The same pod alone: its claim cannot be counted, and says so.
    let alone = input(dir.path(), "pods/dra-gpu-one-per-pod.yaml", false);
    let (o, entries) = check(&alone, &[]);
    assert_eq!(o.status.code(), Some(0));
    let pod = entry(&entries, "Pod");
    assert_eq!(rules(pod), ["device-claims"]);
    assert!(
        pod.to_string()
            .contains("ResourceClaimTemplate single-gpu not found"),
        "{pod:#}"
    );
}

#[test]
fn a_template_in_the_cluster_dir_counts_the_claimed_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let alone = input(dir.path(), "pods/dra-gpu-template-from-cluster.yaml", false);
    let (o, entries) = check(&alone, &["--cluster", "tests/fixtures/cluster/eks-p5-dra"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(rules(entry(&entries, "Pod")), ["partial-node"]);
}

#[test]
fn the_upstream_gb200_sample_is_judged_on_gb200_even_with_a_p5_default() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy");
    std::fs::create_dir(&policy).unwrap();
    std::fs::write(
        policy.join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\ndefaults:\n  instanceType: p5.48xlarge\nrules:\n  partialNode: enforce\n",
    )
    .unwrap();
    let sample = root()
        .join("tests/fixtures/upstream/aws/micro-benchmarks/nccl-tests/nccl-tests-gb200.yaml");
    let (o, entries) = check(&sample, &["--policy-dir", policy.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{entries:#?}");
    let job = entry(&entries, "MPIJob");
    assert!(rules(job).is_empty(), "{job:#}");
    assert!(job.to_string().contains("p6e-gb200.36xlarge"), "{job:#}");
}

/// The webhook reads the template from its inventory (here the file inventory, which
/// shares the snapshot code with the live watch).
#[tokio::test]
async fn the_server_counts_a_claim_through_its_inventory() {
    use trainplace::server::config::InventoryMode;
    let pod = common::fixture_object("dra-gpu-template-from-cluster");
    let mut cfg = common::config(None, None);
    cfg.inventory = InventoryMode::Files(root().join("tests/fixtures/cluster/eks-p5-dra"));
    let body = validate(cfg, &pod).await;
    assert_eq!(body["response"]["allowed"], false, "{body:#}");
    assert!(body.to_string().contains("partial-node"), "{body:#}");
    // Without an inventory the claim is not counted: allowed, with a warning.
    let body = validate(common::config(None, None), &pod).await;
    assert_eq!(body["response"]["allowed"], true, "{body:#}");
    assert!(body.to_string().contains("device-claims"), "{body:#}");
}

async fn validate(cfg: trainplace::server::Config, pod: &Value) -> Value {
    let srv = common::serve(cfg).await;
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{}/validate", srv.addr.port());
    c.post(&url)
        .json(&common::review_for(pod, "dra"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}
