//! Where the pods of each training job are bound, kept so that a pod change costs
//! O(its job labels) and a new snapshot costs O(jobs whose zones changed), not a pass
//! over every pod of the cluster.
//!
//! [`JobIndex`] counts each job's pods per node and per zone (the live watch keeps one
//! across snapshots; the files source builds one and drops it). [`JobZones`], what
//! reviewers read, maps each job to the zones it has pods in; it is a persistent map,
//! so a new snapshot shares every job that did not change with the snapshot before.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use equivalent::Equivalent;

use crate::facts::cluster_objects::PodFacts;

type Fold = foldhash::fast::RandomState;

/// Node name -> its `topology.kubernetes.io/zone` (one `Arc` per zone; the jobs' node
/// counts share the names).
pub(crate) type NodeZones = HashMap<Arc<str>, Arc<str>, Fold>;

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
        JobRef::new(&self.namespace, self.label, &self.value).hash(state)
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
}

impl Equivalent<JobKey> for JobRef<'_> {
    fn equivalent(&self, key: &JobKey) -> bool {
        self.namespace == &*key.namespace && self.label == key.label && self.value == &*key.value
    }
}

/// One job's pods: per node (to map them to zones again when the node list changes)
/// and per zone (what a snapshot reads). No count is ever 0: emptied entries go.
#[derive(Debug, Default)]
struct Counts {
    nodes: HashMap<Arc<str>, u32, Fold>,
    zones: BTreeMap<Arc<str>, u32>,
}

impl Counts {
    /// One more pod on `node` (`listed`: its name and zone from the node list);
    /// whether the job gained a zone, and the node's name when it is new to the job.
    fn add(
        &mut self,
        node: &str,
        listed: Option<(&Arc<str>, &Arc<str>)>,
    ) -> (bool, Option<Arc<str>>) {
        let new = match self.nodes.get_mut(node) {
            Some(n) => {
                *n += 1;
                None
            }
            None => {
                let name: Arc<str> = listed.map_or_else(|| node.into(), |(name, _)| name.clone());
                self.nodes.insert(name.clone(), 1);
                Some(name)
            }
        };
        let Some((_, zone)) = listed else {
            return (false, new);
        };
        (self.add_zone(zone, 1), new)
    }

    /// `n` more pods in `zone`; whether the job gained it.
    fn add_zone(&mut self, zone: &Arc<str>, n: u32) -> bool {
        let z = self.zones.entry(zone.clone()).or_default();
        *z += n;
        *z == n
    }

    /// `n` pods fewer in `zone`; whether the job lost it.
    fn remove_zone(&mut self, zone: &str, n: u32) -> bool {
        let Some(z) = self.zones.get_mut(zone) else {
            return false;
        };
        *z = z.saturating_sub(n);
        if *z > 0 {
            return false;
        }
        self.zones.remove(zone);
        true
    }

    /// One pod fewer on `node`: `None` when no pod was counted there, else whether the
    /// job lost a zone and whether it has no pod left on the node.
    fn remove(&mut self, node: &str, zone: Option<&Arc<str>>) -> Option<(bool, bool)> {
        let n = self.nodes.get_mut(node)?;
        *n -= 1;
        let left = *n == 0;
        if left {
            self.nodes.remove(node);
        }
        Some((zone.is_some_and(|z| self.remove_zone(z, 1)), left))
    }

    fn zone_set(&self) -> BTreeSet<String> {
        self.zones.keys().map(|z| z.to_string()).collect()
    }
}

/// Each job's pods counted per node and zone. A pod added, moved or deleted changes
/// one count per identity label it carries; a job whose set of zones changed is
/// marked for the next publish.
#[derive(Debug, Default)]
pub struct JobIndex {
    jobs: hashbrown::HashMap<JobKey, Counts, Fold>,
    /// Jobs whose zones changed since the last publish.
    changed: hashbrown::HashSet<JobKey, Fold>,
    /// The node list's zones, as of the last snapshot built from this index.
    node_zones: NodeZones,
    /// The jobs with pods counted on each node: what a node that changes zone (added,
    /// removed, relabelled) moves, so it costs O(the jobs on it).
    on_node: HashMap<Arc<str>, hashbrown::HashSet<JobKey, Fold>, Fold>,
}

