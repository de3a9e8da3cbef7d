//! The objects of CRDs a snapshot holds, set and removed one by one: workloads with a
//! scale subresource (what a Scale review is judged against), Kubeflow Trainer runtimes
//! (what a TrainJob inherits its pods from), DRA objects (what pods' claims count) and
//! the sizes of training pods' owners (`owners.rs`), and Kueue's Topologies (which
//! node labels Kueue places whole jobs by).

use std::sync::Arc;

use serde_json::Value;

use super::Snapshot;
use crate::facts::dra::Claims;
use crate::facts::reservations::Reservations;
use crate::read::json::str_at;

/// The objects of CRDs and Capacity Blocks a snapshot holds.
#[derive(Debug, Clone, Default)]
pub(super) struct Objects {
    /// Workloads with a scale subresource, by (namespace, resource, name): what a
    /// Scale review is judged against.
    pub(super) scalable: imbl::HashMap<(String, String, String), Arc<Value>>,
    /// Capacity Blocks and when they end.
    pub(super) reservations: Reservations,
    /// DRA ResourceClaimTemplates, ResourceClaims and ComputeDomains.
    pub(super) claims: Claims,
    /// Kubeflow Trainer runtimes by (namespace, kind, name); a ClusterTrainingRuntime
    /// has namespace "". What a TrainJob's `runtimeRef` inherits its pod template from.
    pub(super) runtimes: imbl::HashMap<(String, String, String), Arc<Value>>,
    /// The owners of training pods, by (namespace, group, kind, name): their uid and
    /// size, what an admission mark's pod count is compared with (`owners.rs`).
    pub(super) owners: imbl::HashMap<super::owners::OwnerKey, Arc<super::owners::OwnerSize>>,
    /// Kueue Topologies by name: the node label of each level, broadest first.
    pub(super) topologies: imbl::HashMap<String, Arc<Vec<String>>>,
}

/// Kueue's Topology kind (cluster-scoped; `spec.levels[].nodeLabel`, broadest first).
/// <https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/>
const KUEUE_GROUP: &str = "kueue.x-k8s.io";

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
    /// Add or replace one CRD object the snapshot reads (a workload with a scale
    /// subresource, a Trainer runtime, a DRA object; other kinds are ignored).
    pub fn apply_object(&mut self, object: &Value) {
        let one = std::slice::from_ref(object);
        self.add_scalable(one);
        self.add_runtimes(one);
        self.add_claims(one);
        self.add_owners(one);
        self.add_topologies(one);
    }

    /// Index Kueue Topologies (other objects are ignored).
    pub fn add_topologies<'v>(&mut self, objects: impl IntoIterator<Item = &'v Value>) {
        for o in objects {
            let group = str_at(o, &["apiVersion"]).and_then(|a| a.split('/').next());
            let (Some(KUEUE_GROUP), Some("Topology"), Some(name)) = (
                group,
                str_at(o, &["kind"]),
                str_at(o, &["metadata", "name"]),
            ) else {
                continue;
            };
            let levels = crate::read::json::items(o, &["spec", "levels"])
                .iter()
                .filter_map(|l| str_at(l, &["nodeLabel"]).map(String::from))
                .collect();
            Arc::make_mut(&mut self.objects)
                .topologies
                .insert(name.to_string(), Arc::new(levels));
        }
    }

    /// Whether some Kueue Topology in the cluster has a level on node label `label`.
    pub fn kueue_has_level(&self, label: &str) -> bool {
        self.objects
            .topologies
            .values()
            .any(|levels| levels.iter().any(|l| l == label))
    }

    /// Remove the object `apiVersion`/`kind` `namespace`/`name` that
    /// [`Snapshot::apply_object`] added (`namespace` "" for a cluster-scoped one).
    pub fn remove_object(&mut self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let group = api_version.split('/').next().unwrap_or("");
        let objects = Arc::make_mut(&mut self.objects);
        if let Some((_, _, resource, _)) = SCALABLE
            .iter()
            .find(|(g, k, _, _)| *g == group && *k == kind)
        {
            let key = (
                namespace.to_string(),
                resource.to_string(),
                name.to_string(),
            );
            objects.scalable.remove(&key);
        }
        if matches!(kind, "TrainingRuntime" | "ClusterTrainingRuntime") {
            let key = (namespace.to_string(), kind.to_string(), name.to_string());
            objects.runtimes.remove(&key);
        }
        objects.claims.remove(group, kind, namespace, name);
        if group == KUEUE_GROUP && kind == "Topology" {
            objects.topologies.remove(name);
        }
        self.remove_owner(namespace, api_version, kind, name);
    }

    /// Index workloads that can be scaled (PyTorchJobs) for Scale reviews.
    pub fn add_scalable<'v>(&mut self, objects: impl IntoIterator<Item = &'v Value>) {
        for o in objects {
            let Some(resource) = scale_resource(o) else {
                continue;
            };
            let at = |k: &str| str_at(o, &["metadata", k]).unwrap_or("").to_string();
            Arc::make_mut(&mut self.objects).scalable.insert(
                (at("namespace"), resource.to_string(), at("name")),
                Arc::new(o.clone()),
            );
        }
    }

    /// Index DRA objects (ResourceClaimTemplates, ResourceClaims, ComputeDomains) that
    /// pods' `resourceClaims` are counted through.
    pub fn add_claims<'v>(&mut self, objects: impl IntoIterator<Item = &'v Value>) {
        Arc::make_mut(&mut self.objects)
            .claims
            .add(objects, "default");
    }

    pub fn claims(&self) -> &Claims {
        &self.objects.claims
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
            Arc::make_mut(&mut self.objects).runtimes.insert(
                (namespace.to_string(), kind.to_string(), name.to_string()),
                Arc::new(o.clone()),
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
        self.objects
            .runtimes
            .get(&(namespace.to_string(), kind.to_string(), name.to_string()))
            .map(Arc::as_ref)
    }

    /// The workload a Scale review scales, when the inventory holds it.
    pub fn scalable(&self, namespace: &str, resource: &str, name: &str) -> Option<&Value> {
        self.objects
            .scalable
            .get(&(
                namespace.to_string(),
                resource.to_string(),
                name.to_string(),
            ))
            .map(Arc::as_ref)
    }
}
