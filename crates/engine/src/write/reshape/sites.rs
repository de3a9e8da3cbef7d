//! The job's GPU templates, each with its GPUs per pod and pod count, and the one
//! instance type they target.

use serde_json::Value;

use super::refusal::refuse;
use crate::error::ObjectError;
use crate::judge::classify::{Class, Target, classify};
use crate::judge::judgement::Ctx;
use crate::judge::verdict::Verdict;
use crate::read::json::Lookup as _;
use crate::read::podspec::PodView;
use crate::read::workload::Site;
use crate::read::workload::SiteHints;
use trainplace_catalog::InstanceProfile;

pub(super) struct GpuSite<'s> {
    pub(super) site: &'s Site,
    pub(super) per_pod: u32,
    pub(super) pods: u32,
}

/// The job's GPU templates and the one instance type they target; `None` (with the
/// reason in the verdict, or nothing to do) when the job cannot be reshaped.
pub(super) fn gpu_sites<'s, 'c>(
    object: &Value,
    sites: &'s [Site],
    ctx: &Ctx<'c, '_>,
    verdict: &mut Verdict,
) -> Result<Option<(Vec<GpuSite<'s>>, &'c InstanceProfile)>, ObjectError> {
    let mut gpu_sites = Vec::new();
    let mut instance = None;
    for site in sites {
        let Some(t) = object.lookup(&site.pointer) else {
            continue;
        };
        let view = PodView::read(t, &site.field, &ctx.eff.policy.catalog)?;
        let Class::Training(shape) = classify(
            &view,
            &SiteHints {
                pods: Some(2),
                ..site.hints.clone()
            },
            ctx.eff,
            ctx.who.inventory,
            &verdict.namespace,
        ) else {
            continue;
        };
        let Target::Known(inst, _) = shape.target else {
            refuse(
                verdict,
                &site.field,
                "reshape needs a known instance type for every GPU template.".into(),
                "pin one instance type from the catalog.".into(),
            );
            return Ok(None);
        };
        if instance.is_some_and(|i: &InstanceProfile| i.name != inst.name) {
            refuse(
                verdict,
                &site.field,
                "GPU templates target different instance types.".into(),
                "use one instance type for the whole job.".into(),
            );
            return Ok(None);
        }
        instance = Some(inst);
        if view.device_containers().any(|c| c.by_class) {
            refuse(
                verdict,
                &site.field,
                "a container asks for its GPUs by a DRA class's name; trainplace rewrites device counts under the device plugin's name only.".into(),
                "reshape by hand.".into(),
            );
            return Ok(None);
        }
        let devices = view
            .device_containers()
            .filter(|c| c.accelerators.is_some())
            .count();
        if devices > 1 {
            refuse(
                verdict,
                &site.field,
                "more than one container asks for GPUs; trainplace will not split them.".into(),
                "reshape by hand.".into(),
            );
            return Ok(None);
        }
        gpu_sites.push(GpuSite {
            site,
            per_pod: shape.per_pod,
            pods: site.pods.unwrap_or(1),
        });
    }
    Ok(instance.map(|inst| (gpu_sites, inst)))
}
