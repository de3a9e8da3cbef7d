//! Reshape (opt-in, `trainplace.io/reshape: "true"`): a job of N pods x g GPUs on an
//! instance with G GPUs becomes N*g/G pods x G GPUs when that divides evenly. Sizes,
//! device requests, process counts and literal torchrun settings are rewritten; a
//! command line that hides them in a longer string is refused with the line to edit.

mod record;
mod refusal;
mod sites;
mod sizes;
mod template;
mod trainjob;

use serde_json::Value;

use crate::error::ObjectError;
use crate::facts::policy::OptIn;
use crate::judge::judgement::Ctx;
use crate::judge::rules::{OptInState, count, count64, opt_in_state};
use crate::judge::verdict::Verdict;
use crate::read::annotations::RESHAPE;
use crate::read::json::Lookup as _;
use crate::read::json::escape;
use crate::read::workload::{Kind, Site};
use crate::write::edit::Ops;
use record::{record, set_at};
use refusal::{not_whole_nodes, refuse};
use sites::{GpuSite, gpu_sites};
use sizes::distribute;
use template::{commands_are_literal, rewrite_template};
use trainplace_catalog::InstanceProfile;

/// A reshape's sizes: `pods` x `per_pod` GPUs (`gpus` in all) become `new_pods` pods of
/// a whole node each.
struct Sizes {
    pods: u64,
    per_pod: u32,
    new_pods: u32,
    gpus: u64,
}

/// Reshape the workload in place when asked. Returns whether anything changed.
pub(crate) fn apply(
    object: &mut Value,
    kind: Kind,
    sites: &[Site],
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<bool, ObjectError> {
    let asked = object
        .lookup(&format!("/metadata/annotations/{}", escape(RESHAPE)))
        .and_then(Value::as_str)
        == Some("true");
    if !asked {
        return Ok(false);
    }
    if opt_in_state(true, OptIn::Reshape, ctx.eff, ctx.who) == OptInState::Refused {
        refuse(
            verdict,
            "metadata.annotations",
            format!(
                "namespace {}: {}",
                verdict.namespace,
                OptIn::Reshape.refused(ctx.eff.policy)
            ),
            "remove the annotation and set the shape yourself, or have it granted in the policy."
                .into(),
        );
        return Ok(false);
    }
    if kind == Kind::TrainJob {
        return trainjob::reshape(object, ctx, verdict, ops);
    }
    let Some((gpu_sites, inst)) = gpu_sites(object, sites, ctx, verdict)? else {
        return Ok(false);
    };
    let Some(sizes) = sizes(&gpu_sites, inst, verdict) else {
        return Ok(false);
    };
    let big = inst.accelerators;
    let Some(plan) = distribute(object, kind, &gpu_sites, sizes.new_pods, big, verdict) else {
        return Ok(false);
    };
    for s in &gpu_sites {
        if !commands_are_literal(object, s.site, verdict) {
            return Ok(false);
        }
    }
    write(object, plan, &gpu_sites, &sizes, inst, verdict, ops)?;
    Ok(true)
}

/// The reshaped sizes; `None` (with the reason in the verdict, or nothing to do) when
/// the GPU templates differ, already take whole nodes, or do not fill whole nodes.
fn sizes(
    gpu_sites: &[GpuSite<'_>],
    inst: &InstanceProfile,
    verdict: &mut Verdict,
) -> Option<Sizes> {
    let g = gpu_sites[0].per_pod;
    if gpu_sites.iter().any(|s| s.per_pod != g) {
        refuse(
            verdict,
            &gpu_sites[0].site.field,
            "GPU templates ask for different GPU counts per pod.".into(),
            "give every GPU template the same count, or reshape by hand.".into(),
        );
        return None;
    }
    let big = inst.accelerators;
    if g == 0 || g >= big {
        return None;
    }
    // u64: counts from the object can be as large as u32 allows.
    let pods: u64 = gpu_sites.iter().map(|s| u64::from(s.pods)).sum();
    let gpus = pods * u64::from(g);
    let big64 = u64::from(big);
    if !gpus.is_multiple_of(big64) {
        let (found, fix) = not_whole_nodes(pods, g, gpus, inst);
        refuse(verdict, &gpu_sites[0].site.field, found, fix);
        return None;
    }
    let Ok(new_pods) = u32::try_from(gpus / big64) else {
        refuse(
            verdict,
            &gpu_sites[0].site.field,
            format!(
                "{} x {} is more pods than a cluster runs.",
                count64(pods, "pod"),
                count(g, "GPU")
            ),
            "set the job's size to what it really needs.".into(),
        );
        return None;
    };
    Some(Sizes {
        pods,
        per_pod: g,
        new_pods,
        gpus,
    })
}

/// Write the new sizes and templates, and say what was reshaped and why.
fn write(
    object: &mut Value,
    plan: Vec<(String, Value)>,
    gpu_sites: &[GpuSite<'_>],
    sizes: &Sizes,
    inst: &InstanceProfile,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<(), ObjectError> {
    let Sizes {
        pods,
        per_pod: g,
        new_pods,
        gpus,
    } = *sizes;
    let big = inst.accelerators;
    let mut lines = Vec::new();
    for (pointer, value) in plan {
        set_at(object, &pointer, value.clone(), ops);
        lines.push(format!(
            "{} = {value}",
            pointer.trim_start_matches('/').replace('/', ".")
        ));
    }
    for s in gpu_sites {
        rewrite_template(object, s.site, new_pods, big, inst.max_efa, ops, &mut lines)?;
    }
    let why = format!(
        "reshaped {} x {} into {} x {big} GPUs on {}: the same {gpus} GPUs, now one pod per node on NVLink",
        count64(pods, "pod"),
        count(g, "GPU"),
        count(new_pods, "pod"),
        inst.name
    );
    verdict.notes.push(format!(
        "{RESHAPE}: {why}. World size is unchanged, so per-device batch x world size is unchanged; ranks per node went from {g} to {big}: check settings that depend on local rank count."
    ));
    record(object, lines, &why, verdict, ops);
    Ok(())
}
