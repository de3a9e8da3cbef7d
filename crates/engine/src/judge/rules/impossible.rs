//! Requests the instance type cannot satisfy: another accelerator, more GPUs or EFA
//! interfaces than a node has, EFA on an instance without it.

use super::efa::{efa_count, no_efa};
use super::input::RuleInput;
use crate::facts::policy::Mode;
use crate::judge::finding::{Finding, Rule};
use crate::read::annotations::RES_EFA;
use trainplace_catalog::InstanceProfile;

fn impossible_finding(site: &str, found: String, fix: String) -> Finding {
    Finding {
        rule: Rule::ImpossibleRequest,
        mode: Mode::Enforce,
        site: site.to_string(),
        found,
        fix,
        opt_in: None,
        why: None,
    }
}

pub(super) fn impossible(input: &RuleInput<'_>, inst: &InstanceProfile, out: &mut Vec<Finding>) {
    let s = input.shape;
    let site = &input.view.base;
    let catalog = &input.eff.policy.catalog;
    let family = |r: &str| {
        catalog
            .family_of(r)
            .map(String::from)
            .unwrap_or_else(|| r.to_string())
    };
    if !s.accel_resource.is_empty()
        && family(&s.accel_resource) != family(&inst.accelerator_resource)
    {
        out.push(impossible_finding(
            site,
            format!(
                "the pod asks for {} but {} offers {}.",
                s.accel_resource, inst.name, inst.accelerator_resource
            ),
            format!(
                "request {} or pick an instance type with {}.",
                inst.accelerator_resource, s.accel_resource
            ),
        ));
        return;
    }
    if s.per_pod > inst.accelerators && !s.shared {
        out.push(impossible_finding(
            site,
            format!(
                "the pod asks for {} {}{} but {} has {}.",
                s.per_pod,
                inst.accelerator_resource,
                if s.accel_claimed { " (with its DRA claims)" } else { "" },
                inst.name,
                inst.accelerators
            ),
            format!(
                "ask for at most {} per pod and add pods (recommended: {} per pod, one pod per node).",
                inst.accelerators, inst.accelerators
            ),
        ));
    }
    if s.efa == 0 {
        no_efa(input, inst, out);
        return;
    }
    let asked = if s.efa_claimed {
        format!("{} EFA interfaces (with its DRA claims)", s.efa)
    } else {
        format!("{} {RES_EFA}", s.efa)
    };
    if !inst.has_efa() {
        out.push(impossible_finding(
            site,
            format!("the pod asks for {asked} but {} has no EFA.", inst.name),
            format!("remove {RES_EFA} or pick an EFA instance type."),
        ));
        return;
    }
    if s.efa > inst.max_efa {
        out.push(impossible_finding(
            site,
            format!(
                "the pod asks for {asked} but {} has {}.",
                inst.name, inst.max_efa
            ),
            format!(
                "ask for {} (all of them) with all {} GPUs.",
                inst.max_efa, inst.accelerators
            ),
        ));
        return;
    }
    efa_count(input, inst, out);
}
