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

/// The system nodegroup's subnets: one per cluster zone.
pub fn system_subnets(zones: &[String; 2]) -> Vec<String> {
    zones.iter().map(|z| format!("system-{z}")).collect()
}

/// GPU subnet `i`'s CIDR: the (i % 4)-th /18 of block 10.(1 + i / 4).0.0/16.
fn gpu_cidr(i: usize) -> String {
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
