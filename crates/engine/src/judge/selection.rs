//! Which catalog instance types a pod's node selection can reach, from the labels
//! Karpenter puts on the nodes it launches (instance family, size, GPU and accelerator
//! counts) and, with a cluster inventory, the node pools and node groups whose nodes
//! are of each type. A `trainplace.io/instance-type` annotation is text; the selection
//! is where the pods land.
//! <https://karpenter.sh/docs/reference/instance-types/> (well-known labels)

use serde_json::Value;

use crate::facts::inventory::Snapshot;
use crate::read::annotations::{LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, RES_NVIDIA_GPU};
use crate::read::json::items;
use crate::read::podspec::required_node_terms;
use trainplace_catalog::{Catalog, InstanceProfile};

const FAMILY: &str = "karpenter.k8s.aws/instance-family";
const SIZE: &str = "karpenter.k8s.aws/instance-size";
const GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
const ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
/// The GPU's name in lower case (`h100`, `l40s`, `a10g`): the catalog's family.
const GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
/// Another accelerator's name (`trainium`, `inferentia`).
const ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
/// Karpenter's labels, on the nodes it launches only.
const KARPENTER: [&str; 6] = [
    FAMILY,
    SIZE,
    GPU_COUNT,
    ACCELERATOR_COUNT,
    GPU_NAME,
    ACCELERATOR_NAME,
];
/// GPU Feature Discovery's product label (`NVIDIA-H100-80GB-HBM3`, `NVIDIA-A10G`,
/// `Tesla-T4`): a value reaches the NVIDIA types whose GPU (the catalog's family, `h100`)
/// is one of its dash-separated words. Like Karpenter's labels it may be absent from a
/// node (GFD not deployed), so an exclusion reaches every type.
/// <https://github.com/NVIDIA/k8s-device-plugin/tree/main/docs/gpu-feature-discovery>
const GPU_PRODUCT: &str = "nvidia.com/gpu.product";

/// The same facts under other names: EKS Auto Mode's node pools label their nodes with
/// Karpenter's attributes under `eks.amazonaws.com/`
/// (<https://docs.aws.amazon.com/eks/latest/userguide/create-node-pool.html>), and GPU
/// Feature Discovery labels a GPU node with its GPU count.
const ALIASES: [(&str, &str); 5] = [
    ("eks.amazonaws.com/instance-family", FAMILY),
    ("eks.amazonaws.com/instance-size", SIZE),
    ("eks.amazonaws.com/instance-gpu-count", GPU_COUNT),
    ("eks.amazonaws.com/instance-gpu-name", GPU_NAME),
    ("nvidia.com/gpu.count", GPU_COUNT),
];

/// Every label by which a selection reaches types here, aliases included (the exported
/// policies judge no type for a pod that selects by one, rather than the wrong one).
pub(crate) fn selection_labels() -> impl Iterator<Item = &'static str> {
    KARPENTER
        .into_iter()
        .chain([GPU_PRODUCT])
        .chain(ALIASES.iter().map(|(alias, _)| *alias))
}

/// The label this module reads `key` as.
fn canonical(key: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == key)
        .map_or(key, |(_, k)| k)
}

/// Node pool and node group labels: which types they hold comes from the inventory.
const POOLS: [&str; 3] = [
    "karpenter.sh/nodepool",
    "eks.amazonaws.com/nodegroup",
    "alpha.eksctl.io/nodegroup-name",
];

/// One node selector requirement on a label this module reads.
struct Requirement<'v> {
    key: &'v str,
    operator: &'v str,
    values: Vec<&'v str>,
}

fn read(key: &str, inventory: Option<&Snapshot>) -> bool {
    KARPENTER.contains(&key) || key == GPU_PRODUCT || (inventory.is_some() && POOLS.contains(&key))
}

/// [`read`], or an instance-type label: read beside the others, so that of two terms
/// (`instance-type In [p5.48xlarge]` or `instance-family In [p5e]`) each reaches only
/// its own types.
fn read_with_types(key: &str, inventory: Option<&Snapshot>) -> bool {
    read(key, inventory) || [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA].contains(&key)
}

fn requirements<'v>(exprs: &'v [Value], inventory: Option<&Snapshot>) -> Vec<Requirement<'v>> {
    exprs
        .iter()
        .filter_map(|e| {
            let key = canonical(e.get("key")?.as_str()?);
            read_with_types(key, inventory).then(|| Requirement {
                key,
                operator: e.get("operator").and_then(Value::as_str).unwrap_or(""),
                values: items(e, &["values"])
                    .iter()
                    .filter_map(Value::as_str)
                    .collect(),
            })
        })
        .collect()
}

