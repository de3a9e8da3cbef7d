//! What a whole node of each catalog type holds of each accelerator resource: the
//! device plugin's resource (`nvidia.com/gpu: 8` on a p5), the same devices under
//! another name of the family (`aws.amazon.com/neurondevice`), and device cores
//! (`aws.amazon.com/neuroncore: 32` on a trn1). Slices (MIG, time-sliced replicas) are
//! no whole node on any type. Strict mode compares a pod's count with these.

use std::collections::BTreeMap;

use trainplace_catalog::{Catalog, InstanceProfile};

/// Whether a type offers the accelerator `resource` names: its own resource, or
/// another name of its devices' family (NeuronCores of a Neuron type), in whatever
/// count.
pub(crate) fn offers_resource(catalog: &Catalog, inst: &InstanceProfile, resource: &str) -> bool {
    inst.accelerator_resource == resource
        || catalog
            .family_of(resource)
            .is_some_and(|f| catalog.family_of(&inst.accelerator_resource) == Some(f))
}

/// How many of `resource` a whole `inst` node holds, when it offers that resource.
pub(crate) fn holds(catalog: &Catalog, inst: &InstanceProfile, resource: &str) -> Option<u32> {
    if resource == inst.accelerator_resource {
        return Some(inst.accelerators);
    }
    let named = catalog.accelerator(resource)?;
    if named.name.ends_with('*') || !offers_resource(catalog, inst, resource) {
        return None;
    }
    if named.cores {
        return inst.accelerator_cores;
    }
    (!named.shared).then_some(inst.accelerators)
}

/// Whether `inst` offers `resource` in a count the catalog does not give: device cores
/// of its accelerators' family on a type with no `acceleratorCores` (trn2's
/// `aws.amazon.com/neuroncore`, whose count its node's logical-core setting decides).
/// Strict mode refuses such a pod where its selection reaches that type: a whole node
/// cannot be shown.
pub(crate) fn uncounted(catalog: &Catalog, inst: &InstanceProfile, resource: &str) -> bool {
    resource != inst.accelerator_resource
        && catalog.accelerator(resource).is_some_and(|named| {
            named.cores
                && !named.name.ends_with('*')
                && inst.accelerator_cores.is_none()
                && catalog.family_of(&inst.accelerator_resource) == Some(&named.family)
        })
}

/// Every resource some catalog type offers whole, with what each type holds of it.
pub(crate) fn offers(catalog: &Catalog) -> BTreeMap<String, BTreeMap<String, u32>> {
    let mut names: Vec<&str> = catalog
        .instances()
        .map(|i| i.accelerator_resource.as_str())
        .collect();
    names.extend(
        catalog
            .accelerator_resources()
            .iter()
            .map(|r| r.name.as_str())
            .filter(|n| !n.ends_with('*')),
    );
    let mut out: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    for resource in names {
        for inst in catalog.instances() {
            if let Some(n) = holds(catalog, inst, resource) {
                out.entry(resource.to_string())
                    .or_default()
                    .insert(inst.name.clone(), n);
            }
        }
    }
    out
}
