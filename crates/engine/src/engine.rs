//! The pipeline: parse -> locate templates -> classify -> plan + apply -> rules ->
//! verdict. Synchronous and pure; the same call serves webhook, CLI and advisor.

use serde::Serialize;
use serde_json::Value;

use crate::annotations::LABEL_ZONE;
use crate::annotations::{ALLOW_MULTI_AZ, ALLOW_PARTIAL_NODE, MUTATED, SKIP};
use crate::classify::{Class, Target, classify};
use crate::edit::{Cursor, Ops};
use crate::error::ObjectError;
use crate::finding::{Finding, Rule};
use crate::layout::{Change, Plan, shm_size};
use crate::podspec::PodView;
use crate::policy::Effective;
use crate::policy::{Mode, OptIn, Policy, Requester};
use crate::rules::{OptInState, RuleInput, check, opt_in_state};
use crate::workload::{Kind, Site, locate};

/// The engine's answer for one object.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    #[serde(skip)]
    pub kind_class: Kind,
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub allowed: bool,
    pub findings: Vec<Finding>,
    /// Informational lines shown as warnings (e.g. a kind we pass through).
    pub notes: Vec<String>,
    pub changes: Vec<Change>,
    pub patch: json_patch::Patch,
    /// The object after the patch.
    pub object: Value,
}

impl Verdict {
    /// An allowing verdict with nothing found yet, named after the object.
    pub fn empty(object: &Value, kind: Kind, who: &Requester<'_>) -> Self {
        let text = |v: Option<&str>| v.unwrap_or("").to_string();
        Verdict {
            kind: text(object.get("kind").and_then(Value::as_str)),
            kind_class: kind,
            name: text(meta_str(object, "name").or_else(|| meta_str(object, "generateName"))),
            namespace: text(meta_str(object, "namespace").or(Some(who.namespace))),
            allowed: true,
            findings: Vec::new(),
            notes: Vec::new(),
            changes: Vec::new(),
            patch: json_patch::Patch(Vec::new()),
            object: Value::Null,
        }
    }

    /// What the client sees as warnings: `warn` findings and notes.
    pub fn warnings(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.mode == Mode::Warn)
            .map(Finding::message)
            .chain(self.notes.iter().cloned())
            .collect()
    }

    /// Why the object is denied: `enforce` findings.
    pub fn reasons(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.mode == Mode::Enforce)
            .map(Finding::message)
            .collect()
    }
}

fn meta_str<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.get("metadata")?.get(key)?.as_str()
}

fn annotation<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.get("metadata")?.get("annotations")?.get(key)?.as_str()
}

/// Evaluate one object against the policy (the object is cloned; see [`evaluate_owned`]).
pub fn evaluate(
    object: &Value,
    policy: &Policy,
    who: &Requester<'_>,
) -> Result<Verdict, ObjectError> {
    evaluate_owned(object.clone(), policy, who)
}

/// What every site of one object is judged with.
pub(crate) struct Ctx<'a, 'p> {
    pub eff: &'a Effective<'p>,
    pub who: &'a Requester<'a>,
    /// A pod its controller made from a template trainplace already judged.
    pub judged_upstream: bool,
    pub kind: Kind,
}

/// Evaluate an object the caller owns: the layout is written into it in place and
/// each edit is recorded as a JSON Patch operation (no clone, no tree diff).
pub fn evaluate_owned(
    mut object: Value,
    policy: &Policy,
    who: &Requester<'_>,
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
        judged_upstream: judged_upstream(&object, kind) && policy.trusted_controller(who),
        kind,
    };
    let skip = annotation(&object, SKIP) == Some("true");
    if skip
        && (ctx.judged_upstream
            || opt_in_state(true, OptIn::Skip, &eff, who) == OptInState::Granted)
    {
        verdict.notes.push(format!(
            "{SKIP}: \"true\": trainplace left this object alone."
        ));
        verdict.object = object;
        return Ok(verdict);
    }
    let mut ops = Ops::default();
    if kind.is_workload()
        && crate::reshape::apply(&mut object, kind, &sites, &ctx, &mut verdict, &mut ops)?
    {
        sites = locate(&object)?.1;
    }
    // Only workloads know how many pods a template makes; a bare Pod's count is unknown.
    let total = if kind.is_workload() {
        job_pods(&object, &sites)?
    } else {
        None
    };
    let mut any_training = false;
    if kind == Kind::TrainJob {
        any_training |= crate::trainjob::evaluate(&mut object, &ctx, &mut verdict, &mut ops)?;
    }
    for site in &sites {
        any_training |= evaluate_site(&mut object, site, total, &ctx, &mut verdict, &mut ops)?;
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
    verdict.allowed = !verdict.findings.iter().any(|f| f.mode == Mode::Enforce);
    verdict.patch = ops.into_patch();
    verdict.object = object;
    Ok(verdict)
}

impl<'a> Ctx<'a, '_> {
    /// Zones where pods of the same job already run, from the inventory.
    pub(crate) fn siblings(
        &self,
        namespace: &str,
        shape: &crate::classify::Shape<'_>,
    ) -> Option<&'a std::collections::BTreeSet<String>> {
        let (key, value) = shape.identity.as_ref()?;
        self.who.inventory?.sibling_zones(namespace, key, value)
    }
}

