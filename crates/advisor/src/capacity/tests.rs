use rstest::rstest;

use super::*;

const T: &str = "p5.48xlarge";

/// An offering starting `day` days after 2026-12-01 11:30 UTC, `hours` long.
fn o(id: &str, az: &str, count: u32, day: i64, hours: u32, fee: f64) -> Offering {
    let base: Timestamp = "2026-12-01T11:30:00Z".parse().unwrap();
    let start = base + SignedDuration::from_hours(day * 24);
    Offering {
        id: id.to_string(),
        instance_type: T.to_string(),
        availability_zone: az.to_string(),
        instance_count: count,
        start,
        end: start + SignedDuration::from_hours(i64::from(hours)),
        duration_hours: hours,
        upfront_fee: fee,
        currency: "USD".to_string(),
        held: false,
    }
}

/// A need for `nodes` p5.48xlarge in us-east-1 (any zone) for `job_hours`, planned at a
/// fixed instant; also used by the held-block tests.
pub(super) fn need(nodes: u32, job_hours: u32) -> BlockNeed<'static> {
    BlockNeed {
        instance_type: T,
        region: "us-east-1",
        nodes,
        job_hours,
        earliest_start: None,
        latest_end: None,
        zones: &[],
        margin_minutes: 0,
        now: "2026-11-22T00:00:00Z".parse().unwrap(),
    }
}

fn chosen(choice: &BlockChoice) -> Vec<String> {
    match choice {
        BlockChoice::Fit(p) => {
            let mut ids: Vec<_> = p.offerings.iter().map(|o| o.id.clone()).collect();
            ids.sort();
            ids
        }
        BlockChoice::NoFit(r) => panic!("no fit: {r:?}"),
    }
}

#[rstest]
#[case::one_hour(1, Some(24))]
#[case::a_day_buys_a_day(24, Some(24))]
#[case::seven_days_buy_seven(168, Some(168))]
#[case::fourteen_days_buy_fourteen(336, Some(336))]
#[case::past_fourteen_days_jumps_to_three_weeks(337, Some(504))]
#[case::twenty_six_weeks(4368, Some(4368))]
#[case::longer_than_182_days(4369, None)]
fn block_length_for_job(#[case] job_hours: u32, #[case] want: Option<u32>) {
    assert_eq!(block_hours_for(job_hours), want);
}

#[rstest]
#[case(24, true)]
#[case(336, true)]
#[case(360, false)]
#[case(504, true)]
#[case(4368, true)]
#[case(4536, false)]
#[case(12, false)]
fn sold_durations(#[case] hours: u32, #[case] valid: bool) {
    assert_eq!(is_valid_block_hours(hours), valid);
    assert_eq!(valid_block_hours().count(), 14 + 24);
}

#[rstest]
#[case::cheapest_single(vec![o("cb-a", "us-east-1a", 8, 0, 192, 50_000.0), o("cb-b", "us-east-1b", 8, 0, 192, 40_000.0)], 8, vec!["cb-b"])]
#[case::two_blocks_same_zone(vec![o("cb-a", "us-east-1a", 4, 0, 192, 20_000.0), o("cb-b", "us-east-1a", 4, 0, 192, 20_000.0), o("cb-c", "us-east-1b", 8, 0, 192, 45_000.0)], 8, vec!["cb-a", "cb-b"])]
#[case::never_across_zones(vec![o("cb-a", "us-east-1a", 4, 0, 192, 1.0), o("cb-b", "us-east-1b", 4, 0, 192, 1.0), o("cb-c", "us-east-1c", 8, 0, 192, 99_999.0)], 8, vec!["cb-c"])]
#[case::tie_goes_to_earlier_start(vec![o("cb-late", "us-east-1a", 8, 3, 192, 100.0), o("cb-early", "us-east-1b", 8, 1, 192, 100.0)], 8, vec!["cb-early"])]
#[case::tie_goes_to_fewer_blocks(vec![o("cb-a", "us-east-1a", 4, 0, 192, 50.0), o("cb-b", "us-east-1a", 4, 0, 192, 50.0), o("cb-c", "us-east-1b", 8, 0, 192, 100.0)], 8, vec!["cb-c"])]
#[case::tie_goes_to_zone_name(vec![o("cb-b", "us-east-1b", 8, 0, 192, 100.0), o("cb-a", "us-east-1c", 8, 0, 192, 100.0)], 8, vec!["cb-b"])]
#[case::too_short_block_skipped(vec![o("cb-6d", "us-east-1a", 8, 0, 144, 1.0), o("cb-8d", "us-east-1a", 8, 0, 192, 2.0)], 8, vec!["cb-8d"])]
#[case::seven_day_job_buys_the_seven_day_block(vec![o("cb-7d", "us-east-1a", 8, 0, 168, 1.0), o("cb-8d", "us-east-1a", 8, 0, 192, 2.0)], 8, vec!["cb-7d"])]
#[case::only_seven_day_blocks(vec![o("cb-7d", "us-east-1b", 8, 0, 168, 100.0)], 8, vec!["cb-7d"])]
#[case::blocks_must_overlap(vec![o("cb-a", "us-east-1a", 4, 0, 192, 1.0), o("cb-b", "us-east-1a", 4, 9, 192, 1.0), o("cb-c", "us-east-1a", 8, 20, 192, 5.0)], 8, vec!["cb-c"])]
#[case::longer_block_covers_later_start(vec![o("cb-long", "us-east-1a", 4, 0, 336, 10.0), o("cb-b", "us-east-1a", 4, 2, 192, 10.0)], 8, vec!["cb-b", "cb-long"])]
#[case::oversize_cover_when_cheaper(vec![o("cb-big", "us-east-1a", 16, 0, 192, 10.0), o("cb-small", "us-east-1a", 8, 0, 192, 20.0)], 8, vec!["cb-big"])]
#[case::many_blocks_to_reach_n(vec![o("cb-1", "us-east-1a", 64, 0, 192, 1.0), o("cb-2", "us-east-1a", 64, 0, 192, 1.0), o("cb-3", "us-east-1a", 64, 0, 192, 1.0), o("cb-4", "us-east-1a", 8, 0, 192, 1.0)], 200, vec!["cb-1", "cb-2", "cb-3", "cb-4"])]
fn chooser_fits(#[case] offers: Vec<Offering>, #[case] nodes: u32, #[case] want: Vec<&str>) {
    assert_eq!(chosen(&choose_blocks(&offers, &need(nodes, 168))), want);
}

