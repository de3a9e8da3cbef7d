//! Reshape (opt-in, `trainplace.io/reshape: "true"`): a job of N pods x g GPUs on an
//! instance with G GPUs becomes N*g/G pods x G GPUs when that divides evenly. Sizes,
//! device requests, process counts and literal torchrun settings are rewritten; a
//! command line that hides them in a longer string is refused with the line to edit.

mod template;
mod trainjob;

use serde_json::{Value, json};

use template::{commands_are_literal, rewrite_template};

use crate::error::ObjectError;
use crate::facts::catalog::InstanceProfile;
use crate::facts::policy::{Mode, OptIn};
use crate::judge::classify::{Class, SiteHints, Target, classify};
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::Ctx;
use crate::judge::rules::{OptInState, count, count64, opt_in_state};
use crate::judge::verdict::Verdict;
use crate::read::annotations::RESHAPE;
use crate::read::edit::{Cursor, Ops};
use crate::read::json::escape;
use crate::read::podspec::PodView;
use crate::read::workload::{Kind, Site};
use crate::write::layout::Change;

/// The torchrun flags reshape rewrites when they stand as literal tokens.
const NPROC_FLAGS: [&str; 2] = ["--nproc_per_node", "--nproc-per-node"];
const NNODES_FLAG: &str = "--nnodes";

struct GpuSite<'s> {
    site: &'s Site,
    per_pod: u32,
    pods: u32,
}

fn refuse(verdict: &mut Verdict, site: &str, found: String, fix: String) {
    verdict.findings.push(Finding {
        rule: Rule::Reshape,
        mode: Mode::Enforce,
        site: site.to_string(),
        found,
        fix,
        opt_in: None,
    });
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
        .pointer(&format!("/metadata/annotations/{}", escape(RESHAPE)))
        .and_then(Value::as_str)
        == Some("true");
    if !asked {
        return Ok(false);
    }
    if opt_in_state(true, OptIn::Reshape, ctx.eff, ctx.who) == OptInState::Refused {
        refuse(
            verdict,
            "metadata.annotations",
            format!("{RESHAPE}: \"true\" is not permitted for namespace {} or your groups.", verdict.namespace),
            "remove the annotation and set the shape yourself, or ask the platform team to grant optIns.reshape.".into(),
        );
        return Ok(false);
    }
    if kind == Kind::TrainJob {
        return trainjob::reshape(object, ctx, verdict, ops);
    }
    let Some((gpu_sites, inst)) = gpu_sites(object, sites, ctx, verdict)? else {
        return Ok(false);
    };
    let g = gpu_sites[0].per_pod;
    if gpu_sites.iter().any(|s| s.per_pod != g) {
        refuse(
            verdict,
            &gpu_sites[0].site.field,
            "GPU templates ask for different GPU counts per pod.".into(),
            "give every GPU template the same count, or reshape by hand.".into(),
        );
        return Ok(false);
    }
    let big = inst.accelerators;
    if g == 0 || g >= big {
        return Ok(false);
    }
    // u64: counts from the object can be as large as u32 allows.
    let pods: u64 = gpu_sites.iter().map(|s| u64::from(s.pods)).sum();
    let gpus = pods * u64::from(g);
    let big64 = u64::from(big);
    if !gpus.is_multiple_of(big64) {
        let (found, fix) = not_whole_nodes(pods, g, gpus, inst);
        refuse(verdict, &gpu_sites[0].site.field, found, fix);
        return Ok(false);
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
        return Ok(false);
    };
    let Some(plan) = distribute(object, kind, &gpu_sites, new_pods, big, verdict) else {
        return Ok(false);
    };
    for s in &gpu_sites {
        if !commands_are_literal(object, s.site, verdict) {
            return Ok(false);
        }
    }
    write(
        object,
        plan,
        &gpu_sites,
        (pods, g, new_pods, gpus),
        inst,
        verdict,
        ops,
    )?;
    Ok(true)
}

