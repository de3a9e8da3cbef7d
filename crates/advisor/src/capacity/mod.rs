//! The Capacity Block chooser: pure, no I/O, table-tested (`tests.rs`).
//!
//! Rules (AWS "Capacity Blocks for ML", <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html>): 1..=64 instances
//! per block, at most 256 across blocks; durations in 1-day steps up to 14 days, then
//! 7-day steps up to 182 days; a block lives in one AZ. A job of D buys the block of D:
//! the block's end less its end margin (`margin.rs`: 40 minutes for instance blocks, the
//! EKS scale-down and the EventBridge warning; 60 for UltraServer blocks, which EC2
//! reclaims earlier) is a checkpoint deadline stated in the plan, not a reason to buy a
//! longer block (the longer block is shown as an alternative with its cost).
//! Several blocks in one AZ may be combined to reach N nodes when they all cover the
//! job's window.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::aws::offerings::Offering;
use crate::request::Request;

pub const MAX_INSTANCES_PER_BLOCK: u32 = 64;
pub const MAX_INSTANCES_ACROSS_BLOCKS: u32 = 256;
pub use margin::{EKS_SCALE_DOWN_MINUTES, ULTRASERVER_RECLAIM_MINUTES, end_margin_minutes};
/// Capacity Blocks can be bought at most 8 weeks ahead (same AWS page).
pub const MAX_WEEKS_AHEAD: i64 = 8;

/// The latest start a block bought at `now` may have.
pub fn latest_buyable_start(now: Timestamp) -> Timestamp {
    now + SignedDuration::from_hours(MAX_WEEKS_AHEAD * 7 * 24)
}

/// Every duration AWS sells, in hours, shortest first.
pub fn valid_block_hours() -> impl Iterator<Item = u32> {
    (1..=14).map(|d| d * 24).chain((3..=26).map(|w| w * 168))
}

/// Block sizes to ask for when `nodes` exceed one block: as few blocks as possible,
/// each at most 64 instances (100 -> [64, 36]); `None` beyond 256 in all.
pub fn block_sizes(nodes: u32) -> Option<Vec<u32>> {
    if nodes > MAX_INSTANCES_ACROSS_BLOCKS {
        return None;
    }
    let mut left = nodes;
    let mut out = Vec::new();
    while left > 0 {
        let n = left.min(MAX_INSTANCES_PER_BLOCK);
        out.push(n);
        left -= n;
    }
    Some(out)
}

pub fn is_valid_block_hours(hours: u32) -> bool {
    valid_block_hours().any(|h| h == hours)
}

/// The shortest block that holds a job of `job_hours`; `None` when the job is longer
/// than the longest block.
pub fn block_hours_for(job_hours: u32) -> Option<u32> {
    block_hours_with_margin(job_hours, 0)
}

/// The shortest block that holds the job plus `margin_min` minutes at its end.
pub fn block_hours_with_margin(job_hours: u32, margin_min: i64) -> Option<u32> {
    valid_block_hours().find(|&h| i64::from(h) * 60 >= i64::from(job_hours) * 60 + margin_min)
}

/// What the job needs from Capacity Blocks.
#[derive(Debug, Clone, Copy)]
pub struct BlockNeed<'a> {
    pub instance_type: &'a str,
    /// Offerings from another region's zones are ignored.
    pub region: &'a str,
    pub nodes: u32,
    pub job_hours: u32,
    pub earliest_start: Option<Timestamp>,
    pub latest_end: Option<Timestamp>,
    /// Allowed zones; empty = any.
    pub zones: &'a [String],
    /// Minutes the blocks must hold after the job (0: the job's own length; 40: room
    /// for the EKS scale-down, the longer alternative).
    pub margin_minutes: i64,
    /// When the plan is made: blocks that already started, or start more than 8
    /// weeks later, cannot be bought.
    pub now: Timestamp,
}

impl<'a> BlockNeed<'a> {
    /// What `req` needs of blocks of `instance_type` for `nodes` nodes, holding
    /// `margin_minutes` after the job.
    pub fn of_request(
        instance_type: &'a str,
        req: &'a Request,
        nodes: u32,
        margin_minutes: i64,
    ) -> Self {
        BlockNeed {
            instance_type,
            region: &req.region,
            nodes,
            job_hours: req.job_hours,
            earliest_start: req.earliest_start,
            latest_end: req.latest_end,
            zones: &req.zones,
            margin_minutes,
            now: req.now,
        }
    }
}

/// The blocks to buy: all in one AZ, together at least `nodes` instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockPlan {
    pub availability_zone: String,
    pub offerings: Vec<Offering>,
    pub instances: u32,
    /// The window every chosen block covers.
    pub start: Timestamp,
    pub end: Timestamp,
    /// Hours the job may run: the window less the end margin.
    pub usable_hours: f64,
    /// Checkpoint and stop by then: the end less the end margin.
    pub checkpoint_by: Timestamp,
    /// Minutes before the end the nodes stop being the job's (`margin.rs`): 40 for
    /// instance blocks (the EKS scale-down), 60 for UltraServer blocks.
    pub end_margin_minutes: i64,
    pub total_fee_usd: f64,
}

