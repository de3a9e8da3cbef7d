//! When no Capacity Block fits as asked: blocks of one AZ that together cover the ask
//! (listed by the script, combined by the chooser), a later start, a shorter block with
//! checkpoint and resume, an extension of a held block.

mod common;

use serde_json::{Value, json};
use trainplace_advisor::capacity::fallbacks::listing_counts;
use trainplace_advisor::options::CapacityOption;
use trainplace_advisor::{Advice, AdviceRequest, RawFacts, advise};
use trainplace_engine::Policy;

/// A Capacity Block offering of p5.48xlarge.
fn offering(id: &str, zone: &str, count: u32, start: &str, hours: u32, fee: &str) -> Value {
    let start_ts: jiff::Timestamp = start.parse().unwrap();
    let end = start_ts + jiff::SignedDuration::from_hours(i64::from(hours));
    json!({
        "CapacityBlockOfferingId": id, "InstanceType": "p5.48xlarge",
        "AvailabilityZone": zone, "InstanceCount": count,
        "StartDate": start, "EndDate": end.to_string(),
        "CapacityBlockDurationHours": hours, "UpfrontFee": fee,
        "CurrencyCode": "USD", "Tenancy": "default",
    })
}

/// 16 H100 for 72 h with `offers`, `held` blocks and the request's window.
fn plan(offers: &[Value], held: Option<Value>, window: (Option<&str>, Option<&str>)) -> Advice {
    let req = AdviceRequest {
        gpus: Some(16),
        family: Some("h100".into()),
        duration_hours: Some(72.0),
        capacity: Some("capacity-block".into()),
        region: Some("us-east-1".into()),
        earliest_start: window.0.map(str::to_string),
        latest_end: window.1.map(str::to_string),
        now: Some(common::NOW.into()),
        ..Default::default()
    };
    let facts = RawFacts {
        offerings: Some(json!({"CapacityBlockOfferings": offers}).to_string()),
        reservations: held.map(|h| json!({"CapacityReservations": [h]}).to_string()),
        ..Default::default()
    };
    advise(&req, &facts, &Policy::embedded(), common::now()).unwrap()
}

fn fallback<'a>(advice: &'a Advice, kind: &str) -> &'a CapacityOption {
    let options = &advice.recommendation.capacity_options;
    options
        .iter()
        .find(|o| o.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} among {options:#?}"))
}

#[test]
fn the_script_lists_smaller_counts_and_the_chooser_combines_them() {
    assert_eq!(listing_counts(&[2]), [2, 1]);
    assert_eq!(listing_counts(&[8]), [8, 4, 2, 1]);
    let big = listing_counts(&[64, 36]);
    assert!(big.len() <= 12 && big.contains(&64) && big.contains(&36) && big.contains(&1));
    // Without offerings, the script lists 2-instance and 1-instance blocks.
    let req = AdviceRequest {
        gpus: Some(16),
        family: Some("h100".into()),
        duration_hours: Some(72.0),
        capacity: Some("capacity-block".into()),
        region: Some("us-east-1".into()),
        now: Some(common::NOW.into()),
        ..Default::default()
    };
    let advice = advise(
        &req,
        &RawFacts::default(),
        &Policy::embedded(),
        common::now(),
    )
    .unwrap();
    let script = common::emitted(&advice, "aws-cli.sh");
    for n in [2, 1] {
        assert!(
            script.contains(&format!("--instance-count {n} ")),
            "{n}: {script}"
        );
    }
    // Two 1-instance blocks of one AZ cover the 2-node job: bought together.
    let a = offering(
        "cb-one-a",
        "us-east-1a",
        1,
        "2026-12-01T11:30:00Z",
        72,
        "2000.00",
    );
    let b = offering(
        "cb-one-b",
        "us-east-1a",
        1,
        "2026-12-01T11:30:00Z",
        72,
        "2100.00",
    );
    let advice = plan(&[a, b], None, (None, None));
    let chosen: Vec<&CapacityOption> = advice
        .recommendation
        .capacity_options
        .iter()
        .filter(|o| o.chosen)
        .collect();
    assert_eq!(chosen[0].offerings, ["cb-one-a", "cb-one-b"], "{chosen:#?}");
}

#[test]
fn a_block_outside_the_window_is_offered_with_its_start() {
    let later = offering(
        "cb-later",
        "us-east-1a",
        2,
        "2026-12-10T11:30:00Z",
        72,
        "6000.00",
    );
    let advice = plan(
        &[later],
        None,
        (Some("2026-12-01T00:00:00Z"), Some("2026-12-06T00:00:00Z")),
    );
    let f = fallback(&advice, "later-start");
    assert_eq!(f.offerings, ["cb-later"]);
    assert!(
        f.label.contains("--start 2026-12-10T11:30:00Z"),
        "{}",
        f.label
    );
    assert_eq!(f.usd, Some(6000.0));
    assert!(!f.chosen);
}

#[test]
fn a_shorter_block_is_offered_with_checkpoint_and_resume() {
    let short = offering(
        "cb-short",
        "us-east-1c",
        2,
        "2026-12-02T11:30:00Z",
        24,
        "1510.27",
    );
    let advice = plan(&[short], None, (None, None));
    let f = fallback(&advice, "shorter-block");
    assert_eq!(f.offerings, ["cb-short"]);
    for needle in [
        "24 h",
        "checkpoint by 2026-12-03T10:50:00Z",
        "resume the other 49 h",
    ] {
        assert!(f.label.contains(needle), "{needle}: {}", f.label);
    }
}

#[test]
fn a_held_block_that_ends_too_early_is_offered_an_extension() {
    // Active since yesterday, ends in a day: 72 h and the scale-down need 48 h 40 min
    // more, sold as a 72 h extension.
    let held = json!({
        "CapacityReservationId": "cr-0held0000000000001", "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a", "TotalInstanceCount": 2, "State": "active",
        "StartDate": "2026-11-21T00:00:00Z", "EndDate": "2026-11-23T00:00:00Z",
        "ReservationType": "capacity-block",
    });
    let advice = plan(&[], Some(held), (None, None));
    let f = fallback(&advice, "extend-held");
    assert_eq!(f.offerings, ["cr-0held0000000000001"]);
    for needle in [
        "by 72 h",
        "aws ec2 describe-capacity-block-extension-offerings --capacity-reservation-id cr-0held0000000000001 --capacity-block-extension-duration-hours 72",
        "purchase-capacity-block-extension",
    ] {
        assert!(f.label.contains(needle), "{needle}: {}", f.label);
    }
}
