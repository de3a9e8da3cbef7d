//! The GPU instance types a cluster has, as its nodes advertise them: accelerators and
//! EFA per node, zones, node groups / pools, and a profile for types the catalog lacks.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::facts::catalog::{InstanceProfile, Rdma};
use crate::facts::cluster_objects::NodeFacts;
use crate::read::annotations::{ACCELERATOR_RESOURCES, LABEL_ZONE, RES_EFA};

/// Labels that say which node group / pool / reservation a node belongs to.
const POOL_LABELS: [&str; 3] = [
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "karpenter.k8s.aws/capacity-reservation-id",
];

/// One GPU instance type as the cluster has it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeType {
    pub name: String,
    pub accelerator_resource: String,
    pub accelerators: u32,
    pub efa: u32,
    pub nodes: u32,
    pub zones: BTreeSet<String>,
    /// `label=value` of node groups, node pools and capacity reservations.
    pub pools: BTreeSet<String>,
}

/// Count a node of instance type `itype` (nodes that advertise no accelerator
/// through an extended resource are not a GPU type here).
pub(crate) fn count_node(
    types: &mut BTreeMap<String, NodeType>,
    itype: &str,
    node: &impl NodeFacts,
) {
    let zone = node.label(LABEL_ZONE);
    let Some((res, count)) = ACCELERATOR_RESOURCES
        .iter()
        .map(|r| (*r, node.allocatable(r)))
        .find(|(_, n)| *n > 0)
    else {
        return;
    };
    let t = types.entry(itype.to_string()).or_insert_with(|| NodeType {
        name: itype.to_string(),
        accelerator_resource: res.to_string(),
        ..NodeType::default()
    });
    t.accelerators = t.accelerators.max(count);
    t.efa = t.efa.max(node.allocatable(RES_EFA));
    t.nodes += 1;
    if let Some(zone) = zone
        && !t.zones.contains(zone)
    {
        t.zones.insert(zone.to_string());
    }
    for key in POOL_LABELS {
        if let Some(v) = node.label(key) {
            t.pools.insert(format!("{key}={v}"));
        }
    }
}

/// A profile for a GPU type the catalog lacks, from what its nodes advertise.
pub(crate) fn learned_profile(t: &NodeType) -> (String, InstanceProfile) {
    let profile = InstanceProfile {
        name: t.name.clone(),
        family: "unknown".into(),
        accelerator: t.accelerator_resource.clone(),
        accelerator_resource: t.accelerator_resource.clone(),
        accelerators: t.accelerators,
        accelerator_memory_gi_b: None,
        memory_gi_b: None,
        intra_node: "unknown".into(),
        nvlink: false,
        nvlink_domain_instances: None,
        accelerator_cores: None,
        max_efa: t.efa,
        network_gbps: None,
        rdma: Rdma::None,
        capacity_blocks: None,
        price_per_hour_usd: None,
        shm_default: "32Gi".into(),
        source: format!("cluster inventory: allocatable of {} node(s)", t.nodes),
    };
    (t.name.clone(), profile)
}
