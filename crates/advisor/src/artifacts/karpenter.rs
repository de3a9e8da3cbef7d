//! Karpenter `EC2NodeClass` + `NodePool` (karpenter.k8s.aws/v1, karpenter.sh/v1).
//! What they assume (the Karpenter release of what is used, node role, discovery tags,
//! device plugins) is checked and installed by `karpenter-prerequisites.sh`
//! (`prereqs.rs`).
//!
//! Nodes of a multi-week run must not roll under it: the AMI alias is pinned to a
//! release (with `@latest` Karpenter drifts the nodes to every new AMI; Karpenter
//! "strongly recommends" version pins,
//! <https://github.com/aws/karpenter-provider-aws/blob/main/website/content/en/v1.14/tasks/managing-amis.md>),
//! `expireAfter: Never` replaces the 720 h default expiry
//! (<https://github.com/aws/karpenter-provider-aws/blob/main/website/content/en/v1.14/concepts/disruption.md>),
//! and the job's pods carry `karpenter.sh/do-not-disrupt: "true"` (`pod.rs`).

use super::reservation_tag::{RESERVATION_TAG, reservation_tag_value};
use serde_json::{Value, json};

use super::network::SUBNET_TAG;
use super::plugins::{node_labels, node_taints};
use crate::limits::nodegroup_sizes;
use crate::recommend::{CapacityPlan, Recommendation, slug};

/// Root volume of the job's nodes: training images are 10-20 GB and checkpoints land
/// on local disk; Karpenter's AL2023 default is 20 GiB
/// (<https://karpenter.sh/docs/concepts/nodeclasses/#specblockdevicemappings>). 500 GiB
/// matches the eksctl nodegroup's `volumeSize`.
pub const ROOT_VOLUME: &str = "500Gi";

/// The EKS-optimized AL2023 AMI release the nodes run: v20260903 has AL2023 NVIDIA and
/// Neuron AMIs for Kubernetes 1.33 to 1.36
/// (<https://github.com/awslabs/amazon-eks-ami/releases/tag/v20260903>). Move it on
/// deliberately, between runs.
pub const AMI_ALIAS: &str = "al2023@v20260903";

/// Node role the Karpenter getting-started CloudFormation stack creates.
pub fn node_role(rec: &Recommendation) -> String {
    format!("KarpenterNodeRole-{}", rec.request.names.cluster)
}

fn name(rec: &Recommendation) -> String {
    slug(&rec.instance.name)
}

/// The NodePool (and EC2NodeClass) name.
pub fn pool_name(rec: &Recommendation) -> String {
    name(rec)
}

/// The GPU subnets of the plan's nodegroups, when each has its own (`network.rs`).
fn gpu_subnets(rec: &Recommendation) -> Vec<String> {
    super::network::gpu_subnets(rec, super::eksctl::nodegroup_names(rec).len())
}

/// `subnetSelectorTerms`: the discovery-tagged subnets, or only `subnets` (each a term,
/// ORed; within a term the tags are ANDed:
/// <https://karpenter.sh/docs/concepts/nodeclasses/>) when the GPU nodegroups have
/// subnets of their own.
fn subnet_terms(cluster: &str, subnets: &[String]) -> Value {
    if subnets.is_empty() {
        return json!([{"tags": {"karpenter.sh/discovery": cluster}}]);
    }
    subnets
        .iter()
        .map(|s| json!({"tags": {"karpenter.sh/discovery": cluster, SUBNET_TAG: s}}))
        .collect()
}

