//! What the cluster holds, as an immutable snapshot the engine reads in the request
//! path: GPU instance types (with allocatable GPUs/EFA, zones, node groups/pools),
//! where the pods of each job are already bound, and namespace labels. Built from
//! plain JSON objects (`kubectl get nodes/pods/namespaces -o json` items, or what a
//! watch delivers), so fixtures and the live cache share one code path.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::Value;

use crate::annotations::{
    ACCELERATOR_RESOURCES, JOB_IDENTITY_LABELS, LABEL_INSTANCE_TYPE, LABEL_ZONE, RES_EFA,
    RES_NVIDIA_GPU,
};
use crate::catalog::{InstanceProfile, Rdma};
use crate::dra::Claims;
use crate::json::{items, str_at};
use crate::quantity::parse_count;
use crate::reservations::Reservations;

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

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub types: BTreeMap<String, NodeType>,
    /// (namespace, identity label, value) -> zones where such pods are bound.
    jobs: HashMap<(String, String, String), BTreeSet<String>>,
    namespaces: HashMap<String, BTreeMap<String, String>>,
    /// Profiles for GPU types the catalog does not know, learned from allocatable.
    learned: BTreeMap<String, InstanceProfile>,
    /// Workloads with a scale subresource, by (namespace, resource, name): what a
    /// Scale review is judged against.
    scalable: HashMap<(String, String, String), Value>,
    /// Capacity Blocks and when they end.
    reservations: Reservations,
    /// DRA ResourceClaimTemplates, ResourceClaims and ComputeDomains.
    claims: Claims,
    /// Every instance type with nodes (also those whose devices come through DRA and
    /// so advertise no extended resource), with the most `vpc.amazonaws.com/efa` any
    /// of its nodes advertises.
    node_efa: BTreeMap<String, u32>,
}

/// The plural resource of a workload whose scale subresource changes its pod count.
fn scale_resource(o: &Value) -> Option<&'static str> {
    match (
        str_at(o, &["apiVersion"])?.split('/').next()?,
        str_at(o, &["kind"])?,
    ) {
        ("kubeflow.org", "PyTorchJob") => Some("pytorchjobs"),
        _ => None,
    }
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn allocatable(node: &Value, res: &str) -> u32 {
    node.pointer("/status/allocatable")
        .and_then(|a| a.get(res))
        .and_then(|v| parse_count(v).ok())
        .unwrap_or(0)
}

