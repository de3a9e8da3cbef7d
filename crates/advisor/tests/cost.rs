//! A purchase only when it pays: the block fee against on-demand for the job's nodes
//! and hours, the nodegroup sized to the job, the block's length as sold, the budget as
//! a constraint, and every listed offering judged.

mod common;

use common::*;
use trainplace_advisor::artifacts::objects;
use trainplace_advisor::recommend::CapacityPlan;
use trainplace_advisor::{AdviceRequest, InputError, Recommendation, recommend};
use trainplace_engine::Policy;

/// 16 H100 for 3 days, with the fixture's offerings: the only block that fits is the
/// 4-instance, 168 h cb-...60001 ($21,143.81); on-demand is 2 x $55.04 x 72 h.
fn sixteen_h100_three_days(capacity: Option<&str>, budget: Option<f64>) -> AdviceRequest {
    let (base, _) = scenario("h100-blocks");
    AdviceRequest {
        gpus: Some(16),
        duration_days: Some(3.0),
        capacity: capacity.map(Into::into),
        budget_usd: budget,
        ..base
    }
}

fn plan(req: &AdviceRequest) -> Result<Recommendation, InputError> {
    let (_, facts) = scenario("h100-blocks");
    let policy = Policy::embedded();
    let valid = req.validate(&policy.catalog, common::now())?;
    recommend(&valid, &policy.catalog, &facts)
}

const ON_DEMAND: f64 = 7925.76;
const BLOCK_FEE: f64 = 21143.81;

#[test]
fn a_block_dearer_than_on_demand_is_not_bought_and_the_risk_is_said() {
    let r = plan(&sixteen_h100_three_days(None, None)).unwrap();
    assert_eq!(r.capacity, CapacityPlan::OnDemand, "{:?}", r.reasons);
    assert_eq!(r.cost.estimate_usd, Some(ON_DEMAND));
    assert!(
        r.reasons
            .iter()
            .any(|x| x.contains("on-demand, the cheaper")
                && x.contains("$7925.76")
                && x.contains("$13218.05 more")
                && x.contains("168 h")),
        "{:?}",
        r.reasons
    );
    let risk = r
        .warnings
        .iter()
        .find(|w| w.code == "on-demand-capacity-risk")
        .expect("the risk of no on-demand capacity is stated");
    assert!(risk.message.contains("InsufficientInstanceCapacity"));
    // The block it was weighed against is an option, with its length as sold.
    let block = r
        .capacity_options
        .iter()
        .find(|o| o.kind == "capacity-block")
        .expect("the block is listed");
    assert!(!block.chosen && block.usd == Some(BLOCK_FEE));
    assert!(
        block.label.contains("of 168 h for the job's 72 h"),
        "{}",
        block.label
    );
    // On-demand nodes of a multi-node job go in a placement group.
    assert!(r.placement_group.is_some());
}

#[test]
fn a_block_asked_for_is_bought_with_the_nodegroup_sized_to_the_job_and_its_length_as_sold() {
    let r = plan(&sixteen_h100_three_days(Some("capacity-block"), None)).unwrap();
    let CapacityPlan::CapacityBlock {
        blocks: Some(p), ..
    } = &r.capacity
    else {
        panic!("{:?}", r.capacity)
    };
    assert_eq!((p.instances, r.shape.nodes), (4, 2));
    assert!(
        r.reasons
            .iter()
            .any(|x| x.contains("$13218.05 more than on-demand") && x.contains("as asked")),
        "{:?}",
        r.reasons
    );
    let o = objects(&r, &Policy::embedded());
    let groups = common::gpu_nodegroups(&o.cluster_config);
    assert_eq!(groups.len(), 1);
    assert_eq!(
        (
            groups[0]["desiredCapacity"].as_u64(),
            groups[0]["maxSize"].as_u64()
        ),
        (Some(2), Some(2)),
        "the job's 2 nodes, not the block's 4"
    );
    let advice = trainplace_advisor::Advice {
        artifacts: Vec::new(),
        recommendation: r,
        layout_svg: None,
    };
    let text = trainplace_advisor::render::text(&advice);
    assert!(
        text.contains("capacity:   Capacity Block(s) of 168 h: cb-0f1a2b3c4d5e60001"),
        "{text}"
    );
    assert!(!text.contains("of 72 h"), "{text}");
}

