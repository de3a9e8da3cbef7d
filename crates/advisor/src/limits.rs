//! How large one job's cluster can be, and the plan that stays inside:
//!
//! - EKS: at most 450 nodes per managed nodegroup and 30 managed nodegroups per cluster
//!   (default quotas, adjustable; <https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html>).
//!   Larger jobs get several nodegroups of at most 450 nodes; one of the 30 is the
//!   system nodegroup.
//! - Cluster placement groups: one AZ; AWS recommends launching a group's instances in one
//!   request, and a later launch into a full group fails with insufficient capacity
//!   (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html>). Each
//!   nodegroup launches on its own, so each gets a placement group of its own.
//! - Subnet addresses: eksctl gives every network card of an `efaEnabled` node an `efa`
//!   (EFA with ENA) interface, each with a private IPv4 address
//!   (<https://github.com/eksctl-io/eksctl/blob/main/pkg/cfn/builder/network_interfaces.go>;
//!   EFA-only interfaces have none: <https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/create-efa.html>):
//!   32 addresses per p5.48xlarge before any pod's. eksctl's default VPC
//!   (192.168.0.0/16) has /19 subnets, 8,187 usable addresses each (AWS keeps 5 per subnet:
//!   <https://docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html>), about 240 such
//!   nodes. A larger job gets a VPC whose GPU nodegroups each have a /18 private subnet
//!   (16,379 addresses, 450 nodes of 32 interfaces and their job pod) in the job's zone,
//!   from extra /16 CIDR blocks: a VPC holds 5 CIDR blocks by default
//!   (<https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html>), so 4 extra
//!   blocks of 4 subnets, 16 GPU nodegroups.
//! - vCPU quotas: running On-Demand instances count against the account's per-family vCPU
//!   quota ("Running On-Demand P instances", L-417A185B; G and VT, L-DB2E81BA; Trn,
//!   L-2C3B7624; <https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html>).
//!   The plan states the vCPUs it needs and `aws-cli.sh` checks the quota before it
//!   creates nodes.

use trainplace_catalog::InstanceProfile;

use crate::recommend::{CapacityPlan, Recommendation};
use crate::warnings::Warning;

pub const NODES_PER_MANAGED_NODEGROUP: u32 = 450;
pub const MANAGED_NODEGROUPS_PER_CLUSTER: u32 = 30;
/// Usable addresses of one of eksctl's default private subnets (a /19).
pub const DEFAULT_SUBNET_ADDRESSES: u32 = 8_187;
/// Usable addresses of a /18, the private subnet of one GPU nodegroup in a large plan.
pub const GPU_SUBNET_ADDRESSES: u32 = 16_379;
/// GPU subnets the VPC's extra CIDR blocks hold: 4 blocks (5 per VPC by default, one
/// the primary) of 4 /18 subnets.
pub const MAX_GPU_SUBNETS: u32 = 16;

/// Private IPv4 addresses one node of `p` takes at least: one per EFA interface (or the
/// primary interface's), and the job pod's.
pub fn addresses_per_node(p: &InstanceProfile) -> u32 {
    p.max_efa.max(1) + 1
}

/// vCPUs of an instance type (the EC2 instance type pages), for the quota check.
pub fn vcpus(instance_type: &str) -> Option<u32> {
    Some(match instance_type {
        "p4d.24xlarge" | "p4de.24xlarge" | "g6e.24xlarge" => 96,
        "p5.48xlarge" | "p5e.48xlarge" | "p5en.48xlarge" | "p6-b200.48xlarge"
        | "p6-b300.48xlarge" | "trn2.48xlarge" | "g5.48xlarge" | "g6.48xlarge" | "g6e.48xlarge" => {
            192
        }
        "trn1.32xlarge" | "trn1n.32xlarge" => 128,
        "g6e.12xlarge" | "g5.12xlarge" | "g4dn.12xlarge" => 48,
        "p5.4xlarge" => 16,
        "g6e.xlarge" | "g6.xlarge" | "g5.xlarge" => 4,
        _ => return None,
    })
}

/// The On-Demand vCPU quota the type counts against: (quota code, name).
pub fn vcpu_quota(instance_type: &str) -> Option<(&'static str, &'static str)> {
    let family = instance_type.split('.').next().unwrap_or_default();
    if family.starts_with('p') {
        Some(("L-417A185B", "Running On-Demand P instances"))
    } else if family.starts_with('g') {
        Some(("L-DB2E81BA", "Running On-Demand G and VT instances"))
    } else if family.starts_with("trn") {
        Some(("L-2C3B7624", "Running On-Demand Trn instances"))
    } else {
        None
    }
}

