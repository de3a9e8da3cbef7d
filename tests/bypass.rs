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
