//! Classify a pod template: is it a training pod, of how many pods, on which instance
//! type, held in which zones. Pure reading; the result drives planning and rules.

mod shape;
mod target;
mod zones;

pub(crate) use crate::read::podspec::required_node_terms;
pub use crate::read::workload::SiteHints;
pub use shape::{Class, InstanceSource, Shape, Target};
use zones::Zones;
pub use zones::zones;
pub(crate) use zones::{Allowed, affinity_values};

use std::collections::BTreeMap;

use serde_json::Value;

use crate::facts::inventory::Snapshot;
use crate::facts::policy::{Effective, Recognizers};
use crate::read::annotations::{
    JOB_IDENTITY_LABELS, LABEL_ARGO_WORKFLOW, LABEL_CLIQUE, LABEL_COMPLETION_INDEX,
    LABEL_RAY_CLUSTER, LABEL_RAY_SERVE, LABEL_RENDEZVOUS, LABEL_VOLCANO_JOB, TRAINING,
};
use crate::read::devices::Count;
use crate::read::podspec::PodView;
use crate::read::recognize::{JobSize, job_size, rendezvous_label};
use target::target;
use trainplace_catalog::InstanceProfile;
use zones::required_pod_terms;

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
    namespace: &str,
) -> Class<'c> {
    let dra = &view.devices;
    let Some((accel_resource, per_pod)) = requested_accelerators(view) else {
        return Class::NotTraining;
    };
    let labels = view.labels();
    let on = eff.policy.recognizers();
    let operator = hints.operator_env();
    let size = job_size(view, per_pod, on, &operator);
    let identity = job_identity(view, hints, &labels, on, size, namespace);
    let (pods, multi_pod) = pod_count(hints.pods, size);
    // Evidence that the pod belongs to a training job; without any, a GPU pod (an
    // inference server, a notebook) is left alone. Argo's workflow label is on every
    // step's pod (an eval, a tokenizer, a server): it ties a job's pods together where
    // something else says they are several, and says nothing itself. Neither does a
    // Ray cluster's label on a pod KubeRay made for serving (a RayService's cluster,
    // which trainplace admitted as serving and did not sign).
    let serving_ray = labels.contains_key(LABEL_RAY_SERVE)
        && crate::judge::owner::controller(view.pod)
            .and_then(|o| o.get("kind"))
            .and_then(Value::as_str)
            == Some("RayCluster");
    let training = identity
        .as_ref()
        .is_some_and(|(k, _)| k != LABEL_ARGO_WORKFLOW && !(k == LABEL_RAY_CLUSTER && serving_ray))
        || labels.contains_key(LABEL_COMPLETION_INDEX)
        || size.is_some_and(JobSize::multi_pod)
        || view.annotation(TRAINING) == Some("true")
        || eff.policy.training_selector_matches(&labels);
    if !training {
        return Class::NotTraining;
    }
    let identity_ref = identity.as_ref().map(|(k, v)| (k.as_str(), v.as_str()));
    let zones = zones_in(view, identity_ref, inventory);
    let clique_held = required_pod_terms(view.pod, "podAffinity")
        .iter()
        .any(|t| t.get("topologyKey").and_then(Value::as_str) == Some(LABEL_CLIQUE));
    let target = target(
        view,
        hints,
        eff,
        inventory,
        (&accel_resource, per_pod),
        clique_held,
    );
    let known = match &target {
        Target::Known(p, _) => Some(*p),
        _ => None,
    };
    let mut counts = device_counts(view, eff, known, &accel_resource, per_pod);
    // Nodes of the type that advertise more of the resource than its devices share them
    // (time-sliced or MPS replicas under the resource's own name): no pod there holds a
    // whole node.
    if known.is_some_and(|p| {
        inventory
            .is_some_and(|inv| inv.oversubscribed(&p.name, &accel_resource, p.accelerators, true))
    }) {
        counts.shared = true;
    }
    let efa_resource_absent =
        known.and_then(|p| crate::facts::efa_source::efa_resource_absent(p, eff, inventory));
    Class::Training(Box::new(Shape {
        accel_resource,
        per_pod: counts.per_pod,
        shared: counts.shared,
        efa: counts.efa,
        pods,
        multi_pod,
        identity,
        group_label: hints.group_label.clone(),
        target,
        accel_claimed: dra.accelerators.is_some(),
        efa_claimed: dra.efa.is_some(),
        efa_resource_absent,
        channel: dra.channel.clone(),
        clique_held,
        kueue_layers: kueue_layers(hints, inventory),
        network_fit: match (inventory, known, pods) {
            (Some(inv), Some(p), Some(n)) if multi_pod => {
                crate::facts::network_fit::network_fit(inv, &p.name, zones.pinned.as_deref(), n)
            }
            _ => None,
        },
        zones,
    }))
}

