//! Capacity Blocks the account already holds (`--existing-reservations`), offered
//! before buying: blocks of the chosen type in one allowed zone that together hold the
//! job's nodes for its whole run, ending no later than the block's end less its end
//! margin (`margin.rs`). The earliest start wins, then fewer blocks,
//! then the zone and ids in name order.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use super::{BlockNeed, BlockPlan, end_margin_minutes, plan};
use crate::aws::offerings::Offering;
use crate::aws::reservations::HeldBlock;

fn as_offering(b: &HeldBlock) -> Offering {
    Offering {
        id: b.id.clone(),
        instance_type: b.instance_type.clone(),
        availability_zone: b.availability_zone.clone(),
        instance_count: b.instance_count,
        start: b.start,
        end: b.end,
        duration_hours: u32::try_from(b.end.duration_since(b.start).as_hours()).unwrap_or(0),
        upfront_fee: 0.0,
        currency: "USD".into(),
        held: true,
    }
}

/// A candidate: (start, number of blocks, zone) orders them; the blocks.
type Candidate<'h> = ((Timestamp, usize, &'h str), Vec<&'h HeldBlock>);

/// The held blocks to use, or why none will do.
pub fn choose_held(held: &[HeldBlock], need: &BlockNeed<'_>) -> Result<BlockPlan, String> {
    let run = SignedDuration::from_hours(i64::from(need.job_hours));
    let margin = end_margin_minutes(need.instance_type);
    let scale_down = SignedDuration::from_mins(margin);
    let mut by_zone: BTreeMap<&str, Vec<&HeldBlock>> = BTreeMap::new();
    for b in held.iter().filter(|b| {
        b.instance_type == need.instance_type
            && crate::regions::is_zone_of(&b.availability_zone, need.region)
            && (need.zones.is_empty() || need.zones.contains(&b.availability_zone))
    }) {
        by_zone.entry(&b.availability_zone).or_default().push(b);
    }
    if by_zone.is_empty() {
        return Err(format!(
            "the account holds no {} Capacity Block in the allowed zones",
            need.instance_type
        ));
    }
    let earliest = need.earliest_start.unwrap_or(need.now).max(need.now);
    let mut best: Option<Candidate<'_>> = None;
    for (zone, blocks) in &by_zone {
        let mut anchors: Vec<Timestamp> = blocks.iter().map(|b| b.start.max(earliest)).collect();
        anchors.sort();
        anchors.dedup();
        for anchor in anchors {
            if need.latest_end.is_some_and(|e| anchor + run > e) {
                continue;
            }
            let mut covering: Vec<&HeldBlock> = blocks
                .iter()
                .copied()
                .filter(|b| b.start <= anchor && b.end - scale_down >= anchor + run)
                .collect();
            covering.sort_by(|a, b| {
                b.instance_count
                    .cmp(&a.instance_count)
                    .then(a.id.cmp(&b.id))
            });
            let mut set = Vec::new();
            let mut count = 0;
            for b in covering {
                if count >= need.nodes {
                    break;
                }
                count += b.instance_count;
                set.push(b);
            }
            if count < need.nodes {
                continue;
            }
            let key = (anchor, set.len(), *zone);
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, set));
            }
        }
    }
    let Some(((anchor, _, _), set)) = best else {
        return Err(format!(
            "none of the account's {} Capacity Blocks holds {} instances in one zone for {} h (ending {margin} minutes before the block does)",
            need.instance_type, need.nodes, need.job_hours
        ));
    };
    let offers: Vec<Offering> = set.into_iter().map(as_offering).collect();
    let mut p = plan(offers.iter().collect());
    p.start = anchor;
    p.usable_hours = (p.checkpoint_by.duration_since(anchor).as_mins()) as f64 / 60.0;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::tests::need;

    fn held(id: &str, az: &str, count: u32, start: &str, end: &str) -> HeldBlock {
        HeldBlock {
            id: id.into(),
            instance_type: "p5.48xlarge".into(),
            availability_zone: az.into(),
            instance_count: count,
            start: start.parse().unwrap(),
            end: end.parse().unwrap(),
            state: "scheduled".into(),
        }
    }

    #[test]
    fn a_held_block_that_covers_the_run_and_the_count_is_chosen() {
        let blocks = [
            held(
                "cr-short",
                "us-east-1a",
                8,
                "2026-11-25T11:30:00Z",
                "2026-11-26T11:30:00Z",
            ),
            held(
                "cr-week",
                "us-east-1b",
                8,
                "2026-11-25T11:30:00Z",
                "2026-12-02T11:30:00Z",
            ),
            held(
                "cr-small",
                "us-east-1a",
                2,
                "2026-11-24T11:30:00Z",
                "2026-12-24T11:30:00Z",
            ),
        ];
        let p = choose_held(&blocks, &need(8, 48)).unwrap();
        assert_eq!(p.offerings.len(), 1);
        assert_eq!(p.offerings[0].id, "cr-week");
        assert!(p.offerings[0].held);
        assert_eq!(p.total_fee_usd, 0.0);
        assert_eq!(p.checkpoint_by.to_string(), "2026-12-02T10:50:00Z");
        // The whole week less 40 minutes: 167 h 20 min.
        assert!(
            (p.usable_hours - (168.0 - 40.0 / 60.0)).abs() < 1e-9,
            "{}",
            p.usable_hours
        );
    }

    #[test]
    fn a_run_that_would_cross_the_scale_down_does_not_fit() {
        // 24 h block, 24 h job: EKS scales the group to 0 40 minutes before the end.
        let blocks = [held(
            "cr-day",
            "us-east-1a",
            8,
            "2026-11-25T11:30:00Z",
            "2026-11-26T11:30:00Z",
        )];
        let why = choose_held(&blocks, &need(8, 24)).unwrap_err();
        assert!(
            why.contains("none of the account's p5.48xlarge Capacity Blocks holds 8 instances"),
            "{why}"
        );
        assert!(choose_held(&blocks, &need(8, 23)).is_ok());
        assert!(
            choose_held(&blocks, &need(9, 23)).is_err(),
            "8 instances are not 9"
        );
    }

    #[test]
    fn blocks_of_one_zone_combine_and_an_active_block_starts_now() {
        let blocks = [
            held(
                "cr-a",
                "us-east-1a",
                4,
                "2026-11-20T11:30:00Z",
                "2026-11-27T11:30:00Z",
            ),
            held(
                "cr-b",
                "us-east-1a",
                4,
                "2026-11-21T11:30:00Z",
                "2026-11-28T11:30:00Z",
            ),
        ];
        let p = choose_held(&blocks, &need(8, 72)).unwrap();
        assert_eq!(p.instances, 8);
        assert_eq!(p.start.to_string(), "2026-11-22T00:00:00Z");
        assert_eq!(p.checkpoint_by.to_string(), "2026-11-27T10:50:00Z");
    }

    #[test]
    fn a_held_ultraserver_block_ends_its_run_an_hour_early() {
        // A 23 h run in a 24 h UltraServer block: usable until an hour before its end.
        let mut block = held(
            "cr-gb200",
            "us-east-1-dfw-2a",
            18,
            "2026-11-25T11:30:00Z",
            "2026-11-26T11:30:00Z",
        );
        block.instance_type = "p6e-gb200.36xlarge".into();
        let mut n = need(18, 23);
        n.instance_type = "p6e-gb200.36xlarge";
        let p = choose_held(std::slice::from_ref(&block), &n).unwrap();
        assert_eq!(p.checkpoint_by.to_string(), "2026-11-26T10:30:00Z");
        assert_eq!(p.end_margin_minutes, 60);
        assert!((p.usable_hours - 23.0).abs() < 1e-9, "{}", p.usable_hours);
        // The same block as p5: 40 minutes.
        block.instance_type = "p5.48xlarge".into();
        let p = choose_held(std::slice::from_ref(&block), &need(18, 23)).unwrap();
        assert_eq!(p.checkpoint_by.to_string(), "2026-11-26T10:50:00Z");
    }
}
