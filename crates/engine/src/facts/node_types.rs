//! The GPU instance types a cluster has, as its nodes advertise them: accelerators and
//! EFA per node, zones, node groups / pools, and a profile for types the catalog lacks.
//! Tallied node by node in `node_index.rs`.

use std::collections::BTreeSet;

use serde::Serialize;

use trainplace_catalog::{InstanceProfile, Rdma};

/// Labels that say which node group / pool / reservation a node belongs to.
pub(crate) const POOL_LABELS: [&str; 3] = [
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
    /// The fewest any of its nodes advertises (below `accelerators` where node pools of
    /// the type differ: one time-sliced, one not).
    pub fewest_accelerators: u32,
    pub efa: u32,
    pub nodes: u32,
    pub zones: BTreeSet<String>,
    /// `label=value` of node groups, node pools and capacity reservations.
    pub pools: BTreeSet<String>,
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
