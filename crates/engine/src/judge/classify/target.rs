//! Which instance type a template targets: the node it is bound to, its node selector,
//! required node affinity, annotation, the types its node selection reaches, an NVLink domain, the policy
//! default, or the cluster's only GPU type.

use super::shape::{InstanceSource, Target};
use super::zones::{Allowed, affinity_values};
use crate::facts::inventory::Snapshot;
use crate::facts::policy::Effective;
use crate::facts::whole_node::{holds, offers_resource};
use crate::read::annotations::{
    INSTANCE_TYPE, LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, hyperpod_type,
};
use crate::read::json::str_at;
use crate::read::podspec::PodView;
use crate::read::workload::SiteHints;
use trainplace_catalog::{Catalog, InstanceProfile};

pub(super) fn target<'c>(
    view: &PodView<'_>,
    hints: &SiteHints,
    eff: &Effective<'c>,
    inventory: Option<&'c Snapshot>,
    (resource, per_pod): (&str, u32),
    clique_held: bool,
) -> Target<'c> {
    let catalog = &eff.policy.catalog;
    let names = Names {
        catalog,
        inventory,
        pod: (resource, per_pod),
        // The types the node selection reaches by Karpenter's or node groups' labels: an
        // unknown name elsewhere does not switch the rules off while these are known.
        reach: crate::judge::selection::reachable(view.pod, catalog, inventory)
            .map(|types| fitting(catalog, types, resource, per_pod)),
    };
    // A bound (or hostname-pinned) pod runs on its node's type, whatever its selection
    // says.
    if let Some(t) = view.pinned_node().and_then(|n| inventory?.node_type(n)) {
        let source = if view.spec_str("nodeName").is_some() {
            InstanceSource::NodeName
        } else {
            InstanceSource::Hostname
        };
        return names.resolve(t.to_string(), source);
    }
    if let Some(t) = named(view, hints, &names) {
        return t;
    }
    if let Some(t) = names.reached() {
        return t;
    }
    // An IMEX channel or an NVLink clique exists only on multi-node NVLink instances: a
    // GB200 job is judged against GB200 facts, not the namespace's default type.
    if (view.devices.channel.is_some() || clique_held)
        && let Some(t) = domain_target(catalog, inventory)
    {
        return t;
    }
    // A selection by Karpenter's or node groups' labels that reaches no catalog type
    // excludes the default type and every GPU type of the cluster the catalog knows too
    // (they would be reached): the type is unknown, not the default (family `g6` with 4
    // GPUs was judged, and pinned, as the default p5.48xlarge).
    if names.reach.as_ref().is_some_and(Vec::is_empty) {
        return Target::None;
    }
    if let Some(t) = &eff.defaults.instance_type {
        let default = names.resolve(t.clone(), InstanceSource::PolicyDefault);
        match default {
            // The default type offers none of the pod's accelerators (a Trainium pod
            // under a p5 default): the pod can only land on types that do, and where the
            // catalog lists none (Gaudi), on a type it does not know.
            Target::Known(p, _)
                if !resource.is_empty() && !offers_resource(catalog, p, resource) =>
            {
                let types = fitting(
                    catalog,
                    catalog
                        .instances()
                        .filter(|i| offers_resource(catalog, i, resource))
                        .collect(),
                    resource,
                    per_pod,
                );
                return match types.as_slice() {
                    [] => Target::None,
                    [only] => Target::Known(only, InstanceSource::Selection),
                    several => Target::Several(several.iter().map(|p| p.name.clone()).collect()),
                };
            }
            _ => return default,
        }
    }
    let pools = eff.defaults.node_pools.as_deref();
    match inventory.map(|s| s.gpu_types(resource, pools)).as_deref() {
        Some([only]) => names.resolve(only.name.clone(), InstanceSource::Inventory),
        Some(several) if several.len() > 1 => names.among(
            several.iter().map(|t| t.name.clone()).collect(),
            InstanceSource::Inventory,
        ),
        _ => Target::None,
    }
}

