//! The pipeline: parse -> locate templates -> classify -> plan + apply -> rules ->
//! verdict, for one object; `update` judges both sides of an UPDATE through it.
//! Synchronous and pure; the same call serves webhook, CLI and advisor.

use serde_json::Value;

mod children;
mod sites;
pub(crate) mod update;
mod write;

use crate::error::ObjectError;
use crate::facts::mark::ADMITTED;
use crate::facts::policy::{Mode, OptIn, Policy};
use crate::facts::requester::Requester;
use crate::judge::finding::{Finding, Rule};
use crate::judge::judgement::Ctx;
use crate::judge::rules::{OptInState, opt_in_state};
use crate::judge::verdict::Verdict;
use crate::read::annotations::SKIP;
use crate::read::json::Lookup as _;
use crate::read::json::annotation;
use crate::read::workload::{Kind, Site, locate};
use crate::write::edit::Ops;
use sites::judge_sites;
use write::write_site;

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
    bounded(|| run(object, policy, who, Layout::Write))
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
    bounded(|| run(object, policy, who, Layout::Skip))
}

/// Run `f` under the review's budget when one is installed, else under the ceiling;
/// an [`OverBudget`](crate::budget::OverBudget) error when the budget was spent,
/// whatever `f` returned.
fn bounded<T>(f: impl FnOnce() -> Result<T, ObjectError>) -> Result<T, ObjectError> {
    let checked = || {
        let out = f();
        match crate::budget::spent() {
            Some(over) => Err(over.into()),
            None => out,
        }
    };
    if crate::budget::installed() {
        checked()
    } else {
        crate::budget::metered(crate::budget::Budget::ceiling(), checked).0
    }
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
    let ctx = Ctx {
        eff: &eff,
        who,
        kind,
        final_object: layout == Layout::Skip,
    };
    // A DRA claim in strict mode; a granted skip leaves it alone, as it does any object
    // (and as the exported policies do).
    if policy.strict() && crate::judge::strict::claims::is_claim(&object) {
        if let Some(note) = granted_skip(&object, &ctx) {
            verdict.notes.push(note);
        } else {
            verdict.findings = crate::judge::strict::judge(&object, kind, &sites, None, &ctx)?;
            verdict.allowed = !verdict.findings.iter().any(|f| f.mode == Mode::Enforce);
        }
        verdict.object = object;
        return Ok(verdict);
    }
    // A Deployment, StatefulSet, CronJob...: judged as what its controller makes (strict
    // mode judges their templates itself, below).
    if kind == Kind::Other
        && !policy.strict()
        && let Some(judged) = children::judge(&object, policy, who)?
    {
        return Ok(judged);
    }
    if let Some(note) = left_alone(&object, &ctx, policy, &verdict)
        .or_else(|| vouched_skip(&object, &sites, &ctx, policy))
        .or_else(|| kept_skip(&object, &ctx, policy))
    {
        verdict.notes.push(note);
        let bounded = || {
            crate::judge::bounds::too_large(&object, kind, &sites, || None, &policy.catalog, false)
                .is_none()
        };
        if layout == Layout::Write && kind.is_workload() && !policy.strict() && bounded() {
            verdict.patch = sign_skipped(&mut object, &sites, &ctx);
        }
        verdict.object = object;
        return Ok(verdict);
    }
    // Past the bounds: refused before anything walks its lists.
    if let Some(f) = crate::judge::bounds::too_large(
        &object,
        kind,
        &sites,
        || (kind == Kind::TrainJob).then(|| crate::write::trainjob::synthetic_spec(&object)),
        &policy.catalog,
        policy.strict(),
    ) {
        verdict.findings.push(f);
        verdict.allowed = false;
        verdict.object = object;
        return Ok(verdict);
    }
    // Read before any edit: the opt-out the requester asked for.
    let skip = annotation(&object, SKIP) == Some("true");
    if !skip {
        verdict
            .notes
            .extend(skip_on_templates(&object, kind, &sites));
    }
    // Strict mode judges the object as it will be stored: when validating, that is the
    // object as sent, before the reshape and TrainJob rewrites the precise rules judge.
    let sent = (policy.strict() && layout == Layout::Skip).then(|| object.clone());
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
    // A controller copies the annotation from a template it did not write: its pod is
    // judged on its content, and the opt-out is the template author's to ask for.
    if skip && any_training && !policy.trusted_controller(who) {
        verdict
            .findings
            .push(opt_out_refused(&verdict.namespace, policy));
    }
    // A mark says "admitted": a template the verdict refuses is laid out but not signed.
    // On an UPDATE the validating webhook decides what lands, for what the update
    // changes (`judge::update`): a finding the object was admitted with does not stop
    // it (Kueue's unsuspend of an opted-in job, writing its flavor's node selector), and
    // an update that brings a new one is refused, its signed template never stored.
    // Strict mode reads no mark, so it signs none (its zone pin, written after the
    // layout, would leave a stored mark that no longer matches the template, and every
    // later update would sign it again).
    let admitted = !policy.strict()
        && (who.updating.is_some() || !verdict.findings.iter().any(|f| f.mode == Mode::Enforce));
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
                admitted,
                &ctx,
                &mut verdict,
                &mut ops,
            )?;
        }
    }
    if policy.strict() {
        // Validating: the object as sent; mutating: the object as laid out.
        let mut sent = sent;
        let sent_sites = sent.as_ref().map(locate).transpose()?.map(|(_, s)| s);
        let (target, at) = match (sent.as_mut(), sent_sites.as_deref()) {
            (Some(sent), Some(sent_sites)) => (sent, sent_sites),
            _ => (&mut object, sites.as_slice()),
        };
        strict(target, kind, at, &ctx, layout, &mut verdict, &mut ops)?;
    }
    verdict.fold_repeats();
    verdict.allowed = !verdict.findings.iter().any(|f| f.mode == Mode::Enforce);
    verdict.patch = ops.into_patch();
    verdict.object = object;
    Ok(verdict)
}

