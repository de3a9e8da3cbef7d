//! One route per plan (`--route`, request field `route`): the eksctl nodegroups
//! `aws-cli.sh` creates, or Karpenter's NodePools. A plan never carries both: the
//! nodegroups would take every reserved instance and the Karpenter job's pods would
//! wait, Pending, on paid hours. Where Karpenter cannot make the plan's nodes, asking
//! for it is refused with the reason.

use super::{CapacityPlan, Recommendation};
use crate::request::Route;

/// Whether the job claims a device through DRA: EFA through the EFA DRA driver, or the
/// IMEX channel of a ComputeDomain (an NVLink domain that spans instances, GB200).
pub fn needs_dra(rec: &Recommendation) -> bool {
    rec.efa_dra || rec.instance.nvlink_domain_instances.is_some()
}

/// Why Karpenter cannot make this plan's nodes; `None` when it can. The EFA DRA driver
/// "is not supported with Karpenter or EKS Auto Mode"
/// (<https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html>), and
/// neither is the NVIDIA DRA driver whose ComputeDomain a multi-node NVLink job (GB200)
/// claims: the EKS guide to P6e-GB200 UltraServers says Karpenter and EKS Auto Mode do
/// not support DRA and recommends self-managed or managed node groups
/// (<https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html>).
/// Nodes the cluster already has need no route to make them.
pub fn karpenter_cannot(rec: &Recommendation) -> Option<String> {
    let t = &rec.instance.name;
    if let CapacityPlan::Existing { nodes, groups } = &rec.capacity {
        return Some(format!(
            "the plan makes no nodes: it runs on the cluster's {nodes} existing {t} node(s) ({})",
            groups.join(", ")
        ));
    }
    if let Some(n) = rec.instance.nvlink_domain_instances {
        return Some(format!(
            "{t}'s NVLink domain spans {n} instances, so the pods claim a ComputeDomain's IMEX channel through the NVIDIA DRA driver, and Karpenter does not support DRA: the EKS guide to P6e-GB200 UltraServers recommends managed or self-managed node groups (https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html)"
        ));
    }
    if rec.efa_dra {
        return Some(
            "EFA comes through the EFA DRA driver (asked for with --efa-dra / efaDra, or the cluster's nodes of the type advertise no vpc.amazonaws.com/efa), which \"is not supported with Karpenter or EKS Auto Mode\" (https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html)".into(),
        );
    }
    None
}

/// The refusal of a route that cannot serve the plan, as the request's error message.
pub fn refusal(rec: &Recommendation) -> Option<String> {
    if rec.request.route != Route::Karpenter {
        return None;
    }
    karpenter_cannot(rec).map(|why| {
        format!(
            "karpenter cannot make this plan's nodes: {why}; use route eksctl, the default, which creates them as managed or self-managed nodegroups"
        )
    })
}

/// The report's line: which route the plan takes, what it emits, and how to get the
/// other one (or why there is none).
pub fn summary(rec: &Recommendation) -> String {
    if matches!(rec.capacity, CapacityPlan::Existing { .. }) {
        return "the cluster's existing nodes: no nodegroup or NodePool is made".into();
    }
    let other = match karpenter_cannot(rec) {
        Some(_) if rec.request.route == Route::Eksctl => {
            "no Karpenter route: the plan needs DRA, which Karpenter does not support".to_string()
        }
        _ => format!(
            "for {} instead, rerun with --route {}",
            describe(rec.request.route.other()),
            rec.request.route.other().slug()
        ),
    };
    format!(
        "{} ({}); {other}",
        describe(rec.request.route),
        rec.request.route.slug()
    )
}

fn describe(route: Route) -> &'static str {
    match route {
        Route::Eksctl => "eksctl nodegroups created by aws-cli.sh",
        Route::Karpenter => {
            "Karpenter NodePools (karpenter.yaml) on a cluster with only the system nodegroup"
        }
    }
}
