//! Reading and judging every template of an object once: the job's size, sizes no
//! cluster can run, the checks that span templates, and the zone to pin templates to.

use serde_json::Value;

use crate::error::ObjectError;
use crate::facts::policy::{Mode, OptIn};
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::{Ctx, Judgement, judge};
use crate::judge::rules::OptInState;
use crate::judge::verdict::Verdict;
use crate::read::json::Lookup as _;
use crate::read::json::annotation;
use crate::read::podspec::PodView;
use crate::read::workload::{Kind, Site};

/// Whether a template asks for devices: accelerators or EFA as extended resources or
/// through DRA claims (resolved, or not countable: a claim that cannot be read may hold
/// GPUs, and a job is not made smaller by hiding them there).
pub(super) fn asks_for_devices(view: &PodView<'_>) -> bool {
    let claimed = &view.devices;
    view.accelerators().is_some()
        || view.efa() > 0
        || claimed.accelerators.is_some()
        || claimed.efa.is_some()
        || !claimed.unresolved.is_empty()
}

/// Pods in the whole job: the sum over templates that ask for devices. `None` when a
/// template's count is unknown (a bare Pod, or a workload that does not say how many
/// pods a template makes).
fn job_pods(kind: Kind, views: &[(&Site, PodView<'_>)]) -> Option<u32> {
    if !kind.is_workload() {
        return None;
    }
    let mut total = 0u32;
    for (site, view) in views {
        if !asks_for_devices(view) {
            continue;
        }
        total = total.saturating_add(site.pods?);
    }
    Some(total)
}

/// More pods than a Kubernetes cluster is tested to run at all (150,000 per cluster:
/// https://github.com/kubernetes/community/blob/master/sig-scalability/configs-and-limits/thresholds.md).
const MAX_JOB_PODS: u64 = 150_000;

/// A size that no cluster can run is a finding of its own, not a count to wrap around.
fn absurd_size(views: &[(&Site, PodView<'_>)], verdict: &mut Verdict) {
    for (site, view) in views {
        if site.requested <= MAX_JOB_PODS || !asks_for_devices(view) {
            continue;
        }
        let knobs: Vec<String> = site.knobs.iter().map(|k| k.value.to_string()).collect();
        verdict.findings.push(Finding {
            rule: Rule::ImpossibleRequest,
            mode: Mode::Enforce,
            site: site.field.clone(),
            found: format!(
                "{} = {} pods from this template; a cluster runs at most {MAX_JOB_PODS} pods in all.",
                knobs.join(" x "),
                site.requested
            ),
            fix: "set replicas and parallelism to the job's real size.".into(),
            opt_in: None,
            why: None,
        });
    }
}

/// A pod's size from its controller, when the inventory holds that owner (a batch
/// Job's active pods, a StatefulSet's replicas, a training CRD's replicas): the pod is
/// one of that many, whatever its own label and launcher leave unsaid. Never smaller
/// than what the pod says (its launcher's count still wins when larger). An owner of
/// one pod makes a pod of one: a 1-pod Job's pod whose mark does not verify (the Job
/// was created before trainplace, or while `/mutate` timed out) is no rank of a job
/// of unknown size; the Job itself was judged at that size.
fn owned_pods(object: &Value, ctx: &Ctx<'_, '_>) -> Option<u32> {
    let inv = ctx.who.inventory?;
    crate::judge::owner::owner_pods(object, inv)?.filter(|n| *n > 0)
}

/// A zone to pin templates to, and the pointers of the templates to pin.
pub(super) type Pin = Option<(String, Vec<String>)>;

/// The training templates of an object, each with its judgement.
pub(super) type Judged<'s, 'a> = Vec<(&'s Site, Judgement<'a>)>;

/// Read every template once and judge it; returns the training templates' judgements,
/// and the zone the job's unpinned templates must be pinned to when others are.
pub(super) fn judge_sites<'s, 'a>(
    object: &Value,
    sites: &'s [Site],
    ctx: &Ctx<'a, '_>,
    verdict: &mut Verdict,
) -> Result<(Judged<'s, 'a>, Pin), ObjectError> {
    let mut views = Vec::with_capacity(sites.len());
    for site in sites {
        let template = object
            .lookup(&site.pointer)
            .ok_or_else(|| ObjectError::bad(&site.field, "missing"))?;
        let view = PodView::read(template, &site.field, &ctx.eff.policy.catalog)?;
        views.push((
            site,
            crate::judge::judgement::with_claims(view, ctx, verdict),
        ));
    }
    if let (Kind::Pod, Some((_, view))) = (ctx.kind, views.first()) {
        verdict
            .notes
            .extend(crate::judge::owner::note(object, view));
    }
    let total = job_pods(ctx.kind, &views);
    absurd_size(&views, verdict);
    let mut judged = Vec::new();
    let mut pinned = Vec::new();
    for (site, view) in &views {
        let mut hints = site.hints.clone();
        if ctx.kind.is_workload() {
            hints.pods = total;
        } else if let Some(n) = owned_pods(object, ctx) {
            hints.pods = Some(n);
        }
        if let Some(j) = judge(view, &hints, object, ctx, verdict)? {
            // A template that makes no pods (0 replicas) runs nowhere.
            // A template bound to a node (`spec.nodeName`, a hostname selector) runs in
            // that node's zone whatever it says: the scheduler, and the zone hold with
            // it, is skipped.
            let bound = ctx
                .who
                .inventory
                .and_then(|inv| inv.node_zone(view.pinned_node()?))
                .map(str::to_string);
            if site.pods != Some(0)
                && let Some(zone) =
                    bound.or_else(|| crate::judge::split_zones::pinned_zone(view.pod))
            {
                let zone = match ctx.who.inventory {
                    Some(inv) => inv.zone_name(&zone).to_string(),
                    None => zone,
                };
                pinned.push((site.field.as_str(), zone));
            }
            judged.push((*site, j));
        }
    }
    if ctx.kind.is_workload() {
        crate::judge::split_zones::check(object, &pinned, ctx, verdict);
        let multi_pod = judged.iter().any(|(_, j)| j.multi_pod());
        crate::judge::placement::check(object, multi_pod, ctx, verdict);
    }
    let mut pin = None;
    let set = crate::read::annotations::ALLOW_MULTI_AZ;
    let opted = annotation(object, set) == Some("true")
        && ctx.opt_in(true, OptIn::AllowMultiAz) == OptInState::Granted;
    if ctx.kind.is_workload()
        && ctx.eff.on(|m| m.zone_affinity)
        && !opted
        && let Some((zone, free)) = crate::judge::split_zones::unpinned_beside(&pinned, &judged)
    {
        if ctx.final_object {
            verdict
                .findings
                .push(crate::judge::split_zones::unpinned_finding(
                    &zone, &free, ctx,
                ));
        } else {
            pin = Some((zone, free.iter().map(|s| s.pointer.clone()).collect()));
        }
    }
    Ok((judged, pin))
}