/// A catalog type the cluster has no nodes of: the pods would stay Pending.
pub(crate) fn not_in_cluster(
    shape: &crate::classify::Shape<'_>,
    ctx: &Ctx<'_, '_>,
    site: &str,
    verdict: &mut Verdict,
) {
    let (Some(inv), Target::Known(inst, _)) = (ctx.who.inventory, &shape.target) else {
        return;
    };
    let mode = ctx.eff.mode_unknown_instance_type();
    if inv.has_type(&inst.name) || mode == Mode::Off {
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
    });
}

/// Pods in the whole job: the sum over templates that ask for accelerators or EFA.
/// `None` when a template's count is unknown (a bare Pod).
fn job_pods(object: &Value, sites: &[Site]) -> Result<Option<u32>, ObjectError> {
    let mut total = 0u32;
    for site in sites {
        let Some(t) = object.pointer(&site.pointer) else {
            continue;
        };
        let view = PodView::read(t, &site.field)?;
        if view.accelerators().is_none() && view.efa() == 0 {
            continue;
        }
        total = total.saturating_add(match site.pods {
            Some(n) => n,
            None => return Ok(None),
        });
    }
    Ok(Some(total))
}

/// A pod created by a controller from a template that carries trainplace's mark:
/// the workload was judged at submit time with the submitter's identity, so the
/// pod is not judged again for layout. The caller also checks that a trusted
/// controller is asking: anyone can write the mark and an ownerReference on a pod.
fn judged_upstream(object: &Value, kind: Kind) -> bool {
    const OWNERS: [&str; 5] = [
        "Job",
        "PyTorchJob",
        "MPIJob",
        "StatefulSet",
        "LeaderWorkerSet",
    ];
    kind == Kind::Pod
        && annotation(object, MUTATED).is_some()
        && crate::json::items(object, &["metadata", "ownerReferences"])
            .iter()
            .any(|o| {
                o.get("controller").and_then(Value::as_bool) == Some(true)
                    && o.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| OWNERS.contains(&k))
            })
}

/// Classify, plan, judge and rewrite one pod template. Returns whether it is training.
fn evaluate_site(
    object: &mut Value,
    site: &Site,
    total: Option<u32>,
    ctx: &Ctx<'_, '_>,
    verdict: &mut Verdict,
    ops: &mut Ops,
) -> Result<bool, ObjectError> {
    let eff = ctx.eff;
    let missing = || ObjectError::bad(&site.field, "missing");
    let original = object.pointer(&site.pointer).ok_or_else(missing)?;
    let view = PodView::read(original, &site.field)?;
    let mut hints = site.hints.clone();
    if ctx.kind.is_workload() {
        hints.pods = total;
    }
    let shape = match classify(&view, &hints, eff, ctx.who.inventory) {
        Class::NotTraining(_) => return Ok(false),
        Class::Training(shape) => shape,
    };
    let opt = |key: &str| view.annotation(key).or_else(|| annotation(object, key)) == Some("true");
    let state = |set: bool, o: OptIn| {
        if ctx.judged_upstream {
            OptInState::Granted
        } else {
            opt_in_state(set, o, eff, ctx.who)
        }
    };
    let partial_opt_in = state(opt(ALLOW_PARTIAL_NODE), OptIn::AllowPartialNode);
    let multi_az_opt_in = state(opt(ALLOW_MULTI_AZ), OptIn::AllowMultiAz);
    let plan = match &shape.target {
        Target::Known(instance, source) => {
            let shm = shm_size(&view, eff, instance).map_err(|e| {
                ObjectError::bad(
                    format!("metadata.annotations[{}]", crate::annotations::SHM_SIZE),
                    e,
                )
            })?;
            Some(Plan::new(&view, &shape, instance, *source, eff, shm))
        }
        _ => None,
    };
    // Rules judge the template as the validating webhook will see it after this
    // mutation; of what they read, only the EFA count changes.
    let mut after = (*shape).clone();
    if let (Some(plan), Target::Known(instance, _)) = (&plan, &shape.target)
        && plan.adds_efa()
    {
        after.efa = instance.max_efa;
    }
    let siblings = ctx.siblings(&verdict.namespace, &shape);
    not_in_cluster(&shape, ctx, &view.base, verdict);
    verdict.findings.extend(check(&RuleInput {
        view: &view,
        shape: &after,
        eff,
        partial_opt_in,
        multi_az_opt_in,
        siblings,
    }));
    let Some(plan) = plan else { return Ok(true) };
    let site_value = object.pointer_mut(&site.pointer).ok_or_else(missing)?;
    let mut changes = plan.apply(Cursor::root(&mut *site_value, &site.pointer), ops);
    if ctx.kind.is_workload() {
        kueue_topology(object, site, &mut changes, ops);
    }
    if !changes.is_empty() {
        record(
            object.pointer_mut(&site.pointer).ok_or_else(missing)?,
            &site.pointer,
            &changes,
            ops,
        );
        verdict.changes.extend(changes);
    }
    Ok(true)
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
    if crate::json::str_at(object, &["metadata", "labels", KUEUE_QUEUE]).is_none() {
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
        changes.push(Change {
            what: format!("annotation {KUEUE_REQUIRED}={LABEL_ZONE}"),
            why: "Kueue admits the podset into one zone (Topology Aware Scheduling)".into(),
        });
    }
}

/// Write the `trainplace.io/mutated` annotation on the template: one line per change.
fn record(site: &mut Value, pointer: &str, changes: &[Change], ops: &mut Ops) {
    let text = changes
        .iter()
        .map(|c| format!("{}: {}", c.what, c.why))
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(mut ann) = Cursor::root(site, pointer).objects(&["metadata", "annotations"], ops) {
        ann.set(MUTATED, Value::String(text), ops);
    }
}