/// The value a type's nodes carry for `key` (`None`: the label is absent). Karpenter
/// puts `instance-gpu-count` on GPU types only and `instance-accelerator-count` on the
/// others' accelerators only (Neuron, Inferentia): `Exists`, `Gt` and `Lt` match no
/// node without the label.
fn label(i: &InstanceProfile, key: &str) -> Option<String> {
    let (family, size) = i.name.split_once('.').unwrap_or((&i.name, ""));
    let nvidia = i.accelerator_resource == RES_NVIDIA_GPU;
    let devices = i.accelerators > 0;
    match key {
        FAMILY => Some(family.to_string()),
        SIZE => Some(size.to_string()),
        GPU_COUNT => (nvidia && devices).then(|| i.accelerators.to_string()),
        ACCELERATOR_COUNT => (!nvidia && devices).then(|| i.accelerators.to_string()),
        GPU_NAME => (nvidia && devices).then(|| i.family.clone()),
        ACCELERATOR_NAME => (!nvidia && devices).then(|| i.family.clone()),
        LABEL_INSTANCE_TYPE | LABEL_INSTANCE_TYPE_BETA => Some(i.name.clone()),
        _ => None,
    }
}

fn holds(r: &Requirement<'_>, i: &InstanceProfile, inventory: Option<&Snapshot>) -> bool {
    if POOLS.contains(&r.key) {
        let in_pool = |v: &str| {
            inventory
                .and_then(|s| s.types.get(&i.name))
                .is_some_and(|t| t.pools.contains(&format!("{}={v}", r.key)))
        };
        return match r.operator {
            "In" => r.values.iter().any(|v| in_pool(v)),
            "NotIn" => !r.values.iter().all(|v| in_pool(v)),
            _ => true,
        };
    }
    // Karpenter writes its labels only on the nodes it launches: a node of a managed
    // node group (or a capacity block) of any type carries none, and `NotIn` or
    // `DoesNotExist` matches it. Such a requirement reaches every type.
    if (KARPENTER.contains(&r.key) || r.key == GPU_PRODUCT)
        && matches!(r.operator, "NotIn" | "DoesNotExist")
    {
        return true;
    }
    if r.key == GPU_PRODUCT {
        let nvidia = i.accelerator_resource == RES_NVIDIA_GPU && i.accelerators > 0;
        let names = |v: &str| v.split('-').any(|w| w.eq_ignore_ascii_case(&i.family));
        return match r.operator {
            "In" => nvidia && r.values.iter().any(|v| names(v)),
            "Exists" => nvidia,
            _ => true,
        };
    }
    let value = label(i, r.key);
    let number = |v: &str| v.parse::<i64>().ok();
    match (r.operator, value.as_deref()) {
        ("In", Some(v)) => r.values.contains(&v),
        ("In", None) => false,
        ("NotIn", v) => v.is_none_or(|v| !r.values.contains(&v)),
        ("Exists", v) => v.is_some(),
        ("DoesNotExist", v) => v.is_none(),
        ("Gt", Some(v)) => number(v) > r.values.first().and_then(|b| number(b)),
        ("Lt", Some(v)) => number(v)
            .zip(r.values.first().and_then(|b| number(b)))
            .is_some_and(|(v, b)| v < b),
        _ => false,
    }
}

/// The types the pod's selection reaches, when it selects by any label read here
/// (`None`: it does not, and says nothing about the type): the catalog's, and those the
/// inventory learned from nodes the catalog does not list (a node group of g5.24xlarge
/// is judged on its own GPUs, not on the policy's default type).
pub(crate) fn reachable<'c>(
    pod: &Value,
    catalog: &'c Catalog,
    inventory: Option<&'c Snapshot>,
) -> Option<Vec<&'c InstanceProfile>> {
    let selector: Vec<(String, Value)> = pod
        .get("spec")
        .and_then(|s| s.get("nodeSelector"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        serde_json::json!({"key": k, "operator": "In", "values": [v]}),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let selector_exprs: Vec<Value> = selector.into_iter().map(|(_, e)| e).collect();
    let from_selector = requirements(&selector_exprs, inventory);
    let terms: Vec<Vec<Requirement<'_>>> = required_node_terms(pod)
        .iter()
        .map(|t| requirements(items(t, &["matchExpressions"]), inventory))
        .collect();
    // Only a selection by a label read here (not the instance type alone) says which
    // types it reaches.
    let selects = |rs: &[Requirement<'_>]| rs.iter().any(|r| read(r.key, inventory));
    if !selects(&from_selector) && !terms.iter().any(|t| selects(t)) {
        return None;
    }
    Some(
        catalog
            .instances()
            .chain(
                inventory
                    .into_iter()
                    .flat_map(Snapshot::learned_profiles)
                    .filter(|p| catalog.get(&p.name).is_none()),
            )
            .filter(|i| from_selector.iter().all(|r| holds(r, i, inventory)))
            .filter(|i| {
                terms.is_empty()
                    || terms
                        .iter()
                        .any(|t| t.iter().all(|r| holds(r, i, inventory)))
            })
            .collect(),
    )
}
