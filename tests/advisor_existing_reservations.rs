//! `trainplace advise --existing-reservations FILE`: a Capacity Block the account
//! already holds (matching type, zone, count and window) is used before buying one;
//! the emitted job says how long it runs, for the webhook's `capacity-block-ends`.

use std::path::{Path, PathBuf};

use trainplace::cli::advise::{AdviseArgs, OutputFormat, run_advise};
use trainplace::exit::ExitCode;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/advisor/fixtures")
        .join(name)
}

/// 64 x H100 for `days`, with the offerings and the account's reservations.
fn emit(days: f64, out: &Path) -> ExitCode {
    emit_on(days, out, None)
}

/// `emit` on `route` (`None`: the default).
fn emit_on(days: f64, out: &Path, route: Option<&str>) -> ExitCode {
    let args = AdviseArgs {
        route: route.map(str::to_string),
        gpus: Some(64),
        family: Some("h100".into()),
        days: Some(days),
        offerings: Some(fixture("capacity-block-offerings.json")),
        existing_reservations: Some(fixture("existing-reservations.json")),
        now: Some("2026-11-22T00:00:00Z".into()),
        emit: Some(out.to_path_buf()),
        output: OutputFormat::Json,
        ..Default::default()
    };
    run_advise(&args).unwrap()
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

#[test]
fn a_held_block_that_covers_the_week_is_used_and_nothing_is_bought() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(emit(7.0, dir.path()), ExitCode::Ok);
    let script = read(dir.path(), "aws-cli.sh");
    assert!(!script.contains("purchase-capacity-block"), "{script}");
    assert!(
        script.contains(
            "Nothing to buy: the account already holds cr-0b7c6d5e4f3a21098 in us-east-1b"
        ),
        "{script}"
    );
    let eksctl = read(dir.path(), "eksctl-cluster.yaml");
    assert!(
        eksctl.contains("capacityReservationID: cr-0b7c6d5e4f3a21098")
            && !eksctl.contains("REPLACE-WITH"),
        "{eksctl}"
    );
    assert!(eksctl.contains("us-east-1b"), "{eksctl}");
    // The Karpenter route's EC2NodeClass selects the held block by its id.
    let on_karpenter = tempfile::tempdir().unwrap();
    assert_eq!(
        emit_on(7.0, on_karpenter.path(), Some("karpenter")),
        ExitCode::Ok
    );
    let karpenter = read(on_karpenter.path(), "karpenter.yaml");
    assert!(
        karpenter.contains("id: cr-0b7c6d5e4f3a21098"),
        "{karpenter}"
    );
    let job: serde_json::Value =
        serde_yaml_ng::from_str(&read(dir.path(), "job-pytorchjob.yaml")).unwrap();
    assert_eq!(
        job["metadata"]["annotations"]["trainplace.io/expected-duration"],
        "168h"
    );
}

#[test]
fn a_run_longer_than_the_held_block_buys_one_instead() {
    // 8 days = 192 h; the held block holds 192 h less the 40-minute scale-down.
    let dir = tempfile::tempdir().unwrap();
    emit(8.0, dir.path());
    let script = read(dir.path(), "aws-cli.sh");
    assert!(
        !script.contains("cr-0b7c6d5e4f3a21098"),
        "the held block cannot hold 192 h:\n{script}"
    );
    assert!(script.contains("purchase-capacity-block"), "{script}");
    let job: serde_json::Value =
        serde_yaml_ng::from_str(&read(dir.path(), "job-pytorchjob.yaml")).unwrap();
    assert_eq!(
        job["metadata"]["annotations"]["trainplace.io/expected-duration"],
        "192h"
    );
}

#[test]
fn the_plan_says_why_it_buys_nothing() {
    let args = AdviseArgs {
        gpus: Some(64),
        family: Some("h100".into()),
        days: Some(7.0),
        existing_reservations: Some(fixture("existing-reservations.json")),
        now: Some("2026-11-22T00:00:00Z".into()),
        output: OutputFormat::Json,
        ..Default::default()
    };
    let (req, facts) = trainplace::cli::advise::inputs(&args).unwrap();
    let advice = trainplace_advisor::advise(
        &req,
        &facts,
        &trainplace_engine::Policy::embedded(),
        jiff::Timestamp::now(),
    )
    .unwrap();
    let rec = &advice.recommendation;
    assert!(
        rec.reasons.iter().any(|r| r.starts_with(
            "nothing to buy: the account already holds Capacity Block(s) cr-0b7c6d5e4f3a21098 in us-east-1b (8 instances, usable from 2026-11-24T11:30:00Z to 2026-12-02T10:50:00Z)"
        )),
        "{:?}",
        rec.reasons
    );
    assert_eq!(rec.availability_zone, "us-east-1b");
    assert_eq!(rec.cost.capacity_block_usd, Some(0.0));
    let bad = AdviseArgs {
        existing_reservations: Some(fixture("capacity-block-offerings.json")),
        ..args
    };
    let err = trainplace::cli::advise::inputs(&bad)
        .and_then(|(r, f)| {
            trainplace_advisor::advise(
                &r,
                &f,
                &trainplace_engine::Policy::embedded(),
                jiff::Timestamp::now(),
            )
        })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "existing reservations CapacityReservations: missing (is this the aws CLI's JSON output?)"
    );
}

/// The HTTP face takes the same document as `existingReservations` in the body.
#[tokio::test]
async fn the_http_api_takes_existing_reservations() {
    use axum::body::{Body, to_bytes};
    use axum::http::{Request, StatusCode, header};
    use tower::ServiceExt;

    let held: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("existing-reservations.json")).unwrap(),
    )
    .unwrap();
    let body = serde_json::json!({"gpus": 64, "family": "h100", "durationDays": 7,
        "existingReservations": held, "now": "2026-11-22T00:00:00Z"});
    let req = Request::builder()
        .method("POST")
        .uri("/v1/recommendations")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let res = trainplace::advisor_server::router(trainplace::advisor_server::AppState::new())
        .oneshot(req)
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let v: serde_json::Value =
        serde_json::from_slice(&to_bytes(res.into_body(), usize::MAX).await.unwrap()).unwrap();
    let blocks = &v["recommendation"]["capacity"]["blocks"];
    assert_eq!(blocks["offerings"][0]["id"], "cr-0b7c6d5e4f3a21098", "{v}");
    assert_eq!(blocks["offerings"][0]["held"], true);
    assert_eq!(blocks["totalFeeUsd"], 0.0);
}
