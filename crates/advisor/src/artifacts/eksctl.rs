//! eksctl `ClusterConfig`: the GPU managed nodegroup(s) (one AZ, EFA, taints, and a
//! placement group or the Capacity Block / ODCR reservation), the untainted system
//! nodegroup the cluster's own pods need, and an IAM OIDC provider. On the Karpenter
//! route (`crate::recommend::route`) only the system nodegroup: Karpenter launches the GPU nodes,
//! and a GPU nodegroup beside it would take every reserved instance.

use serde_json::{Value, json};

use super::network;
use super::plugins::{node_labels, node_taints};
use crate::capacity::{BlockPlan, block_sizes};
use crate::limits::{needs_large_subnets, nodegroup_sizes};
use crate::recommend::{CapacityPlan, Recommendation, slug};
use crate::regions::companion_zone;

/// Stands in for a Capacity Block's reservation id until it is bought; `aws-cli.sh`
/// replaces it with the id `purchase-capacity-block` returns.
pub fn reservation_placeholder(offering_id: &str) -> String {
    format!("REPLACE-WITH-cr-ID-OF-{offering_id}")
}

pub fn cluster_config(rec: &Recommendation) -> Value {
    let req = &rec.request;
    let groups = all_nodegroups(rec);
    let mut config = json!({
        "apiVersion": "eksctl.io/v1alpha5",
        "kind": "ClusterConfig",
        "metadata": {"name": req.names.cluster, "region": req.region, "version": req.eks_version},
        "availabilityZones": zones(rec),
        // IAM roles for service accounts (the EBS/FSx CSI drivers, Karpenter, the AWS
        // Load Balancer Controller) need the cluster's OIDC provider.
        "iam": {"withOIDC": true},
        "managedNodeGroups": groups,
    });
    if !groups.is_empty() {
        // The EKS node monitoring agent reports accelerated-hardware faults (GPU,
        // Neuron, EFA) as node conditions, which node auto repair acts on
        // (https://docs.aws.amazon.com/eks/latest/userguide/node-health.html; the
        // AWS sample 1.architectures/4.amazon-eks/eksctl/eks-g5-node-autorepair.yaml).
        let mut addons = vec![json!({"name": "eks-node-monitoring-agent"})];
        // The FSx for Lustre CSI driver, when the job gets checkpoint storage.
        addons.extend(super::storage::addon(rec));
        config["addons"] = json!(addons);
    }
    if needs_large_subnets(rec) {
        // Subnets named by the VPC: eksctl takes them instead of zones. One GPU subnet
        // per nodegroup of the plan's split, on either route (Karpenter's NodePools
        // select them by tag).
        config.as_object_mut().unwrap().remove("availabilityZones");
        config["vpc"] = network::vpc(rec, &zones(rec), nodegroups(rec).len());
    }
    // A Local Zone plan's GPU nodes are a self-managed nodegroup there (`local_zone.rs`).
    super::local_zone::place(&mut config, rec, &nodegroup_names(rec));
    config
}

/// The cluster's two zones: eksctl needs two for the cluster VPC; the GPU nodes stay in
/// the first.
fn zones(rec: &Recommendation) -> [String; 2] {
    if super::local_zone::local_zone(rec).is_some() {
        return super::local_zone::cluster_zones(rec);
    }
    let req = &rec.request;
    let zone = &rec.availability_zone;
    [zone.clone(), companion_zone(zone, &req.region, &req.zones)]
}

/// Every nodegroup of the config: the job's (none on the Karpenter route), then the
/// system nodegroup (none when the job's nodes exist: the cluster does too).
fn all_nodegroups(rec: &Recommendation) -> Vec<Value> {
    let mut groups = nodegroups(rec);
    if groups.is_empty() {
        return groups;
    }
    if super::on_karpenter(rec) {
        groups.clear();
    }
    groups.push(system_nodegroup(rec));
    groups
}

/// The names of every nodegroup in `eksctl-cluster.yaml`, the system one included.
pub fn all_nodegroup_names(rec: &Recommendation) -> Vec<String> {
    all_nodegroups(rec)
        .iter()
        .filter_map(|ng| ng["name"].as_str().map(str::to_string))
        .collect()
}

/// Untainted on-demand nodes for what is not the job: CoreDNS, the operators, the MPI
/// launcher, the device plugins' controllers. Without them a cluster whose only nodes are
/// tainted GPU nodes has nowhere to run CoreDNS or the training operator, so no job
/// starts. Two nodes in the cluster's two zones, as the AWS samples' system nodegroup
/// (aws-samples/aws-do-eks wd/conf/eksctl/yaml/eks-gpu-p5-cbr.yaml: `sys`,
/// c5.2xlarge; aws-samples/awsome-distributed-training 1.architectures/4.amazon-eks:
/// "a `system` nodegroup is used to run pods like kube-dns, kubeflow training operator").
pub fn system_nodegroup(rec: &Recommendation) -> Value {
    let mut ng = json!({
        "name": SYSTEM_NODEGROUP,
        "instanceType": SYSTEM_INSTANCE_TYPE,
        "amiFamily": "AmazonLinux2023",
        "desiredCapacity": SYSTEM_NODES,
        "minSize": SYSTEM_NODES,
        "maxSize": SYSTEM_NODES * 2,
        "availabilityZones": zones(rec),
        "privateNetworking": true,
        "volumeSize": 100,
        "labels": {"trainplace.io/nodegroup": SYSTEM_NODEGROUP},
    });
    if needs_large_subnets(rec) {
        ng.as_object_mut().unwrap().remove("availabilityZones");
        ng["subnets"] = json!(network::system_subnets(&zones(rec)));
    }
    ng
}

