//! Rule `capacity-block-ends`: a job that can only run on Capacity Block nodes must not
//! be expected to outlive the block. A block ends at a fixed time and EC2 reclaims its
//! instances 30 minutes before (see `reservations.rs`); whatever the job did since its
//! last checkpoint is lost.

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::annotations::{EXPECTED_DURATION, LABEL_RESERVATION_ID};
use crate::finding::{Finding, Rule};
use crate::inventory::Snapshot;
use crate::json::str_at;
use crate::podspec::PodView;
use crate::policy::{Effective, Mode};
use crate::reservations::{RECLAIM_BEFORE_END, Reservation};

/// Node labels that say "reserved capacity only" (Karpenter, EKS managed node groups).
const RESERVED_ONLY: [(&str, &str); 2] = [
    ("karpenter.sh/capacity-type", "reserved"),
    ("eks.amazonaws.com/capacityType", "CAPACITY_BLOCK"),
];

/// With no expected duration, warn only when the block ends this soon.
const HORIZON: SignedDuration = SignedDuration::from_hours(24);

pub(crate) struct BlockInput<'a> {
    pub view: &'a PodView<'a>,
    pub object: &'a Value,
    pub instance_type: Option<&'a str>,
    pub eff: &'a Effective<'a>,
    pub inventory: &'a Snapshot,
    pub now: Timestamp,
}

/// The block the pod can only land on: pinned by reservation id, or the one of its
/// instance type that ends first when it asks for reserved capacity only.
fn block<'a>(input: &BlockInput<'a>) -> Option<&'a Reservation> {
    let selected = |key: &str| str_at(input.view.pod, &["spec", "nodeSelector", key]);
    let reservations = input.inventory.reservations();
    if let Some(id) = selected(LABEL_RESERVATION_ID) {
        return reservations.get(id);
    }
    let reserved_only = RESERVED_ONLY.iter().any(|(k, v)| selected(k) == Some(*v));
    if !reserved_only {
        return None;
    }
    reservations.first_ending(
        input.instance_type?,
        selected(crate::annotations::LABEL_ZONE),
    )
}

/// How long the job expects to run, and where that came from.
fn expected(input: &BlockInput<'_>) -> Result<Option<(SignedDuration, String)>, String> {
    let annotation = input.view.annotation(EXPECTED_DURATION).or_else(|| {
        str_at(
            input.object,
            &["metadata", "annotations", EXPECTED_DURATION],
        )
    });
    if let Some(text) = annotation {
        return text
            .trim()
            .parse::<SignedDuration>()
            .map(|d| Some((d, format!("{EXPECTED_DURATION}: {text}"))))
            .map_err(|e| {
                format!(
                    "{EXPECTED_DURATION}: {text:?} is not a duration (write e.g. 36h or 90m): {e}"
                )
            });
    }
    for (pointer, what) in [
        ("/spec/activeDeadlineSeconds", "activeDeadlineSeconds"),
        (
            "/spec/runPolicy/activeDeadlineSeconds",
            "runPolicy.activeDeadlineSeconds",
        ),
    ] {
        let seconds = input
            .view
            .pod
            .pointer(pointer)
            .or_else(|| input.object.pointer(pointer))
            .and_then(Value::as_i64);
        if let Some(s) = seconds {
            return Ok(Some((SignedDuration::from_secs(s), format!("{what}: {s}"))));
        }
    }
    Ok(None)
}

fn hours(d: SignedDuration) -> String {
    format!("{:.1}h", d.as_secs_f64() / 3600.0)
}

pub(crate) fn check(input: &BlockInput<'_>, out: &mut Vec<Finding>) {
    let mode = input.eff.mode_capacity_block_ends();
    if mode == Mode::Off {
        return;
    }
    let Some(block) = block(input) else { return };
    let site = input.view.base.clone();
    let reclaim = block.reclaim_at();
    let left = reclaim.duration_since(input.now);
    let on = format!(
        "the job can only run on Capacity Block {} ({}, {}), which ends {}; EC2 starts terminating its instances at {}",
        block.id, block.instance_type, block.zone, block.end, reclaim
    );
    let finding = |found: String, fix: String| Finding {
        rule: Rule::CapacityBlockEnds,
        mode,
        site: site.clone(),
        found,
        fix,
        opt_in: None,
    };
    if block.expiring() || left <= SignedDuration::ZERO {
        out.push(finding(
            format!("{on}: the block is already in its reclaim window, so new pods will not run to completion."),
            "submit onto a later block or other capacity.".into(),
        ));
        return;
    }
    match expected(input) {
        Err(message) => out.push(finding(
            format!("{on}, {} from now; {message}.", hours(left)),
            format!("write {EXPECTED_DURATION} as a duration such as 36h."),
        )),
        Ok(Some((run, source))) if run > left => {
            let needed = input.now + run + RECLAIM_BEFORE_END;
            out.push(finding(
                format!(
                    "{on}, {} from now, but the job expects to run {} ({source}).",
                    hours(left),
                    hours(run)
                ),
                format!(
                    "checkpoint often enough to lose little at {reclaim} and resume on a later block, shorten the run to under {}, or submit onto a block that ends after {needed}.",
                    hours(left)
                ),
            ));
        }
        Ok(Some(_)) => {}
        Ok(None) if left < HORIZON => out.push(finding(
            format!(
                "{on}, {} from now, and the job states no expected run time.",
                hours(left)
            ),
            format!(
                "set {EXPECTED_DURATION} (e.g. 36h) or activeDeadlineSeconds so trainplace can check it against the block, and checkpoint before {reclaim}."
            ),
        )),
        Ok(None) => {}
    }
}