/// The accelerator resource and count the pod asks for, from extended resources and
/// DRA claims together (`All` is counted once the type is known); an empty resource
/// for a pod with only EFA or unresolved claims; `None` for a pod with no devices.
fn requested_accelerators(view: &PodView<'_>) -> Option<(String, u32)> {
    let claimed = view.devices.accelerators.as_ref();
    match (view.accelerators(), claimed) {
        (Some((res, n)), c) => Some((
            res.to_string(),
            n.saturating_add(c.map_or(0, |c| c.count.on(0))),
        )),
        (None, Some(c)) => Some((c.resource.clone(), c.count.on(0))),
        (None, None) if view.efa() > 0 || view.claims > 0 => Some((String::new(), 0)),
        (None, None) => None,
    }
}

/// The label that ties the job's pods together: the workload's, a recognised job label
/// on the pod, or the rendezvous the ranks meet at.
fn job_identity(
    view: &PodView<'_>,
    hints: &SiteHints,
    labels: &BTreeMap<String, String>,
    on: &Recognizers,
    size: Option<JobSize>,
    namespace: &str,
) -> Option<(String, String)> {
    let mut identity = hints.identity.clone().or_else(|| {
        JOB_IDENTITY_LABELS
            .iter()
            .filter(|(k, _)| label_recognized(k, on))
            .find_map(|(k, _)| labels.get(*k).map(|v| (k.to_string(), v.clone())))
    });
    // A label that names one pod or one batch Job does not span a job whose ranks are
    // separate pods or Jobs; the rendezvous they all meet at does. Neither does a
    // workload's whose pods are fewer than its launcher says (one workload per rank).
    // A rendezvous label is recomputed, so a written value cannot split the job.
    let outgrown = hints.identity.is_some()
        && match (hints.pods, size) {
            (Some(n), Some(JobSize::Pods(m))) => m > n,
            (Some(n), Some(JobSize::Several)) => n <= 1,
            _ => false,
        };
    let per_object = outgrown
        || identity.as_ref().is_none_or(|(k, _)| {
            k == "batch.kubernetes.io/job-name" || k == "job-name" || k == LABEL_RENDEZVOUS
        });
    if per_object
        && size.is_some_and(JobSize::multi_pod)
        && let Some(r) = rendezvous_label(view, namespace, &[])
    {
        identity = Some((LABEL_RENDEZVOUS.to_string(), r));
    }
    identity
}

/// How many pods the job has, when known, and whether it has more than one.
fn pod_count(workload_pods: Option<u32>, size: Option<JobSize>) -> (Option<u32>, bool) {
    // What the pods' own launchers say wins over a smaller workload count: one Job
    // per rank is one multi-pod job.
    let launched = size.filter(|s| s.multi_pod());
    let pods = match (workload_pods, launched) {
        (Some(n), Some(JobSize::Pods(m))) => Some(n.max(m)),
        (Some(n), Some(JobSize::Several)) if n <= 1 => None,
        (Some(n), _) => Some(n),
        (None, s) => s.or(size).and_then(JobSize::pods),
    };
    let multi_pod = match (workload_pods, launched) {
        (Some(n), None) => n > 1,
        _ => pods.is_none_or(|n| n > 1),
    };
    (pods, multi_pod)
}

/// The template's zones, with a pinned zone named as the cluster names it.
fn zones_in(
    view: &PodView<'_>,
    identity: Option<(&str, &str)>,
    inventory: Option<&Snapshot>,
) -> Zones {
    let mut zones = zones(view.pod, identity);
    if let Some(inv) = inventory {
        // One zone however a label spells it (name or zone id), and a pod bound to a
        // node (`spec.nodeName`, or a hostname selector) runs in that node's zone
        // whatever else it says.
        zones.pinned = zones.pinned.map(|z| inv.zone_name(&z).to_string());
        if let Some(z) = view.pinned_node().and_then(|n| inv.node_zone(n)) {
            zones.pinned = Some(z.to_string());
        }
    }
    zones
}

/// Accelerators and EFA interfaces per pod once the target type is known.
struct Counts {
    per_pod: u32,
    shared: bool,
    efa: u32,
}

fn device_counts(
    view: &PodView<'_>,
    eff: &Effective<'_>,
    known: Option<&InstanceProfile>,
    accel_resource: &str,
    mut per_pod: u32,
) -> Counts {
    let dra = &view.devices;
    let claimed = dra.accelerators.as_ref();
    let accel_all = claimed.is_some_and(|c| c.count == Count::All);
    if accel_all && let Some(p) = known {
        per_pod = per_pod.saturating_add(p.accelerators);
    }
    // Every NeuronCore of the node is every device: the whole node, not a slice.
    let mut shared = view.shared || claimed.is_some_and(|c| c.shared);
    let cores = eff
        .policy
        .catalog
        .accelerator(accel_resource)
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
    Counts {
        per_pod,
        shared,
        efa,
    }
}

/// The network layer labels of the cluster's Kueue Topologies, for a job Kueue queues:
/// Kueue places such a job whole, by these levels, so its layout asks Kueue instead of
/// the scheduler. Empty when the job is not queued or no Topology has these levels.
fn kueue_layers(hints: &SiteHints, inventory: Option<&Snapshot>) -> Vec<&'static str> {
    match inventory {
        Some(inv) if hints.queued => crate::read::annotations::NETWORK_LAYERS
            .into_iter()
            .filter(|l| inv.kueue_has_level(l))
            .collect(),
        _ => Vec::new(),
    }
}