#[rstest]
#[case::nothing_given(vec![], 8, "no offering for p5.48xlarge")]
#[case::other_region(vec![o("cb-a", "us-west-2a", 8, 0, 192, 1.0)], 8, "zones (or regions) the request does not allow")]
#[case::too_few_in_zone(vec![o("cb-a", "us-east-1a", 4, 0, 192, 1.0), o("cb-b", "us-east-1b", 4, 0, 192, 1.0)], 8, "us-east-1a: at most 4")]
#[case::all_too_short(vec![o("cb-a", "us-east-1a", 8, 0, 144, 1.0)], 8, "shorter than the job")]
#[case::invalid_count(vec![o("cb-a", "us-east-1a", 65, 0, 192, 1.0)], 8, "not a valid Capacity Block")]
#[case::invalid_duration(vec![o("cb-a", "us-east-1a", 8, 0, 360, 1.0)], 8, "not a valid Capacity Block")]
#[case::started_before_now(vec![o("cb-a", "us-east-1a", 8, -30, 192, 1.0)], 8, "already started")]
#[case::more_than_8_weeks_ahead(vec![o("cb-a", "us-east-1a", 8, 60, 192, 1.0)], 8, "more than 8 weeks")]
#[case::over_256(vec![o("cb-a", "us-east-1a", 64, 0, 192, 1.0)], 257, "exceed the 256")]
fn chooser_no_fit(#[case] offers: Vec<Offering>, #[case] nodes: u32, #[case] reason: &str) {
    match choose_blocks(&offers, &need(nodes, 168)) {
        BlockChoice::NoFit(reasons) => {
            assert!(reasons.iter().any(|r| r.contains(reason)), "{reasons:?}")
        }
        BlockChoice::Fit(p) => panic!("unexpected fit {p:?}"),
    }
}

#[test]
fn window_and_zone_filters() {
    let offers = vec![
        o("cb-early", "us-east-1a", 8, 0, 192, 1.0),
        o("cb-mid", "us-east-1a", 8, 5, 192, 2.0),
        o("cb-zone", "us-east-1b", 8, 5, 192, 0.5),
    ];
    let zones = vec!["us-east-1a".to_string()];
    let mut n = need(8, 168);
    n.earliest_start = Some("2026-12-03T00:00:00Z".parse().unwrap());
    n.zones = &zones;
    assert_eq!(chosen(&choose_blocks(&offers, &n)), ["cb-mid"]);
    n.latest_end = Some("2026-12-10T00:00:00Z".parse().unwrap());
    match choose_blocks(&offers, &n) {
        BlockChoice::NoFit(r) => {
            assert!(
                r.iter().any(|x| x.contains("outside the requested window")),
                "{r:?}"
            );
            assert!(
                r.iter()
                    .any(|x| x.contains("zones (or regions) the request does not allow")),
                "{r:?}"
            );
        }
        fit => panic!("{fit:?}"),
    }
}

#[test]
fn plan_reports_window_and_fee() {
    let offers = vec![
        o("cb-a", "us-east-1a", 4, 0, 192, 100.25),
        o("cb-b", "us-east-1a", 4, 1, 192, 100.5),
    ];
    let BlockChoice::Fit(plan) = choose_blocks(&offers, &need(8, 100)) else {
        panic!()
    };
    assert_eq!(plan.instances, 8);
    assert_eq!(plan.total_fee_usd, 200.75);
    assert_eq!(plan.start, offers[1].start);
    assert_eq!(plan.end, offers[0].end);
    assert!((plan.usable_hours - (168.0 - 40.0 / 60.0)).abs() < 1e-9);
    assert_eq!(
        plan.checkpoint_by,
        offers[0].end - SignedDuration::from_mins(40)
    );
}

#[test]
fn margin_asks_for_room_after_the_job() {
    let offers = vec![
        o("cb-7d", "us-east-1a", 8, 0, 168, 1.0),
        o("cb-8d", "us-east-1a", 8, 0, 192, 2.0),
    ];
    let mut n = need(8, 168);
    n.margin_minutes = EKS_SCALE_DOWN_MINUTES;
    assert_eq!(chosen(&choose_blocks(&offers, &n)), ["cb-8d"]);
    assert_eq!(block_hours_with_margin(168, 40), Some(192));
}
