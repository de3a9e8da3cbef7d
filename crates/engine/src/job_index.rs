//! Where the pods of each training job are bound, kept so that a pod change costs
//! O(its job labels) and a new snapshot costs O(jobs whose zones changed), not a pass
//! over every pod of the cluster.
//!
//! [`JobIndex`] counts each job's pods per node (the live watch keeps one across
//! snapshots; the files source builds one and drops it). [`JobZones`], what reviewers
//! read, maps each job to the zones of those nodes; it is a persistent map, so a new
//! snapshot shares every job that did not change with the snapshot before it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use equivalent::Equivalent;

use crate::cluster_objects::PodFacts;

type Fold = foldhash::fast::RandomState;

/// Node name -> its `topology.kubernetes.io/zone`.
pub(crate) type NodeZones = HashMap<Box<str>, Box<str>, Fold>;

/// Zones where each job's pods are bound, as reviewers read them.
pub(crate) type JobZones = imbl::HashMap<JobKey, Arc<BTreeSet<String>>>;

/// One job: (namespace, job identity label, its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobKey {
    namespace: Arc<str>,
    label: &'static str,
    value: Arc<str>,
}

impl Hash for JobKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        JobRef::of(self).hash(state)
    }
}

/// A job named by borrowed strings, to look one up without allocating.
#[derive(Hash)]
pub(crate) struct JobRef<'a> {
    namespace: &'a str,
    label: &'a str,
    value: &'a str,
}

impl<'a> JobRef<'a> {
    pub(crate) fn new(namespace: &'a str, label: &'a str, value: &'a str) -> Self {
        JobRef {
            namespace,
            label,
            value,
        }
    }

    fn of(key: &'a JobKey) -> Self {
        JobRef::new(&key.namespace, key.label, &key.value)
    }
}

impl Equivalent<JobKey> for JobRef<'_> {
    fn equivalent(&self, key: &JobKey) -> bool {
        self.namespace == &*key.namespace && self.label == key.label && self.value == &*key.value
    }
}

/// Each job's pods counted per node. A pod added, moved or deleted changes one count
/// per identity label it carries, and marks its jobs for the next publish.
#[derive(Debug, Default)]
pub struct JobIndex {
    /// job -> node -> how many of its pods are bound there (never 0: emptied entries
    /// are removed, so a job whose pods all left takes no memory).
    jobs: HashMap<JobKey, HashMap<Box<str>, u32, Fold>, Fold>,
    /// Jobs whose counts changed since the last publish.
    changed: HashSet<JobKey, Fold>,
}

impl JobIndex {
    /// Count a pod (a pod without a node or a namespace counts nowhere).
    pub fn add(&mut self, pod: &impl PodFacts) {
        self.count(pod, true);
    }

    /// Take back a pod counted by [`JobIndex::add`] (give it the same facts it was
    /// added with: the cached copy, not the changed object).
    pub fn remove(&mut self, pod: &impl PodFacts) {
        self.count(pod, false);
    }

    /// How many jobs have pods bound to a node.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    fn count(&mut self, pod: &impl PodFacts, add: bool) {
        let (Some(node), Some(namespace)) = (pod.node_name(), pod.namespace()) else {
            return;
        };
        for (label, value) in pod.job_labels() {
            let key = JobKey {
                namespace: namespace.into(),
                label,
                value: value.into(),
            };
            if add {
                let nodes = self.jobs.entry(key.clone()).or_default();
                match nodes.get_mut(node) {
                    Some(n) => *n += 1,
                    None => {
                        nodes.insert(node.into(), 1);
                    }
                }
            } else {
                let Some(nodes) = self.jobs.get_mut(&key) else {
                    continue;
                };
                let Some(n) = nodes.get_mut(node) else {
                    continue;
                };
                *n -= 1;
                if *n == 0 {
                    nodes.remove(node);
                    if nodes.is_empty() {
                        self.jobs.remove(&key);
                    }
                }
            }
            self.changed.insert(key);
        }
    }

    /// The zones of the nodes a job's pods are bound to (nodes with no known zone
    /// count nowhere).
    fn zones(&self, key: &JobKey, node_zones: &NodeZones) -> BTreeSet<String> {
        let zones: BTreeSet<&str> = self
            .jobs
            .get(key)
            .into_iter()
            .flat_map(HashMap::keys)
            .filter_map(|node| node_zones.get(node).map(|z| &**z))
            .collect();
        zones.into_iter().map(str::to_string).collect()
    }

    /// Every job's zones afresh (for a new node list); clears the changes.
    pub(crate) fn publish_all(&mut self, node_zones: &NodeZones) -> JobZones {
        self.changed.clear();
        self.release();
        self.jobs
            .keys()
            .filter_map(|key| {
                let zones = self.zones(key, node_zones);
                (!zones.is_empty()).then(|| (key.clone(), Arc::new(zones)))
            })
            .collect()
    }

    /// Lay the jobs changed since the last publish over `published` (built from this
    /// index and `node_zones`); clears the changes. Costs O(changed jobs).
    pub(crate) fn publish_changes(&mut self, published: &mut JobZones, node_zones: &NodeZones) {
        for key in std::mem::take(&mut self.changed) {
            let zones = self.zones(&key, node_zones);
            if zones.is_empty() {
                published.remove(&key);
            } else if published.get(&key).is_none_or(|old| **old != zones) {
                published.insert(key, Arc::new(zones));
            }
        }
        self.release();
    }

    /// Give back the table space of jobs that are gone once it is mostly empty.
    fn release(&mut self) {
        if self.jobs.capacity() > 64 && self.jobs.len() < self.jobs.capacity() / 4 {
            self.jobs.shrink_to_fit();
        }
    }
}
