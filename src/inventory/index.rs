//! What the live inventory's watches write, and what each new snapshot is published
//! from: the nodes ([`NodeIndex`]), the training pods ([`PodIndex`], with where each
//! job's pods are bound) and the next snapshot with the namespace and CRD changes so
//! far. Every watch event is applied here as a bounded delta (O(the object), or for a
//! relist O(what it lists)), and [`Index::publish`] costs O(the changes since the last
//! publish): no event and no publish walks the whole cluster.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use trainplace_engine::{NodeIndex, Reservations, Snapshot};

use super::pods::{PodIndex, PodPlacement};

/// (namespace, name); namespace "" for a cluster-scoped object.
type Key = (String, String);

fn key_of<K: kube::Resource>(o: &K) -> Key {
    let m = o.meta();
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

/// The keys a watch has delivered, so a relist can tell which objects it no longer
/// lists. What a relist delivers is held until it completes, then applied at once (as
/// the `kube` reflector store does).
#[derive(Debug)]
struct Listed<K> {
    keys: HashSet<Key>,
    relist: Option<Vec<K>>,
}

impl<K> Default for Listed<K> {
    fn default() -> Self {
        Listed {
            keys: HashSet::new(),
            relist: None,
        }
    }
}

/// One change a watch event makes.
enum Change<'a, K> {
    Apply(&'a K),
    Remove(&'a Key),
}

impl<K: kube::Resource + Clone> Listed<K> {
    /// Apply `event`: each object it changes is handed to `sink`, in order. Returns
    /// whether a (re)list completed.
    fn event(&mut self, event: &Event<K>, mut sink: impl FnMut(Change<'_, K>)) -> bool {
        match event {
            Event::Apply(o) => {
                self.keys.insert(key_of(o));
                sink(Change::Apply(o));
            }
            Event::Delete(o) => {
                let key = key_of(o);
                self.keys.remove(&key);
                sink(Change::Remove(&key));
            }
            Event::Init => self.relist = Some(Vec::new()),
            Event::InitApply(o) => self.relist.get_or_insert_default().push(o.clone()),
            Event::InitDone => {
                let fresh = self.relist.take().unwrap_or_default();
                let keys: HashSet<Key> = fresh.iter().map(key_of).collect();
                for gone in self.keys.difference(&keys) {
                    sink(Change::Remove(gone));
                }
                for o in &fresh {
                    sink(Change::Apply(o));
                }
                self.keys = keys;
                return true;
            }
        }
        false
    }
}

/// The kinds whose objects a snapshot holds one by one: (apiVersion, kind, plural).
/// PyTorchJobs and PaddleJobs (what their `/scale` reviews scale, and how many pods
/// they own), Trainer runtimes (what TrainJobs inherit), the DRA objects pods'
/// resourceClaims are counted through (resource.k8s.io/v1 from Kubernetes 1.34;
/// NVIDIA's ComputeDomain CRD where its DRA driver runs), and batch Jobs and
/// StatefulSets, of which the snapshot keeps only uid and size: what a marked pod's
/// owner runs, against the count its mark states; and Kueue's Topologies (whether Kueue
/// places queued jobs by the EKS network layer labels; v1beta2, served from Kueue 0.15:
/// <https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/>).
pub const OBJECT_CRDS: [(&str, &str, &str); 10] = [
    ("kubeflow.org/v1", "PyTorchJob", "pytorchjobs"),
    ("kubeflow.org/v1", "PaddleJob", "paddlejobs"),
    (
        "trainer.kubeflow.org/v1alpha1",
        "TrainingRuntime",
        "trainingruntimes",
    ),
    (
        "trainer.kubeflow.org/v1alpha1",
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
    ),
    (
        "resource.k8s.io/v1",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
    ),
    ("resource.k8s.io/v1", "ResourceClaim", "resourceclaims"),
    (
        "resource.nvidia.com/v1beta1",
        "ComputeDomain",
        "computedomains",
    ),
    ("batch/v1", "Job", "jobs"),
    ("apps/v1", "StatefulSet", "statefulsets"),
    ("kueue.x-k8s.io/v1beta2", "Topology", "topologies"),
];

/// Karpenter's EC2NodeClasses, whose statuses name Capacity Blocks.
pub const NODE_CLASSES: (&str, &str, &str) =
    ("karpenter.k8s.aws/v1", "EC2NodeClass", "ec2nodeclasses");

/// The optional CRD watches, by what their objects are to a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crd {
    /// The watch of `OBJECT_CRDS[i]`.
    Object(usize),
    /// Karpenter's EC2NodeClasses: their Capacity Blocks.
    NodeClass,
}

/// Everything the watches have delivered that a snapshot is published from.
#[derive(Default)]
pub struct Index {
    next: Snapshot,
    nodes: NodeIndex,
    node_keys: Listed<Node>,
    namespaces: Listed<Namespace>,
    pub pods: PodIndex,
    objects: Vec<Listed<DynamicObject>>,
    node_classes: Listed<DynamicObject>,
    classes: BTreeMap<Key, Value>,
    /// Blocks from the describe-capacity-reservations file.
    described: Reservations,
    reservations_changed: bool,
}

impl Index {
    /// An index whose node list has been listed (empty until nodes arrive).
    pub fn new() -> Self {
        Index {
            nodes: NodeIndex::listed(),
            ..Index::default()
        }
    }

    /// A Node watch event; whether a (re)list completed.
    pub fn node(&mut self, event: &Event<Node>) -> bool {
        let nodes = &mut self.nodes;
        self.node_keys.event(event, |change| match change {
            Change::Apply(n) => {
                nodes.apply(n);
            }
            Change::Remove((_, name)) => {
                nodes.remove(name);
            }
        })
    }

    /// A Namespace watch event; whether a (re)list completed.
    pub fn namespace(&mut self, event: &Event<Namespace>) -> bool {
        let next = &mut self.next;
        self.namespaces.event(event, |change| match change {
            Change::Apply(ns) => {
                let name = ns.metadata.name.as_deref().unwrap_or_default();
                next.set_namespace(name, Some(ns.metadata.labels.clone().unwrap_or_default()));
            }
            Change::Remove((_, name)) => next.set_namespace(name, None),
        })
    }

    /// An event of pod watch number `watch`.
    pub fn pod(&mut self, watch: usize, event: &Event<PodPlacement>) {
        self.pods.apply(watch, event);
    }

    /// An event of an optional CRD watch.
    pub fn crd(&mut self, crd: Crd, event: &Event<DynamicObject>) {
        match crd {
            Crd::Object(i) => {
                let Some((api_version, kind, _)) = OBJECT_CRDS.get(i) else {
                    return;
                };
                if self.objects.len() <= i {
                    self.objects.resize_with(i + 1, Listed::default);
                }
                let next = &mut self.next;
                self.objects[i].event(event, |change| match change {
                    Change::Apply(o) => {
                        if let Ok(mut v) = serde_json::to_value(o) {
                            v["apiVersion"] = json!(api_version);
                            v["kind"] = json!(kind);
                            next.apply_object(&v);
                        }
                    }
                    Change::Remove((ns, name)) => next.remove_object(api_version, kind, ns, name),
                });
            }
            Crd::NodeClass => {
                let classes = &mut self.classes;
                self.node_classes.event(event, |change| match change {
                    Change::Apply(o) => {
                        if let Ok(v) = serde_json::to_value(o) {
                            classes.insert(key_of(o), v);
                        }
                    }
                    Change::Remove(key) => {
                        classes.remove(key);
                    }
                });
                self.reservations_changed = true;
            }
        }
    }

    /// Blocks from a describe-capacity-reservations file, laid over the EC2NodeClasses'.
    pub fn set_described(&mut self, described: Reservations) {
        self.described = described;
        self.reservations_changed = true;
    }

    /// A new snapshot with every change since the last publish. Costs O(those
    /// changes), and O(EC2NodeClasses) when one of them or the file's blocks changed.
    pub fn publish(&mut self) -> Snapshot {
        if std::mem::take(&mut self.reservations_changed) {
            let mut r = Reservations::default();
            let items: Vec<&Value> = self.classes.values().collect();
            r.add_ec2nodeclasses(&json!({ "items": items }));
            r.extend(&self.described);
            *self.next.reservations_mut() = r;
        }
        self.next = self
            .next
            .with_changes(&mut self.nodes, self.pods.jobs_mut());
        self.next.clone()
    }

    /// How many nodes the index holds.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }
}
