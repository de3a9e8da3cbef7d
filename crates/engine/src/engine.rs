//! The pipeline: parse -> locate templates -> classify -> plan + apply -> rules ->
//! verdict. Synchronous and pure; the same call serves webhook, CLI and advisor.

use serde_json::Value;

use crate::answer::mark::{ADMITTED, Claim};
use crate::error::ObjectError;
use crate::facts::policy::{Mode, OptIn, Policy};
use crate::facts::requester::Requester;
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::{Ctx, Judgement, judge};
use crate::judge::rules::{OptInState, opt_in_state};
use crate::judge::verdict::Verdict;
use crate::read::annotations::{LABEL_JOB, LABEL_RENDEZVOUS, LABEL_ZONE, SKIP};
use crate::read::edit::{Cursor, Ops};
use crate::read::json::str_at;
use crate::read::podspec::PodView;
use crate::read::workload::{Kind, Site, locate};
use crate::write::layout::Change;

fn annotation<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    str_at(obj, &["metadata", "annotations", key])
}

/// Evaluate one object against the policy (the object is cloned; see [`evaluate_owned`]).
pub fn evaluate(
    object: &Value,
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Verdict, ObjectError> {
    evaluate_owned(object.clone(), policy, who)
}

/// Evaluate an object the caller owns: the layout is written into it in place and
/// each edit is recorded as a JSON Patch operation (no clone, no tree diff).
pub fn evaluate_owned(
    object: Value,
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Verdict, ObjectError> {
    run(object, policy, who, Layout::Write)
}

/// Judge an object without writing its layout: the same findings, notes and verdict
/// as [`evaluate_owned`] (every template is judged before any layout is written), but
/// no changes and no patch. For the validating webhook, which answers only allowed or
/// denied and sends no patch.
pub fn judge_owned(
    object: Value,
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Verdict, ObjectError> {
    run(object, policy, who, Layout::Skip)
}

/// Whether [`run`] writes the recommended layout after judging.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Write,
    Skip,
}

fn run(
    mut object: Value,
    policy: &Policy,
    who: &Requester<'_>,
    layout: Layout,
) -> Result<Verdict, ObjectError> {
    if !object.is_object() {
        return Err(ObjectError::NotAnObject);
    }
    let (kind, mut sites) = locate(&object)?;
    let eff = policy.effective(who);
    let mut verdict = Verdict::empty(&object, kind, who);
    if kind == Kind::Other {
        let api = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        verdict.notes.push(format!(
            "trainplace does not handle {api}/{}; passed through unchanged.",
            verdict.kind
        ));
        verdict.object = object;
        return Ok(verdict);
    }
    let ctx = Ctx {
        eff: &eff,
        who,
        kind,
        final_object: layout == Layout::Skip,
    };
    // A pod whose mark verifies has exactly the judged fields of the template trainplace
    // admitted (and laid out) with the submitter's identity. Laying it out again as a
    // lone pod would add what that job was judged not to need (a single-pod Job's pod
    // would get a multi-pod layout) and break its own mark for /validate.
    if policy.trusted_controller(who)
        && crate::judge::upstream::made_from_admitted(&object, kind, &sites, who, policy)
    {
        verdict.notes.push(format!(
            "made by its controller from a template trainplace admitted ({ADMITTED} verified); left as admitted."
        ));
        verdict.object = object;
        return Ok(verdict);
    }
    let skip = annotation(&object, SKIP) == Some("true");
    if skip && opt_in_state(true, OptIn::Skip, &eff, who) == OptInState::Granted {
        verdict.notes.push(format!(
            "{SKIP}: \"true\": trainplace left this object alone."
        ));
        verdict.object = object;
        return Ok(verdict);
    }
    let mut ops = Ops::default();
    if kind.is_workload()
        && crate::write::reshape::apply(&mut object, kind, &sites, &ctx, &mut verdict, &mut ops)?
    {
        sites = locate(&object)?.1;
    }
    let mut any_training = false;
    if kind == Kind::TrainJob {
        any_training |=
            crate::write::trainjob::evaluate(&mut object, &ctx, &mut verdict, &mut ops)?;
    }
    // Read and judge every template once, then write the layouts.
    let (judged, pin) = judge_sites(&object, &sites, &ctx, &mut verdict)?;
    any_training |= !judged.is_empty();
    if layout == Layout::Write {
        for (site, judgement) in judged {
            let zone = pin
                .as_ref()
                .filter(|(_, pointers)| pointers.contains(&site.pointer))
                .map(|(zone, _)| zone.as_str());
            write_site(
                &mut object,
                site,
                &judgement,
                zone,
                &ctx,
                &mut verdict,
                &mut ops,
            )?;
        }
    }
    if skip && any_training {
        verdict.findings.push(Finding {
            rule: Rule::OptOutRefused,
            mode: Mode::Enforce,
            site: "metadata.annotations".into(),
            found: format!("{SKIP}: \"true\" is not permitted for namespace {} or your groups.", verdict.namespace),
            fix: "remove the annotation, or ask the platform team to grant the opt-out in policy (optIns.skip).".into(),
            opt_in: None,
        });
    }
    verdict.fold_repeats();
    verdict.allowed = !verdict.findings.iter().any(|f| f.mode == Mode::Enforce);
    verdict.patch = ops.into_patch();
    verdict.object = object;
    Ok(verdict)
}

/// Pods in the whole job: the sum over templates that ask for accelerators or EFA.
/// `None` when a template's count is unknown (a bare Pod, or a workload that does not
/// say how many pods a template makes).
fn job_pods(kind: Kind, views: &[(&Site, PodView<'_>)]) -> Option<u32> {
    if !kind.is_workload() {
        return None;
    }
    let mut total = 0u32;
    for (site, view) in views {
        if view.accelerators().is_none() && view.efa() == 0 {
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
        if site.requested <= MAX_JOB_PODS || (view.accelerators().is_none() && view.efa() == 0) {
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
        });
    }
}

/// A zone to pin templates to, and the pointers of the templates to pin.
type Pin = Option<(String, Vec<String>)>;

/// The training templates of an object, each with its judgement.
type Judged<'s, 'a> = Vec<(&'s Site, Judgement<'a>)>;

/// Read every template once and judge it; returns the training templates' judgements,
/// and the zone the job's unpinned templates must be pinned to when others are.
fn judge_sites<'s, 'a>(
    object: &Value,
    sites: &'s [Site],
    ctx: &Ctx<'a, '_>,
    verdict: &mut Verdict,
) -> Result<(Judged<'s, 'a>, Pin), ObjectError> {
    let mut views = Vec::with_capacity(sites.len());
    for site in sites {
        let template = object
            .pointer(&site.pointer)
            .ok_or_else(|| ObjectError::bad(&site.field, "missing"))?;
        views.push((
            site,
            PodView::read(template, &site.field, &ctx.eff.policy.catalog)?,
        ));
    }
    if let (Kind::Pod, Some((_, view))) = (ctx.kind, views.first()) {
        verdict.notes.extend(crate::read::owner::note(object, view));
    }
    let total = job_pods(ctx.kind, &views);
    absurd_size(&views, verdict);
    let mut judged = Vec::new();
    let mut pinned = Vec::new();
    for (site, view) in &views {
        let mut hints = site.hints.clone();
        if ctx.kind.is_workload() {
            hints.pods = total;
        }
        if let Some(j) = judge(view, &hints, object, ctx, verdict)? {
            // A template that makes no pods (0 replicas) runs nowhere.
            if site.pods != Some(0)
                && let Some(zone) = crate::judge::split_zones::pinned_zone(view.pod)
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

/// Write one judged template's layout, the Kueue topology ask and the explanation.
fn write_site(
    object: &mut Value,
    site: &Site,
    judgement: &Judgement<'_>,
    zone: Option<&str>,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<(), ObjectError> {
    if !judgement.has_layout() {
        return Ok(());
    }
    let missing = || ObjectError::bad(&site.field, "missing");
    let template = object.pointer_mut(&site.pointer).ok_or_else(missing)?;
    let mut changes: Vec<Change> = identity_label(template, site, judgement, ctx, ops)
        .into_iter()
        .collect();
    let template = object.pointer_mut(&site.pointer).ok_or_else(missing)?;
    changes.extend(zone.and_then(|z| pin_zone(template, &site.pointer, z, ops)));
    let template = object.pointer_mut(&site.pointer).ok_or_else(missing)?;
    changes.extend(judgement.write(ctx.eff, Cursor::root(template, &site.pointer), ops));
    if ctx.kind.is_workload() {
        kueue_topology(object, site, &mut changes, ops);
    }
    if !changes.is_empty() {
        for c in &mut changes {
            c.site.clone_from(&site.field);
        }
        crate::write::layout::write_mutated(
            object.pointer_mut(&site.pointer).ok_or_else(missing)?,
            &site.pointer,
            &changes,
            ops,
        );
        verdict.changes.extend(changes);
    }
    mark_admitted(object, site, judgement, ctx, &verdict.namespace, ops)
}

/// Pin an unpinned template to the zone the job's other templates are pinned to.
fn pin_zone(template: &mut Value, pointer: &str, zone: &str, ops: &mut Ops) -> Option<Change> {
    let mut sel = Cursor::root(template, pointer).objects(&["spec", "nodeSelector"], ops)?;
    sel.insert_missing(LABEL_ZONE, Value::String(zone.to_string()), ops)
        .then(|| Change::new(
            format!("nodeSelector {LABEL_ZONE}={zone}"),
            "the job's other templates are pinned to this zone; a hold alone lets the first pod go to any zone",
        ))
}

/// The job label trainplace keys the hold on, when it names the job itself (an unnamed
/// workload, a rendezvous): written on the template so every pod of the job carries it.
fn identity_label(
    template: &mut Value,
    site: &Site,
    judgement: &Judgement<'_>,
    ctx: &Ctx<'_, '_>,
    ops: &mut Ops,
) -> Option<Change> {
    let holds = ctx.eff.on(|m| m.zone_affinity) || ctx.eff.on(|m| m.node_anti_affinity);
    let (key, value) = judgement.identity()?;
    if !holds || ![LABEL_JOB, LABEL_RENDEZVOUS].contains(&key) {
        return None;
    }
    let mut labels = Cursor::root(template, &site.pointer).objects(&["metadata", "labels"], ops)?;
    labels
        .insert_missing(key, Value::String(value.to_string()), ops)
        .then(|| {
            Change::new(
                format!("label {key}={value}"),
                "ties every pod of the job together, so one zone can hold them",
            )
        })
}

/// Sign the template as trainplace admitted it, so the controller's pods can show it.
fn mark_admitted(
    object: &mut Value,
    site: &Site,
    judgement: &Judgement<'_>,
    ctx: &Ctx<'_, '_>,
    namespace: &str,
    ops: &mut Ops,
) -> Result<(), ObjectError> {
    let (Some(keys), Some(owner_kind), Some((key, value))) = (
        ctx.who.marks,
        ctx.kind.pod_owner_kind(),
        judgement.identity(),
    ) else {
        return Ok(());
    };
    let missing = || ObjectError::bad(&site.field, "missing");
    let template = object.pointer(&site.pointer).ok_or_else(missing)?;
    let view = PodView::read(template, &site.field, &ctx.eff.policy.catalog)?;
    let mark = keys.sign(&Claim {
        namespace,
        identity: (key, value),
        owner_kind,
        digest: crate::answer::mark::digest(&view),
        pods: judgement.pods().unwrap_or(0),
    });
    if annotation(template, ADMITTED) == Some(mark.as_str()) {
        return Ok(());
    }
    let template = object.pointer_mut(&site.pointer).ok_or_else(missing)?;
    if let Some(mut ann) =
        Cursor::root(template, &site.pointer).objects(&["metadata", "annotations"], ops)
    {
        ann.set(ADMITTED, Value::String(mark), ops);
    }
    Ok(())
}

const KUEUE_QUEUE: &str = "kueue.x-k8s.io/queue-name";
const KUEUE_REQUIRED: &str = "kueue.x-k8s.io/podset-required-topology";
const KUEUE_TOPOLOGY: [&str; 3] = [
    KUEUE_REQUIRED,
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
];

/// A Kueue-managed workload: ask Topology Aware Scheduling for one zone per podset.
fn kueue_topology(object: &mut Value, site: &Site, changes: &mut Vec<Change>, ops: &mut Ops) {
    if crate::read::json::str_at(object, &["metadata", "labels", KUEUE_QUEUE]).is_none() {
        return;
    }
    let Some(template) = object.pointer_mut(&site.pointer) else {
        return;
    };
    let already = KUEUE_TOPOLOGY.iter().any(|k| {
        template
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(*k))
            .is_some()
    });
    if already {
        return;
    }
    if let Some(mut ann) =
        Cursor::root(template, &site.pointer).objects(&["metadata", "annotations"], ops)
        && ann.insert_missing(KUEUE_REQUIRED, Value::String(LABEL_ZONE.into()), ops)
    {
        changes.push(Change::new(
            format!("annotation {KUEUE_REQUIRED}={LABEL_ZONE}"),
            "Kueue admits the podset into one zone (Topology Aware Scheduling)",
        ));
    }
}
