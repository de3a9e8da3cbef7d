//! EFA counts a node can grant but that are not the pod's share of it, and pods of a
//! multi-pod job left with no EFA.

use super::input::{OptInState, RuleInput};
use crate::facts::policy::Mode;
use crate::judge::finding::{Finding, Rule};
use crate::read::annotations::{DRA_CLASS_EFA, RES_EFA};
use trainplace_catalog::InstanceProfile;

/// A pod of a multi-pod job on an EFA instance that gets no EFA interface (too few
/// GPUs for a share, or the EFA mutation is off): its inter-node traffic uses TCP.
pub(super) fn no_efa(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    // A pod that takes part of a node without the opt-in already gets the partial-node
    // finding, whose fix (whole nodes) also brings EFA.
    let partial = s.per_pod < inst.accelerators || s.shared;
    let judged_otherwise = partial && input.partial_opt_in != OptInState::Granted;
    if !s.multi_pod
        || !inst.has_efa()
        || s.per_pod == 0
        || s.per_pod > inst.accelerators
        || judged_otherwise
    {
        return;
    }
    let (found, fix) = match &s.efa_resource_absent {
        // The webhook cannot add a claim (its template is a separate object): say how.
        Some(why) => (
            format!(
                "the pod gets no EFA on {}: {why}, so trainplace adds no {RES_EFA}; its traffic to the job's other nodes goes over TCP, not EFA.",
                inst.name
            ),
            format!(
                "claim EFA through DRA: a ResourceClaimTemplate with a request `exactly: {{deviceClassName: {DRA_CLASS_EFA}, allocationMode: All}}` (all {} interfaces for a pod with all {} GPUs; the driver pairs them with their GPUs), named in the pod's resourceClaims and the container's resources.claims (https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html).",
                inst.max_efa, inst.accelerators
            ),
        ),
        None => (
            format!(
                "the pod gets no {RES_EFA} on {}: its traffic to the job's other nodes goes over TCP, not EFA.",
                inst.name
            ),
            format!(
                "take whole nodes ({} GPUs and {} EFA per pod), or request at least {RES_EFA}: 1.",
                inst.accelerators, inst.max_efa
            ),
        ),
    };
    out.push(Finding {
        rule: Rule::EfaCount,
        mode: Mode::Warn,
        site: input.view.base.clone(),
        found,
        fix,
        opt_in: None,
        why: None,
    });
}

/// An EFA count the device plugin can grant (any count up to the node's) but that is
/// not the pod's share of the node: it runs, so it is a warning with the count to use.
pub(super) fn efa_count(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    let warn = |found: String, fix: String| Finding {
        rule: Rule::EfaCount,
        mode: Mode::Warn,
        site: input.view.base.clone(),
        found,
        fix,
        opt_in: None,
        why: None,
    };
    if s.per_pod == 0 && s.accel_resource.is_empty() {
        out.push(warn(
            format!(
                "the pod asks for {} {RES_EFA} but no accelerators on {}, a GPU instance; EFA serves GPU traffic.",
                s.efa, inst.name
            ),
            format!(
                "request {} too, or drop {RES_EFA} if the pod does not use it.",
                inst.accelerator_resource
            ),
        ));
        return;
    }
    let share = efa_share(inst, s.per_pod);
    if s.efa == share || s.per_pod > inst.accelerators {
        return;
    }
    let effect = if s.efa > share {
        format!(
            "it holds interfaces that other pods on the node then cannot get (with {} of {} GPUs its share of {}'s {} EFA interfaces is {share})",
            s.per_pod, inst.accelerators, inst.name, inst.max_efa
        )
    } else {
        format!(
            "it leaves inter-node bandwidth unused (with {} of {} GPUs its share of {}'s {} EFA interfaces is {share})",
            s.per_pod, inst.accelerators, inst.name, inst.max_efa
        )
    };
    let (asked, fix) = if s.efa_claimed {
        (
            format!("{} EFA interfaces through its DRA claim", s.efa),
            format!(
                "claim {share} devices of class {DRA_CLASS_EFA} (allocationMode: All when the pod takes the whole node) unless this pod is alone on the node."
            ),
        )
    } else {
        (
            format!("{} {RES_EFA}", s.efa),
            format!(
                "request {RES_EFA}: {share} (requests = limits) unless this pod is alone on the node."
            ),
        )
    };
    out.push(warn(format!("the pod asks for {asked}: {effect}."), fix));
}

/// A pod's share of the node's EFA interfaces: proportional to its GPUs, rounded
/// down (0 when it holds too few GPUs for one interface).
pub(crate) fn efa_share_floor(inst: &InstanceProfile, per_pod: u32) -> u32 {
    let share = u64::from(inst.max_efa) * u64::from(per_pod) / u64::from(inst.accelerators.max(1));
    u32::try_from(share).unwrap_or(u32::MAX)
}

/// The count to recommend: the share, at least one.
fn efa_share(inst: &InstanceProfile, per_pod: u32) -> u32 {
    efa_share_floor(inst, per_pod).max(1)
}