/// The on-demand GPU nodegroups' sizes: `nodes` in as few nodegroups of at most 450 as
/// hold it, evenly (1,250 -> 417, 417, 416).
pub fn nodegroup_sizes(nodes: u32) -> Vec<u32> {
    let groups = nodes.div_ceil(NODES_PER_MANAGED_NODEGROUP).max(1);
    (0..groups)
        .map(|i| nodes / groups + u32::from(i < nodes % groups))
        .collect()
}

/// Whether the job's nodes need more addresses than one default eksctl subnet holds, so
/// each GPU nodegroup gets a /18 subnet of its own.
pub fn needs_large_subnets(rec: &Recommendation) -> bool {
    !matches!(rec.capacity, CapacityPlan::Existing { .. })
        && rec.shape.nodes * addresses_per_node(&rec.instance) > DEFAULT_SUBNET_ADDRESSES
}

/// Why the plan cannot be built inside the limits, if it cannot: the GPU nodegroups
/// (`groups`) exceed the managed nodegroups of a cluster, or the GPU subnets a VPC holds.
pub fn refusal(rec: &Recommendation, groups: u32) -> Option<String> {
    let per_node = addresses_per_node(&rec.instance);
    let most_groups = (MANAGED_NODEGROUPS_PER_CLUSTER - 1).min(if needs_large_subnets(rec) {
        MAX_GPU_SUBNETS
    } else {
        u32::MAX
    });
    if groups <= most_groups {
        return None;
    }
    let most_nodes = most_groups * NODES_PER_MANAGED_NODEGROUP.min(GPU_SUBNET_ADDRESSES / per_node);
    Some(format!(
        "{} x {} need {groups} nodegroups of at most {NODES_PER_MANAGED_NODEGROUP} nodes (EKS quota), each with a /18 subnet for its {per_node} addresses per node ({} EFA interfaces and the pod); one cluster holds {} GPU nodegroups ({MANAGED_NODEGROUPS_PER_CLUSTER} managed nodegroups with the system one; {MAX_GPU_SUBNETS} GPU subnets from a VPC's 5 CIDR blocks), at most {most_nodes} nodes ({} accelerators) in one zone: ask for fewer, or raise those quotas and split the cluster yourself",
        rec.shape.nodes,
        rec.instance.name,
        rec.instance.max_efa,
        most_groups,
        most_nodes * rec.instance.accelerators
    ))
}

/// What the plan does about the limits a large job meets: nodegroups split, a placement
/// group each, subnets of their own, the vCPU quota the script checks.
pub fn warnings(rec: &Recommendation, groups: u32) -> Vec<Warning> {
    let mut out = Vec::new();
    let nodes = rec.shape.nodes;
    if groups > 1 && !matches!(rec.capacity, CapacityPlan::CapacityBlock { .. }) {
        out.push(Warning {
            code: "nodegroups-split",
            message: format!(
                "{nodes} nodes in {groups} nodegroups of at most {NODES_PER_MANAGED_NODEGROUP} (the EKS quota of nodes per managed nodegroup), each with a cluster placement group of its own: a placement group's instances are best launched in one request, and each nodegroup launches on its own"
            ),
        });
    }
    if needs_large_subnets(rec) {
        let need = nodes * addresses_per_node(&rec.instance);
        out.push(Warning {
            code: "subnet-addresses",
            message: format!(
                "{nodes} x {} take at least {need} private IPv4 addresses ({} EFA interfaces and the pod per node), more than eksctl's default /19 subnet holds ({DEFAULT_SUBNET_ADDRESSES}): each GPU nodegroup gets a /18 private subnet in {} from extra VPC CIDR blocks (vpc in eksctl-cluster.yaml)",
                rec.instance.name, rec.instance.max_efa, rec.availability_zone
            ),
        });
    }
    let on_demand = matches!(
        rec.capacity,
        CapacityPlan::OnDemand | CapacityPlan::Odcr { .. }
    );
    if let (true, Some(per_node), Some((code, name))) = (
        on_demand,
        vcpus(&rec.instance.name),
        vcpu_quota(&rec.instance.name),
    ) {
        out.push(Warning {
            code: "vcpu-quota",
            message: format!(
                "{} vCPUs of \"{name}\" ({code}) needed; the account's quota is often far lower: aws-cli.sh checks it before creating nodes (aws service-quotas request-service-quota-increase)",
                per_node * nodes
            ),
        });
    }
    out
}
