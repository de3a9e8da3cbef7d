//! Classify a pod template: is it a training pod, of how many pods, on which instance
//! type, held in which zones. Pure reading; the result drives planning and rules.

use serde_json::Value;

use crate::facts::catalog::{Catalog, InstanceProfile};
use crate::facts::dra::{Channel, Count};
use crate::facts::inventory::Snapshot;
use crate::facts::policy::{Effective, Recognizers};
use crate::read::annotations::{
    INSTANCE_TYPE, JOB_IDENTITY_LABELS, LABEL_CLIQUE, LABEL_COMPLETION_INDEX, LABEL_HYPERPOD_JOB,
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_JOBSET_NAME, LABEL_RAY_CLUSTER,
    LABEL_RENDEZVOUS, LABEL_REPLICATED_JOB, LABEL_VOLCANO_JOB, LWS_GROUP_KEY, TRAINING, ZONE_KEYS,
};
use crate::read::json::{items, str_at};
use crate::read::podspec::PodView;
pub(crate) use crate::read::podspec::required_node_terms;
use crate::read::recognize::{JobSize, job_size, rendezvous_label};

/// Where the target instance type came from (shown in explanations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceSource {
    NodeSelector,
    NodeAffinity,
    Annotation,
    PolicyDefault,
    /// The only GPU instance type in the cluster.
    Inventory,
    /// The node selection's Karpenter or node group labels reach only this type.
    Selection,
    /// The pod claims a ComputeDomain IMEX channel or is held in an NVLink clique: only
    /// the catalog's multi-node NVLink type (GB200) has those.
    NvlinkDomain,
}

impl InstanceSource {
    pub fn describe(self) -> &'static str {
        match self {
            InstanceSource::NodeSelector => "nodeSelector",
            InstanceSource::NodeAffinity => "required node affinity",
            InstanceSource::Annotation => "annotation trainplace.io/instance-type",
            InstanceSource::PolicyDefault => "the policy default for this namespace",
            InstanceSource::Inventory => "the only GPU instance type in the cluster",
            InstanceSource::Selection => {
                "the node selection's Karpenter or node group labels (the only catalog type they reach)"
            }
            InstanceSource::NvlinkDomain => {
                "the pod's ComputeDomain channel or NVLink clique affinity (only multi-node NVLink instances have them)"
            }
        }
    }
}

#[derive(Debug, Clone)]
pub enum Target<'c> {
    Known(&'c InstanceProfile, InstanceSource),
    Unknown(String, InstanceSource),
    /// Required node affinity allows several types; trainplace will not guess.
    Several(Vec<String>),
    None,
}

/// What the pod's scheduling constraints say about availability zones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zones {
    /// A single zone the pod is pinned to.
    pub pinned: Option<String>,
    /// Node affinity that explicitly allows more than one zone (described).
    pub allows_many: Option<String>,
    /// A topology spread constraint over zones.
    pub spread: bool,
    /// A required pod affinity on the zone topology already holds the job together.
    pub held: bool,
    /// A required pod anti-affinity on a zone key between the job's own pods.
    pub anti: bool,
}

/// What the surrounding workload knows about this template (empty for a bare Pod).
#[derive(Debug, Clone, Default)]
pub struct SiteHints {
    /// How many pods the workload creates from this template, when known.
    pub pods: Option<u32>,
    /// The job identity label the operator will put on the pods.
    pub identity: Option<(String, String)>,
    /// `trainplace.io/instance-type` on the workload's own metadata: used when the
    /// template names no instance type itself.
    pub instance_type: Option<String>,
    /// A label whose value splits the workload into independent jobs (a LeaderWorkerSet
    /// group): affinity terms match it with `matchLabelKeys`.
    pub group_label: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Shape<'c> {
    pub accel_resource: String,
    pub per_pod: u32,
    /// The accelerators are slices of devices (MIG, time-slicing, NeuronCores): never a
    /// whole node, whatever the count.
    pub shared: bool,
    pub efa: u32,
    /// Pods in the job, when known.
    pub pods: Option<u32>,
    pub multi_pod: bool,
    pub identity: Option<(String, String)>,
    /// See [`SiteHints::group_label`].
    pub group_label: Option<String>,
    pub target: Target<'c>,
    pub zones: Zones,
    /// Accelerators counted from DRA claims.
    pub accel_claimed: bool,
    /// EFA interfaces counted from DRA claims (`efa.networking.k8s.aws`).
    pub efa_claimed: bool,
    /// Why nodes of the target type cannot grant `vpc.amazonaws.com/efa` (EFA through
    /// DRA, or no EFA device plugin), when so: trainplace must not add it.
    pub efa_resource_absent: Option<String>,
    /// The pod's ComputeDomain IMEX channel claim.
    pub channel: Option<Channel>,
    /// A required pod affinity on the NVLink clique label already holds the job.
    pub clique_held: bool,
}

