//! Judging one pod template: classify -> opt-ins -> plan -> rules. The one sequence
//! every template goes through, whether it sits in a Pod, a workload, or the synthetic
//! pod of a TrainJob. Judging only reads; the caller writes the returned layout.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::error::ObjectError;
use crate::facts::dra;
use crate::facts::policy::{Effective, Mode, OptIn};
use crate::facts::requester::Requester;
use crate::judge::classify::{Class, InstanceSource, Shape, SiteHints, Target, classify};
use crate::judge::finding::{Finding, Rule};
use crate::judge::plan::{Plan, shm_size};
use crate::judge::rules::{OptInState, RuleInput, Unheld, check, opt_in_state, shm_memory};
use crate::judge::verdict::Verdict;
use crate::read::annotations::{ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, SHM_SIZE};
use crate::read::devices::PodDevices;
use crate::read::json::str_at;
use crate::read::podspec::PodView;
use crate::read::workload::Kind;
use trainplace_catalog::InstanceProfile;

/// What every template of one object is judged with.
pub(crate) struct Ctx<'a, 'p> {
    pub eff: &'a Effective<'p>,
    pub who: &'a Requester<'a>,
    pub kind: Kind,
    /// The object is judged as it will be stored (the validating webhook): nothing is
    /// written, so what the layout would add must already be there.
    pub final_object: bool,
}

impl<'a> Ctx<'a, '_> {
    /// Zones where pods of the same job already run, from the inventory.
    fn siblings(&self, namespace: &str, shape: &Shape<'_>) -> Option<&'a BTreeSet<String>> {
        let (key, value) = shape.identity.as_ref()?;
        self.who.inventory?.sibling_zones(namespace, key, value)
    }

    /// Whether an opt-in annotation is set and granted. (Pods made from a judged
    /// template are not judged again at all: `engine::run`.)
    pub(crate) fn opt_in(&self, set: bool, which: OptIn) -> OptInState {
        opt_in_state(set, which, self.eff, self.who)
    }
}

/// A judged training template: its shape and, on a known instance type, its layout.
pub(crate) struct Judgement<'p> {
    shape: Box<Shape<'p>>,
    layout: Option<Layout<'p>>,
}

struct Layout<'p> {
    host_access_forbidden: bool,
    instance: &'p InstanceProfile,
    source: InstanceSource,
    shm_size: String,
    containers: Vec<usize>,
    nccl_debug: Option<String>,
}

impl<'p> Judgement<'p> {
    /// The layout plan, on a known instance type.
    pub(crate) fn plan<'a>(&'a self, eff: &'a Effective<'a>) -> Option<Plan<'a>> {
        let l = self.layout.as_ref()?;
        Some(Plan {
            shape: &self.shape,
            instance: l.instance,
            source: l.source,
            eff,
            containers: l.containers.clone(),
            shm_size: l.shm_size.clone(),
            nccl_debug: l.nccl_debug.clone(),
            host_access_forbidden: l.host_access_forbidden,
        })
    }

    /// What the template was judged to be.
    pub(crate) fn shape(&self) -> &Shape<'p> {
        &self.shape
    }

    /// The job's identity label, when known.
    pub fn identity(&self) -> Option<(&str, &str)> {
        self.shape
            .identity
            .as_ref()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Pods in the job, when known.
    pub fn pods(&self) -> Option<u32> {
        self.shape.pods
    }

    /// Whether the template belongs to a job of more than one pod.
    pub fn multi_pod(&self) -> bool {
        self.shape.multi_pod
    }

    /// A template of a multi-pod job with no zone constraint of its own (no pin, spread,
    /// multi-zone affinity or anti-affinity): only a hold keeps it with the others.
    pub fn unconstrained(&self) -> bool {
        let z = &self.shape.zones;
        self.shape.multi_pod
            && z.pinned.is_none()
            && z.allows_many.is_none()
            && !z.spread
            && !z.anti
    }

    /// Whether the instance type is known, so there is a layout to write.
    pub fn has_layout(&self) -> bool {
        self.layout.is_some()
    }
}

/// The view with what its DRA claims ask for, counted through the templates submitted
/// alongside, then the inventory's (unchanged when it has no claims).
pub(crate) fn with_claims<'v>(
    view: PodView<'v>,
    ctx: &Ctx<'_, '_>,
    verdict: &Verdict,
) -> PodView<'v> {
    ctx.who
        .claims_resolved(view, &verdict.namespace, &ctx.eff.policy.catalog)
}