/// The chosen blocks' lengths as sold: `168 h`, or `168 h + 192 h`.
pub fn block_lengths(plan: &BlockPlan) -> String {
    let hours: Vec<String> = plan
        .offerings
        .iter()
        .map(|o| format!("{} h", o.duration_hours))
        .collect();
    hours.join(" + ")
}

#[derive(Debug, Clone, PartialEq)]
pub enum BlockChoice {
    Fit(BlockPlan),
    NoFit(Vec<String>),
}

/// Cheapest set of offerings that fits; ties go to the earlier start, then fewer
/// blocks, then the AZ and offering ids in name order, so the answer is deterministic.
pub fn choose_blocks(offers: &[Offering], need: &BlockNeed<'_>) -> BlockChoice {
    let mut reasons = Vec::new();
    if need.nodes > MAX_INSTANCES_ACROSS_BLOCKS {
        reasons.push(format!(
            "{} instances exceed the {MAX_INSTANCES_ACROSS_BLOCKS} Capacity Blocks allow across blocks",
            need.nodes
        ));
        return BlockChoice::NoFit(reasons);
    }
    let usable_min = i64::from(need.job_hours) * 60 + need.margin_minutes;
    if block_hours_with_margin(need.job_hours, need.margin_minutes).is_none() {
        reasons.push(format!(
            "the job ({} h) is longer than the longest Capacity Block (182 days)",
            need.job_hours
        ));
        return BlockChoice::NoFit(reasons);
    }
    let eligible = filter(offers, need, usable_min, &mut reasons);
    let mut by_zone: BTreeMap<&str, Vec<&Offering>> = BTreeMap::new();
    for o in eligible {
        by_zone
            .entry(o.availability_zone.as_str())
            .or_default()
            .push(o);
    }
    let mut best: Option<(Key, Vec<&Offering>)> = None;
    for (zone, zone_offers) in &by_zone {
        let mut most = 0u32;
        for anchor in anchors(zone_offers) {
            let need_end = anchor + SignedDuration::from_mins(usable_min);
            let covering: Vec<&Offering> = zone_offers
                .iter()
                .copied()
                .filter(|o| o.start <= anchor && o.end >= need_end)
                .collect();
            most = most.max(covering.iter().map(|o| o.instance_count).sum());
            if let Some(set) = cheapest_cover(&covering, need.nodes) {
                let key = Key::of(zone, &set);
                if best.as_ref().is_none_or(|(k, _)| key < *k) {
                    best = Some((key, set));
                }
            }
        }
        if most < need.nodes {
            reasons.push(format!(
                "{zone}: at most {most} {} instances cover one window of {} h, {} needed",
                need.instance_type, need.job_hours, need.nodes
            ));
        }
    }
    match best {
        Some((_, set)) => BlockChoice::Fit(plan(set)),
        None => {
            if reasons.is_empty() {
                reasons.push(format!("no offering for {} was given", need.instance_type));
            }
            BlockChoice::NoFit(reasons)
        }
    }
}

/// Why an offering cannot be part of a plan for `need`, as an index into [`MISFITS`];
/// `None` when it can (alone or with others).
fn misfit(o: &Offering, need: &BlockNeed<'_>, usable_min: i64) -> Option<usize> {
    let minutes = (o.end.as_second() - o.start.as_second()) / 60;
    if !crate::regions::is_zone_of(&o.availability_zone, need.region)
        || (!need.zones.is_empty() && !need.zones.contains(&o.availability_zone))
    {
        Some(0)
    } else if need.earliest_start.is_some_and(|s| o.start < s)
        || need.latest_end.is_some_and(|e| o.end > e)
    {
        Some(1)
    } else if o.instance_count > MAX_INSTANCES_PER_BLOCK
        || !is_valid_block_hours(o.duration_hours)
        || o.currency != "USD"
    {
        Some(2)
    } else if minutes < usable_min {
        Some(3)
    } else if o.start < need.now || o.start > latest_buyable_start(need.now) {
        Some(4)
    } else {
        None
    }
}

/// What each [`misfit`] index means, after "N offering(s)".
const MISFITS: [&str; 5] = [
    "in zones (or regions) the request does not allow",
    "outside the requested window",
    "not a valid Capacity Block (1-64 instances, sold durations, USD)",
    "shorter than the job",
    "already started, or starting more than 8 weeks from now (not buyable today)",
];