#[derive(Debug, Clone)]
pub enum Class<'c> {
    NotTraining,
    Training(Box<Shape<'c>>),
}

/// Ray and Volcano job labels count unless policy switches their recogniser off.
fn label_recognized(key: &str, on: &Recognizers) -> bool {
    match key {
        LABEL_RAY_CLUSTER => on.ray.unwrap_or(true),
        LABEL_VOLCANO_JOB => on.volcano.unwrap_or(true),
        _ => true,
    }
}

pub fn classify<'c>(
    view: &PodView<'_>,
    hints: &SiteHints,
    eff: &Effective<'c>,
    inventory: Option<&'c Snapshot>,
) -> Class<'c> {
    let dra = &view.devices;
    // Extended resources and DRA claims together; `All` is known once the type is.
    let claimed = dra.accelerators.as_ref();
    let (accel_resource, mut per_pod) = match (view.accelerators(), claimed) {
        (Some((res, n)), c) => (
            res.to_string(),
            n.saturating_add(c.map_or(0, |c| c.count.on(0))),
        ),
        (None, Some(c)) => (c.resource.clone(), c.count.on(0)),
        (None, None) if view.efa() > 0 || view.claims > 0 => (String::new(), 0),
        (None, None) => return Class::NotTraining,
    };
    let accel_all = claimed.is_some_and(|c| c.count == Count::All);
    let labels = view.labels();
    let on = eff.policy.recognizers();
    let mut identity = hints.identity.clone().or_else(|| {
        JOB_IDENTITY_LABELS
            .iter()
            .filter(|(k, _)| label_recognized(k, on))
            .find_map(|(k, _)| labels.get(*k).map(|v| (k.to_string(), v.clone())))
    });
    let size = job_size(view, per_pod, on);
    // A label that names one pod or one batch Job does not span a job whose ranks are
    // separate pods or Jobs; the rendezvous they all meet at does.
    // A rendezvous label is recomputed, so a written value cannot split the job.
    let per_object = identity.as_ref().is_none_or(|(k, _)| {
        k == "batch.kubernetes.io/job-name" || k == "job-name" || k == LABEL_RENDEZVOUS
    });
    if per_object
        && size.is_some_and(JobSize::multi_pod)
        && let Some(r) = rendezvous_label(view)
    {
        identity = Some((LABEL_RENDEZVOUS.to_string(), r));
    }
    // What the pods' own launchers say wins over a smaller workload count: one Job
    // per rank is one multi-pod job.
    let launched = size.filter(|s| s.multi_pod());
    let pods = match (hints.pods, launched) {
        (Some(n), Some(JobSize::Pods(m))) => Some(n.max(m)),
        (Some(n), Some(JobSize::Several)) if n <= 1 => None,
        (Some(n), _) => Some(n),
        (None, s) => s.or(size).and_then(JobSize::pods),
    };
    // Evidence that the pod belongs to a training job; without any, a GPU pod (an
    // inference server, a notebook) is left alone.
    let training = identity.is_some()
        || labels.contains_key(LABEL_COMPLETION_INDEX)
        || size.is_some_and(JobSize::multi_pod)
        || view.annotation(TRAINING) == Some("true")
        || eff.policy.training_selector_matches(&labels);
    if !training {
        return Class::NotTraining;
    }
    let multi_pod = match (hints.pods, launched) {
        (Some(n), None) => n > 1,
        _ => pods.is_none_or(|n| n > 1),
    };
    let identity_ref = identity.as_ref().map(|(k, v)| (k.as_str(), v.as_str()));
    let mut zones = zones(view.pod, identity_ref);
    if let Some(inv) = inventory {
        // One zone however a label spells it (name or zone id), and a pod bound to a
        // node by `spec.nodeName` runs in that node's zone whatever else it says.
        zones.pinned = zones.pinned.map(|z| inv.zone_name(&z).to_string());
        if let Some(z) = view.spec_str("nodeName").and_then(|n| inv.node_zone(n)) {
            zones.pinned = Some(z.to_string());
        }
    }
    let clique_held = required_pod_terms(view.pod, "podAffinity")
        .iter()
        .any(|t| t.get("topologyKey").and_then(Value::as_str) == Some(LABEL_CLIQUE));
    let target = target(view, hints, eff, inventory, &accel_resource, clique_held);
    let known = match &target {
        Target::Known(p, _) => Some(*p),
        _ => None,
    };
    if accel_all && let Some(p) = known {
        per_pod = per_pod.saturating_add(p.accelerators);
    }
    // Every NeuronCore of the node is every device: the whole node, not a slice.
    let mut shared = view.shared || claimed.is_some_and(|c| c.shared);
    let cores = eff
        .policy
        .catalog
        .accelerator(&accel_resource)
        .is_some_and(|r| r.cores);
    if cores
        && let Some(p) = known
        && p.accelerator_cores == Some(per_pod)
    {
        per_pod = p.accelerators;
        shared = false;
    }
    let efa = view
        .efa()
        .saturating_add(dra.efa.map_or(0, |c| c.on(known.map_or(0, |p| p.max_efa))));
    let efa_resource_absent =
        known.and_then(|p| crate::facts::efa_source::efa_resource_absent(p, eff, inventory));
    Class::Training(Box::new(Shape {
        accel_resource,
        per_pod,
        shared,
        efa,
        pods,
        multi_pod,
        identity,
        group_label: hints.group_label.clone(),
        target,
        zones,
        accel_claimed: claimed.is_some(),
        efa_claimed: dra.efa.is_some(),
        efa_resource_absent,
        channel: dra.channel.clone(),
        clique_held,
    }))
}

