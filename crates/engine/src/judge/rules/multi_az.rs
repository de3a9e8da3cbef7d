//! Multi-pod jobs that may span availability zones, or that nothing holds in one.

use super::input::{RuleInput, Unheld, opted_in};
use crate::judge::finding::{Finding, Rule};
use crate::read::annotations::{ALLOW_MULTI_AZ, LABEL_JOB, LABEL_ZONE};

pub(super) fn multi_az(input: &RuleInput<'_>, out: &mut Vec<Finding>) {
    let s = input.shape;
    let z = &s.zones;
    if !s.multi_pod {
        return;
    }
    let siblings = input.siblings.filter(|zs| !zs.is_empty());
    let elsewhere = match (siblings, &z.pinned) {
        (Some(zs), _) if zs.len() > 1 => Some(format!(
            "pods of this job already run in several zones ({})",
            zs.iter().cloned().collect::<Vec<_>>().join(", ")
        )),
        (Some(zs), Some(pinned)) if !zs.contains(pinned) => Some(format!(
            "this pod is pinned to {pinned} but its siblings already run in {}",
            zs.iter().cloned().collect::<Vec<_>>().join(", ")
        )),
        _ => None,
    };
    let why = if let Some(text) = elsewhere {
        text
    } else if let Some(text) = &z.allows_many {
        text.clone()
    } else if z.spread {
        "a topologySpreadConstraint spreads pods over zones".to_string()
    } else if z.anti {
        "a required pod anti-affinity on a zone key puts the job's pods in different zones"
            .to_string()
    } else if let Some(unheld) = input.unheld {
        return out.extend(unheld_finding(input, unheld));
    } else {
        return;
    };
    let why = match siblings {
        Some(zs) if !why.contains("siblings") && !why.contains("already run") => format!(
            "{why} (its siblings run in {})",
            zs.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
        _ => why,
    };
    let found =
        format!("the job may span availability zones: {why}; EFA traffic cannot cross zones.");
    out.extend(opted_in(
        Finding {
            rule: Rule::MultiAz,
            mode: input.eff.mode_multi_az(),
            site: input.view.base.clone(),
            found,
            fix: "pin one zone (nodeSelector topology.kubernetes.io/zone) or remove the multi-zone constraint; trainplace then holds the job in one zone.".into(),
            opt_in: Some(ALLOW_MULTI_AZ),
            why: None,
        },
        input.multi_az_opt_in,
        input.eff.policy,
    ));
}

/// A multi-pod job held in no zone: the scheduler may place its pods in any zone.
fn unheld_finding(input: &RuleInput<'_>, unheld: Unheld) -> Option<Finding> {
    let pods = match input.shape.pods {
        Some(n) => format!("one of {n} pods"),
        None => "one of several pods".to_string(),
    };
    let (why, fix) = match unheld {
        Unheld::NoIdentity => (
            format!(
                "this pod says it is {pods} of a training job, but no label ties the job's pods together (an operator's job label, {LABEL_JOB}, or a rendezvous host name such as torchrun's --rdzv-endpoint or MASTER_ADDR gives; an IP address names no job), so nothing can hold them in one zone"
            ),
            format!(
                "label every pod of the job with {LABEL_JOB}: NAME (trainplace then holds them in one zone), or pin one zone with nodeSelector {LABEL_ZONE}."
            ),
        ),
        Unheld::NotMutated => {
            let (key, value) = input
                .shape
                .identity
                .as_ref()
                .map_or(("", ""), |(k, v)| (k.as_str(), v.as_str()));
            (
                format!(
                    "this pod is {pods} but arrived without the zone hold trainplace's mutating webhook writes (a required podAffinity on {LABEL_ZONE} over {key}={value}): that call was skipped or failed, so the scheduler may place the job's pods in different zones"
                ),
                format!(
                    "create it again so the mutating webhook runs, or add that podAffinity yourself, or pin one zone with nodeSelector {LABEL_ZONE}."
                ),
            )
        }
    };
    let found =
        format!("the job may span availability zones: {why}; EFA traffic cannot cross zones.");
    opted_in(
        Finding {
            rule: Rule::MultiAz,
            mode: input.eff.mode_multi_az(),
            site: input.view.base.clone(),
            found,
            fix,
            opt_in: Some(ALLOW_MULTI_AZ),
            why: None,
        },
        input.multi_az_opt_in,
        input.eff.policy,
    )
}