/// Of the types a selection reaches, those a pod of `per_pod` accelerators fits on: the
/// scheduler binds it to no node with fewer, and Karpenter launches none (a selection
/// of family `p5` reaches p5.4xlarge, whose one GPU is no place for 8). All of them
/// when none fits, so the request is judged impossible.
/// <https://karpenter.sh/docs/concepts/scheduling/>
fn fitting<'c>(
    catalog: &Catalog,
    types: Vec<&'c InstanceProfile>,
    resource: &str,
    per_pod: u32,
) -> Vec<&'c InstanceProfile> {
    // A type that offers another accelerator (a GPU pod's selection reaching trn2)
    // has none of the pod's: no place for it either. A count the catalog does not give
    // (NeuronCores on trn2) is not too small.
    let too_small = |p: &InstanceProfile| {
        !offers_resource(catalog, p, resource)
            || holds(catalog, p, resource).is_some_and(|n| n < per_pod)
    };
    if types.iter().all(|p| too_small(p)) {
        // None fits: judged on those that offer the pod's accelerator (impossible), or
        // on all when none does.
        let offering: Vec<&'c InstanceProfile> = types
            .iter()
            .copied()
            .filter(|p| offers_resource(catalog, p, resource))
            .collect();
        return if offering.is_empty() { types } else { offering };
    }
    types.into_iter().filter(|p| !too_small(p)).collect()
}

/// Where instance type names are looked up, and the types the node selection reaches.
struct Names<'c, 'r> {
    catalog: &'c Catalog,
    inventory: Option<&'c Snapshot>,
    /// The pod's accelerator resource and its count per pod.
    pod: (&'r str, u32),
    reach: Option<Vec<&'c InstanceProfile>>,
}

impl<'c> Names<'c, '_> {
    /// Several types the pod may land on (a required affinity's `In` list, the GPU
    /// types of the cluster): those it fits on, as a selection's reach is narrowed. The
    /// scheduler binds an 8-GPU pod to no 4-GPU node, so a p5 job on a fleet that also
    /// runs g5 is judged on p5, not refused as impossible on g5. A name neither the
    /// catalog nor the cluster knows leaves them all.
    fn among(&self, values: Vec<String>, src: InstanceSource) -> Target<'c> {
        let known: Option<Vec<&'c InstanceProfile>> = values
            .iter()
            .map(|v| match self.resolve(v.clone(), src) {
                Target::Known(p, _) => Some(p),
                _ => None,
            })
            .collect();
        let Some(known) = known else {
            return Target::Several(values);
        };
        let (resource, per_pod) = self.pod;
        match fitting(self.catalog, known, resource, per_pod).as_slice() {
            [] => Target::Several(values),
            [only] => Target::Known(only, src),
            several => Target::Several(several.iter().map(|p| p.name.clone()).collect()),
        }
    }

    /// The catalog first; a type it lacks may still be known from the nodes themselves.
    /// SageMaker HyperPod nodes label their type `ml.p5.48xlarge`: the EC2 type's facts.
    fn resolve(&self, name: String, src: InstanceSource) -> Target<'c> {
        let lookup = |name: &str| {
            self.catalog
                .get(name)
                .or_else(|| self.inventory?.learned(name))
        };
        match lookup(&name).or_else(|| lookup(hyperpod_type(&name)?)) {
            Some(p) => Target::Known(p, src),
            None => Target::Unknown(name, src),
        }
    }

    fn reached(&self) -> Option<Target<'c>> {
        match self.reach.as_deref() {
            Some([only]) => Some(Target::Known(only, InstanceSource::Selection)),
            Some([]) | None => None,
            Some(several) => Some(Target::Several(
                several.iter().map(|p| p.name.clone()).collect(),
            )),
        }
    }

    fn or_reached(&self, t: Target<'c>) -> Target<'c> {
        match t {
            Target::Unknown(..) => self.reached().unwrap_or(t),
            t => t,
        }
    }
}

/// The type the template names itself: by node selector, required node affinity, or
/// annotation (its own or the workload's).
fn named<'c>(view: &PodView<'_>, hints: &SiteHints, names: &Names<'c, '_>) -> Option<Target<'c>> {
    for key in [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA] {
        if let Some(t) = str_at(view.pod, &["spec", "nodeSelector", key]) {
            return Some(
                names.or_reached(names.resolve(t.to_string(), InstanceSource::NodeSelector)),
            );
        }
    }
    let allowed = affinity_values(view.pod, &[LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA]);
    if let Some(Allowed::Values(mut values)) = allowed {
        values.dedup();
        match values.len() {
            1 => {
                let t = names.resolve(values.remove(0), InstanceSource::NodeAffinity);
                return Some(names.or_reached(t));
            }
            0 => {}
            _ => return Some(names.among(values, InstanceSource::NodeAffinity)),
        }
    }
    let t = view
        .annotation(INSTANCE_TYPE)
        .or(hints.instance_type.as_deref())?;
    // The annotation names the type only where the selection can reach it.
    let named = names.resolve(t.to_string(), InstanceSource::Annotation);
    let within = match (&named, names.reach.as_deref()) {
        (Target::Known(p, _), Some(r)) => r.iter().any(|q| q.name == p.name),
        _ => true,
    };
    Some(if within {
        names.or_reached(named)
    } else {
        names.reached().unwrap_or(named)
    })
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