#[test]
fn a_budget_is_a_constraint() {
    // Enough for on-demand, not the block: auto plans on-demand.
    let r = plan(&sixteen_h100_three_days(None, Some(10_000.0))).unwrap();
    assert_eq!(r.capacity, CapacityPlan::OnDemand);
    // The block asked for is over it: refused, naming what fits.
    let e = plan(&sixteen_h100_three_days(
        Some("capacity-block"),
        Some(10_000.0),
    ))
    .unwrap_err();
    assert_eq!(e.field, "budgetUsd");
    assert!(
        e.message
            .contains("costs $21143.81, over the budget of $10000.00")
            && e.message.contains("within it: on-demand"),
        "{e}"
    );
    // Nothing fits: refused with the reason.
    let e = plan(&sixteen_h100_three_days(None, Some(5_000.0))).unwrap_err();
    assert_eq!(e.field, "budgetUsd");
    assert!(
        e.message.contains("$7925.76, over the budget of $5000.00")
            && e.message.contains("no listed capacity fits it"),
        "{e}"
    );
}

#[test]
fn every_listed_offering_says_whether_it_fits_and_why_not() {
    let r = recommendation("h100-blocks", "pytorchjob");
    let why = |id: &str| {
        let l = r
            .other_offerings
            .iter()
            .find(|l| l.offering.id == id)
            .unwrap_or_else(|| panic!("{id} not listed"));
        (l.fits, l.why.clone())
    };
    // 8 x 192 h in us-east-1b fits alone but costs more than the chosen pair.
    let (fits, w) = why("cb-0f1a2b3c4d5e60004");
    assert!(
        fits && w.contains("not chosen: the chosen block(s) cost $45308.16"),
        "{w}"
    );
    let (fits, w) = why("cb-0f1a2b3c4d5e60005");
    assert!(
        !fits && w.contains("24 h is shorter than the job's 168 h"),
        "{w}"
    );
    let (fits, w) = why("cb-0f1a2b3c4d5e60003");
    assert!(!fits && w.contains("4 of the 8 instances needed"), "{w}");
    assert!(r.other_offerings.iter().all(|l| !l.why.is_empty()));
    let json = serde_json::to_value(&r).unwrap();
    let first = &json["otherOfferings"][0];
    assert!(first["id"].is_string() && first["fits"].is_boolean() && first["why"].is_string());
}

/// The l40s-on-demand scenario (16 L40S, 30 h, no offerings) in `region`.
fn l40s_in(region: &str) -> trainplace_advisor::Advice {
    let (mut req, _) = common::scenario("l40s-on-demand");
    req.region = Some(region.into());
    req.availability_zones = vec![];
    trainplace_advisor::advise(
        &req,
        &trainplace_advisor::RawFacts::default(),
        &Policy::embedded(),
        common::now(),
    )
    .unwrap()
}

#[test]
fn a_us_east_1_price_shown_for_another_region_says_so() {
    let advice = l40s_in("us-west-2");
    let r = &advice.recommendation;
    assert!(r.cost.on_demand_usd.is_some(), "{:?}", r.cost);
    let w = r
        .warnings
        .iter()
        .find(|w| w.code == "us-east-1-prices")
        .unwrap_or_else(|| panic!("{:?}", r.warnings));
    assert!(
        w.message.contains("us-east-1 list price")
            && w.message.contains("us-west-2")
            && w.message
                .contains("https://aws.amazon.com/ec2/pricing/on-demand/"),
        "{}",
        w.message
    );
    assert_eq!(r.cost.list_prices_region, Some("us-east-1"));
    let text = trainplace_advisor::render::text(&advice);
    let line = text.lines().find(|l| l.starts_with("cost:")).unwrap();
    assert!(
        line.contains("us-east-1 list prices, not us-west-2's"),
        "{line}"
    );
    // In us-east-1 the figures are that region's: nothing to say.
    let advice = l40s_in("us-east-1");
    let r = &advice.recommendation;
    assert!(!codes(r).contains(&"us-east-1-prices"), "{:?}", r.warnings);
    assert_eq!(r.cost.list_prices_region, None);
}

fn codes(r: &Recommendation) -> Vec<&str> {
    r.warnings.iter().map(|w| w.code).collect()
}