impl JobIndex {
    /// Count a pod (a pod without a node or a namespace counts nowhere).
    pub fn add(&mut self, pod: &impl PodFacts) {
        self.count(pod, true);
    }

    /// Take back a pod counted by [`JobIndex::add`] (give it the facts it was added
    /// with: the cached copy, not the changed object). A pod never counted changes
    /// nothing.
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
        let listed = self.node_zones.get_key_value(node);
        let zone = listed.map(|(_, zone)| zone);
        for (label, value) in pod.job_labels() {
            let job = JobRef::new(namespace, label, value);
            if add && !self.jobs.contains_key(&job) {
                let key = JobKey {
                    namespace: namespace.into(),
                    label,
                    value: value.into(),
                };
                self.jobs.insert(key, Counts::default());
            }
            let Some((key, counts)) = self.jobs.get_key_value_mut(&job) else {
                continue;
            };
            let zones_changed = if add {
                let (changed, new) = counts.add(node, listed);
                if let Some(name) = new {
                    self.on_node.entry(name).or_default().insert(key.clone());
                }
                changed
            } else {
                let (changed, left) = counts.remove(node, zone).unwrap_or((false, false));
                if left && let Some(jobs) = self.on_node.get_mut(node) {
                    jobs.remove(&job);
                    if jobs.is_empty() {
                        self.on_node.remove(node);
                    }
                }
                changed
            };
            if zones_changed && !self.changed.contains(&job) {
                self.changed.insert(key.clone());
            }
            if counts.nodes.is_empty() {
                self.jobs.remove(&job);
            }
        }
    }

    /// Node `node` is now in `zone` (`None`: gone from the node list, or without a
    /// zone): the jobs with pods on it move their counts. Costs O(those jobs).
    pub(crate) fn set_node_zone(&mut self, node: &Arc<str>, zone: Option<Arc<str>>) {
        let old = match &zone {
            Some(z) => self.node_zones.insert(node.clone(), z.clone()),
            None => self.node_zones.remove(node),
        };
        if old == zone {
            return;
        }
        let Some(on_node) = self.on_node.get(&**node) else {
            return;
        };
        for key in on_node {
            let Some(counts) = self.jobs.get_mut(key) else {
                continue;
            };
            let n = counts.nodes.get(&**node).copied().unwrap_or(0);
            let lost = old.as_ref().is_some_and(|o| counts.remove_zone(o, n));
            let gained = zone.as_ref().is_some_and(|z| counts.add_zone(z, n));
            if lost || gained {
                self.changed.insert(key.clone());
            }
        }
    }

    /// Every job with pods in a zone, published afresh (a snapshot built from a node
    /// list; the live watch publishes changes only).
    pub(crate) fn publish_all(&mut self) -> JobZones {
        self.changed.clear();
        self.release();
        self.jobs
            .iter()
            .filter(|(_, c)| !c.zones.is_empty())
            .map(|(key, counts)| (key.clone(), Arc::new(counts.zone_set())))
            .collect()
    }

    /// The zones of the node list this index was last told about.
    pub(crate) fn node_zones(&self) -> &NodeZones {
        &self.node_zones
    }

    /// Lay the jobs whose zones changed since the last publish over `published` (the
    /// jobs as this index last published them). Costs O(those jobs).
    pub(crate) fn publish_changes(&mut self, published: &mut JobZones) {
        for key in std::mem::take(&mut self.changed) {
            match self.jobs.get(&key).filter(|c| !c.zones.is_empty()) {
                None => {
                    published.remove(&key);
                }
                Some(counts) => {
                    published.insert(key, Arc::new(counts.zone_set()));
                }
            }
        }
        self.release();
    }

    /// Give back the table space of jobs that are gone once it is mostly empty.
    fn release(&mut self) {
        if self.jobs.capacity() > 64 && self.jobs.len() < self.jobs.capacity() / 4 {
            self.jobs.shrink_to_fit();
        }
        if self.on_node.capacity() > 64 && self.on_node.len() < self.on_node.capacity() / 4 {
            self.on_node.shrink_to_fit();
        }
    }
}
