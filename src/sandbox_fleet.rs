//! The sandbox's simulated EKS fleet: a `SandboxFleet` file (node groups per zone) expanded
//! into the Node objects kwok runs, with the labels, taints and capacity real EKS nodes carry.
//! GPU, Neuron and EFA counts and memory come from the instance catalog, so the nodes the
//! sandbox shows are the ones the engine reasons about.
//!
//! Labels, as EKS and Karpenter set them:
//! - well-known: <https://kubernetes.io/docs/reference/labels-annotations-taints/>
//! - zone-id: <https://docs.aws.amazon.com/eks/latest/userguide/eks-optimized-ami.html>
//!   (`topology.k8s.aws/zone-id`, set by the AWS cloud controller)
//! - managed node groups: <https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html>
//!   (`eks.amazonaws.com/nodegroup`, `eks.amazonaws.com/capacityType`)
//! - Karpenter: <https://karpenter.sh/docs/reference/instance-types/> (`karpenter.sh/nodepool`,
//!   `karpenter.sh/capacity-type`, `karpenter.k8s.aws/instance-family`)
//! - network topology: <https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html>
//!   (`topology.k8s.aws/network-node-layer-1` to `-3`: a node's network nodes in the EC2
//!   network hierarchy, broadest first; simulated here from a group's `network` shape)
//! - device resources: the NVIDIA, Neuron and EFA device plugins advertise
//!   `nvidia.com/gpu`, `aws.amazon.com/neuron` and `vpc.amazonaws.com/efa`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use trainplace_engine::Catalog;

/// What went wrong reading a fleet file: which group, which field, what to do.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("{origin}: not a SandboxFleet: {source}")]
    Parse {
        origin: String,
        source: serde_yaml_ng::Error,
    },
    #[error(
        "{origin}: kind must be SandboxFleet (apiVersion trainplace.io/v1alpha1), got {kind:?}"
    )]
    Kind { origin: String, kind: String },
    #[error(
        "{origin}: nodeGroups[{index}] ({group}): zone {zone:?} is not in zones; add it to zones with its zone id"
    )]
    UnknownZone {
        origin: String,
        index: usize,
        group: String,
        zone: String,
    },
    #[error(
        "{origin}: nodeGroups[{index}] ({group}): {instance_type} is not in the instance catalog, so give its cpu and memory"
    )]
    Unsized {
        origin: String,
        index: usize,
        group: String,
        instance_type: String,
    },
    #[error(
        "{origin}: {nodes} nodes in all; the sandbox holds at most {MAX_NODES} (lower the counts)"
    )]
    TooMany { origin: String, nodes: u64 },
}

