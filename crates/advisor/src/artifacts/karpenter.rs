//! Karpenter `EC2NodeClass` + `NodePool` (karpenter.k8s.aws/v1, karpenter.sh/v1).

use serde_json::{Value, json};

use super::pod::RES_EFA;
use crate::recommend::{CapacityPlan, Recommendation, slug};

/// Tag `aws-cli.sh` puts on purchased Capacity Blocks so the node class finds them.
pub const RESERVATION_TAG: &str = "trainplace.io/reservation";

pub fn reservation_tag_value(rec: &Recommendation) -> String {
    format!("{}-{}", rec.request.names.cluster, rec.request.names.job)
}

fn name(rec: &Recommendation) -> String {
    slug(&rec.instance.name)
}

pub fn node_class(rec: &Recommendation) -> Value {
    let cluster = &rec.request.names.cluster;
    let discovery = json!([{"tags": {"karpenter.sh/discovery": cluster}}]);
    let mut spec = json!({
        "role": format!("KarpenterNodeRole-{cluster}"),
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": discovery,
        "securityGroupSelectorTerms": discovery,
    });
    match &rec.capacity {
        CapacityPlan::CapacityBlock { .. } => {
            spec["capacityReservationSelectorTerms"] =
                json!([{"tags": {RESERVATION_TAG: reservation_tag_value(rec)}}]);
        }
        CapacityPlan::Odcr { reservation_id } => {
            spec["capacityReservationSelectorTerms"] = json!([{"id": reservation_id}]);
        }
        CapacityPlan::OnDemand => {
            if let Some(pg) = &rec.placement_group {
                spec["placementGroupSelector"] = json!({"name": pg});
            }
        }
    }
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name(rec)},
        "spec": spec,
    })
}

pub fn node_pool(rec: &Recommendation) -> Value {
    let p = &rec.instance;
    let capacity_type = match rec.capacity {
        CapacityPlan::CapacityBlock { .. } | CapacityPlan::Odcr { .. } => "reserved",
        CapacityPlan::OnDemand => "on-demand",
    };
    let mut taints =
        vec![json!({"key": p.accelerator_resource, "value": "true", "effect": "NoSchedule"})];
    if p.max_efa > 0 {
        taints.push(json!({"key": RES_EFA, "value": "true", "effect": "NoSchedule"}));
    }
    let mut limits = serde_json::Map::new();
    limits.insert(
        p.accelerator_resource.clone(),
        json!(rec.shape.total_gpus.to_string()),
    );
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name(rec)},
        "spec": {
            "template": {
                "metadata": {"labels": {"trainplace.io/nodepool": name(rec)}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name(rec)},
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [p.name]},
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rec.availability_zone]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
                    ],
                    "taints": taints,
                },
            },
            "limits": limits,
            // Training nodes are expensive to restart mid-run: only reclaim empty ones.
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"},
        },
    })
}