pub fn node_class(rec: &Recommendation) -> Value {
    let cluster = &rec.request.names.cluster;
    let discovery = json!([{"tags": {"karpenter.sh/discovery": cluster}}]);
    let mut spec = json!({
        "role": node_role(rec),
        "amiSelectorTerms": [{"alias": AMI_ALIAS}],
        "subnetSelectorTerms": subnet_terms(cluster, &gpu_subnets(rec)),
        "securityGroupSelectorTerms": discovery,
        "blockDeviceMappings": [{
            "deviceName": "/dev/xvda",
            "ebs": {"volumeSize": ROOT_VOLUME, "volumeType": "gp3", "encrypted": true, "deleteOnTermination": true},
        }],
        // Every type in the catalog has local NVMe instance storage (EC2 accelerated
        // computing specs): RAID0 it for image layers and scratch.
        "instanceStorePolicy": "RAID0",
    });
    match &rec.capacity {
        CapacityPlan::CapacityBlock {
            blocks: Some(plan), ..
        } if plan.offerings.iter().all(|o| o.held) => {
            // Blocks the account already holds: selected by id (they carry no tag of ours).
            let ids: Vec<serde_json::Value> =
                plan.offerings.iter().map(|o| json!({"id": o.id})).collect();
            spec["capacityReservationSelectorTerms"] = json!(ids);
        }
        CapacityPlan::CapacityBlock { .. } => {
            spec["capacityReservationSelectorTerms"] =
                json!([{"tags": {RESERVATION_TAG: reservation_tag_value(rec)}}]);
        }
        CapacityPlan::Odcr { reservation_id } => {
            spec["capacityReservationSelectorTerms"] = json!([{"id": reservation_id}]);
        }
        CapacityPlan::OnDemand | CapacityPlan::Existing { .. } => {
            // The plan's placement group; a split plan's pairs (`pools`) each select
            // their own.
            if let Some(pg) = super::network::placement_groups(rec).first() {
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
        CapacityPlan::OnDemand | CapacityPlan::Existing { .. } => "on-demand",
    };
    let mut labels = serde_json::Map::new();
    labels.insert("trainplace.io/nodepool".into(), json!(name(rec)));
    for (k, v) in node_labels(rec) {
        labels.insert(k.into(), json!(v));
    }
    // A prepaid reservation is paid whether or not nodes run: never consolidate its
    // nodes away between runs. On-demand nodes go once empty.
    let disruption = if capacity_type == "reserved" {
        json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    } else {
        json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"})
    };
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
                "metadata": {"labels": labels},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name(rec)},
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [p.name]},
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rec.availability_zone]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
                    ],
                    "taints": node_taints(rec),
                    // No forced replacement mid-run (default 720h).
                    "expireAfter": "Never",
                },
            },
            "limits": limits,
            // Training nodes are expensive to restart mid-run: only reclaim empty ones.
            "disruption": disruption,
        },
    })
}

/// Every EC2NodeClass and NodePool of `karpenter.yaml`: the plan's pair, or, for an
/// on-demand job split over several placement groups (`limits.rs`: a cluster placement
/// group each, launched on its own), one pair per placement group, `NAME-1`, `NAME-2`,
/// ..., each selecting its group (and its nodegroup's subnet, when each has one) and
/// limited to its share of the accelerators, so the pods fill one group before the next
/// instead of all asking for the first.
pub fn pools(rec: &Recommendation) -> Vec<(Value, Value)> {
    let groups = super::network::placement_groups(rec);
    if groups.len() <= 1 {
        return vec![(node_class(rec), node_pool(rec))];
    }
    let per_node = rec.shape.total_gpus / rec.shape.nodes.max(1);
    let base = name(rec);
    let subnets = gpu_subnets(rec);
    groups
        .iter()
        .zip(nodegroup_sizes(rec.shape.nodes))
        .enumerate()
        .map(|(i, (pg, nodes))| {
            let own = format!("{base}-{}", i + 1);
            let mut class = node_class(rec);
            class["metadata"]["name"] = json!(own);
            class["spec"]["placementGroupSelector"] = json!({"name": pg});
            if let Some(subnet) = subnets.get(i) {
                class["spec"]["subnetSelectorTerms"] =
                    subnet_terms(&rec.request.names.cluster, std::slice::from_ref(subnet));
            }
            let mut pool = node_pool(rec);
            pool["metadata"]["name"] = json!(own);
            pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = json!(own);
            pool["spec"]["limits"][rec.instance.accelerator_resource.as_str()] =
                json!((nodes * per_node).to_string());
            (class, pool)
        })
        .collect()
}

/// The names of the plan's NodePools (`pools`).
pub fn pool_names(rec: &Recommendation) -> Vec<String> {
    pools(rec)
        .iter()
        .filter_map(|(_, pool)| pool["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}
