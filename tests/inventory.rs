//! Inventory-driven decisions through the server, and the fallback when the
//! Kubernetes API cannot be reached (the webhook keeps serving from the catalog).

mod common;

use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;
use trainplace::server::config::InventoryMode;

#[tokio::test]
async fn server_uses_file_inventory_for_sibling_zones() {
    let mut cfg = config(None, None);
    cfg.inventory = InventoryMode::Files(root().join("tests/fixtures/cluster/eks-p5"));
    let srv = serve(cfg).await;
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{}/validate", srv.addr.port());
    let mut pod = fixture_object("full-node-p5-jobset");
    pod["metadata"]["namespace"] = "ml".into();
    pod["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] = "us-east-1b".into();
    let body: Value = c
        .post(&url)
        .json(&review_for(&pod, "z"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["response"]["allowed"], false);
    let msg = body["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.contains("siblings already run in us-east-1a"), "{msg}");
    let ready: Value = reqwest::get(format!("http://{}/readyz", srv.probe_addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["inventory"]["state"], "static");
    srv.handle.shutdown();
}

#[tokio::test]
async fn api_down_falls_back_to_the_catalog_and_stays_ready() {
    let dir = tempfile::tempdir().unwrap();
    // A kubeconfig whose API server refuses connections.
    let [dead, addr, probe] = free_addrs().map(|a| a.port());
    let kubeconfig = dir.path().join("kubeconfig");
    write_kubeconfig(&kubeconfig, &format!("https://127.0.0.1:{dead}"), true);
    let _server = serve_with_kubeconfig(&kubeconfig, addr, probe, Stdio::piped());
    let readyz = format!("http://127.0.0.1:{probe}/readyz");
    // The probes answer before the webhook has bound its port, and the watch may give up
    // on the API before that: wait for the webhook to start, then judge readiness.
    eventually("the webhook started", || async {
        let v: Value = reqwest::get(&readyz).await.ok()?.json().await.ok()?;
        (v["ready"] == true).then_some(())
    })
    .await;
    let ready = eventually("the inventory reporting the API as down", || async {
        let r = reqwest::get(&readyz).await.ok()?;
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        (v["inventory"]["state"] == "down").then(|| {
            assert_eq!(status, 200, "API down must not make the webhook unready");
            v
        })
    })
    .await;
    assert!(
        ready["inventory"]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty())
    );
    let metrics = metrics_text(format!("127.0.0.1:{probe}")).await;
    assert!(metrics.contains("trainplace_inventory_up 0"), "{metrics}");
    assert!(
        metrics.contains("trainplace_inventory_enabled 1"),
        "a broken watch is not `--inventory off`: {metrics}"
    );
    // Reviews still work, from the embedded catalog.
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let pod = fixture_object("full-node-p5-jobset");
    let body: Value = c
        .post(format!("https://127.0.0.1:{addr}/mutate"))
        .json(&review_for(&pod, "down"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["response"]["allowed"], true);
    assert!(body["response"]["patch"].is_string());
}

#[test]
fn cli_takes_a_cluster_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut pod = fixture_object("full-node-p5-jobset");
    pod["metadata"]["namespace"] = "ml".into();
    pod["spec"]["nodeSelector"] = serde_json::json!({});
    let f = dir.path().join("pod.yaml");
    std::fs::write(&f, serde_yaml_ng::to_string(&pod).unwrap()).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args(["check", "-f", f.to_str().unwrap(), "--cluster"])
        .arg(root().join("tests/fixtures/cluster/eks-p5-only"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("nodeSelector node.kubernetes.io/instance-type=p5.48xlarge (instance type from the only GPU instance type in the cluster)"), "{out}");
    let bad = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args([
            "check",
            "-f",
            f.to_str().unwrap(),
            "--cluster",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("nodes.json"));
}

#[test]
fn advise_from_cluster_without_a_cluster_is_a_clear_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_trainplace"))
        .args([
            "advise",
            "--gpus",
            "16",
            "--family",
            "h100",
            "--days",
            "1",
            "--from-cluster",
        ])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--from-cluster: cannot list nodes through the kubeconfig"),
        "{err}"
    );
}
