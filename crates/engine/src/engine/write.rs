//! Writing one judged template: the job label, the zone pin, the layout, Kueue's
//! topology ask, the explanation, and the signed admission mark.

use serde_json::Value;

use crate::error::ObjectError;
use crate::facts::mark::{ADMITTED, Claim};
use crate::facts::policy::OptIn;
use crate::judge::judgement::{Ctx, Judgement};
use crate::judge::plan::Change;
use crate::judge::rules::{OptInState, opt_in_state};
use crate::judge::verdict::Verdict;
use crate::read::annotations::{
    KUEUE_QUEUE, KUEUE_REQUIRED_TOPOLOGY, LABEL_JOB, LABEL_RENDEZVOUS, LABEL_ZONE,
    chose_kueue_topology,
};
use crate::read::json::Lookup as _;
use crate::read::json::annotation;
use crate::read::podspec::PodView;
use crate::read::workload::{Kind, Site};
use crate::write::edit::{Cursor, Ops};

/// Write one judged template's layout, the Kueue topology ask and the explanation; and,
/// when the object is `admitted`, the mark that says so.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_site(
    object: &mut Value,
    site: &Site,
    judgement: &Judgement<'_>,
    zone: Option<&str>,
    admitted: bool,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<(), ObjectError> {
    // No layout and nothing to hold: left as sent (and not signed).
    if !judgement.has_layout() && !judgement.unconstrained() {
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
        kueue_topology(object, site, ctx, &mut changes, ops);
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
    if !admitted {
        return Ok(());
    }
    carry_object_opt_ins(
        object,
        site,
        ctx,
        ops,
        &[OptIn::AllowPartialNode, OptIn::AllowMultiAz],
    );
    mark_admitted(object, site, judgement, ctx, &verdict.namespace, ops)
}

/// The opt-ins granted on the workload's own metadata, written on a template whose
/// controller makes child workloads from it (a JobSet's Jobs carry the template, not
/// the JobSet's metadata), before it is signed: the child's mark then vouches for them,
/// as it does for the template's own. Only what the requester is granted.
pub(super) fn carry_object_opt_ins(
    object: &mut Value,
    site: &Site,
    ctx: &Ctx<'_, '_>,
    ops: &mut Ops,
    opt_ins: &[OptIn],
) {
    if !ctx.kind.makes_child_workloads() || site.pointer.is_empty() {
        return;
    }
    for &which in opt_ins {
        let key = which.annotation();
        let granted = annotation(object, key) == Some("true")
            && opt_in_state(true, which, ctx.eff, ctx.who) == OptInState::Granted;
        let Some(template) = object.pointer_mut(&site.pointer) else {
            return;
        };
        if !granted || annotation(template, key).is_some() {
            continue;
        }
        if let Some(mut ann) =
            Cursor::root(template, &site.pointer).objects(&["metadata", "annotations"], ops)
        {
            ann.set(key, Value::String("true".into()), ops);
        }
    }
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

/// Sign the template as trainplace admitted it, so the controller's pods can show it:
/// this content, in this namespace, under this job label and owner kind, admitted as
/// part of a job of this many pods. A mark already there that verifies for the same
/// content and a job at least this large is kept: a JobSet's child Job is judged as its
/// own Job, smaller than the JobSet its template was admitted in.
pub(super) fn mark_admitted(
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
    let template = object.lookup(&site.pointer).ok_or_else(missing)?;
    let catalog = &ctx.eff.policy.catalog;
    let view = PodView::read(template, &site.field, catalog)?;
    let view = ctx.who.claims_resolved(view, namespace, catalog);
    let claim = Claim {
        namespace,
        identity: (key, value),
        owner_kind,
        digest: crate::facts::mark::digest(&view),
        pods: kept_count(
            signed_pods(object, judgement.pods().unwrap_or(0), ctx),
            site,
            ctx,
        ),
    };
    let kept = annotation(template, ADMITTED)
        .filter(|m| m.split('.').nth(1) == Some(keys.current_id()))
        .and_then(|m| keys.verify(m, &claim))
        .is_some_and(|signed| signed == claim.pods || (claim.pods > 0 && signed >= claim.pods));
    if kept {
        return Ok(());
    }
    let mark = keys.sign(&claim);
    let template = object.pointer_mut(&site.pointer).ok_or_else(missing)?;
    if let Some(mut ann) =
        Cursor::root(template, &site.pointer).objects(&["metadata", "annotations"], ops)
    {
        ann.set(ADMITTED, Value::String(mark), ops);
    }
    Ok(())
}

/// The pod count a template's mark states: the job's (0: several, count unknown). A
/// LeaderWorkerSet's groups are separate jobs of `size` pods, but its leader
/// StatefulSet runs one leader per group (`replicas` of them, numbered by group), from
/// the leader template or, without one, the worker template: the mark states the larger
/// count, so the leaders of groups past `size` are not taken for pods of a larger job.
/// Each group's job size is still judged on the LeaderWorkerSet (its template's
/// launcher at CREATE and on every UPDATE).
fn signed_pods(object: &Value, job: u32, ctx: &Ctx<'_, '_>) -> u32 {
    if job == 0 || ctx.kind != Kind::LeaderWorkerSet {
        return job;
    }
    let groups = object
        .lookup("/spec/replicas")
        .and_then(Value::as_u64)
        .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX));
    job.max(groups)
}

/// On an UPDATE, the larger of `judged` and the count the stored template's mark states
/// (0, several of unknown count, stays 0 either way): the mark keeps the largest job
/// the template was admitted for. Kueue admitting part of a Job lowers its parallelism
/// and writes its flavor's node selector, so the template is signed again; when Kueue
/// preempts the job it restores the parallelism, which `/validate` then judges against
/// that count (`update.rs`) and not as growth past what the submitter was granted.
fn kept_count(judged: u32, site: &Site, ctx: &Ctx<'_, '_>) -> u32 {
    let before = ctx.who.updating.and_then(|stored| {
        crate::judge::upstream::signed_before(stored, site, ctx.kind, ctx.who, ctx.eff.policy)
    });
    match before {
        Some(n) if judged > 0 && n > 0 => judged.max(n),
        _ => judged,
    }
}

/// A Kueue-managed workload: ask Topology Aware Scheduling for one zone per podset,
/// where the cluster has a Kueue Topology with the zone level. Without one, Kueue would
/// not admit a podset that asks for a level its flavor's topology lacks, so nothing is
/// written (the layout's zone affinity holds the pods once Kueue admits them).
fn kueue_topology(
    object: &mut Value,
    site: &Site,
    ctx: &Ctx<'_, '_>,
    changes: &mut Vec<Change>,
    ops: &mut Ops,
) {
    if crate::read::json::str_at(object, &["metadata", "labels", KUEUE_QUEUE]).is_none()
        || !ctx
            .who
            .inventory
            .is_some_and(|inv| inv.kueue_has_level(LABEL_ZONE))
    {
        return;
    }
    let Some(template) = object.pointer_mut(&site.pointer) else {
        return;
    };
    if chose_kueue_topology(template) {
        return;
    }
    if let Some(mut ann) =
        Cursor::root(template, &site.pointer).objects(&["metadata", "annotations"], ops)
        && ann.insert_missing(
            KUEUE_REQUIRED_TOPOLOGY,
            Value::String(LABEL_ZONE.into()),
            ops,
        )
    {
        changes.push(Change::new(
            format!("annotation {KUEUE_REQUIRED_TOPOLOGY}={LABEL_ZONE}"),
            "Kueue admits the podset into one zone (Topology Aware Scheduling)",
        ));
    }
}
