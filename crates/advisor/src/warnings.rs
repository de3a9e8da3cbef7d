//! Warnings the recommendation carries: a stable code (for tests, the UI and scripts)
//! and a sentence for people.

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use trainplace_catalog::InstanceProfile;

use crate::capacity::{BlockPlan, margin};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub code: &'static str,
    pub message: String,
}

fn w(code: &'static str, message: impl Into<String>) -> Warning {
    Warning {
        code,
        message: message.into(),
    }
}

/// The catalog's prices (EC2 on-demand, FSx for Lustre) are `from`'s list prices, shown
/// for a plan in `region`: said, as the catalog has no other region's.
pub fn list_prices_of_another_region(from: &str, region: &str) -> Warning {
    w(
        "us-east-1-prices",
        format!(
            "the on-demand cost and the checkpoint storage cost are the {from} list prices, not {region}'s (the catalog has {from} prices only); {region}'s may differ: https://aws.amazon.com/ec2/pricing/on-demand/ and https://aws.amazon.com/fsx/lustre/pricing/. Capacity Block fees are {region}'s, from its offerings; a comparison of a block with on-demand mixes the two"
        ),
    )
}

pub fn efa_one_az(zone: &str) -> Warning {
    w(
        "efa-single-az",
        format!(
            "EFA traffic cannot cross availability zones or VPCs: keep every node of this job in {zone}"
        ),
    )
}

/// The block's end as a checkpoint deadline: the end less the plan's end margin
/// (`capacity/margin.rs`: the EKS scale-down for instance blocks, the earlier reclaim of
/// UltraServer blocks).
pub fn block_end(plan: &BlockPlan, job_hours: u32) -> Warning {
    let end = plan.end;
    let usable_hours = plan.usable_hours;
    let stop = end - SignedDuration::from_mins(plan.end_margin_minutes);
    let instance_type = plan
        .offerings
        .first()
        .map_or("", |o| o.instance_type.as_str());
    let squeeze = if f64::from(job_hours) > usable_hours {
        format!(
            "; the job's {job_hours} h run {:.0} min past that: save a checkpoint before it and resume, or buy the longer block listed in the capacity options",
            (f64::from(job_hours) - usable_hours) * 60.0
        )
    } else {
        String::new()
    };
    w(
        "capacity-block-end",
        format!(
            "checkpoint deadline {stop}: the Capacity Block ends {end}; {}{squeeze}",
            margin::end_margin_story(instance_type)
        ),
    )
}

pub fn no_capacity_blocks(p: &InstanceProfile) -> Warning {
    let why = match p.capacity_blocks {
        Some(false) if p.name.starts_with('g') => "G families are not sold as Capacity Blocks",
        Some(false) => "this type is not sold as Capacity Blocks",
        _ => "Capacity Block support for this type is unconfirmed in the catalog",
    };
    w(
        "no-capacity-blocks",
        format!("{}: {why}; planned on-demand instead", p.name),
    )
}

pub fn p4d_efa(p: &InstanceProfile) -> Option<Warning> {
    p.name.starts_with("p4d").then(|| {
        w(
            "p4d-efa-isolated",
            format!("{}: P4d instances cannot talk EFA to other instance types: keep the job on {} only", p.name, p.name),
        )
    })
}

pub fn job_longer_than_block(job_hours: u32, detail: &str) -> Warning {
    w(
        "job-longer-than-block",
        format!(
            "the job ({job_hours} h) is longer than {detail}: checkpoint and resume in a second block, or plan on-demand"
        ),
    )
}

pub fn rounded_up(requested: u32, total: u32, per_node: u32, instance: &str) -> Warning {
    w(
        "rounded-up",
        format!(
            "{requested} GPUs is not a multiple of {per_node} per {instance}: planned the next shape up, {total} GPUs ({} nodes)",
            total / per_node
        ),
    )
}

pub fn no_block_fits(reasons: &[String]) -> Warning {
    w(
        "no-capacity-block-fits",
        format!(
            "no Capacity Block offering fits: {}; planned on-demand",
            reasons.join("; ")
        ),
    )
}

/// On-demand chosen over a Capacity Block that costs more: the nodes are not reserved.
/// InsufficientInstanceCapacity: <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/troubleshooting-launch.html#troubleshooting-launch-capacity>
pub fn on_demand_risk(nodes: u32, instance: &str, extra_usd: f64) -> Warning {
    w(
        "on-demand-capacity-risk",
        format!(
            "on-demand {nodes} x {instance} is not reserved: launches in one zone can fail with InsufficientInstanceCapacity, and the job then waits or cannot start; the Capacity Block in the capacity options guarantees the nodes for ${extra_usd:.2} more (--capacity capacity-block)"
        ),
    )
}

pub fn unknown_cost(instance: &str) -> Warning {
    w(
        "cost-unknown",
        format!("{instance}: no price in the catalog and no offering fee: cost not estimated"),
    )
}

pub fn zone_assumed(zone: &str) -> Warning {
    w(
        "zone-assumed",
        format!(
            "no zone given or known: {zone} assumed; on InsufficientInstanceCapacity try another zone or reserve capacity"
        ),
    )
}

pub fn no_rdma(p: &InstanceProfile) -> Warning {
    w(
        "no-gpudirect-rdma",
        format!(
            "{}: EFA without GPUDirect RDMA: inter-node traffic goes through host memory",
            p.name
        ),
    )
}

pub fn catalog_mismatch(detail: &str) -> Warning {
    w(
        "catalog-mismatch",
        format!("instance types input disagrees with the catalog: {detail}"),
    )
}

pub fn too_many_for_blocks(nodes: u32) -> Warning {
    w(
        "too-many-for-capacity-blocks",
        format!(
            "{nodes} instances cannot be bought as Capacity Blocks (at most 64 per block and 256 across blocks): planned on-demand; split the job or ask AWS for a larger reservation"
        ),
    )
}

pub fn start_moved(from: Timestamp, now: Timestamp) -> Warning {
    w(
        "start-moved",
        format!("the requested start {from} is in the past: planned from now ({now})"),
    )
}

pub fn block_too_far_ahead(start: Timestamp, buy_from: Timestamp) -> Warning {
    w(
        "capacity-block-too-early",
        format!(
            "Capacity Blocks sell at most 8 weeks ahead: a block starting {start} cannot be bought today; list and buy it from {buy_from}"
        ),
    )
}
