//! What the cluster holds, as an immutable snapshot the engine reads in the request
//! path: GPU instance types (with allocatable GPUs/EFA, zones, node groups/pools),
//! where the pods of each job are already bound, and namespace labels. Built from
//! plain JSON objects (`kubectl get nodes/pods/namespaces -o json` items, or what a
//! watch delivers), so fixtures and the live cache share one code path. Where jobs run
//! comes from a [`JobIndex`] the live watch updates pod by pod; a new snapshot then
//! re-reads only the jobs that changed (`job_index.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::facts::block_nodes::BlockNodes;
use crate::facts::catalog::InstanceProfile;
use crate::facts::cluster_objects::{NamespaceFacts, NodeFacts, PodFacts};
use crate::facts::dra::Claims;
use crate::facts::job_index::{JobIndex, JobRef, JobZones, NodeZones};
use crate::facts::node_types::{NodeType, count_node, learned_profile};
use crate::facts::reservations::Reservations;
use crate::read::annotations::{
    LABEL_INSTANCE_TYPE, LABEL_ZONE, RES_EFA, RES_NVIDIA_GPU, ZONE_KEYS,
};
use crate::read::json::{items, str_at};

/// A snapshot is cheap to clone: what pods change often (where each job runs) is a
/// persistent map, and everything else is shared behind one `Arc`, so the live watch
/// publishes a pod change without copying the rest.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub types: BTreeMap<String, NodeType>,
    /// (namespace, identity label, value) -> zones where such pods are bound.
    jobs: JobZones,
    cluster: Arc<Cluster>,
}

/// What a snapshot knows besides where each job's pods are bound.
#[derive(Debug, Clone, Default)]
struct Cluster {
    namespaces: HashMap<String, BTreeMap<String, String>>,
    /// Profiles for GPU types the catalog does not know, learned from allocatable.
    learned: BTreeMap<String, InstanceProfile>,
    /// Workloads with a scale subresource, by (namespace, resource, name): what a
    /// Scale review is judged against.
    scalable: HashMap<(String, String, String), Value>,
    /// Capacity Blocks and when they end.
    reservations: Reservations,
    /// Nodes on reserved capacity, and the node pools / groups that have nothing else.
    block_nodes: BlockNodes,
    /// Whether the cluster's nodes were listed (false: Capacity Blocks only, from
    /// `--reservations` without `--cluster`; nothing is known about node types).
    nodes_listed: bool,
    /// DRA ResourceClaimTemplates, ResourceClaims and ComputeDomains.
    claims: Claims,
    /// Every instance type with nodes (also those whose devices come through DRA and
    /// so advertise no extended resource), with the most `vpc.amazonaws.com/efa` any
    /// of its nodes advertises.
    node_efa: BTreeMap<String, u32>,
    /// Kubeflow Trainer runtimes by (namespace, kind, name); a ClusterTrainingRuntime
    /// has namespace "". What a TrainJob's `runtimeRef` inherits its pod template from.
    runtimes: HashMap<(String, String, String), Value>,
    /// Each node's `topology.kubernetes.io/zone` (where a pod with `spec.nodeName`
    /// runs: it skips the scheduler).
    node_zones: NodeZones,
    /// The other labels that name a zone (zone id, the beta zone label) -> the zone
    /// name the same nodes carry: one zone, however it is spelled.
    zone_aliases: HashMap<String, String>,
}

/// Workloads whose CRD has a scale subresource: (API group, kind, plural resource, JSON
/// Pointer of the CRD's `specReplicasPath`). A Scale review writes its count there.
/// From the vendored CRDs in schemas/ (`subresources.scale.specReplicasPath`).
/// (LeaderWorkerSet's scale changes only how many independent groups run; each group is
/// judged on its own, so a scale cannot change a verdict and is not reviewed.)
const SCALABLE: [(&str, &str, &str, &str); 2] = [
    (
        "kubeflow.org",
        "PyTorchJob",
        "pytorchjobs",
        "/spec/pytorchReplicaSpecs/Worker/replicas",
    ),
    (
        "kubeflow.org",
        "PaddleJob",
        "paddlejobs",
        "/spec/paddleReplicaSpecs/Worker/replicas",
    ),
];