/// The system nodegroup: its name, instance type (8 vCPU, 32 GiB:
/// <https://aws.amazon.com/ec2/instance-types/m7i/>) and size.
pub const SYSTEM_NODEGROUP: &str = "system";
pub const SYSTEM_INSTANCE_TYPE: &str = "m7i.2xlarge";
pub const SYSTEM_NODES: u32 = 2;

/// The names of the nodegroups the plan splits the job's nodes into (not the system
/// one): in `eksctl-cluster.yaml` on the eksctl route; on the Karpenter route they are
/// not created, and their count sizes the GPU subnets its NodePools select.
pub fn nodegroup_names(rec: &Recommendation) -> Vec<String> {
    nodegroups(rec)
        .iter()
        .filter_map(|ng| ng["name"].as_str().map(str::to_string))
        .collect()
}

/// The job's nodegroups, each in a private subnet of its own when the job's addresses
/// outgrow eksctl's default subnets (`network.rs`).
fn nodegroups(rec: &Recommendation) -> Vec<Value> {
    let mut groups = job_nodegroups(rec);
    if needs_large_subnets(rec) {
        for (i, ng) in groups.iter_mut().enumerate() {
            ng.as_object_mut().unwrap().remove("availabilityZones");
            ng["subnets"] = json!([network::gpu_subnet(i)]);
        }
    }
    groups
}

fn job_nodegroups(rec: &Recommendation) -> Vec<Value> {
    let base = slug(&rec.instance.name);
    match &rec.capacity {
        CapacityPlan::CapacityBlock {
            blocks: Some(plan), ..
        } => plan
            .offerings
            .iter()
            .zip(job_share(rec.shape.nodes, plan))
            .enumerate()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(i, (o, n))| {
                // Sized to the job's nodes, not the block's: the rest of a bigger block
                // stays unlaunched (and unbilled beyond the fee already paid).
                let mut ng = nodegroup(rec, &format!("{base}-cb{}", i + 1), n);
                // A block the account holds has its id already; a bought one gets
                // it from aws-cli.sh.
                let id = if o.held {
                    o.id.clone()
                } else {
                    reservation_placeholder(&o.id)
                };
                ng["capacityReservation"] = json!({"capacityReservationTarget": {
                    "capacityReservationID": id}});
                ng["instanceMarketOptions"] = json!({"marketType": "capacity-block"});
                ng
            })
            .collect(),
        CapacityPlan::CapacityBlock { blocks: None, .. } => {
            // One nodegroup per block to buy: a block holds at most 64 instances.
            let sizes = block_sizes(rec.shape.nodes).unwrap_or_default();
            sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let mut ng = nodegroup(rec, &format!("{base}-cb{}", i + 1), n);
                    ng["capacityReservation"] = json!({"capacityReservationTarget": {
                        "capacityReservationID": reservation_placeholder(&format!("the-offering-you-buy-{}", i + 1))}});
                    ng["instanceMarketOptions"] = json!({"marketType": "capacity-block"});
                    ng
                })
                .collect()
        }
        CapacityPlan::Odcr { reservation_id } => split(rec, &format!("{base}-odcr"))
            .map(|mut ng| {
                ng["capacityReservation"] = json!({"capacityReservationTarget": {
                    "capacityReservationID": reservation_id}});
                ng
            })
            .collect(),
        // The nodes exist: a config for a new cluster would duplicate them.
        CapacityPlan::Existing { .. } => Vec::new(),
        CapacityPlan::OnDemand => {
            let groups = network::placement_groups(rec);
            split(rec, &base)
                .zip(groups.into_iter().map(Some).chain(std::iter::repeat(None)))
                .map(|(mut ng, pg)| {
                    if let Some(pg) = pg {
                        ng["placement"] = json!({"groupName": pg});
                    }
                    ng
                })
                .collect()
        }
    }
}

/// The job's nodes in nodegroups of at most 450 (the EKS quota), named `base`, or
/// `base-1`, `base-2`, ... when there are several.
fn split<'a>(rec: &'a Recommendation, base: &'a str) -> impl Iterator<Item = Value> + 'a {
    let sizes = nodegroup_sizes(rec.shape.nodes);
    let several = sizes.len() > 1;
    sizes.into_iter().enumerate().map(move |(i, n)| {
        let name = if several {
            format!("{base}-{}", i + 1)
        } else {
            base.to_string()
        };
        nodegroup(rec, &name, n)
    })
}

/// The job's nodes spread over the chosen blocks in order, each taking what it holds.
pub fn job_share(nodes: u32, plan: &BlockPlan) -> Vec<u32> {
    let mut left = nodes;
    plan.offerings
        .iter()
        .map(|o| {
            let n = left.min(o.instance_count);
            left -= n;
            n
        })
        .collect()
}

fn nodegroup(rec: &Recommendation, name: &str, count: u32) -> Value {
    let p = &rec.instance;
    let mut labels = serde_json::Map::new();
    labels.insert("trainplace.io/nodegroup".into(), json!(name));
    for (k, v) in node_labels(rec) {
        labels.insert(k.into(), json!(v));
    }
    json!({
        "name": name,
        "instanceType": p.name,
        "amiFamily": "AmazonLinux2023",
        "desiredCapacity": count,
        "minSize": 0,
        "maxSize": count,
        "availabilityZones": [rec.availability_zone],
        "privateNetworking": true,
        "efaEnabled": p.max_efa > 0,
        "volumeSize": 500,
        "labels": labels,
        "taints": node_taints(rec),
        // A node whose GPU fails is replaced (`addons`: the node monitoring agent).
        "nodeRepairConfig": {"enabled": true},
    })
}
