//! When no Capacity Block fits the job as asked, what else could: blocks of a later start
//! (outside the requested window), a shorter block with checkpoint and resume, and an
//! extension of a block the account already holds. Smaller blocks of one AZ that together
//! cover the ask are the chooser's own (`choose_blocks`), reachable because the script
//! lists offerings of smaller counts too (`listing_counts`). Pure, no I/O.
//!
//! Extensions (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-extend.html>):
//! a block `active` or `scheduled` may be extended from 56 days to 1 hour before it ends,
//! in the durations blocks are sold in; the reservation id stays the same;
//! `describe-capacity-block-extension-offerings` lists the extensions and
//! `purchase-capacity-block-extension` buys one.

use jiff::{SignedDuration, Timestamp};

use super::{BlockChoice, BlockNeed, BlockPlan, choose_blocks, valid_block_hours};
use crate::aws::offerings::Offering;
use crate::aws::reservations::HeldBlock;

/// Extensions are bought at most this long before the block ends (same AWS page).
pub const EXTEND_DAYS_BEFORE_END: i64 = 56;

/// One way to get the job's capacity when no block fits as asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// `later-start`, `shorter-block` or `extend-held`.
    pub kind: &'static str,
    pub label: String,
    pub offerings: Vec<String>,
    pub usd: Option<f64>,
}

/// The counts to list offerings for: the job's `nodes` per block (at most 64), then
/// halves down to 1, so blocks of one AZ that together cover the ask are listed too
/// (2 -> [2, 1]; 8 -> [8, 4, 2, 1]; 100 -> [64, 36, 32, 18, 16, 9, 8, 5, 4, 3, 2, 1]).
pub fn listing_counts(block_sizes: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for &n in block_sizes {
        let mut c = n;
        loop {
            if !out.contains(&c) {
                out.push(c);
            }
            if c == 1 {
                break;
            }
            c = c.div_ceil(2);
        }
    }
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// Every fallback for `need`, when no block fits it as asked.
pub fn fallbacks(offers: &[Offering], held: &[HeldBlock], need: &BlockNeed<'_>) -> Vec<Fallback> {
    let mut out = Vec::new();
    out.extend(later_start(offers, need));
    out.extend(shorter_block(offers, need));
    out.extend(held.iter().filter_map(|b| extend_held(b, need)));
    out
}

fn ids(plan: &BlockPlan) -> Vec<String> {
    plan.offerings.iter().map(|o| o.id.clone()).collect()
}

/// Blocks that fit once the requested window is let go: a later (or earlier) start.
fn later_start(offers: &[Offering], need: &BlockNeed<'_>) -> Option<Fallback> {
    if need.earliest_start.is_none() && need.latest_end.is_none() {
        return None;
    }
    let open = BlockNeed {
        earliest_start: None,
        latest_end: None,
        ..*need
    };
    let BlockChoice::Fit(plan) = choose_blocks(offers, &open) else {
        return None;
    };
    Some(Fallback {
        kind: "later-start",
        label: format!(
            "outside the requested window: {} x {} in {} from {} to {} (rerun with --start {} --end {})",
            plan.instances,
            need.instance_type,
            plan.availability_zone,
            plan.start,
            plan.end,
            plan.start,
            plan.end
        ),
        offerings: ids(&plan),
        usd: Some(plan.total_fee_usd),
    })
}

/// The longest block shorter than the job that holds every node: run that long,
/// checkpoint before its end, resume the rest elsewhere.
fn shorter_block(offers: &[Offering], need: &BlockNeed<'_>) -> Option<Fallback> {
    let mut lengths: Vec<u32> = offers
        .iter()
        .filter(|o| o.instance_type == need.instance_type)
        .map(|o| o.duration_hours)
        .filter(|&h| h < need.job_hours)
        .collect();
    lengths.sort_unstable_by(|a, b| b.cmp(a));
    lengths.dedup();
    for hours in lengths {
        // Whole hours the block holds the job, before the EKS scale-down.
        let margin = super::end_margin_minutes(need.instance_type);
        let usable = ((i64::from(hours) * 60 - margin) / 60).max(1) as u32;
        let part = BlockNeed {
            job_hours: usable,
            ..*need
        };
        if let BlockChoice::Fit(plan) = choose_blocks(offers, &part) {
            return Some(Fallback {
                kind: "shorter-block",
                label: format!(
                    "a shorter block with checkpoint and resume: {} x {} in {}, {hours} h from {}; checkpoint by {}, then resume the other {} h on a later block{}",
                    plan.instances,
                    need.instance_type,
                    plan.availability_zone,
                    plan.start,
                    plan.checkpoint_by,
                    need.job_hours.saturating_sub(usable),
                    if super::margin::ultraserver_only(need.instance_type) {
                        ""
                    } else {
                        " or on-demand"
                    }
                ),
                offerings: ids(&plan),
                usd: Some(plan.total_fee_usd),
            });
        }
    }
    None
}

/// A held block of the type, in an allowed zone, with the nodes, that ends too early:
/// the extension that covers the job from when it can start.
fn extend_held(b: &HeldBlock, need: &BlockNeed<'_>) -> Option<Fallback> {
    let zone_ok = need.zones.is_empty() || need.zones.contains(&b.availability_zone);
    let live = b.state == "active" || b.state == "scheduled";
    if b.instance_type != need.instance_type || !zone_ok || !live || b.instance_count < need.nodes {
        return None;
    }
    let start = b.start.max(need.now);
    let needed_end = start
        + SignedDuration::from_mins(
            i64::from(need.job_hours) * 60 + super::end_margin_minutes(need.instance_type),
        );
    if needed_end <= b.end {
        return None;
    }
    let short_min = (needed_end.as_second() - b.end.as_second()).div_euclid(60);
    let hours = valid_block_hours().find(|&h| i64::from(h) * 60 >= short_min)?;
    let from: Timestamp = b.end - SignedDuration::from_hours(EXTEND_DAYS_BEFORE_END * 24);
    let when = if from > need.now {
        format!(" (from {from}, {EXTEND_DAYS_BEFORE_END} days before it ends)")
    } else {
        String::new()
    };
    Some(Fallback {
        kind: "extend-held",
        label: format!(
            "extend the held block {} ({} x {} in {}, ends {}) by {hours} h{when}: aws ec2 describe-capacity-block-extension-offerings --capacity-reservation-id {} --capacity-block-extension-duration-hours {hours}, then aws ec2 purchase-capacity-block-extension --capacity-reservation-id {} --capacity-block-extension-offering-id <id>",
            b.id, b.instance_count, b.instance_type, b.availability_zone, b.end, b.id, b.id
        ),
        offerings: vec![b.id.clone()],
        usd: None,
    })
}