/// The plural resource of a workload whose scale subresource changes its pod count.
fn scale_resource(o: &Value) -> Option<&'static str> {
    let group = str_at(o, &["apiVersion"])?.split('/').next()?;
    let kind = str_at(o, &["kind"])?;
    SCALABLE
        .iter()
        .find(|(g, k, _, _)| *g == group && *k == kind)
        .map(|(_, _, r, _)| *r)
}

/// Where a Scale of `resource` (a plural in `SCALABLE`) writes its replica count.
pub(crate) fn scale_replicas_path(resource: &str) -> Option<&'static str> {
    SCALABLE
        .iter()
        .find(|(_, _, r, _)| *r == resource)
        .map(|(_, _, _, p)| *p)
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
    /// from `jobs` (the live watch keeps that index up to date pod by pod). Every
    /// change recorded in `jobs` is in the new snapshot.
    pub fn build_indexed<'v, N, S>(
        nodes: impl IntoIterator<Item = &'v N>,
        jobs: &mut JobIndex,
        namespaces: impl IntoIterator<Item = &'v S>,
    ) -> Self
    where
        N: NodeFacts + 'v,
        S: NamespaceFacts + 'v,
    {
        let (mut types, mut node_zones) = (BTreeMap::new(), NodeZones::default());
        let mut c = Cluster {
            nodes_listed: true,
            ..Cluster::default()
        };
        // One `Arc` per zone, shared by its nodes (a region has a handful of zones).
        let mut zones: Vec<Arc<str>> = Vec::new();
        for node in nodes {
            c.add_node(node, &mut types);
            if let Some(zone) = node.label(LABEL_ZONE) {
                let shared = match zones.iter().find(|z| &***z == zone) {
                    Some(z) => z.clone(),
                    None => {
                        zones.push(zone.into());
                        zones[zones.len() - 1].clone()
                    }
                };
                node_zones.insert(node.name().into(), shared);
                for alias in &ZONE_KEYS[1..] {
                    if let Some(a) = node.label(alias)
                        && a != zone
                    {
                        c.zone_aliases.insert(a.to_string(), zone.to_string());
                    }
                }
            }
        }
        c.node_zones = node_zones.clone();
        for ns in namespaces {
            if let Some(name) = ns.name() {
                c.namespaces.insert(name.to_string(), ns.labels());
            }
        }
        c.learned = types.values().map(learned_profile).collect();
        Snapshot {
            types,
            jobs: jobs.publish_all(node_zones),
            cluster: Arc::new(c),
        }
    }

    /// This snapshot with the pod changes `jobs` recorded since it was built (or
    /// last published from): only the jobs that changed are looked at, and everything
    /// else is shared with `self`. `jobs` must be the index `self` was built from.
    pub fn with_job_changes(&self, jobs: &mut JobIndex) -> Self {
        let mut next = self.clone();
        jobs.publish_changes(&mut next.jobs);
        next
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
            Arc::make_mut(&mut self.cluster).scalable.insert(
                (at("namespace"), resource.to_string(), at("name")),
                o.clone(),
            );
        }
    }

    /// Capacity Blocks and nothing else: the CLI's `--reservations` without `--cluster`.
    /// Rules that need the node list (`unknown-instance-type`) stay silent.
    pub fn blocks_only(reservations: Reservations) -> Self {
        Snapshot {
            cluster: Arc::new(Cluster {
                reservations,
                ..Cluster::default()
            }),
            ..Snapshot::default()
        }
    }

    /// Whether the snapshot holds the cluster's node list.
    pub fn nodes_listed(&self) -> bool {
        self.cluster.nodes_listed
    }

    /// Index DRA objects (ResourceClaimTemplates, ResourceClaims, ComputeDomains) that
    /// pods' `resourceClaims` are counted through.
    pub fn add_claims<'v>(&mut self, objects: impl IntoIterator<Item = &'v Value>) {
        Arc::make_mut(&mut self.cluster)
            .claims
            .add(objects, "default");
    }

    pub fn claims(&self) -> &Claims {
        &self.cluster.claims
    }

    /// Index TrainingRuntimes and ClusterTrainingRuntimes (other objects are ignored).
    pub fn add_runtimes<'v>(&mut self, objects: impl IntoIterator<Item = &'v Value>) {
        for o in objects {
            let (Some(kind), Some(name)) = (str_at(o, &["kind"]), str_at(o, &["metadata", "name"]))
            else {
                continue;
            };
            let namespace = match kind {
                "TrainingRuntime" => str_at(o, &["metadata", "namespace"]).unwrap_or("default"),
                "ClusterTrainingRuntime" => "",
                _ => continue,
            };
            Arc::make_mut(&mut self.cluster).runtimes.insert(
                (namespace.to_string(), kind.to_string(), name.to_string()),
                o.clone(),
            );
        }
    }

    /// The runtime a TrainJob in `namespace` names (`kind` TrainingRuntime or
    /// ClusterTrainingRuntime), when the inventory holds it.
    pub fn runtime(&self, namespace: &str, kind: &str, name: &str) -> Option<&Value> {
        let namespace = if kind == "ClusterTrainingRuntime" {
            ""
        } else {
            namespace
        };
        self.cluster
            .runtimes
            .get(&(namespace.to_string(), kind.to_string(), name.to_string()))
    }

    /// Capacity Blocks from EC2NodeClass statuses and/or describe-capacity-reservations.
    pub fn reservations_mut(&mut self) -> &mut Reservations {
        &mut Arc::make_mut(&mut self.cluster).reservations
    }

    pub fn reservations(&self) -> &Reservations {
        &self.cluster.reservations
    }

    /// Which nodes run on reserved capacity (matched to blocks through `reservations`).
    pub fn block_nodes(&self) -> &BlockNodes {
        &self.cluster.block_nodes
    }

    /// The workload a Scale review scales, when the inventory holds it.
    pub fn scalable(&self, namespace: &str, resource: &str, name: &str) -> Option<&Value> {
        self.cluster.scalable.get(&(
            namespace.to_string(),
            resource.to_string(),
            name.to_string(),
        ))
    }

    /// A profile for a type the catalog lacks, from what the nodes advertise.
    pub fn learned(&self, name: &str) -> Option<&InstanceProfile> {
        self.cluster.learned.get(name)
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
        self.types.contains_key(name) || self.cluster.node_efa.contains_key(name)
    }

    /// Whether nodes of this type advertise `vpc.amazonaws.com/efa`; `None` when the
    /// cluster has none of them.
    pub fn advertises_efa(&self, name: &str) -> Option<bool> {
        self.cluster.node_efa.get(name).map(|n| *n > 0)
    }

    /// The zone a node is in, by its `topology.kubernetes.io/zone`.
    pub fn node_zone(&self, node: &str) -> Option<&str> {
        self.cluster.node_zones.get(node).map(|z| &**z)
    }

    /// A zone as the nodes name it in `topology.kubernetes.io/zone`, from any label
    /// that names it (a zone id such as `use1-az1`); unknown names are returned as is.
    pub fn zone_name<'a>(&'a self, zone: &'a str) -> &'a str {
        self.cluster
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
        self.cluster.namespaces.get(namespace)
    }
}

impl Cluster {
    /// Record one node: its reserved capacity and its instance type.
    fn add_node(&mut self, node: &impl NodeFacts, types: &mut BTreeMap<String, NodeType>) {
        self.block_nodes.add(node.name(), |k| node.label(k));
        let Some(itype) = node.label(LABEL_INSTANCE_TYPE) else {
            return;
        };
        let efa = self.node_efa.entry(itype.to_string()).or_default();
        *efa = (*efa).max(node.allocatable(RES_EFA));
        count_node(types, itype, node);
    }
}
