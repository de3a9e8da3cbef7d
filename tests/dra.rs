//! DRA claims through the real binary and the server: a ResourceClaimTemplate or
//! ComputeDomain in the same input file, in `--cluster DIR` or in the server's inventory
//! counts the devices of the pods that claim it; one found nowhere is reported, not
//! passed as a CPU pod.

mod common;

use common::root;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_trainplace");

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
    // Without an inventory the claim is not counted: reported, and partial-node is not
    // judged. Sent straight to /validate, the pod of an 8-pod job also lacks the zone
    // hold the mutating webhook writes for it whatever its devices count.
    let body = validate(common::config(None, None), &pod).await;
    uncounted(&body);
}

/// The verdict on the DRA pod whose claim could not be counted.
fn uncounted(body: &Value) {
    let text = body.to_string();
    assert!(text.contains("device-claims"), "{body:#}");
    assert!(!text.contains("[partial-node]"), "{body:#}");
    assert!(text.contains("arrived without the zone hold"), "{body:#}");
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

/// A Kubernetes API stand-in for the live inventory: lists answer from fixed objects,
/// watches stay open and send nothing, every other path is 404 (as for a CRD that is
/// not installed).
async fn fake_api(objects: std::collections::HashMap<&'static str, Value>) -> std::net::SocketAddr {
    use axum::body::{Body, Bytes};
    use axum::http::{Response, StatusCode, Uri};
    let objects = std::sync::Arc::new(objects);
    let app = axum::Router::new().fallback(move |uri: Uri| {
        let objects = objects.clone();
        async move {
            let json = |status: StatusCode, v: Value| {
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(v.to_string()))
                    .unwrap()
            };
            let Some(items) = objects.get(uri.path()) else {
                return json(
                    StatusCode::NOT_FOUND,
                    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
                );
            };
            if uri.query().is_some_and(|q| q.contains("watch=true")) {
                let quiet = futures_util::stream::pending::<Result<Bytes, std::convert::Infallible>>();
                return Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from_stream(quiet))
                    .unwrap();
            }
            json(
                StatusCode::OK,
                serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// The live inventory watches ResourceClaimTemplates: the webhook counts a pod's claim
/// through the template it read from the API, and without it cannot.
#[tokio::test]
async fn the_live_inventory_watches_claim_templates() {
    let body = live_verdict(true).await;
    assert_eq!(body["response"]["allowed"], false, "{body:#}");
    assert!(body.to_string().contains("partial-node"), "{body:#}");
    let body = live_verdict(false).await;
    uncounted(&body);
}

/// The verdict on the one-GPU DRA pod from a server whose live inventory reads a fake
/// API (with or without the pod's ResourceClaimTemplate).
async fn live_verdict(with_template: bool) -> Value {
    let cluster = root().join("tests/fixtures/cluster/eks-p5-dra");
    let list = |f: &str| -> Value {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(cluster.join(f)).unwrap()).unwrap();
        v["items"].clone()
    };
    let mut objects = std::collections::HashMap::from([
        ("/api/v1/nodes", list("nodes.json")),
        (
            "/api/v1/namespaces",
            serde_json::json!([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "resourceVersion": "1"}}]),
        ),
        ("/api/v1/pods", serde_json::json!([])),
    ]);
    if with_template {
        objects.insert(
            "/apis/resource.k8s.io/v1/resourceclaimtemplates",
            list("resourceclaimtemplates.json"),
        );
    }
    let api = fake_api(objects).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    common::write_kubeconfig(&kubeconfig, &format!("http://{api}"), false);
    let [addr, probe] = common::free_addrs().map(|a| a.port());
    let server =
        common::serve_with_kubeconfig(&kubeconfig, addr, probe, std::process::Stdio::null());
    let readyz = format!("http://127.0.0.1:{probe}/readyz");
    common::eventually("the inventory live against the fake API", || async {
        let v: Value = reqwest::get(&readyz).await.ok()?.json().await.ok()?;
        (v["inventory"]["state"] == "live").then_some(())
    })
    .await;
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let pod = common::fixture_object("dra-gpu-template-from-cluster");
    let url = format!("https://127.0.0.1:{addr}/validate");
    let review = || async {
        let resp = c
            .post(&url)
            .json(&common::review_for(&pod, "live"))
            .send()
            .await
            .ok()?;
        resp.json::<Value>().await.ok()
    };
    // The snapshot is rebuilt at most once a second as watches deliver: the first live
    // one may predate the optional DRA watch's list. With the template, ask until the
    // verdict settles on the denial; without it the first answer is the verdict (it
    // never flips).
    let body = if with_template {
        common::eventually("a denial counting the cluster's template", || async {
            review().await.filter(|b| b["response"]["allowed"] == false)
        })
        .await
    } else {
        review().await.expect("an answer")
    };
    drop(server);
    body
}
