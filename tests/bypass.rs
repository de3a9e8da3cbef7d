//! Guardrail bypasses that need the server (files, reloads, certificates), over real
//! HTTPS. Engine-level bypasses are fixtures in `tests/fixtures/bypass/`. Each test
//! starts with the attack it closes.

mod common;

use std::time::Duration;

use common::{config, fixture_object, metrics_text, post_review, review_for};
use trainplace::server::start;

const RESTRICTED: &str = include_str!("../examples/policy-restricted.yaml");

/// Attack: the platform team's policy directory loses its `kind: Policy` file (deleted,
/// renamed, a ConfigMap key dropped). Before, the server fell back to the embedded
/// default, which grants every opt-in, logged a successful reload and stayed ready.
#[tokio::test]
async fn a_policy_directory_that_lost_its_policy_keeps_the_last_good_one() {
    let pol = tempfile::tempdir().unwrap();
    let file = pol.path().join("policy.yaml");
    std::fs::write(&file, RESTRICTED).unwrap();
    let srv = start(config(None, Some(pol.path().to_path_buf())))
        .await
        .expect("server starts");
    let url = format!("https://127.0.0.1:{}/validate", srv.addr.port());
    // A 1-GPU-per-pod job in `prod` that opts in: refused by the restricted policy.
    let attack = fixture_object("one-gpu-opt-in-refused");
    let (_, b) = post_review(&url, &review_for(&attack, "1")).await;
    assert_eq!(b["response"]["allowed"], false, "{b}");

    std::fs::rename(&file, pol.path().join("policy.yaml.bak")).unwrap();
    let mut failed = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if metrics_text(srv.probe_addr)
            .await
            .contains("trainplace_policy_reloads_total{outcome=\"failure\"} 1")
        {
            failed = true;
            break;
        }
    }
    assert!(
        failed,
        "the lost Policy file was not counted as a failed reload"
    );
    let (_, b) = post_review(&url, &review_for(&attack, "2")).await;
    assert_eq!(
        b["response"]["allowed"], false,
        "a directory without its Policy loosened the guardrail: {b}"
    );
    let ready: serde_json::Value = reqwest::get(format!("http://{}/readyz", srv.probe_addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let why = ready["detail"]["policyError"].as_str().unwrap_or_default();
    assert!(
        why.contains("no `kind: Policy` file") && why.contains("last good policy"),
        "{ready}"
    );
    srv.handle.shutdown();
}

/// Attack: start the server on a directory with no Policy (only a catalog, or empty),
/// so it runs on the permissive embedded default.
#[tokio::test]
async fn startup_fails_on_a_policy_directory_without_a_policy() {
    let pol = tempfile::tempdir().unwrap();
    std::fs::write(
        pol.path().join("catalog.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: InstanceCatalog\ninstances: []\n",
    )
    .unwrap();
    let err = match start(config(None, Some(pol.path().to_path_buf()))).await {
        Ok(_) => panic!("started without a Policy file"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("no `kind: Policy` file"), "{err}");
}

/// Attack: a user's StatefulSet (never reviewed) carries trainplace's mark on its
/// template, so the statefulset controller's 1-GPU pods would pass as "already judged".
/// Over HTTPS with a key directory: the operator's pods of an admitted PyTorchJob are
/// trusted; the same template under a StatefulSet owner is judged and denied; after the
/// key is rotated out, old marks no longer verify.
#[tokio::test]
async fn only_pods_of_templates_this_webhook_admitted_are_trusted() {
    let pol = tempfile::tempdir().unwrap();
    std::fs::write(
        pol.path().join("policy.yaml"),
        "apiVersion: trainplace.io/v1alpha1\nkind: Policy\noptIns:\n  allowPartialNode: { namespaces: [\"*\"], groups: [ml-researchers] }\n",
    )
    .unwrap();
    let keys = tempfile::tempdir().unwrap();
    std::fs::write(keys.path().join("2026-11-01"), [7u8; 32]).unwrap();
    // As kubelet mounts a Secret: a hidden timestamped directory beside the keys.
    std::fs::create_dir(keys.path().join("..2026_11_01_00_00_00.000000001")).unwrap();
    let mut cfg = config(None, Some(pol.path().to_path_buf()));
    cfg.mark_keys = Some(keys.path().to_path_buf());
    let srv = start(cfg).await.expect("server starts");
    let base = format!("https://127.0.0.1:{}", srv.addr.port());

    let job = serde_json::json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "research"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": {
            "metadata": {"annotations": {"trainplace.io/allow-partial-node": "true"}},
            "spec": {"containers": [{"name": "pytorch", "image": "train:1",
                "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}}}}}
    });
    let mut review = review_for(&job, "job");
    review["request"]["userInfo"]["groups"] = serde_json::json!(["ml-researchers"]);
    let (_, b) = post_review(&format!("{base}/mutate"), &review).await;
    assert_eq!(b["response"]["allowed"], true, "{b}");
    assert!(b["response"]["patch"].is_string(), "no patch: {b}");
    let mutated = common::apply_response_patch(&job, &b);
    let template = &mutated["spec"]["pytorchReplicaSpecs"]["Worker"]["template"];
    assert!(
        template["metadata"]["annotations"]["trainplace.io/admitted"]
            .as_str()
            .is_some_and(|m| m.starts_with("v2.2026-11-01.4.")),
        "{template}"
    );

    let pod_of = |owner: &str| {
        let mut pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
        pod["metadata"]["name"] = serde_json::json!("bert-worker-0");
        pod["metadata"]["namespace"] = serde_json::json!("research");
        pod["metadata"]["labels"] = serde_json::json!({"training.kubeflow.org/job-name": "bert"});
        pod["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "v1", "kind": owner,
            "name": "bert", "uid": "00000000-0000-4000-8000-000000000001", "controller": true}]);
        let mut r = review_for(&pod, "pod");
        r["request"]["userInfo"]["groups"] = serde_json::json!(["system:serviceaccounts:kubeflow"]);
        r
    };
    let validate = format!("{base}/validate");
    let (_, b) = post_review(&validate, &pod_of("PyTorchJob")).await;
    assert_eq!(b["response"]["allowed"], true, "operator's pod: {b}");
    let (_, b) = post_review(&validate, &pod_of("StatefulSet")).await;
    assert_eq!(b["response"]["allowed"], false, "StatefulSet replay: {b}");

    // Rotate as the chart's README says: the new key added as pending (it verifies, it
    // signs nowhere), then promoted by renaming it (the same bytes: a reload that read
    // only the files' contents missed it, and the old key kept signing), then the old
    // key removed; the old mark stops verifying.
    std::fs::write(keys.path().join("2026-12-01.pending"), [9u8; 32]).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::rename(
        keys.path().join("2026-12-01.pending"),
        keys.path().join("2026-12-01"),
    )
    .unwrap();
    let mut promoted = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, b) = post_review(&format!("{base}/mutate"), &review).await;
        let signed = common::apply_response_patch(&job, &b);
        let mark = &signed["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"]
            ["trainplace.io/admitted"];
        if mark
            .as_str()
            .is_some_and(|m| m.starts_with("v2.2026-12-01."))
        {
            promoted = true;
            break;
        }
    }
    assert!(promoted, "the key promoted by renaming never signed");
    std::fs::remove_file(keys.path().join("2026-11-01")).unwrap();
    let mut rotated = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, b) = post_review(&validate, &pod_of("PyTorchJob")).await;
        if b["response"]["allowed"] == false {
            rotated = true;
            break;
        }
    }
    assert!(rotated, "the removed key still verified marks");
    srv.handle.shutdown();
}