fn target<'c>(
    view: &PodView<'_>,
    hints: &SiteHints,
    eff: &Effective<'c>,
    inventory: Option<&'c Snapshot>,
    resource: &str,
    clique_held: bool,
) -> Target<'c> {
    let catalog = &eff.policy.catalog;
    // The catalog first; a type it lacks may still be known from the nodes themselves.
    // SageMaker HyperPod nodes label their type `ml.p5.48xlarge`: the EC2 type's facts.
    let lookup = |name: &str| catalog.get(name).or_else(|| inventory?.learned(name));
    let resolve =
        |name: String, src| match lookup(&name).or_else(|| lookup(name.strip_prefix("ml.")?)) {
            Some(p) => Target::Known(p, src),
            None => Target::Unknown(name, src),
        };
    // The types the node selection reaches by Karpenter's or node groups' labels: an
    // unknown name elsewhere does not switch the rules off while these are known.
    let reach = crate::judge::selection::reachable(view.pod, catalog, inventory);
    let reached = || match reach.as_deref() {
        Some([only]) => Some(Target::Known(only, InstanceSource::Selection)),
        Some([]) | None => None,
        Some(several) => Some(Target::Several(
            several.iter().map(|p| p.name.clone()).collect(),
        )),
    };
    let or_reached = |t: Target<'c>| match t {
        Target::Unknown(..) => reached().unwrap_or(t),
        t => t,
    };
    for key in [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA] {
        if let Some(t) = str_at(view.pod, &["spec", "nodeSelector", key]) {
            return or_reached(resolve(t.to_string(), InstanceSource::NodeSelector));
        }
    }
    let allowed = affinity_values(view.pod, &[LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA]);
    if let Some(Allowed::Values(mut values)) = allowed {
        values.dedup();
        match values.len() {
            1 => return or_reached(resolve(values.remove(0), InstanceSource::NodeAffinity)),
            0 => {}
            _ => return Target::Several(values),
        }
    }
    if let Some(t) = view
        .annotation(INSTANCE_TYPE)
        .or(hints.instance_type.as_deref())
    {
        // The annotation names the type only where the selection can reach it.
        let named = resolve(t.to_string(), InstanceSource::Annotation);
        let within = match (&named, reach.as_deref()) {
            (Target::Known(p, _), Some(r)) => r.iter().any(|q| q.name == p.name),
            _ => true,
        };
        return if within {
            or_reached(named)
        } else {
            reached().unwrap_or(named)
        };
    }
    if let Some(t) = reached() {
        return t;
    }
    // An IMEX channel or an NVLink clique exists only on multi-node NVLink instances: a
    // GB200 job is judged against GB200 facts, not the namespace's default type.
    if (view.devices.channel.is_some() || clique_held)
        && let Some(t) = domain_target(catalog, inventory)
    {
        return t;
    }
    if let Some(t) = &eff.defaults.instance_type {
        return resolve(t.clone(), InstanceSource::PolicyDefault);
    }
    let pools = eff.defaults.node_pools.as_deref();
    match inventory.map(|s| s.gpu_types(resource, pools)).as_deref() {
        Some([only]) => resolve(only.name.clone(), InstanceSource::Inventory),
        Some(several) if several.len() > 1 => {
            Target::Several(several.iter().map(|t| t.name.clone()).collect())
        }
        _ => Target::None,
    }
}

