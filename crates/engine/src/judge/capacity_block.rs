//! Rule `capacity-block-ends`: a job that can only run on Capacity Block nodes must not
//! be expected to outlive the block. A block ends at a fixed time and EC2 reclaims its
//! instances 30 minutes before (see `reservations.rs`); Karpenter drains them and an EKS
//! managed node group is scaled to 0 already 40 minutes before (see `block_nodes.rs`).
//! Whatever the job did since its last checkpoint is lost.

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::facts::block_nodes::{
    LABEL_EKS_CAPACITY_TYPE, LABEL_KARPENTER_CAPACITY_TYPE, LABEL_NODEGROUP, LABEL_NODEPOOL,
    Provisioner,
};
use crate::facts::inventory::Snapshot;
use crate::facts::policy::{Effective, Mode};
use crate::facts::reservations::Reservation;
use crate::judge::classify::{Allowed, affinity_values, required_node_terms};
use crate::judge::finding::{Finding, Rule};
use crate::read::annotations::{EXPECTED_DURATION, LABEL_RESERVATION_ID, LABEL_ZONE};
use crate::read::json::Lookup as _;
use crate::read::json::{items, str_at};
use crate::read::podspec::PodView;

/// Node labels that say "Capacity Block nodes only": the value that means it, every value
/// the label takes (so `NotIn` the others can be read as that one), and who provisions
/// such nodes.
/// - `karpenter.sh/capacity-type`: `spot`, `on-demand`, `reserved`
///   (https://karpenter.sh/docs/concepts/scheduling/, https://karpenter.sh/docs/tasks/odcrs/).
/// - `karpenter.k8s.aws/capacity-reservation-type`: `default`, `capacity-block`, Karpenter's
///   label for the kind of reservation (https://karpenter.sh/docs/reference/instance-types/,
///   Karpenter >= 1.6).
/// - `eks.amazonaws.com/capacityType`: `ON_DEMAND`, `SPOT`, `CAPACITY_BLOCK`, a managed
///   node group's capacity type
///   (https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html).
const BLOCK_ONLY: [(&str, &str, &[&str], Provisioner); 3] = [
    (
        LABEL_KARPENTER_CAPACITY_TYPE,
        "reserved",
        &["spot", "on-demand", "reserved"],
        Provisioner::Karpenter,
    ),
    (
        "karpenter.k8s.aws/capacity-reservation-type",
        "capacity-block",
        &["default", "capacity-block"],
        Provisioner::Karpenter,
    ),
    (
        LABEL_EKS_CAPACITY_TYPE,
        "CAPACITY_BLOCK",
        &["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"],
        Provisioner::ManagedNodeGroup,
    ),
];

pub(crate) struct BlockInput<'a> {
    pub view: &'a PodView<'a>,
    pub object: &'a Value,
    pub instance_type: Option<&'a str>,
    pub eff: &'a Effective<'a>,
    pub inventory: &'a Snapshot,
    pub now: Timestamp,
}

/// The values a pod's required scheduling allows for a node label: its nodeSelector
/// value, else the `In` values of its required node affinity. `None` when the label
/// is not constrained to a list.
fn allowed(pod: &Value, key: &str) -> Option<Vec<String>> {
    if let Some(v) = str_at(pod, &["spec", "nodeSelector", key]) {
        return Some(vec![v.to_string()]);
    }
    match affinity_values(pod, &[key])? {
        Allowed::Values(v) if !v.is_empty() => Some(v),
        _ => None,
    }
}