/// Judge one template: `None` when it is not a training pod. Findings go into the
/// verdict; annotations are read from the template, then from the object around it.
pub(crate) fn judge<'a>(
    view: &PodView<'_>,
    hints: &SiteHints,
    object: &Value,
    ctx: &Ctx<'a, '_>,
    verdict: &mut Verdict,
) -> Result<Option<Judgement<'a>>, ObjectError> {
    let eff = ctx.eff;
    let object_annotation = |key: &str| str_at(object, &["metadata", "annotations", key]);
    let resolved;
    let view = if view.claims == 0 || view.devices != PodDevices::default() {
        view
    } else {
        resolved = with_claims(view.clone(), ctx, verdict);
        &resolved
    };
    let shape = match classify(view, hints, eff, ctx.who.inventory, &verdict.namespace) {
        Class::NotTraining => return Ok(None),
        Class::Training(shape) => shape,
    };
    let set = |key: &str| view.annotation(key).or_else(|| object_annotation(key)) == Some("true");
    // Opt-ins are the requester's own. An UPDATE by someone without the grant (Kueue,
    // the garbage collector) is judged for what it changes (`update.rs`). A trusted
    // controller's child workload (a JobSet's Job) keeps the opt-ins written on a
    // template whose mark verifies: the submitter was granted them when it was admitted
    // (the mark is written only on what was admitted, and binds the annotations).
    let vouched = ctx.kind.is_workload()
        && crate::judge::upstream::vouched(
            object,
            view.pod,
            (
                ctx.kind,
                shape
                    .identity
                    .as_ref()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            ),
            shape.pods,
            ctx.who,
            eff.policy,
        );
    let opt_in = |key: &str, which: OptIn| match ctx.opt_in(set(key), which) {
        OptInState::Refused if vouched && view.annotation(key) == Some("true") => {
            OptInState::Granted
        }
        state => state,
    };
    let partial_opt_in = opt_in(ALLOW_PARTIAL_NODE, OptIn::AllowPartialNode);
    let multi_az_opt_in = opt_in(ALLOW_MULTI_AZ, OptIn::AllowMultiAz);
    let layout = layout_of(view, &shape, ctx)?;
    let judgement = Judgement { shape, layout };
    // Rules judge the template as the validating webhook will see it after this
    // mutation; of what they read, only the EFA count changes.
    let mut after = (*judgement.shape).clone();
    if let Some(added) = judgement.plan(eff).and_then(|p| p.added_efa()) {
        after.efa = added;
    }
    not_in_cluster(&judgement.shape, ctx, &view.base, verdict);
    if judgement.layout.is_some() {
        left_out_for_pod_security(view, ctx, verdict);
    }
    let planned_shm = judgement
        .layout
        .as_ref()
        .filter(|_| eff.on(|m| m.shm))
        .map(|l| l.shm_size.as_str());
    shm_memory(view, planned_shm, &mut verdict.findings);
    capacity_blocks(view, object, &judgement.shape, ctx, verdict);
    let input = RuleInput {
        view,
        shape: &after,
        eff,
        partial_opt_in,
        multi_az_opt_in,
        siblings: ctx.siblings(&verdict.namespace, &judgement.shape),
        unheld: unheld(&judgement, ctx),
    };
    verdict.findings.extend(check(&input));
    if let Target::Known(instance, _) = &after.target {
        crate::judge::nvlink::check(&input, instance, &mut verdict.findings);
    }
    Ok(Some(judgement))
}

/// What the layout needs, read before any edit; `None` when the template gets none: its
/// type is not known, or its devices could not be counted (DRA claims of unknown
/// templates), so nothing would be laid out right.
fn layout_of<'a>(
    view: &PodView<'_>,
    shape: &Shape<'a>,
    ctx: &Ctx<'a, '_>,
) -> Result<Option<Layout<'a>>, ObjectError> {
    let counted = shape.per_pod > 0 || shape.efa > 0;
    let mut containers: Vec<usize> = view.device_containers().map(|c| c.index).collect();
    containers.extend(dra::containers_using(view.pod, &view.devices.device_claims));
    containers.sort_unstable();
    containers.dedup();
    Ok(match &shape.target {
        Target::Known(instance, source) if counted => Some(Layout {
            host_access_forbidden: pod_security(ctx).is_some(),
            instance,
            source: *source,
            shm_size: shm_size(view, ctx.eff, instance)
                .map_err(|e| ObjectError::bad(format!("metadata.annotations[{SHM_SIZE}]"), e))?,
            containers,
            nccl_debug: view
                .annotation(crate::read::annotations::NCCL_DEBUG)
                .map(String::from),
        }),
        _ => None,
    })
}

/// Capacity Block ends for a template, when the inventory and the request's time are
/// known (the engine reads no clock).
fn capacity_blocks(
    view: &PodView<'_>,
    object: &Value,
    shape: &Shape<'_>,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
) {
    if let (Some(inventory), Some(now)) = (ctx.who.inventory, ctx.who.now) {
        let instance_type = match &shape.target {
            Target::Known(i, _) => Some(i.name.as_str()),
            Target::Unknown(name, _) => Some(name.as_str()),
            _ => None,
        };
        crate::judge::capacity_block::check(
            &crate::judge::capacity_block::BlockInput {
                view,
                object,
                instance_type,
                eff: ctx.eff,
                inventory,
                now,
            },
            &mut verdict.findings,
        );
    }
}