impl Snapshot {
    /// Build from node, pod and namespace objects.
    pub fn build<'v>(
        nodes: impl IntoIterator<Item = &'v Value>,
        pods: impl IntoIterator<Item = &'v Value>,
        namespaces: impl IntoIterator<Item = &'v Value>,
    ) -> Self {
        let mut s = Snapshot::default();
        let mut node_zone: HashMap<String, String> = HashMap::new();
        for node in nodes {
            let l = labels(node);
            let name = str_at(node, &["metadata", "name"])
                .unwrap_or("")
                .to_string();
            if let Some(zone) = l.get(LABEL_ZONE) {
                node_zone.insert(name, zone.clone());
            }
            let Some(itype) = l.get(LABEL_INSTANCE_TYPE) else {
                continue;
            };
            let efa = s.node_efa.entry(itype.clone()).or_default();
            *efa = (*efa).max(allocatable(node, RES_EFA));
            let Some((res, count)) = ACCELERATOR_RESOURCES
                .iter()
                .map(|r| (*r, allocatable(node, r)))
                .find(|(_, n)| *n > 0)
            else {
                continue;
            };
            let t = s.types.entry(itype.clone()).or_insert_with(|| NodeType {
                name: itype.clone(),
                accelerator_resource: res.to_string(),
                ..NodeType::default()
            });
            t.accelerators = t.accelerators.max(count);
            t.efa = t.efa.max(allocatable(node, RES_EFA));
            t.nodes += 1;
            t.zones.extend(l.get(LABEL_ZONE).cloned());
            t.pools.extend(
                POOL_LABELS
                    .iter()
                    .filter_map(|k| l.get(*k).map(|v| format!("{k}={v}"))),
            );
        }
        for pod in pods {
            let (Some(node), Some(ns)) = (
                str_at(pod, &["spec", "nodeName"]),
                str_at(pod, &["metadata", "namespace"]),
            ) else {
                continue;
            };
            let Some(zone) = node_zone.get(node) else {
                continue;
            };
            let l = labels(pod);
            for (key, _) in JOB_IDENTITY_LABELS {
                if let Some(v) = l.get(key) {
                    s.jobs
                        .entry((ns.to_string(), key.to_string(), v.clone()))
                        .or_default()
                        .insert(zone.clone());
                }
            }
        }
        for ns in namespaces {
            if let Some(name) = str_at(ns, &["metadata", "name"]) {
                s.namespaces.insert(name.to_string(), labels(ns));
            }
        }
        s.learned = s
            .types
            .values()
            .map(|t| {
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
            })
            .collect();
        s
    }

    /// Build from `kind: List` (or `NodeList`, `PodList`) documents.
    pub fn from_lists(nodes: &Value, pods: &Value, namespaces: &Value) -> Self {
        Self::build(
            items(nodes, &["items"]),
            items(pods, &["items"]),
            items(namespaces, &["items"]),
        )
    }

    /// Index workloads that can be scaled (PyTorchJobs) for Scale reviews.
    pub fn add_scalable<'v>(&mut self, objects: impl IntoIterator<Item = &'v Value>) {
        for o in objects {
            let Some(resource) = scale_resource(o) else {
                continue;
            };
            let at = |k: &str| str_at(o, &["metadata", k]).unwrap_or("").to_string();
            self.scalable.insert(
                (at("namespace"), resource.to_string(), at("name")),
                o.clone(),
            );
        }
    }

    /// Index DRA objects (ResourceClaimTemplates, ResourceClaims, ComputeDomains) that
    /// pods' `resourceClaims` are counted through.
    pub fn add_claims<'v>(&mut self, objects: impl IntoIterator<Item = &'v Value>) {
        self.claims.add(objects, "default");
    }

    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// Capacity Blocks from EC2NodeClass statuses and/or describe-capacity-reservations.
    pub fn reservations_mut(&mut self) -> &mut Reservations {
        &mut self.reservations
    }

    pub fn reservations(&self) -> &Reservations {
        &self.reservations
    }

    /// The workload a Scale review scales, when the inventory holds it.
    pub fn scalable(&self, namespace: &str, resource: &str, name: &str) -> Option<&Value> {
        self.scalable.get(&(
            namespace.to_string(),
            resource.to_string(),
            name.to_string(),
        ))
    }

    /// A profile for a type the catalog lacks, from what the nodes advertise.
    pub fn learned(&self, name: &str) -> Option<&InstanceProfile> {
        self.learned.get(name)
    }

    /// The GPU instance types in the cluster for `resource`, limited to nodes in the
    /// allowed pools when the policy names any (`name` or `label=value`).
    pub fn gpu_types(&self, resource: &str, pools: Option<&[String]>) -> Vec<&NodeType> {
        let res = if resource.is_empty() {
            RES_NVIDIA_GPU
        } else {
            resource
        };
        let allowed = |t: &NodeType| {
            pools.is_none_or(|want| {
                t.pools.iter().any(|have| {
                    want.iter()
                        .any(|w| have == w || have.rsplit_once('=').is_some_and(|(_, v)| v == w))
                })
            })
        };
        self.types
            .values()
            .filter(|t| t.accelerator_resource == res && allowed(t))
            .collect()
    }

    /// Whether the cluster has nodes of this type (with devices through device plugins
    /// or DRA).
    pub fn has_type(&self, name: &str) -> bool {
        self.types.contains_key(name) || self.node_efa.contains_key(name)
    }

    /// Whether nodes of this type advertise `vpc.amazonaws.com/efa`; `None` when the
    /// cluster has none of them.
    pub fn advertises_efa(&self, name: &str) -> Option<bool> {
        self.node_efa.get(name).map(|n| *n > 0)
    }

    /// Zones where pods of this job are already bound.
    pub fn sibling_zones(
        &self,
        namespace: &str,
        label: &str,
        value: &str,
    ) -> Option<&BTreeSet<String>> {
        self.jobs
            .get(&(namespace.to_string(), label.to_string(), value.to_string()))
    }

    pub fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace)
    }
}