/// Whether the pod's required scheduling lets it land only on nodes whose `key` label is
/// `value`, reading `In`, `NotIn`, `Exists` and `DoesNotExist` over the label's known
/// values `domain`. As the scheduler does, `NotIn` and `DoesNotExist` also match a node
/// without the label, so `NotIn [spot, on-demand]` alone may land on a node Karpenter did
/// not make; with `Exists` (or an `In`) beside it, it may not.
fn only_value(pod: &Value, key: &str, value: &str, domain: &[&str]) -> bool {
    if let Some(v) = str_at(pod, &["spec", "nodeSelector", key]) {
        return v == value;
    }
    let terms = required_node_terms(pod);
    // The terms are ORed: each must allow `value` alone or nothing, and one must allow it.
    let mut reaches = false;
    for term in terms {
        let mut labelled_only = false;
        let mut allowed: Vec<&str> = domain.to_vec();
        for e in items(term, &["matchExpressions"]) {
            if e.get("key").and_then(Value::as_str) != Some(key) {
                continue;
            }
            let vals: Vec<&str> = items(e, &["values"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => {
                    labelled_only = true;
                    allowed.retain(|v| vals.contains(v));
                }
                Some("NotIn") => allowed.retain(|v| !vals.contains(v)),
                Some("Exists") => labelled_only = true,
                Some("DoesNotExist") => allowed.clear(),
                // Gt/Lt on these labels, or an unknown operator: not read.
                _ => return false,
            }
        }
        match allowed.as_slice() {
            [] if labelled_only => {}
            [only] if labelled_only && *only == value => reaches = true,
            _ => return false,
        }
    }
    reaches
}

/// The block, of those each allowed value leads to, whose pods stop first; `None`
/// when any value may lead off Capacity Blocks.
fn first_stopping<'r>(
    values: &[String],
    lookup: impl Fn(&str) -> Option<(&'r Reservation, Provisioner)>,
) -> Option<(&'r Reservation, Provisioner)> {
    let mut found = Vec::with_capacity(values.len());
    for v in values {
        found.push(lookup(v)?);
    }
    found
        .into_iter()
        .min_by_key(|(r, p)| r.before_end(p.stop_before_end()))
}

/// The block the pod can only land on, and who provisions its nodes: pinned by
/// reservation id; a NodePool or node group whose nodes are all block nodes; or
/// reserved capacity only, then the block of its instance type that ends first.
fn block<'a>(input: &BlockInput<'a>) -> Option<(&'a Reservation, Provisioner)> {
    let pod = input.view.pod;
    let reservations = input.inventory.reservations();
    if let Some(ids) = allowed(pod, LABEL_RESERVATION_ID) {
        return first_stopping(&ids, |id| {
            Some((reservations.get(id)?, Provisioner::Karpenter))
        });
    }
    for key in [LABEL_NODEPOOL, LABEL_NODEGROUP] {
        if let Some(pools) = allowed(pod, key) {
            let nodes = input.inventory.block_nodes();
            if let Some(found) = first_stopping(&pools, |p| {
                nodes.pool_block(&format!("{key}={p}"), reservations)
            }) {
                return Some(found);
            }
        }
    }
    // Only that value allowed: `In [reserved, on-demand]` may land elsewhere.
    let provisioner = BLOCK_ONLY
        .iter()
        .find_map(|(k, v, domain, p)| only_value(pod, k, v, domain).then_some(*p))?;
    let zone = allowed(pod, LABEL_ZONE).filter(|z| z.len() == 1);
    let block =
        reservations.first_ending(input.instance_type?, zone.as_ref().map(|z| z[0].as_str()))?;
    Some((block, provisioner))
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
        return match text.trim().parse::<SignedDuration>() {
            Err(e) => Err(format!(
                "{EXPECTED_DURATION}: {text:?} is not a duration (write e.g. 36h or 90m): {e}"
            )),
            Ok(d) if d.is_negative() => Err(format!(
                "{EXPECTED_DURATION}: {text:?} is negative; a run time is at least 0"
            )),
            Ok(d) => Ok(Some((d, format!("{EXPECTED_DURATION}: {text}")))),
        };
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
            .lookup(pointer)
            .or_else(|| input.object.lookup(pointer))
            .and_then(Value::as_i64);
        if let Some(s) = seconds {
            return Ok(Some((SignedDuration::from_secs(s), format!("{what}: {s}"))));
        }
    }
    // A JobSet's deadlines sit on its child Jobs: the longest one bounds the run.
    let jobset = items(input.object, &["spec", "replicatedJobs"])
        .iter()
        .filter_map(|r| r.lookup("/template/spec/activeDeadlineSeconds")?.as_i64())
        .max();
    if let Some(s) = jobset {
        return Ok(Some((
            SignedDuration::from_secs(s),
            format!("replicatedJobs[].template.spec.activeDeadlineSeconds: {s}"),
        )));
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
    let Some((block, provisioner)) = block(input) else {
        return;
    };
    let site = input.view.base.clone();
    let stop_before = provisioner.stop_before_end();
    let reclaim = block.before_end(stop_before);
    let left = reclaim.duration_since(input.now);
    let on = format!(
        "the job can only run on Capacity Block {} ({}, {}), which ends {}; {} at {}",
        block.id,
        block.instance_type,
        block.zone,
        block.end,
        provisioner.stopper(),
        reclaim
    );
    let finding = |found: String, fix: String| Finding {
        rule: Rule::CapacityBlockEnds,
        mode,
        site: site.clone(),
        found,
        fix,
        opt_in: None,
        why: None,
    };
    if block.expiring() || left <= SignedDuration::ZERO {
        out.push(finding(
            format!("{on}: its nodes are already being drained or reclaimed, so new pods will not run to completion."),
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
            // Checked: an int64 deadline (2^63 - 1 s) runs past the last instant a
            // timestamp holds.
            let later = match input
                .now
                .checked_add(run)
                .and_then(|t| t.checked_add(stop_before))
            {
                Ok(needed) => format!("submit onto a block that ends after {needed}"),
                Err(_) => "submit onto a later block".to_string(),
            };
            out.push(finding(
                format!(
                    "{on}, {} from now, but the job expects to run {} ({source}).",
                    hours(left),
                    hours(run)
                ),
                format!(
                    "checkpoint often enough to lose little at {reclaim} and resume on a later block, shorten the run to under {}, or {later}.",
                    hours(left)
                ),
            ));
        }
        Ok(Some(_)) => {}
        Ok(None) if left < input.eff.capacity_block_horizon() => out.push(finding(
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