/// Why a multi-pod job's template is held in no zone when trainplace would hold it: no
/// label ties its pods together, or (judging the object as stored) the hold the
/// mutating webhook writes is missing because that call was skipped or failed.
fn unheld(judgement: &Judgement<'_>, ctx: &Ctx<'_, '_>) -> Option<Unheld> {
    let shape = &judgement.shape;
    let held = shape.zones.held || shape.clique_held;
    if !judgement.unconstrained() || held || !ctx.eff.on(|m| m.zone_affinity) {
        return None;
    }
    match shape.identity {
        // A workload without one is a serving RayService that says it trains: its
        // pods carry KubeRay's labels, judged when they are created.
        None if ctx.kind == Kind::Pod => Some(Unheld::NoIdentity),
        None => None,
        // A workload's pods are judged, and held, when its controller creates them.
        // Written with the layout or, where there is none, alone.
        Some(_) if ctx.final_object && ctx.kind == Kind::Pod => Some(Unheld::NotMutated),
        Some(_) => None,
    }
}

/// The Pod Security Standards level the namespace enforces, when it forbids hostIPC
/// and added capabilities (baseline and restricted both do).
/// https://kubernetes.io/docs/concepts/security/pod-security-standards/
fn pod_security<'a>(ctx: &Ctx<'a, '_>) -> Option<&'a str> {
    let level = ctx
        .who
        .namespace_labels?
        .get("pod-security.kubernetes.io/enforce")?
        .as_str();
    matches!(level, "baseline" | "restricted").then_some(level)
}

/// Say what the layout leaves out under the namespace's Pod Security level, or what
/// the pod itself sets that the apiserver's PodSecurity admission will reject.
fn left_out_for_pod_security(view: &PodView<'_>, ctx: &Ctx<'_, '_>, verdict: &mut Verdict) {
    let Some(level) = pod_security(ctx) else {
        return;
    };
    let eff = ctx.eff;
    let user_host_ipc = view.spec_bool("hostIPC") == Some(true);
    let mut left_out = Vec::new();
    if eff.on(|m| m.host_ipc) && !user_host_ipc {
        left_out.push("hostIPC");
    }
    if eff.on(|m| m.ipc_lock) {
        left_out.push("the IPC_LOCK capability");
    }
    let (found, fix) = if user_host_ipc {
        (
            format!("the namespace enforces Pod Security \"{level}\", which forbids hostIPC: true; the apiserver will reject this pod."),
            "remove hostIPC (one pod per node keeps NVLink without it: 338.7 GB/s measured in the pod's own IPC namespace, docs/measurements.md), or run the job in a namespace whose Pod Security level allows it.".to_string(),
        )
    } else if left_out.is_empty() {
        return;
    } else {
        (
            format!(
                "the namespace enforces Pod Security \"{level}\", which forbids {}: trainplace left {} out so the pod is not rejected.",
                left_out.join(" and "),
                if left_out.len() > 1 { "them" } else { "it" }
            ),
            "nothing to do for bandwidth: one pod per node reaches the same NVLink bandwidth without hostIPC (338.7 GB/s vs 336.6 GB/s with it, docs/measurements.md); EFA needs IPC_LOCK only where the container runtime's memlock limit is too low to register memory (`ulimit -l` in a pod prints `unlimited` where it is not needed; capabilities(7): https://man7.org/linux/man-pages/man7/capabilities.7.html).".to_string(),
        )
    };
    verdict.findings.push(Finding {
        rule: Rule::PodSecurity,
        mode: Mode::Warn,
        site: view.base.clone(),
        found,
        fix,
        opt_in: None,
        why: None,
    });
}

/// A catalog type the cluster has no nodes of: the pods would stay Pending.
fn not_in_cluster(shape: &Shape<'_>, ctx: &Ctx<'_, '_>, site: &str, verdict: &mut Verdict) {
    let (Some(inv), Target::Known(inst, _)) = (ctx.who.inventory, &shape.target) else {
        return;
    };
    let mode = ctx.eff.mode_unknown_instance_type();
    if !inv.nodes_listed() || inv.has_type(&inst.name) || mode == Mode::Off {
        return;
    }
    let have: Vec<String> = inv.types.keys().cloned().collect();
    verdict.findings.push(Finding {
        rule: Rule::UnknownInstanceType,
        mode: if mode == Mode::Enforce { Mode::Enforce } else { Mode::Warn },
        site: site.to_string(),
        found: format!(
            "the cluster has no {} nodes (GPU types present: {}); the pods stay Pending until a node group or Karpenter NodePool provides them.",
            inst.name,
            if have.is_empty() { "none".to_string() } else { have.join(", ") }
        ),
        fix: "check the instance type, or create capacity for it (`trainplace advise` writes the eksctl/Karpenter config).".into(),
        opt_in: None,
        why: None,
    });
}
