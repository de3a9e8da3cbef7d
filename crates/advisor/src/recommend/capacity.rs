//! The capacity a plan buys or uses: on demand, an ODCR, a Capacity Block the account
//! holds, or the cheapest listed blocks that fit (when they beat on demand).

use trainplace_catalog::InstanceProfile;

use super::cost::on_demand;
use crate::capacity::margin::ultraserver_only;
use crate::capacity::{
    BlockChoice, BlockNeed, BlockPlan, block_hours_for, block_lengths, block_sizes, choose_blocks,
    choose_held,
};
use crate::error::InputError;
use crate::plan::{CapacityPlan, Facts};
use crate::request::{CapacityPref, Request};
use crate::shape::Shape;
use crate::warnings::{self as warn, Warning};

/// The capacity plan and, when it fixes one, its zone. Types sold only as UltraServer
/// Capacity Blocks (`capacity/margin.rs`) never fall back to on-demand: when no block
/// fits, or on-demand is asked for, the plan is refused with the reason.
pub(super) fn capacity_plan(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> Result<(CapacityPlan, Option<String>), InputError> {
    let (plan, zone) = capacity_plan_of(req, p, shape, facts, reasons, warnings);
    if ultraserver_only(&p.name) && matches!(plan, CapacityPlan::OnDemand) {
        let mut err = not_on_demand(req, p, warnings);
        let need = BlockNeed::of_request(&p.name, req, shape.nodes, 0);
        let other = crate::capacity::fallbacks::fallbacks(
            facts.offerings.as_deref().unwrap_or_default(),
            facts.reservations.as_deref().unwrap_or_default(),
            &need,
        );
        if !other.is_empty() {
            let labels: Vec<&str> = other.iter().map(|f| f.label.as_str()).collect();
            err.message.push_str(&format!(
                "; what the offerings allow instead: {}",
                labels.join("; ")
            ));
        }
        return Err(err);
    }
    Ok((plan, zone))
}

/// The refusal of an on-demand plan for a type sold only as UltraServer Capacity Blocks,
/// with why no block was planned (the warnings that said so).
fn not_on_demand(req: &Request, p: &InstanceProfile, warnings: &[Warning]) -> InputError {
    const WHY: [&str; 4] = [
        "no-capacity-block-fits",
        "job-longer-than-block",
        "too-many-for-capacity-blocks",
        "no-capacity-blocks",
    ];
    let why: Vec<&str> = warnings
        .iter()
        .filter(|w| WHY.contains(&w.code))
        .map(|w| {
            let m = w.message.as_str();
            m.split("; planned on-demand")
                .next()
                .unwrap_or(m)
                .split(", or plan on-demand")
                .next()
                .unwrap_or(m)
        })
        .collect();
    let (field, what) = if req.capacity == CapacityPref::OnDemand {
        ("capacity", "on-demand was asked for".to_string())
    } else {
        (
            "offerings",
            format!("no UltraServer Capacity Block fits: {}", why.join("; ")),
        )
    };
    InputError::request(
        field,
        format!(
            "{} is not sold on-demand, only as UltraServer Capacity Blocks (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html), and {what}; list offerings for another window (--start/--end), fewer nodes or a shorter job, or choose another instance type",
            p.name
        ),
    )
}

fn capacity_plan_of(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    facts: &Facts,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> (CapacityPlan, Option<String>) {
    match req.capacity {
        CapacityPref::OnDemand => return (CapacityPlan::OnDemand, None),
        CapacityPref::Odcr => {
            let id = req.reservation_id.clone().unwrap_or_default();
            reasons.push(format!("targets the On-Demand Capacity Reservation {id}"));
            return (CapacityPlan::Odcr { reservation_id: id }, None);
        }
        CapacityPref::CapacityBlock | CapacityPref::Auto => {}
    }
    let Some(block_hours) = block_hours_if_sold(req, p, shape, reasons, warnings) else {
        return (CapacityPlan::OnDemand, None);
    };
    let need = BlockNeed::of_request(&p.name, req, shape.nodes, 0);
    // A block the account already holds comes before buying one.
    if let Some(plan) = held_block(req, facts, &need, reasons, warnings) {
        return on_blocks(block_hours, plan);
    }
    warnings.extend(too_far_ahead(req));
    let Some(offers) = &facts.offerings else {
        reasons.push(format!(
            "Capacity Block of {block_hours} h x {} instances: list the offerings (aws-cli.sh), then rerun with --offerings to pick one",
            shape.nodes
        ));
        return (
            CapacityPlan::CapacityBlock {
                block_hours,
                blocks: None,
            },
            None,
        );
    };
    match choose_blocks(offers, &need) {
        BlockChoice::Fit(plan) => bought_block(req, p, shape, block_hours, plan, reasons, warnings),
        BlockChoice::NoFit(why) => {
            if why.iter().any(|r| r.contains("shorter than the job")) {
                warnings.push(warn::job_longer_than_block(
                    req.job_hours,
                    "every offered block",
                ));
            }
            warnings.push(warn::no_block_fits(&why));
            (CapacityPlan::OnDemand, None)
        }
    }
}

/// The Capacity Block(s) the account already holds that fit the job, said in the reasons;
/// `None` (said why) when none fits.
fn held_block(
    req: &Request,
    facts: &Facts,
    need: &BlockNeed,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> Option<BlockPlan> {
    let held = facts.reservations.as_ref()?;
    match choose_held(held, need) {
        Ok(plan) => {
            reasons.push(format!(
                "nothing to buy: the account already holds Capacity Block(s) {} in {} ({} instances, usable from {} to {})",
                block_ids(&plan),
                plan.availability_zone,
                plan.instances,
                plan.start,
                plan.checkpoint_by
            ));
            warnings.push(warn::block_end(&plan, req.job_hours));
            Some(plan)
        }
        Err(why) => {
            reasons.push(format!("{why}: buying one"));
            None
        }
    }
}

/// The cheapest listed blocks that fit: bought, unless on demand is cheaper and the
/// request lets the plan choose.
fn bought_block(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    block_hours: u32,
    plan: BlockPlan,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> (CapacityPlan, Option<String>) {
    let on_demand_usd = on_demand(p, shape.nodes, req.job_hours);
    let what = format!(
        "{} in {} ({} instances of {}, {} to {}, ${:.2})",
        block_ids(&plan),
        plan.availability_zone,
        plan.instances,
        block_lengths(&plan),
        plan.start,
        plan.end,
        plan.total_fee_usd
    );
    if ultraserver_only(&p.name) {
        reasons.push(format!("cheapest Capacity Block plan that fits: {what}"));
        reasons.push(format!(
            "no on-demand comparison: {} is not sold on-demand, only as UltraServer Capacity Blocks",
            p.name
        ));
        warnings.push(warn::block_end(&plan, req.job_hours));
        return on_blocks(block_hours, plan);
    }
    if let Some(od) = on_demand_usd
        && req.capacity == CapacityPref::Auto
        && plan.total_fee_usd > od
    {
        reasons.push(format!(
            "on-demand, the cheaper: {} x {} for the job's {} h cost ${od:.2}; the cheapest Capacity Block plan that fits, {what}, costs ${:.2} more",
            shape.nodes,
            p.name,
            req.job_hours,
            plan.total_fee_usd - od
        ));
        warnings.push(warn::on_demand_risk(
            shape.nodes,
            &p.name,
            plan.total_fee_usd - od,
        ));
        return (CapacityPlan::OnDemand, None);
    }
    reasons.push(format!("cheapest Capacity Block plan that fits: {what}"));
    if let Some(od) = on_demand_usd {
        reasons.push(if plan.total_fee_usd <= od {
            format!(
                "the block fee ${:.2} is ${:.2} less than on-demand for the job's {} node(s) x {} h (${od:.2}), and the nodes are reserved",
                plan.total_fee_usd,
                od - plan.total_fee_usd,
                shape.nodes,
                req.job_hours
            )
        } else {
            format!(
                "the block fee ${:.2} is ${:.2} more than on-demand for the job's {} node(s) x {} h (${od:.2}): paid for reserved nodes, as asked (--capacity capacity-block)",
                plan.total_fee_usd,
                plan.total_fee_usd - od,
                shape.nodes,
                req.job_hours
            )
        });
    }
    warnings.push(warn::block_end(&plan, req.job_hours));
    on_blocks(block_hours, plan)
}

/// The Capacity Block length for this job when the type is sold as blocks and the job
/// and shape fit them; `None` (said why) means on-demand.
fn block_hours_if_sold(
    req: &Request,
    p: &InstanceProfile,
    shape: &Shape,
    reasons: &mut Vec<String>,
    warnings: &mut Vec<Warning>,
) -> Option<u32> {
    if p.capacity_blocks != Some(true) {
        if req.capacity == CapacityPref::CapacityBlock {
            warnings.push(warn::no_capacity_blocks(p));
        } else {
            reasons.push(format!(
                "on-demand: {} is not sold as Capacity Blocks",
                p.name
            ));
        }
        return None;
    }
    let Some(block_hours) = block_hours_for(req.job_hours) else {
        warnings.push(warn::job_longer_than_block(
            req.job_hours,
            "the longest Capacity Block (182 days)",
        ));
        return None;
    };
    if block_sizes(shape.nodes).is_none() {
        warnings.push(warn::too_many_for_blocks(shape.nodes));
        return None;
    }
    Some(block_hours)
}

/// A start later than Capacity Blocks can be bought for today: when they can be.
fn too_far_ahead(req: &Request) -> Option<Warning> {
    let start = req.earliest_start?;
    let latest = crate::capacity::latest_buyable_start(req.now);
    (start > latest).then(|| warn::block_too_far_ahead(start, start - (latest - req.now)))
}

/// The plan of `blocks`, in their zone.
fn on_blocks(block_hours: u32, blocks: BlockPlan) -> (CapacityPlan, Option<String>) {
    let zone = blocks.availability_zone.clone();
    (
        CapacityPlan::CapacityBlock {
            block_hours,
            blocks: Some(blocks),
        },
        Some(zone),
    )
}

fn block_ids(plan: &BlockPlan) -> String {
    let ids: Vec<&str> = plan.offerings.iter().map(|o| o.id.as_str()).collect();
    ids.join(" + ")
}
