//! What the cluster holds, as an immutable snapshot the engine reads in the request
//! path: GPU instance types (with allocatable GPUs/EFA, zones, node groups/pools),
//! where the pods of each job are already bound, and namespace labels. Built from
//! plain JSON objects (`kubectl get nodes/pods/namespaces -o json` items, or what a
//! watch delivers), so fixtures and the live cache share one code path. The live watch
//! keeps a [`NodeIndex`] and a [`JobIndex`] up to date event by event and publishes each
//! new snapshot with only what changed (`node_index.rs`, `job_index.rs`); namespaces and
//! the objects of CRDs are set one by one. Every part is a persistent map or shared behind
//! an `Arc`, so a new snapshot copies O(what changed), never the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use crate::facts::block_nodes::BlockNodes;
use crate::facts::cluster_objects::{NamespaceFacts, NodeFacts, PodFacts};
use crate::facts::job_index::{JobIndex, JobRef, JobZones};
use crate::facts::node_index::{NodeIndex, NodeView};
use crate::facts::node_types::NodeType;
use crate::facts::reservations::Reservations;
use crate::read::annotations::RES_NVIDIA_GPU;
use crate::read::json::items;
use trainplace_catalog::InstanceProfile;

mod objects;
mod owners;

use objects::Objects;
pub(crate) use objects::scale_replicas_path;
pub use owners::OwnerSize;

/// A snapshot is cheap to clone: where each job runs, the nodes' zones and blocks,
/// the namespaces and the CRD objects are persistent maps, the per-type tables are as
/// small as the number of instance types, so the live watch publishes a change without
/// copying the rest.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub types: BTreeMap<String, NodeType>,
    /// (namespace, identity label, value) -> zones where such pods are bound.
    jobs: JobZones,
    nodes: Arc<NodeView>,
    namespaces: imbl::HashMap<String, Arc<BTreeMap<String, String>>>,
    objects: Arc<Objects>,
}