/// A workload a granted `trainplace.io/skip` leaves alone: its templates are signed as
/// they are (no layout), so the pods its controller makes carry the grant the skip was
/// judged with and are left alone too, within the job size the mark states. Without
/// the mark they were judged as the controller's own pods and refused. A template that
/// cannot be read is not signed (its pods are judged).
fn sign_skipped(object: &mut Value, sites: &[Site], ctx: &Ctx<'_, '_>) -> crate::Patch {
    let mut scratch = Verdict::empty(object, ctx.kind, ctx.who);
    let mut ops = Ops::default();
    let Ok((judged, _)) = judge_sites(object, sites, ctx, &mut scratch) else {
        return ops.into_patch();
    };
    for (site, judgement) in judged {
        // The skip travels with the template to a child workload, whose mark vouches
        // for it ([`vouched_skip`]).
        write::carry_object_opt_ins(object, site, ctx, &mut ops, &[OptIn::Skip]);
        // The site was found by `judge_sites`; an error leaves that template unsigned.
        let _ = write::mark_admitted(object, site, &judgement, ctx, &scratch.namespace, &mut ops);
    }
    ops.into_patch()
}

/// Strict mode: pin what needs the namespace's zone (when writing), then replace the
/// precise partial-node and multi-az findings with strict mode's on the final object.
fn strict(
    object: &mut Value,
    kind: Kind,
    sites: &[Site],
    ctx: &Ctx<'_, '_>,
    layout: Layout,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<(), ObjectError> {
    use crate::judge::strict;
    if layout == Layout::Write
        && let Some(zone) = ctx.eff.defaults.zone.as_deref()
    {
        for (pointer, field) in strict::to_pin(object, kind, sites, ctx)? {
            crate::write::zone_pin::pin(object, &pointer, &field, zone, verdict, ops);
        }
    }
    verdict
        .findings
        .retain(|f| !matches!(f.rule, Rule::PartialNode | Rule::MultiAz));
    // A TrainJob's node pod, as its patches give it.
    let node_pod =
        (kind == Kind::TrainJob).then(|| crate::write::trainjob::synthetic_pod(object, None));
    verdict
        .findings
        .extend(strict::judge(object, kind, sites, node_pod, ctx)?);
    Ok(())
}

/// Why the object passes unchanged, when it does: a kind trainplace does not handle, a
/// pod made from a template it admitted, or a granted opt-out.
fn left_alone(
    object: &Value,
    ctx: &Ctx<'_, '_>,
    policy: &Policy,
    verdict: &Verdict,
) -> Option<String> {
    let (kind, who) = (ctx.kind, ctx.who);
    let strict_template =
        policy.strict() && crate::read::templates::core_template_pointer(object).is_some();
    if kind == Kind::Other && !strict_template {
        let api = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Some(format!(
            "trainplace does not handle {api}/{}; passed through unchanged.",
            verdict.kind
        ));
    }
    // A pod whose mark verifies has exactly the judged fields of the template trainplace
    // admitted (and laid out) with the submitter's identity. Laying it out again as a
    // lone pod would add what that job was judged not to need (a single-pod Job's pod
    // would get a multi-pod layout) and break its own mark for /validate. Only a Pod: a
    // workload's own CREATE is judged on its content whoever asks. Strict mode trusts no
    // mark: every pod is judged on its own content.
    if kind == Kind::Pod
        && !policy.strict()
        && policy.trusted_controller(who)
        && crate::judge::upstream::made_from_admitted(object, kind, who, policy)
    {
        return Some(format!(
            "made by its controller from a template trainplace admitted ({ADMITTED} verified); left as admitted."
        ));
    }
    granted_skip(object, ctx)
}

/// A trusted controller's child workload (a JobSet's Job) whose every template carries
/// the skip its parent was granted, bound by a mark that verifies under a parent kind
/// trainplace signs: left alone as the parent was. Precise mode only (strict reads no
/// mark).
fn vouched_skip(
    object: &Value,
    sites: &[Site],
    ctx: &Ctx<'_, '_>,
    policy: &Policy,
) -> Option<String> {
    if policy.strict() || !ctx.kind.is_workload() || sites.is_empty() {
        return None;
    }
    // Templates that ask for no devices (a Ray cluster's CPU head) were judged for
    // nothing and signed for nothing; at least one template must be vouched for.
    let mut any = false;
    let every = sites.iter().all(|site| {
        object.lookup(&site.pointer).is_some_and(|t| {
            if !asks_for_devices(t, site, policy) {
                return true;
            }
            any = true;
            annotation(t, SKIP) == Some("true")
                && crate::judge::upstream::vouched(
                    object,
                    t,
                    (
                        ctx.kind,
                        site.hints
                            .identity
                            .as_ref()
                            .map(|(k, v)| (k.as_str(), v.as_str())),
                    ),
                    Some(0),
                    ctx.who,
                    policy,
                )
        })
    });
    (every && any).then(|| {
        format!("{SKIP}: \"true\" granted to the submitter of its parent ({ADMITTED} verified): trainplace left this object alone.")
    })
}

/// The mutating webhook's pass over an UPDATE of a workload a granted skip left alone
/// (Kueue unsuspending it and writing its flavor's node selector into the templates):
/// the stored object was admitted with the skip ([`skip_admitted`]). The object is left
/// alone again and its templates signed as they are now, so the pods its controller
/// makes from them keep the skip. Whoever sends the update: the validating webhook
/// judges what it changes with the requester's own grants (`update`), so an update it
/// refuses never stores the signed templates. Precise mode only (strict reads no mark;
/// it judges the skip kept on an UPDATE as no news, `update/strict.rs`).
fn kept_skip(object: &Value, ctx: &Ctx<'_, '_>, policy: &Policy) -> Option<String> {
    let stored = ctx.who.updating?;
    (!ctx.final_object
        && annotation(object, SKIP) == Some("true")
        && skip_admitted(stored, ctx.who, policy))
    .then(|| {
        format!("{SKIP}: \"true\" granted when the object was admitted ({ADMITTED} verified on the stored object): trainplace signed its templates again and left it alone.")
    })
}

/// Whether a stored workload carries `trainplace.io/skip`, and every pod template of it
/// that asks for devices a mark that verifies as stored: the object was admitted with
/// the skip (an update that adds it is refused unless its requester is granted it, so
/// its marks are signed for it).
pub(crate) fn skip_admitted(stored: &Value, who: &Requester<'_>, policy: &Policy) -> bool {
    if policy.strict() || annotation(stored, SKIP) != Some("true") {
        return false;
    }
    let Ok((kind, sites)) = locate(stored) else {
        return false;
    };
    let mut any = false;
    let every = sites.iter().all(|site| {
        if stored
            .lookup(&site.pointer)
            .is_none_or(|t| !asks_for_devices(t, site, policy))
        {
            return true;
        }
        any = true;
        crate::judge::upstream::stored_mark(stored, site, kind, who, policy).is_some()
    });
    kind.is_workload() && every && any
}

/// Whether a workload's template asks for devices: one that asks for none was judged
/// for nothing and is signed for nothing.
fn asks_for_devices(template: &Value, site: &Site, policy: &Policy) -> bool {
    crate::read::podspec::PodView::read(template, &site.field, &policy.catalog)
        .map_or(true, |view| sites::asks_for_devices(&view))
}

/// The note for an object a granted `trainplace.io/skip` leaves alone.
fn granted_skip(object: &Value, ctx: &Ctx<'_, '_>) -> Option<String> {
    let skip = annotation(object, SKIP) == Some("true");
    (skip && opt_in_state(true, OptIn::Skip, ctx.eff, ctx.who) == OptInState::Granted)
        .then(|| format!("{SKIP}: \"true\": trainplace left this object alone."))
}

/// `trainplace.io/skip` on a workload's pod template: the opt-out is read on the
/// workload's own metadata, so it has no effect there; say so instead of ignoring it.
fn skip_on_templates(object: &Value, kind: Kind, sites: &[Site]) -> Vec<String> {
    if !kind.is_workload() {
        return Vec::new();
    }
    sites
        .iter()
        .filter(|site| !site.pointer.is_empty())
        .filter(|site| {
            object
                .lookup(&site.pointer)
                .is_some_and(|t| annotation(t, SKIP) == Some("true"))
        })
        .map(|site| {
            let at = site.field.strip_suffix(".spec").unwrap_or(&site.field);
            format!(
                "{at}.metadata.annotations: {SKIP} has no effect on a pod template, so trainplace judges and lays out its pods as usual; to leave the whole object alone, set it on the object's own metadata.annotations (where the policy grants it)."
            )
        })
        .collect()
}

/// The opt-out asked for by a requester the policy does not grant it to.
fn opt_out_refused(namespace: &str, policy: &Policy) -> Finding {
    Finding {
        rule: Rule::OptOutRefused,
        mode: Mode::Enforce,
        site: "metadata.annotations".into(),
        found: format!("namespace {namespace}: {}", OptIn::Skip.refused(policy)),
        fix: "remove the annotation, or have it granted in the policy.".into(),
        opt_in: None,
        why: None,
    }
}