/// Write the new sizes and templates, and say what was reshaped and why.
fn write(
    object: &mut Value,
    plan: Vec<(String, Value)>,
    gpu_sites: &[GpuSite<'_>],
    (pods, g, new_pods, gpus): (u64, u32, u32, u64),
    inst: &crate::InstanceProfile,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<(), ObjectError> {
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

/// The job's GPU templates and the one instance type they target; `None` (with the
/// reason in the verdict, or nothing to do) when the job cannot be reshaped.
fn gpu_sites<'s, 'c>(
    object: &Value,
    sites: &'s [Site],
    ctx: &Ctx<'c, '_>,
    verdict: &mut Verdict,
) -> Result<Option<(Vec<GpuSite<'s>>, &'c crate::InstanceProfile)>, ObjectError> {
    let mut gpu_sites = Vec::new();
    let mut instance = None;
    for site in sites {
        let Some(t) = object.pointer(&site.pointer) else {
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
        if instance.is_some_and(|i: &crate::InstanceProfile| i.name != inst.name) {
            refuse(
                verdict,
                &site.field,
                "GPU templates target different instance types.".into(),
                "use one instance type for the whole job.".into(),
            );
            return Ok(None);
        }
        instance = Some(inst);
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

/// Why `pods x g` GPUs cannot become whole nodes, and the nearest shapes that can.
/// Never offers zero pods: below one node the only whole-node shape is one node.
pub(super) fn not_whole_nodes(
    pods: u64,
    g: u32,
    gpus: u64,
    inst: &InstanceProfile,
) -> (String, String) {
    let big = u64::from(inst.accelerators);
    let found = format!(
        "{} x {} = {gpus} GPUs do not fill whole {} nodes ({big} GPUs each).",
        count64(pods, "pod"),
        count(g, "GPU"),
        inst.name
    );
    let (down, up) = (gpus / big, gpus.div_ceil(big));
    let fix = if down == 0 {
        format!(
            "use 1 pod x {big} GPUs (the whole node), or leave the job as it is without {RESHAPE}."
        )
    } else {
        format!(
            "the nearest full-node shapes are {} x {big} GPUs ({} GPUs) and {} x {big} GPUs ({} GPUs); pick one and resubmit.",
            count64(down, "pod"),
            down * big,
            count64(up, "pod"),
            up * big
        )
    };
    (found, fix)
}

/// Explain a reshape on the workload itself: every rewritten field and why.
fn record(object: &mut Value, lines: Vec<String>, why: &str, verdict: &mut Verdict, ops: &mut Ops) {
    let changes: Vec<Change> = lines
        .into_iter()
        .map(|what| Change::new(what, why))
        .collect();
    crate::write::layout::write_mutated(object, "", &changes, ops);
    verdict.changes.extend(changes);
}

/// The size fields to set for `new_pods`, per kind.
fn distribute(
    object: &Value,
    kind: Kind,
    sites: &[GpuSite<'_>],
    new_pods: u32,
    big: u32,
    verdict: &mut Verdict,
) -> Option<Vec<(String, Value)>> {
    let field = sites[0].site.field.clone();
    let one_site = |verdict: &mut Verdict| {
        if sites.len() == 1 {
            return true;
        }
        refuse(
            verdict,
            &field,
            "reshape of several GPU templates is not supported for this kind.".into(),
            "reshape by hand.".into(),
        );
        false
    };
    match kind {
        Kind::Job => {
            let mut out = vec![("/spec/parallelism".to_string(), json!(new_pods))];
            if object.pointer("/spec/completions").is_some() {
                out.push(("/spec/completions".to_string(), json!(new_pods)));
            }
            Some(out)
        }
        Kind::JobSet => {
            if !one_site(verdict) {
                return None;
            }
            let knobs = &sites[0].site.knobs;
            let (replicas, parallelism) = (&knobs[0], &knobs[1]);
            if parallelism.value == 1 {
                Some(vec![(replicas.pointer.clone(), json!(new_pods))])
            } else if replicas.value == 1 {
                let completions = parallelism.pointer.replace("/parallelism", "/completions");
                Some(vec![
                    (parallelism.pointer.clone(), json!(new_pods)),
                    (completions, json!(new_pods)),
                ])
            } else {
                refuse(
                    verdict,
                    &field,
                    "both replicas and parallelism are above 1.".into(),
                    "set one of them to 1, then reshape.".into(),
                );
                None
            }
        }
        Kind::PyTorchJob => {
            let master = sites.iter().find(|s| s.site.pointer.contains("/Master/"));
            let worker = sites.iter().find(|s| s.site.pointer.contains("/Worker/"));
            // nprocPerNode is a string in the v1 CRD.
            let mut out = vec![("/spec/nprocPerNode".to_string(), json!(big.to_string()))];
            match (master, worker) {
                (Some(_), Some(w)) if new_pods >= 2 => {
                    out.push((w.site.knobs[0].pointer.clone(), json!(new_pods - 1)))
                }
                (None, Some(w)) => out.push((w.site.knobs[0].pointer.clone(), json!(new_pods))),
                (Some(m), None) => out.push((m.site.knobs[0].pointer.clone(), json!(new_pods))),
                _ => {
                    refuse(
                        verdict,
                        &field,
                        format!(
                            "the reshaped job has {} but Master and Worker both ask for GPUs.",
                            count(new_pods, "pod")
                        ),
                        "keep only the Master replica spec, then resubmit.".into(),
                    );
                    return None;
                }
            }
            Some(out)
        }
        Kind::MpiJob => {
            if !one_site(verdict) || !sites[0].site.pointer.contains("/Worker/") {
                refuse(
                    verdict,
                    &field,
                    "only the Worker replica spec of an MPIJob can be reshaped.".into(),
                    "move GPUs off the Launcher.".into(),
                );
                return None;
            }
            Some(vec![
                (sites[0].site.knobs[0].pointer.clone(), json!(new_pods)),
                ("/spec/slotsPerWorker".to_string(), json!(big)),
            ])
        }
        Kind::LeaderWorkerSet => {
            refuse(
                verdict,
                &field,
                "reshape is not supported for this kind: its groups are model replicas.".into(),
                "set size and GPUs per pod by hand.".into(),
            );
            None
        }
        _ => {
            refuse(
                verdict,
                &field,
                format!(
                    "reshape is not supported for a {}: its sizes and launcher settings are not rewritten.",
                    kind.metric_label()
                ),
                "set the pod count and GPUs per pod by hand.".into(),
            );
            None
        }
    }
}

/// Write `value` at `pointer`; the parent object must exist.
fn set_at(object: &mut Value, pointer: &str, value: Value, ops: &mut Ops) {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return;
    };
    if let Some(p) = object.pointer_mut(parent) {
        Cursor::root(p, parent).set(&key.replace("~1", "/").replace("~0", "~"), value, ops);
    }
}
