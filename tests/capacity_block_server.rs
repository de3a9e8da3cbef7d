//! The webhook's Capacity Blocks for EKS managed node groups: `serve --reservations FILE`
//! (describe-capacity-reservations output, a ConfigMap the platform team refreshes),
//! reloaded on change through the inventory snapshot; a bad file keeps the last good
//! blocks and says so on /readyz and /metrics. Over real HTTPS, at the server's clock.

mod common;

use common::{config, eventually, metrics_text, post_review, review_for, write_atomic};
use serde_json::{Value, json};
use trainplace::server::config::InventoryMode;
use trainplace::server::start;

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/capacity-blocks"
);
const BLOCK: &str = "cr-0123456789abcdef0";

/// describe-capacity-reservations output with one active p5 block ending `hours` from now.
fn describe(hours: i64) -> Vec<u8> {
    let end = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(hours);
    serde_json::to_vec_pretty(&json!({"CapacityReservations": [{
        "CapacityReservationId": BLOCK, "OwnerId": "123456789012",
        "InstanceType": "p5.48xlarge", "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-east-1d", "Tenancy": "default",
        "TotalInstanceCount": 4, "AvailableInstanceCount": 0, "State": "active",
        "StartDate": "2026-01-01T11:30:00+00:00", "EndDate": end.to_string(),
        "EndDateType": "limited", "InstanceMatchCriteria": "targeted",
        "ReservationType": "capacity-block"}]}))
    .unwrap()
}

/// The capacity-block-ends warnings for the 72-hour job on node group `p5-block`.
async fn block_warnings(url: &str, uid: &str) -> Vec<String> {
    let text = std::fs::read_to_string(format!("{DIR}/job-mng-nodegroup.yaml")).unwrap();
    let job: Value = serde_yaml_ng::from_str(&text).unwrap();
    let (status, body) = post_review(url, &review_for(&job, uid)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["response"]["allowed"], true, "warn mode: {body}");
    body["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|w| w.contains("Capacity Block"))
        .map(String::from)
        .collect()
}

/// Poll /metrics until `needle` shows (reloads are polled every 100 ms in tests).
async fn metrics_until(probe: std::net::SocketAddr, needle: &str) -> String {
    eventually(&format!("{needle:?} on /metrics"), || async {
        Some(metrics_text(probe).await).filter(|text| text.contains(needle))
    })
    .await
}

#[tokio::test]
async fn the_reservations_file_is_reloaded_and_a_bad_one_keeps_the_last_good_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("reservations.json");
    std::fs::write(&file, describe(200)).unwrap();
    let mut cfg = config(None, None);
    cfg.inventory = InventoryMode::Files(format!("{DIR}/managed-node-group").into());
    cfg.reservations = Some(file.clone());
    let srv = start(cfg).await.expect("server starts");
    let url = format!("https://127.0.0.1:{}/validate", srv.addr.port());

    // 200 h left: a 72 h job fits.
    assert_eq!(block_warnings(&url, "1").await, Vec::<String>::new());
    let text = metrics_until(
        srv.probe_addr,
        "trainplace_reservations_reloads_total{outcome=\"success\"} 1",
    )
    .await;
    let left = gauge(&text);
    assert!((199 * 3600..=200 * 3600).contains(&left), "{left}");

    // The platform team's refresh: the block now ends in 3 h.
    write_atomic(&file, &describe(3));
    metrics_until(
        srv.probe_addr,
        "trainplace_reservations_reloads_total{outcome=\"success\"} 2",
    )
    .await;
    let warnings = block_warnings(&url, "2").await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!("Capacity Block {BLOCK} (p5.48xlarge, us-east-1d)"))
            && warnings[0].contains("EKS scales its managed node group to 0")
            && warnings[0].contains("the job expects to run 72.0h"),
        "{warnings:?}"
    );
    let left = gauge(&metrics_text(srv.probe_addr).await);
    assert!((2 * 3600..=3 * 3600).contains(&left), "{left}");

    // A broken refresh: the last good blocks still count, and it is reported.
    write_atomic(&file, b"{\"CapacityReservations\": ");
    metrics_until(
        srv.probe_addr,
        "trainplace_reservations_reloads_total{outcome=\"failure\"} 1",
    )
    .await;
    assert_eq!(block_warnings(&url, "3").await.len(), 1);
    let ready: Value = reqwest::get(format!("http://{}/readyz", srv.probe_addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["ready"], true, "{ready}");
    let why = ready["detail"]["reservationsError"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("not the JSON of `aws ec2 describe-capacity-reservations --output json`")
            && why.contains("keeping the last good blocks"),
        "{ready}"
    );

    // Fixed again: the error clears.
    write_atomic(&file, &describe(3));
    metrics_until(
        srv.probe_addr,
        "trainplace_reservations_reloads_total{outcome=\"success\"} 3",
    )
    .await;
    let ready: Value = reqwest::get(format!("http://{}/readyz", srv.probe_addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        ready["detail"].get("reservationsError").is_none(),
        "{ready}"
    );
    srv.handle.shutdown();
}

/// `trainplace_capacity_block_seconds_remaining{reservation="cr-…"}` of the block.
fn gauge(metrics: &str) -> i64 {
    let prefix = format!("trainplace_capacity_block_seconds_remaining{{reservation=\"{BLOCK}\"}} ");
    let line = metrics
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no gauge for {BLOCK}:\n{metrics}"));
    line[prefix.len()..].trim().parse().unwrap()
}
