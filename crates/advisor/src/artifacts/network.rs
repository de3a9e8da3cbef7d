//! The VPC of a job too large for eksctl's default subnets, and the placement groups of
//! a job split into several nodegroups (the limits and their sources: `limits.rs`).
//!
//! Layout: the primary CIDR 10.0.0.0/16 holds a public and a system private /20 in each
//! of the cluster's two zones; each GPU nodegroup gets a /18 private subnet in the job's
//! zone, four to each extra /16 CIDR block (10.1.0.0/16, 10.2.0.0/16, ...), which eksctl
//! associates with the VPC (`vpc.extraCIDRs`).

use serde_json::{Map, Value, json};

use crate::limits::{MAX_GPU_SUBNETS, nodegroup_sizes};
use crate::recommend::{CapacityPlan, Recommendation};

/// The name of GPU nodegroup `i`'s subnet (0-based).
pub fn gpu_subnet(i: usize) -> String {
    format!("gpu-{}", i + 1)
}

/// The tag `karpenter-prerequisites.sh` puts on each GPU subnet, valued with its name
/// (`gpu-1`, ...): eksctl tags the private subnets it makes with
/// `kubernetes.io/role/internal-elb` only (`addSubnets` in
/// <https://github.com/eksctl-io/eksctl/blob/main/pkg/cfn/builder/vpc_ipv4.go>), so the
/// script finds each by its CIDR block and names it, and each Karpenter EC2NodeClass of
/// a split job selects its own nodegroup's subnet.
pub const SUBNET_TAG: &str = "trainplace.io/subnet";

/// The system nodegroup's subnets: one per cluster zone.
pub fn system_subnets(zones: &[String; 2]) -> Vec<String> {
    zones.iter().map(|z| format!("system-{z}")).collect()
}

/// GPU subnet `i`'s CIDR: the (i % 4)-th /18 of block 10.(1 + i / 4).0.0/16.
pub fn gpu_cidr(i: usize) -> String {
    format!("10.{}.{}.0/18", 1 + i / 4, 64 * (i % 4))
}

/// `vpc` for eksctl with `gpu_groups` GPU nodegroups (at most 16: `limits::refusal`
/// refuses more).
pub fn vpc(rec: &Recommendation, zones: &[String; 2], gpu_groups: usize) -> Value {
    let gpu_groups = gpu_groups.min(MAX_GPU_SUBNETS as usize);
    let mut public = Map::new();
    let mut private = Map::new();
    for (i, (zone, system)) in zones.iter().zip(system_subnets(zones)).enumerate() {
        public.insert(
            format!("public-{zone}"),
            json!({"az": zone, "cidr": format!("10.0.{}.0/20", 16 * i)}),
        );
        private.insert(
            system,
            json!({"az": zone, "cidr": format!("10.0.{}.0/20", 32 + 16 * i)}),
        );
    }
    for i in 0..gpu_groups {
        private.insert(
            gpu_subnet(i),
            json!({"az": rec.availability_zone, "cidr": gpu_cidr(i)}),
        );
    }
    let extra: Vec<String> = (0..gpu_groups.div_ceil(4))
        .map(|b| format!("10.{}.0.0/16", b + 1))
        .collect();
    json!({
        "cidr": "10.0.0.0/16",
        "extraCIDRs": extra,
        "subnets": {"public": public, "private": private},
    })
}

/// The cluster placement groups of an on-demand job: the plan's one, or one per
/// nodegroup (`name-1`, `name-2`, ...) when the job has several.
pub fn placement_groups(rec: &Recommendation) -> Vec<String> {
    let Some(pg) = &rec.placement_group else {
        return Vec::new();
    };
    if !matches!(rec.capacity, CapacityPlan::OnDemand) {
        return vec![pg.clone()];
    }
    let groups = nodegroup_sizes(rec.shape.nodes).len();
    if groups == 1 {
        vec![pg.clone()]
    } else {
        (1..=groups).map(|i| format!("{pg}-{i}")).collect()
    }
}

/// The GPU subnets of a plan whose nodegroups each have one (`needs_large_subnets`):
/// `gpu_groups` of them, at most 16; none otherwise.
pub fn gpu_subnets(rec: &Recommendation, gpu_groups: usize) -> Vec<String> {
    if !crate::limits::needs_large_subnets(rec) {
        return Vec::new();
    }
    (0..gpu_groups.min(MAX_GPU_SUBNETS as usize))
        .map(gpu_subnet)
        .collect()
}

/// `karpenter-prerequisites.sh` lines naming each GPU subnet (`SUBNET_TAG`), found in
/// the cluster's VPC (`$VPC`) by its CIDR block; a missing one stops the script.
/// `create-tags` overwrites a tag with the same value, so a rerun changes nothing.
pub fn tag_lines(rec: &Recommendation, gpu_groups: usize) -> Vec<String> {
    let subnets = gpu_subnets(rec, gpu_groups);
    if subnets.is_empty() {
        return Vec::new();
    }
    let mut out = vec![format!(
        "# Each GPU nodegroup's own subnet, named by the tag {SUBNET_TAG} its EC2NodeClass selects."
    )];
    for (i, name) in subnets.iter().enumerate() {
        let cidr = gpu_cidr(i);
        out.push(format!(
            "S=$(aws ec2 describe-subnets --region \"$REGION\" --filters Name=vpc-id,Values=\"$VPC\" Name=cidr-block,Values={cidr} --query 'Subnets[0].SubnetId' --output text)"
        ));
        out.push(format!(
            "if [ -z \"$S\" ] || [ \"$S\" = None ]; then echo 'subnet {name} ({cidr}) is not in the cluster VPC: create the cluster from eksctl-cluster.yaml first' >&2; exit 1; fi"
        ));
        out.push(format!(
            "aws ec2 create-tags --region \"$REGION\" --resources \"$S\" --tags Key={SUBNET_TAG},Value={name}"
        ));
    }
    out
}