/// Whether one offering can serve `need` on its own, and if not why: the same rules
/// the chooser applies, said for this offering.
pub fn judge(o: &Offering, need: &BlockNeed<'_>) -> Result<(), String> {
    let usable_min = i64::from(need.job_hours) * 60 + need.margin_minutes;
    match misfit(o, need, usable_min) {
        Some(0) => Err(format!(
            "{} is not a zone the request allows",
            o.availability_zone
        )),
        Some(1) => Err(format!(
            "{} .. {} is outside the requested window",
            o.start, o.end
        )),
        Some(2) => Err(MISFITS[2].to_string()),
        Some(3) => Err(format!(
            "{} h is shorter than the job's {} h",
            o.duration_hours, need.job_hours
        )),
        Some(_) if o.start < need.now => Err(format!("started {}: not buyable now", o.start)),
        Some(_) => Err(format!(
            "starts {}, more than {MAX_WEEKS_AHEAD} weeks ahead: not buyable today",
            o.start
        )),
        None if o.instance_count < need.nodes => Err(format!(
            "{} of the {} instances needed: only with other blocks in {} covering the same window",
            o.instance_count, need.nodes, o.availability_zone
        )),
        None => Ok(()),
    }
}

fn filter<'o>(
    offers: &'o [Offering],
    need: &BlockNeed<'_>,
    usable_min: i64,
    reasons: &mut Vec<String>,
) -> Vec<&'o Offering> {
    let mut counts = [0usize; MISFITS.len()];
    let mut out = Vec::new();
    for o in offers
        .iter()
        .filter(|o| o.instance_type == need.instance_type)
    {
        match misfit(o, need, usable_min) {
            Some(slot) => counts[slot] += 1,
            None => out.push(o),
        }
    }
    for (n, what) in counts.iter().zip(MISFITS) {
        if *n > 0 {
            reasons.push(format!("{n} {} offering(s) {what}", need.instance_type));
        }
    }
    out
}

/// Candidate start instants: every block's own start, in order.
fn anchors(offers: &[&Offering]) -> Vec<Timestamp> {
    let mut starts: Vec<Timestamp> = offers.iter().map(|o| o.start).collect();
    starts.sort();
    starts.dedup();
    starts
}

/// Ordering of candidate plans: fee, start, number of blocks, zone, ids.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    fee_cents: u64,
    start: Timestamp,
    blocks: usize,
    zone: String,
    ids: Vec<String>,
}

impl Key {
    fn of(zone: &str, set: &[&Offering]) -> Self {
        let mut ids: Vec<String> = set.iter().map(|o| o.id.clone()).collect();
        ids.sort();
        Key {
            fee_cents: set.iter().map(|o| o.fee_cents()).sum(),
            start: set.iter().map(|o| o.start).max().unwrap_or_default(),
            blocks: set.len(),
            zone: zone.to_string(),
            ids,
        }
    }
}

/// Minimum-fee subset reaching `nodes` instances (0/1 knapsack over capped counts).
/// Fewer blocks, then smaller ids, break fee ties.
fn cheapest_cover<'o>(offers: &[&'o Offering], nodes: u32) -> Option<Vec<&'o Offering>> {
    let mut sorted = offers.to_vec();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let cap = nodes as usize;
    type Cell = Option<(u64, usize, Vec<usize>)>;
    let mut dp: Vec<Cell> = vec![None; cap + 1];
    dp[0] = Some((0, 0, Vec::new()));
    for (i, o) in sorted.iter().enumerate() {
        let prev = dp.clone();
        for (c, cell) in prev.iter().enumerate() {
            let Some((fee, n, ids)) = cell else { continue };
            let next = (c + o.instance_count as usize).min(cap);
            let mut ids = ids.clone();
            ids.push(i);
            let cand = (fee + o.fee_cents(), n + 1, ids);
            if dp[next].as_ref().is_none_or(|cur| cand < *cur) {
                dp[next] = Some(cand);
            }
        }
    }
    dp[cap]
        .take()
        .map(|(_, _, ids)| ids.into_iter().map(|i| sorted[i]).collect())
}

fn plan(set: Vec<&Offering>) -> BlockPlan {
    let start = set.iter().map(|o| o.start).max().unwrap_or_default();
    let end = set.iter().map(|o| o.end).min().unwrap_or_default();
    let margin = end_margin_minutes(&set[0].instance_type);
    let minutes = (end.as_second() - start.as_second()) / 60 - margin;
    BlockPlan {
        availability_zone: set[0].availability_zone.clone(),
        instances: set.iter().map(|o| o.instance_count).sum(),
        total_fee_usd: set.iter().map(|o| o.fee_cents()).sum::<u64>() as f64 / 100.0,
        usable_hours: minutes as f64 / 60.0,
        checkpoint_by: end - SignedDuration::from_mins(margin),
        end_margin_minutes: margin,
        start,
        end,
        offerings: set.into_iter().cloned().collect(),
    }
}

pub mod fallbacks;
mod held;
pub mod margin;
pub use held::choose_held;

#[cfg(test)]
mod tests;