/// The catalog's multi-node NVLink type for a pod that claims an IMEX channel or is
/// held in a clique.
fn domain_target<'c>(catalog: &'c Catalog, inventory: Option<&'c Snapshot>) -> Option<Target<'c>> {
    let all: Vec<&InstanceProfile> = catalog
        .instances()
        .filter(|p| p.nvlink_domain().is_some())
        .collect();
    // Those the cluster has, when it has any; else the catalog's (and the job is told
    // the cluster has none).
    let present: Vec<&InstanceProfile> = all
        .iter()
        .copied()
        .filter(|p| inventory.is_some_and(|s| s.has_type(&p.name)))
        .collect();
    let domains = if present.is_empty() { all } else { present };
    match domains.as_slice() {
        [only] => Some(Target::Known(only, InstanceSource::NvlinkDomain)),
        [] => None,
        several => Some(Target::Several(
            several.iter().map(|p| p.name.clone()).collect(),
        )),
    }
}

/// What required node affinity allows for a label: a finite list, or anything.
#[derive(Debug, PartialEq)]
pub(crate) enum Allowed {
    Values(Vec<String>),
    Unbounded(String),
}

/// Combine the required node selector terms (ORed) for `keys`. `None` when no term
/// constrains the key at all.
pub(crate) fn affinity_values(pod: &Value, keys: &[&str]) -> Option<Allowed> {
    let terms = required_node_terms(pod);
    let mut any_constrained = false;
    let mut values: Vec<String> = Vec::new();
    let mut unbounded: Option<String> = None;
    for term in terms {
        let exprs: Vec<&Value> = items(term, &["matchExpressions"])
            .iter()
            .filter(|e| {
                e.get("key")
                    .and_then(Value::as_str)
                    .is_some_and(|k| keys.contains(&k))
            })
            .collect();
        if exprs.is_empty() {
            unbounded
                .get_or_insert_with(|| "a node selector term that does not constrain it".into());
            continue;
        }
        any_constrained = true;
        let mut term_values: Option<Vec<String>> = None;
        for e in exprs {
            let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
            let vals: Vec<String> = items(e, &["values"])
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            if op == "In" {
                term_values = Some(match term_values {
                    Some(prev) => prev.into_iter().filter(|v| vals.contains(v)).collect(),
                    None => vals,
                });
            } else if term_values.is_none() {
                unbounded.get_or_insert_with(|| format!("operator {op}"));
            }
        }
        match term_values {
            Some(v) => values.extend(v),
            None => {
                unbounded.get_or_insert_with(|| "a term without an In list".into());
            }
        }
    }
    if !any_constrained {
        return None;
    }
    match unbounded {
        Some(why) => Some(Allowed::Unbounded(why)),
        None => {
            values.sort();
            Some(Allowed::Values(values))
        }
    }
}

/// Labels an operator sets on every pod of a job (or of a LeaderWorkerSet group) alike;
/// JobSet's replicated-job name is how a training runtime holds its node pods.
const SPANNING_LABELS: [&str; 10] = [
    LABEL_JOBSET_NAME,
    LABEL_REPLICATED_JOB,
    "training.kubeflow.org/job-name",
    LWS_GROUP_KEY,
    "leaderworkerset.sigs.k8s.io/name",
    "trainer.kubeflow.org/trainjob-name",
    LABEL_RAY_CLUSTER,
    crate::read::annotations::LABEL_RAY_NODE,
    LABEL_VOLCANO_JOB,
    LABEL_HYPERPOD_JOB,
];