impl Snapshot {
    /// Build from node, pod and namespace objects as JSON.
    pub fn build<'v>(
        nodes: impl IntoIterator<Item = &'v Value>,
        pods: impl IntoIterator<Item = &'v Value>,
        namespaces: impl IntoIterator<Item = &'v Value>,
    ) -> Self {
        Self::build_from(nodes, pods, namespaces)
    }

    /// Build from node, pod and namespace objects in any form the snapshot can read
    /// (JSON, or the typed objects a live watch caches).
    pub fn build_from<'v, N, P, S>(
        nodes: impl IntoIterator<Item = &'v N>,
        pods: impl IntoIterator<Item = &'v P>,
        namespaces: impl IntoIterator<Item = &'v S>,
    ) -> Self
    where
        N: NodeFacts + 'v,
        P: PodFacts + 'v,
        S: NamespaceFacts + 'v,
    {
        // The live watch's path: the nodes first, then the pods as changes.
        let mut jobs = JobIndex::default();
        let snap = Self::build_indexed(nodes, &mut jobs, namespaces);
        for pod in pods {
            jobs.add(pod);
        }
        snap.with_job_changes(&mut jobs)
    }

    /// Build from node and namespace objects, with where each job's pods are bound
    /// from `jobs`, mapped to zones by these nodes. Every change recorded in `jobs` is
    /// in the new snapshot. Costs O(nodes + jobs): the live watch instead keeps a
    /// [`NodeIndex`] and publishes changes ([`Snapshot::with_changes`]).
    pub fn build_indexed<'v, N, S>(
        nodes: impl IntoIterator<Item = &'v N>,
        jobs: &mut JobIndex,
        namespaces: impl IntoIterator<Item = &'v S>,
    ) -> Self
    where
        N: NodeFacts + 'v,
        S: NamespaceFacts + 'v,
    {
        let mut index = NodeIndex::listed();
        for node in nodes {
            index.apply(node);
        }
        index.take_moves();
        let listed: Vec<_> = index
            .zones_by_node()
            .map(|(n, z)| (n.clone(), z.clone()))
            .collect();
        let stale: Vec<_> = jobs
            .node_zones()
            .keys()
            .filter(|n| index.zone_of(n).is_none())
            .cloned()
            .collect();
        for node in stale {
            jobs.set_node_zone(&node, None);
        }
        for (node, zone) in listed {
            jobs.set_node_zone(&node, Some(zone));
        }
        let mut snap = Snapshot::default();
        if let Some(view) = index.publish() {
            snap.types = view.types.clone();
            snap.nodes = view;
        }
        snap.jobs = jobs.publish_all();
        for ns in namespaces {
            if let Some(name) = ns.name() {
                snap.set_namespace(name, Some(ns.labels()));
            }
        }
        snap
    }

    /// This snapshot with the pod changes `jobs` recorded since it was built (or
    /// last published from): only the jobs that changed are looked at, and everything
    /// else is shared with `self`. `jobs` must be the index `self` was built from.
    pub fn with_job_changes(&self, jobs: &mut JobIndex) -> Self {
        let mut next = self.clone();
        jobs.publish_changes(&mut next.jobs);
        next
    }

    /// This snapshot with the node and pod changes `nodes` and `jobs` recorded since
    /// the last publish: the jobs with pods on a node that changed zone are moved, the
    /// instance types a change touched recomputed, and everything else is shared with
    /// `self`. Costs O(the changes), whatever the size of the cluster.
    pub fn with_changes(&self, nodes: &mut NodeIndex, jobs: &mut JobIndex) -> Self {
        let mut next = self.clone();
        for (node, zone) in nodes.take_moves() {
            jobs.set_node_zone(&node, zone);
        }
        if let Some(view) = nodes.publish() {
            next.types = view.types.clone();
            next.nodes = view;
        }
        jobs.publish_changes(&mut next.jobs);
        next
    }

    /// Set a namespace's labels (`None`: it is gone).
    pub fn set_namespace(&mut self, name: &str, labels: Option<BTreeMap<String, String>>) {
        match labels {
            Some(l) => self.namespaces.insert(name.to_string(), Arc::new(l)),
            None => self.namespaces.remove(name),
        };
    }

    /// Build from `kind: List` (or `NodeList`, `PodList`) documents.
    pub fn from_lists(nodes: &Value, pods: &Value, namespaces: &Value) -> Self {
        Self::build(
            items(nodes, &["items"]),
            items(pods, &["items"]),
            items(namespaces, &["items"]),
        )
    }

    /// Capacity Blocks and nothing else: the CLI's `--reservations` without `--cluster`.
    /// Rules that need the node list (`unknown-instance-type`) stay silent.
    pub fn blocks_only(reservations: Reservations) -> Self {
        Snapshot {
            objects: Arc::new(Objects {
                reservations,
                ..Objects::default()
            }),
            ..Snapshot::default()
        }
    }

    /// Whether the snapshot holds the cluster's node list.
    pub fn nodes_listed(&self) -> bool {
        self.nodes.listed
    }

    /// Capacity Blocks from EC2NodeClass statuses and/or describe-capacity-reservations.
    pub fn reservations_mut(&mut self) -> &mut Reservations {
        &mut Arc::make_mut(&mut self.objects).reservations
    }

    pub fn reservations(&self) -> &Reservations {
        &self.objects.reservations
    }

    /// Which nodes run on reserved capacity (matched to blocks through `reservations`).
    pub fn block_nodes(&self) -> &BlockNodes {
        &self.nodes.block_nodes
    }

    /// Whether nodes of type `name` advertise more `resource` than its `devices`: the
    /// device plugin shares them (NVIDIA time-slicing or MPS keeps the name
    /// `nvidia.com/gpu` and advertises each device `replicas` times unless renamed:
    /// <https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus>). `every`:
    /// all of them (precise mode: where only some node pools share them, a pod is not
    /// known to land there); else any (strict mode, which reads no pool).
    pub fn oversubscribed(&self, name: &str, resource: &str, devices: u32, every: bool) -> bool {
        self.types.get(name).is_some_and(|t| {
            let advertised = if every {
                t.fewest_accelerators
            } else {
                t.accelerators
            };
            t.accelerator_resource == resource && advertised > devices
        })
    }

    /// A profile for a type the catalog lacks, from what the nodes advertise.
    pub fn learned(&self, name: &str) -> Option<&InstanceProfile> {
        self.nodes.learned.get(name)
    }

    /// Every GPU type the nodes show that the catalog does not know, as learned from
    /// their allocatable.
    pub fn learned_profiles(&self) -> impl Iterator<Item = &InstanceProfile> {
        self.nodes.learned.values()
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
        self.types.contains_key(name) || self.nodes.node_efa.contains_key(name)
    }

    /// Whether nodes of this type advertise `vpc.amazonaws.com/efa`; `None` when the
    /// cluster has none of them.
    pub fn advertises_efa(&self, name: &str) -> Option<bool> {
        self.nodes.node_efa.get(name).map(|n| *n > 0)
    }

    /// The zone a node is in, by its `topology.kubernetes.io/zone`.
    pub fn node_zone(&self, node: &str) -> Option<&str> {
        self.nodes.node_zones.get(node).map(|z| &**z)
    }

    /// A node's instance type (its `node.kubernetes.io/instance-type` label).
    pub fn node_type(&self, node: &str) -> Option<&str> {
        self.nodes.node_types.get(node).map(|t| &**t)
    }

    /// A node's network nodes from its EKS layer labels, layer 1 first; `None` when it
    /// carries none.
    pub fn node_network(&self, node: &str) -> Option<&[Arc<str>]> {
        self.nodes.node_network.get(node).map(|n| &**n)
    }

    /// Every node that carries the network layer labels, with its network nodes.
    pub fn networked_nodes(&self) -> impl Iterator<Item = (&str, &[Arc<str>])> {
        self.nodes
            .node_network
            .iter()
            .map(|(node, path)| (&**node, &**path))
    }

    /// A zone as the nodes name it in `topology.kubernetes.io/zone`, from any label
    /// that names it (a zone id such as `use1-az1`); unknown names are returned as is.
    pub fn zone_name<'a>(&'a self, zone: &'a str) -> &'a str {
        self.nodes
            .zone_aliases
            .get(zone)
            .map_or(zone, String::as_str)
    }

    /// Zones where pods of this job are already bound.
    pub fn sibling_zones(
        &self,
        namespace: &str,
        label: &str,
        value: &str,
    ) -> Option<&BTreeSet<String>> {
        self.jobs
            .get(&JobRef::new(namespace, label, value))
            .map(Arc::as_ref)
    }

    pub fn namespace_labels(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace).map(Arc::as_ref)
    }
}