/// More nodes than this is a scale benchmark, not a sandbox.
pub const MAX_NODES: u64 = 10_000;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FleetFile {
    api_version: String,
    kind: String,
    region: String,
    zones: Vec<Zone>,
    node_groups: Vec<Group>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Zone {
    name: String,
    id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Group {
    name: String,
    instance_type: String,
    /// `nodegroup` (EKS managed node group) or `karpenter` (a NodePool).
    #[serde(default)]
    provisioner: Provisioner,
    /// ON_DEMAND, SPOT or CAPACITY_BLOCK, as EKS writes it.
    #[serde(default = "on_demand")]
    capacity_type: String,
    /// Nodes per zone name.
    nodes: BTreeMap<String, u32>,
    cpu: String,
    memory: Option<String>,
    #[serde(default = "default_pods")]
    pods: String,
    /// Taint the node with its device resources (`nvidia.com/gpu`, `vpc.amazonaws.com/efa`,
    /// `aws.amazon.com/neuron`), as GPU node groups usually are. Default: true when the
    /// instance type has accelerators.
    taint_devices: Option<bool>,
    /// A simulated EC2 instance topology for the group's nodes in each zone: how many
    /// nodes share a layer-3 network node, how many layer-3 nodes a layer-2 node holds,
    /// and how many layer-2 nodes a layer-1 node holds. Absent: no network labels.
    network: Option<Network>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Network {
    nodes_per_layer3: u32,
    #[serde(default = "two")]
    layer3_per_layer2: u32,
    #[serde(default = "two")]
    layer2_per_layer1: u32,
}

fn two() -> u32 {
    2
}

impl Network {
    /// The `topology.k8s.aws/network-node-layer-N` labels of node `i` of the group in
    /// `zone`: node ids in the form EKS shows (`nn-` and 17 hex digits), distinct per
    /// zone, group and position.
    fn labels(&self, zone: &Zone, group: &str, i: u32) -> [(String, String); 3] {
        let l3 = i / self.nodes_per_layer3.max(1);
        let l2 = l3 / self.layer3_per_layer2.max(1);
        let l1 = l2 / self.layer2_per_layer1.max(1);
        [(1, l1), (2, l2), (3, l3)].map(|(layer, index)| {
            let id = fake_instance_id(&format!("{}/{group}/{layer}/{index}", zone.id));
            (
                format!("topology.k8s.aws/network-node-layer-{layer}"),
                format!("nn-{id:017x}"),
            )
        })
    }
}

#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Provisioner {
    #[default]
    Nodegroup,
    Karpenter,
}

fn on_demand() -> String {
    "ON_DEMAND".into()
}

fn default_pods() -> String {
    "110".into()
}

/// The Node objects of the fleet in `text` (a v1 List), in file order.
pub fn nodes(text: &str, origin: &str, catalog: &Catalog) -> Result<Value, FleetError> {
    let fleet: FleetFile = serde_yaml_ng::from_str(text).map_err(|source| FleetError::Parse {
        origin: origin.into(),
        source,
    })?;
    if fleet.kind != "SandboxFleet" || fleet.api_version != "trainplace.io/v1alpha1" {
        return Err(FleetError::Kind {
            origin: origin.into(),
            kind: format!("{}/{}", fleet.api_version, fleet.kind),
        });
    }
    let total: u64 = fleet
        .node_groups
        .iter()
        .flat_map(|g| g.nodes.values())
        .map(|n| u64::from(*n))
        .sum();
    if total > MAX_NODES {
        return Err(FleetError::TooMany {
            origin: origin.into(),
            nodes: total,
        });
    }
    let mut items = Vec::new();
    for (index, group) in fleet.node_groups.iter().enumerate() {
        let profile = catalog.get(&group.instance_type);
        let memory = match (&group.memory, profile.and_then(|p| p.memory_gi_b)) {
            (Some(m), _) => m.clone(),
            (None, Some(gib)) => format!("{gib}Gi"),
            (None, None) => {
                return Err(FleetError::Unsized {
                    origin: origin.into(),
                    index,
                    group: group.name.clone(),
                    instance_type: group.instance_type.clone(),
                });
            }
        };
        let mut capacity = json!({
            "cpu": group.cpu, "memory": memory, "pods": group.pods,
            "ephemeral-storage": "500Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
        });
        let mut devices = Vec::new();
        if let Some(p) = profile {
            if p.accelerators > 0 {
                devices.push(p.accelerator_resource.clone());
                capacity[&p.accelerator_resource] = json!(p.accelerators.to_string());
            }
            if p.max_efa > 0 {
                devices.push("vpc.amazonaws.com/efa".to_string());
                capacity["vpc.amazonaws.com/efa"] = json!(p.max_efa.to_string());
            }
        }
        let taints: Vec<Value> = if group.taint_devices.unwrap_or(!devices.is_empty()) {
            devices
                .iter()
                .map(|d| json!({"key": d, "value": "true", "effect": "NoSchedule"}))
                .collect()
        } else {
            Vec::new()
        };
        for (zone_name, count) in &group.nodes {
            let zone = fleet
                .zones
                .iter()
                .find(|z| &z.name == zone_name)
                .ok_or_else(|| FleetError::UnknownZone {
                    origin: origin.into(),
                    index,
                    group: group.name.clone(),
                    zone: zone_name.clone(),
                })?;
            for i in 0..*count {
                items.push(node(&fleet.region, zone, group, i, &capacity, &taints));
            }
        }
    }
    Ok(json!({"apiVersion": "v1", "kind": "List", "items": items}))
}

fn node(
    region: &str,
    zone: &Zone,
    group: &Group,
    i: u32,
    capacity: &Value,
    taints: &[Value],
) -> Value {
    let name = format!("{}-{}-{i}", group.name, zone.name);
    let family = group.instance_type.split('.').next().unwrap_or_default();
    let mut labels = json!({
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": group.instance_type,
        "beta.kubernetes.io/instance-type": group.instance_type,
        "topology.kubernetes.io/region": region,
        "topology.kubernetes.io/zone": zone.name,
        "topology.k8s.aws/zone-id": zone.id,
        "type": "kwok",
    });
    if let Some(network) = &group.network {
        for (key, value) in network.labels(zone, &group.name, i) {
            labels[key] = json!(value);
        }
    }
    match group.provisioner {
        Provisioner::Nodegroup => {
            labels["eks.amazonaws.com/nodegroup"] = json!(group.name);
            labels["eks.amazonaws.com/capacityType"] = json!(group.capacity_type);
        }
        Provisioner::Karpenter => {
            let capacity_type = match group.capacity_type.as_str() {
                "SPOT" => "spot",
                "CAPACITY_BLOCK" => "reserved",
                _ => "on-demand",
            };
            labels["karpenter.sh/nodepool"] = json!(group.name);
            labels["karpenter.sh/capacity-type"] = json!(capacity_type);
            labels["karpenter.k8s.aws/instance-family"] = json!(family);
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            // kwok manages the nodes carrying this annotation (scripts/sandbox.sh).
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {
            "providerID": format!("aws:///{}/i-{:017x}", zone.name, fake_instance_id(&name)),
            "taints": taints,
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    })
}

/// A stable made-up EC2 instance id for a node name (FNV-1a, 64 bits).
fn fake_instance_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    }) >> 4
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLEET: &str = "apiVersion: trainplace.io/v1alpha1
kind: SandboxFleet
region: us-east-1
zones: [{name: us-east-1a, id: use1-az4}, {name: us-east-1b, id: use1-az6}]
nodeGroups:
  - name: p5
    instanceType: p5.48xlarge
    nodes: {us-east-1a: 2, us-east-1b: 1}
    cpu: '192'
  - name: system
    instanceType: m7i.2xlarge
    provisioner: karpenter
    nodes: {us-east-1a: 1}
    cpu: '8'
    memory: 32Gi
";

    #[test]
    fn a_network_shape_labels_nodes_with_their_network_nodes() {
        let fleet = FLEET.replace(
            "    nodes: {us-east-1a: 2, us-east-1b: 1}\n",
            "    nodes: {us-east-1a: 5, us-east-1b: 1}\n    network: {nodesPerLayer3: 2, layer3PerLayer2: 2}\n",
        );
        let list = nodes(&fleet, "fleet.yaml", &Catalog::embedded()).unwrap();
        let items = list["items"].as_array().unwrap();
        let layer = |i: usize, l: u8| {
            items[i]["metadata"]["labels"][format!("topology.k8s.aws/network-node-layer-{l}")]
                .as_str()
                .unwrap()
                .to_string()
        };
        // us-east-1a: nodes 0,1 | 2,3 under one layer-2 node; node 4 under the next.
        assert_eq!(layer(0, 3), layer(1, 3));
        assert_ne!(layer(1, 3), layer(2, 3));
        assert_eq!(layer(0, 2), layer(3, 2));
        assert_ne!(layer(3, 2), layer(4, 2));
        assert_eq!(layer(0, 1), layer(4, 1));
        assert!(
            layer(0, 3).starts_with("nn-") && layer(0, 3).len() == 20,
            "{}",
            layer(0, 3)
        );
        // Another zone has network nodes of its own; a group without a shape has none.
        assert_ne!(layer(5, 1), layer(0, 1));
        assert!(items[6]["metadata"]["labels"]["topology.k8s.aws/network-node-layer-3"].is_null());
    }

    #[test]
    fn gpu_nodes_carry_catalog_devices_taints_and_zone_labels() {
        let list = nodes(FLEET, "fleet.yaml", &Catalog::embedded()).unwrap();
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 4);
        let p5 = &items[0];
        assert_eq!(p5["metadata"]["name"], "p5-us-east-1a-0");
        assert_eq!(p5["status"]["capacity"]["nvidia.com/gpu"], "8");
        assert_eq!(p5["status"]["capacity"]["vpc.amazonaws.com/efa"], "32");
        assert_eq!(
            p5["metadata"]["labels"]["topology.k8s.aws/zone-id"],
            "use1-az4"
        );
        assert_eq!(
            p5["metadata"]["labels"]["eks.amazonaws.com/nodegroup"],
            "p5"
        );
        let taints: Vec<&str> = p5["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(taints, ["nvidia.com/gpu", "vpc.amazonaws.com/efa"]);
        assert_eq!(
            items[2]["metadata"]["labels"]["topology.kubernetes.io/zone"],
            "us-east-1b"
        );
        let system = &items[3];
        assert_eq!(system["spec"]["taints"], json!([]));
        assert_eq!(
            system["metadata"]["labels"]["karpenter.sh/nodepool"],
            "system"
        );
        assert!(system["status"]["capacity"].get("nvidia.com/gpu").is_none());
    }

    #[test]
    fn an_unknown_zone_or_an_unsized_type_says_which_group() {
        let bad_zone = FLEET.replace("us-east-1b: 1", "us-east-1c: 1");
        let e = nodes(&bad_zone, "fleet.yaml", &Catalog::embedded()).unwrap_err();
        assert!(
            e.to_string()
                .contains("nodeGroups[0] (p5): zone \"us-east-1c\""),
            "{e}"
        );
        let unsized_group = FLEET.replace("    memory: 32Gi\n", "");
        let e = nodes(&unsized_group, "fleet.yaml", &Catalog::embedded()).unwrap_err();
        assert!(
            e.to_string()
                .contains("nodeGroups[1] (system): m7i.2xlarge"),
            "{e}"
        );
        let huge = FLEET.replace("us-east-1a: 2,", "us-east-1a: 20000,");
        let e = nodes(&huge, "fleet.yaml", &Catalog::embedded()).unwrap_err();
        assert!(e.to_string().contains("20002 nodes"), "{e}");
    }
}