/// A pod affinity term that selects every pod of the job and only those (its identity
/// label), so it holds the job together and not some other workload: by value, or
/// through `matchLabelKeys` naming the identity label (the scheduler adds the pod's own
/// value; how a RayJob's or a training runtime's template holds each of its jobs
/// together). A term that also asks for another label, another namespace or a
/// mismatch selects only part of the job (a Master held apart from its Workers).
fn selects_job(term: &Value, identity: Option<(&str, &str)>) -> bool {
    let Some((key, value)) = identity else {
        return false;
    };
    let selector = term.get("labelSelector");
    let labels = selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object);
    let exprs = items(term, &["labelSelector", "matchExpressions"]);
    let keys = items(term, &["matchLabelKeys"]);
    let on_key = |e: &Value| e.get("key").and_then(Value::as_str) == Some(key);
    let names_value = |e: &Value| {
        on_key(e)
            && e.get("operator").and_then(Value::as_str) == Some("In")
            && items(e, &["values"])
                .iter()
                .any(|v| v.as_str() == Some(value))
    };
    // Other labels that every pod of one job (or one LeaderWorkerSet group) carries
    // alike: their operators set them, so no role can be labelled apart.
    let spans = |k: &str| k == key || SPANNING_LABELS.contains(&k);
    let narrows = labels.is_some_and(|m| m.keys().any(|k| !spans(k)))
        || exprs.iter().any(|e| {
            !(names_value(e)
                || (on_key(e) && e.get("operator").and_then(Value::as_str) == Some("Exists")))
        })
        || keys.iter().any(|k| !k.as_str().is_some_and(spans))
        || !items(term, &["mismatchLabelKeys"]).is_empty()
        || term
            .get("namespaces")
            .is_some_and(|n| n.as_array().is_none_or(|a| !a.is_empty()))
        || term.get("namespaceSelector").is_some();
    if narrows {
        return false;
    }
    let has_selector = selector.is_some_and(|s| s.as_object().is_some_and(|m| !m.is_empty()));
    labels.and_then(|m| m.get(key)).and_then(Value::as_str) == Some(value)
        || exprs.iter().any(names_value)
        || (has_selector && keys.iter().any(|k| k.as_str() == Some(key)))
}

fn required_pod_terms<'v>(pod: &'v Value, kind: &str) -> &'v [Value] {
    items(
        pod,
        &[
            "spec",
            "affinity",
            kind,
            "requiredDuringSchedulingIgnoredDuringExecution",
        ],
    )
}

fn on_zone_key(term: &Value) -> bool {
    term.get("topologyKey")
        .and_then(Value::as_str)
        .is_some_and(|k| ZONE_KEYS.contains(&k))
}

pub fn zones(pod: &Value, identity: Option<(&str, &str)>) -> Zones {
    let mut z = Zones::default();
    for key in ZONE_KEYS {
        if let Some(v) = str_at(pod, &["spec", "nodeSelector", key]) {
            z.pinned = Some(v.to_string());
        }
    }
    if z.pinned.is_none() {
        match affinity_values(pod, &ZONE_KEYS) {
            Some(Allowed::Values(mut v)) => {
                v.dedup();
                if v.len() == 1 {
                    z.pinned = v.pop();
                } else if v.len() > 1 {
                    z.allows_many = Some(format!(
                        "required node affinity allows zones {}",
                        v.join(", ")
                    ));
                }
            }
            Some(Allowed::Unbounded(why)) => {
                z.allows_many = Some(format!("required node affinity on the zone uses {why}"));
            }
            None => {}
        }
    }
    z.spread = items(pod, &["spec", "topologySpreadConstraints"])
        .iter()
        .any(on_zone_key);
    // Only an affinity over the job's own pods holds the job in one zone: one with an
    // empty selector or towards another workload (CoreDNS runs in every zone) does not.
    z.held = required_pod_terms(pod, "podAffinity")
        .iter()
        .any(|t| on_zone_key(t) && selects_job(t, identity));
    z.anti = required_pod_terms(pod, "podAntiAffinity")
        .iter()
        .any(|t| on_zone_key(t) && selects_job(t, identity));
    z
}
